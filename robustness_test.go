package wakebench

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/server"
)

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
	cmd = exec.Command(os.Args[0], append([]string{"-test.run=^TestProtocol$/^sleep-level1$", "-test.v"}, args...)...)
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
	for _, f := range rep.Failures {
		assert.NotContains(t, f.Error, "see the go test output", "a phase that recorded its own failure is not recorded again by its test: %+v", f)
	}
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
