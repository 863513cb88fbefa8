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
	"strconv"
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
	// The reference ran models A and B: a run of the same labels must have
	// exactly its keys; other labels are compared by shape.
	var dataKeyed []string
	if !slices.Equal(h.Labels(), []string{"A", "B"}) {
		dataKeyed = report.DataKeyed
	}
	diffs, err := report.ShapeDiff(ref, ours, dataKeyed...)
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
	// Physical limits: every model's level-1 wake and TPOT at c=1 against
	// the link and memory bandwidths, below the limit (fraction ≤ 1), each
	// source named (and simulated ones labelled so).
	for _, l := range h.Labels() {
		lim := rep.Models[l].PhysicalLimits
		if !assert.NotNil(t, lim, "physical_limits of %s", l) {
			continue
		}
		if !slices.Contains(p.Concurrency, 1) || cfg.Memory == "none" {
			continue
		}
		assert.Empty(t, lim.Note, l)
		for name, f := range map[string]float64{"l1 wake / PCIe": lim.L1WakeFractionOfPCIe, "tpot / HBM": lim.TPOTFractionOfHBM} {
			assert.True(t, f > 0 && f <= 1, "%s %s fraction %v in (0, 1]", l, name, f)
		}
		assert.NotEmpty(t, lim.WeightSource)
		if rep.Simulated != nil {
			assert.Contains(t, lim.PCIeSource, "simulated")
			assert.Contains(t, lim.HBMSource, "simulated")
		}
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

// childRun starts the suite as a child process on the level-1 cycles
// (endless) with extra arguments, and returns once it is in its third cycle.
func childRun(t *testing.T, args ...string) (cmd *exec.Cmd, out string, servers []int) {
	t.Helper()
	if os.Getenv("WAKEBENCH_CHILD") != "" {
		t.Skip("this is a child run")
	}
	out = t.TempDir()
	// Whatever this run's config and build tags, the child runs vllmsim's
	// tiny models on the simulated GPU.
	cfg := filepath.Join(t.TempDir(), "child.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"command": "vllmsim", "memory": "sim", "sim": {"profile": "tiny", "time_scale": 1},
		"models": [{"label": "A", "name": "tiny-a", "gpu_memory_utilization": 0.45}, {"label": "B", "name": "tiny-b", "gpu_memory_utilization": 0.45}],
		"protocol": {"sleep_l1_cycles": 100000, "settle_s": 0.1}}`), 0o644))
	cmd = exec.Command(os.Args[0], append([]string{"-test.run=^TestSleepLevel1$", "-test.v"}, args...)...)
	cmd.Env = append(os.Environ(), "WAKEBENCH_CHILD=1", "WAKEBENCH_CONFIG="+cfg, "WAKEBENCH_OUT_DIR="+out)
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
	go io.Copy(io.Discard, stdout)
	servers = childrenOf(t, cmd.Process.Pid)
	require.NotEmpty(t, servers, "the child runs servers")
	return cmd, out, servers
}

func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatal("the run did not exit")
		return nil
	}
}

func readChildReport(t *testing.T, out string) report.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err, "the report is written")
	var rep report.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	return rep
}

// TestInterruptStopsEverything sends SIGINT to a run in the middle of the
// level-1 cycles: it exits, writes a FAIL report naming the interrupt with
// the cycles done so far, and leaves no server behind.
func TestInterruptStopsEverything(t *testing.T) {
	cmd, out, servers := childRun(t)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	var ee *exec.ExitError
	require.ErrorAs(t, waitExit(t, cmd, 30*time.Second), &ee, "an interrupted run fails")
	for _, pid := range servers {
		assert.False(t, server.GroupAlive(pid), "server process group %d is gone", pid)
	}
	rep := readChildReport(t, out)
	assert.Equal(t, "FAIL", rep.Status)
	require.NotEmpty(t, rep.Failures)
	assert.Contains(t, rep.Failures[0].Error, "interrupted by interrupt")
	assert.GreaterOrEqual(t, rep.Models["A"].Sleep["1"].SuccessfulCycles, 3, "cycles done before the interrupt are kept")
	csv, err := os.ReadFile(filepath.Join(out, "samples.csv"))
	require.NoError(t, err)
	assert.Greater(t, strings.Count(string(csv), "\n"), 20, "samples are on disk")
}

// TestGoTestTimeoutStillCleansUp: a run about to hit go test -timeout stops
// itself first, so the report is written and no server is left.
func TestGoTestTimeoutStillCleansUp(t *testing.T) {
	cmd, out, servers := childRun(t, "-test.timeout=20s")
	start := time.Now()
	var ee *exec.ExitError
	require.ErrorAs(t, waitExit(t, cmd, 60*time.Second), &ee)
	assert.Less(t, time.Since(start), 20*time.Second, "it stops before the test binary's own timeout panic")
	for _, pid := range servers {
		assert.False(t, server.GroupAlive(pid), "server process group %d is gone", pid)
	}
	rep := readChildReport(t, out)
	assert.Equal(t, "FAIL", rep.Status)
	assert.Contains(t, rep.Failures[0].Error, "go test -timeout 20s is near")
}

// TestKilledHarnessLosesAtMostASecond: kill -9 of the harness. Its servers
// die with it (Pdeathsig) and samples.csv holds all but the last second.
func TestKilledHarnessLosesAtMostASecond(t *testing.T) {
	cmd, out, servers := childRun(t)
	time.Sleep(1500 * time.Millisecond)
	killedAt := time.Now()
	require.NoError(t, cmd.Process.Kill())
	waitExit(t, cmd, 10*time.Second)
	for _, pid := range servers {
		assert.Eventually(t, func() bool { return !server.GroupAlive(pid) }, 5*time.Second, 20*time.Millisecond,
			"server %d dies with its harness", pid)
	}
	b, err := os.ReadFile(filepath.Join(out, "samples.csv"))
	require.NoError(t, err)
	rows := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Greater(t, len(rows), 1)
	last, err := strconv.ParseFloat(strings.Split(rows[len(rows)-1], ",")[0], 64)
	require.NoError(t, err)
	lost := float64(killedAt.UnixNano())/1e9 - last
	assert.Less(t, lost, 1.5, "samples lost at the end: %.2f s", lost)
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
