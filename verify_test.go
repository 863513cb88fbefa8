package wakebench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/server"
)

// TestOutputs checks what the run will write, after every phase ran: the
// report has every key path of the L20 reference report with the same JSON
// type, the request accounting adds up, and bench.txt parses as benchfmt
// with a result for every phase.
func TestOutputs(t *testing.T) {
	h, _ := begin(t)
	raw := h.Rec.Raw()
	all := []string{protocol.PhaseRestart, protocol.PhaseBaseline, protocol.PhaseSleepL1, protocol.PhaseAfterWake, protocol.PhaseSleepL2, protocol.PhaseSwitch}
	for _, p := range all {
		if !slices.Contains(raw.Phases, p) {
			t.Skipf("phase %s did not run (a -run filter?): the output checks need every phase; ran %v", p, raw.Phases)
		}
	}
	rep := report.Build(raw)

	ours, err := json.Marshal(rep)
	require.NoError(t, err)
	ref, err := os.ReadFile(filepath.Join("testdata", "l20-reference-report.json"))
	require.NoError(t, err)
	diffs, err := report.ShapeDiff(ref, ours)
	require.NoError(t, err)
	assert.Empty(t, diffs, "key paths of the reference report missing or of another type in ours")

	cfg := h.Config()
	p := cfg.Protocol
	perModel := 2 * len(p.Concurrency) * p.Rounds * p.RequestsPerRound
	assert.Equal(t, len(cfg.Models)*perModel, rep.Requests.PlannedPerformance, "planned_performance")
	assert.Equal(t, rep.Requests.Executed, rep.Requests.Success+rep.Requests.Failure, "executed = success + failure")
	// Performance requests plus one probe per start, cycle and handoff
	// (the reference run: 128 + 42 = 170).
	probes := len(cfg.Models)*(1+p.RestartWarm+p.SleepL1Cycles+p.SleepL2Cycles) + 1 + p.Handoffs
	assert.Equal(t, rep.Requests.PlannedPerformance+probes, rep.Requests.Executed, "executed requests")

	for _, l := range h.Labels() {
		n := p.SleepL1Cycles + 1 // cycles + the after-wake sleep
		got := rep.Memory.L1ReleaseFraction[l].N
		assert.GreaterOrEqual(t, got, n, "level-1 sleeps measured for %s", l)
	}
	for _, w := range []string{"A-baseline", "A-sleep-level1", "A-after-wake", "B-baseline", "AB-switch"} {
		if len(cfg.Models) == 2 && cfg.Models[0].Label == "A" && cfg.Models[1].Label == "B" {
			assert.Contains(t, rep.Windows, w)
		}
	}

	var buf bytes.Buffer
	require.NoError(t, report.WriteBench(&buf, raw))
	text := buf.String()
	rd := benchfmt.NewReader(strings.NewReader(text), "bench.txt")
	names := map[string]int{}
	units := map[string]bool{}
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Errorf("bench.txt: %v", rec)
		case *benchfmt.Result:
			base, _ := rec.Name.Parts()
			names[string(base)]++
			for _, v := range rec.Values {
				units[v.OrigUnit+v.Unit] = true
			}
			if !strings.Contains(rec.Name.String(), "model=") && !strings.HasPrefix(rec.Name.String(), "Switch/dir=") {
				assert.Equal(t, "Memory/device", rec.Name.String())
			}
		}
	}
	require.NoError(t, rd.Err())
	for _, b := range []string{"Restart", "Sleep", "Serve", "Switch", "Memory"} {
		assert.Positive(t, names[b], "bench.txt has Benchmark%s results", b)
	}
	assert.Equal(t, p.Handoffs, countPrefix(text, "BenchmarkSwitch/"), "one line per handoff")
}

func countPrefix(s, prefix string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

// TestInterruptStopsEverything runs the suite as a child process, sends it
// SIGINT in the middle of the level-1 cycles, and checks that it exits,
// writes a FAIL report naming the interrupt and leaves no server behind.
func TestInterruptStopsEverything(t *testing.T) {
	if os.Getenv("WAKEBENCH_INTERRUPT_CHILD") != "" {
		t.Skip("this is the child run")
	}
	out := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSleepLevel1$", "-test.v")
	cmd.Env = append(os.Environ(), "WAKEBENCH_INTERRUPT_CHILD=1", "WAKEBENCH_CONFIG=", "WAKEBENCH_OUT_DIR="+out,
		"WAKEBENCH_PROTOCOL_SLEEP_L1_CYCLES=100000")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "level 1 cycle 3/") {
			break
		}
	}
	servers := childrenOf(t, cmd.Process.Pid)
	require.NotEmpty(t, servers, "the child runs servers")
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	go io.Copy(io.Discard, stdout)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "an interrupted run fails")
	case <-time.After(30 * time.Second):
		t.Fatal("the interrupted run did not exit")
	}
	for _, pid := range servers {
		assert.False(t, server.GroupAlive(pid), "server process group %d is gone", pid)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err, "the report is written")
	var rep report.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.Equal(t, "FAIL", rep.Status)
	require.NotEmpty(t, rep.Failures)
	assert.Contains(t, rep.Failures[0].Error, "interrupted by interrupt")
	assert.GreaterOrEqual(t, rep.Models["A"].Sleep["1"].SuccessfulCycles, 3, "cycles done before the interrupt are kept")
	csv, err := os.ReadFile(filepath.Join(out, "samples.csv"))
	require.NoError(t, err)
	assert.Greater(t, strings.Count(string(csv), "\n"), 20, "samples are on disk")
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	procs, err := procfs.AllProcs()
	require.NoError(t, err)
	var out []int
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}

// TestRegressionGate compares this run with the baseline run named by
// WAKEBENCH_BASELINE (its bench.txt) with benchstat's statistics, prints the
// table (also to out/compare.txt) and fails on every metric worse by more
// than thresholds.regression_percent that is also significant.
func TestRegressionGate(t *testing.T) {
	h, _ := begin(t)
	cfg := h.Config()
	if cfg.Baseline == "" {
		t.Skip("no baseline: set WAKEBENCH_BASELINE=path/to/old/bench.txt to gate this run on regressions")
	}
	old, err := os.ReadFile(cfg.Baseline)
	require.NoError(t, err)
	var cur bytes.Buffer
	require.NoError(t, report.WriteBench(&cur, h.Rec.Raw()))
	ds, err := report.CompareBench(bytes.NewReader(old), &cur, cfg.Thresholds.RegressionPercent, cfg.Thresholds.RegressionAlpha)
	require.NoError(t, err, "compare with %s", cfg.Baseline)
	var table bytes.Buffer
	fmt.Fprintf(&table, "baseline %s vs this run (regression: worse by > %g %% and p ≤ %g)\n", cfg.Baseline, cfg.Thresholds.RegressionPercent, cfg.Thresholds.RegressionAlpha)
	require.NoError(t, report.WriteDeltas(&table, ds))
	t.Output().Write(table.Bytes())
	require.NoError(t, report.WriteFile(filepath.Join(cfg.OutDir, "compare.txt"), func(w io.Writer) error {
		_, err := w.Write(table.Bytes())
		return err
	}))
	n := 0
	for _, d := range ds {
		if d.Regression {
			n++
			c := h.Check("regression "+d.Name+" "+d.Unit, "", d.ChangePct, "within", cfg.Thresholds.RegressionPercent)
			assert.Fail(t, "regression", "%s %s: %+.1f%% (%s), tolerance %g%%: %s", d.Name, d.Unit, d.ChangePct, d.Cmp, cfg.Thresholds.RegressionPercent, c.Verdict)
		}
	}
	h.Check("regressions against baseline", "", float64(n), "==", 0)
}
