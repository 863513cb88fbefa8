package hostload

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/wakebench/wakebench/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m, "") }

// TestTheRunsTreeIsOursOthersAreNot: a busy child process is the run's
// when the reading's root is its parent's tree, and another's when the
// root is a process beside it: the same CPU seconds move from the run's
// run time to OthersPct. Readings of both roots are taken back to back,
// so the identity holds to the counters' resolution (10 ms jiffies).
func TestTheRunsTreeIsOursOthersAreNot(t *testing.T) {
	busy := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, busy.Start())
	t.Cleanup(func() { _ = busy.Process.Kill(); _ = busy.Wait() })
	idle := exec.Command("sleep", "30")
	require.NoError(t, idle.Start())
	t.Cleanup(func() { _ = idle.Process.Kill(); _ = idle.Wait() })

	b0, err := Read(busy.Process.Pid)
	require.NoError(t, err)
	i0, err := Read(idle.Process.Pid)
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	b1, err := Read(busy.Process.Pid)
	require.NoError(t, err)
	i1, err := Read(idle.Process.Pid)
	require.NoError(t, err)
	mine, theirs := Between(b0, b1), Between(i0, i1)
	t.Logf("busy child's tree: ran %.3f s, others %.1f %%, wait/run %.2f; idle child's tree: ran %.3f s, others %.1f %%", mine.RunS, mine.OthersPct, mine.WaitPerRun, theirs.RunS, theirs.OthersPct)
	assert.Greater(t, mine.RunS, 0.03, "the busy loop ran")
	assert.Less(t, theirs.RunS, 0.01, "sleep(1) ran nothing")
	assert.Greater(t, theirs.OthersPct, mine.OthersPct, "the busy loop is another's CPU when the run is the idle child")
	for _, l := range []Load{mine, theirs} {
		assert.GreaterOrEqual(t, l.OthersPct, 0.0)
		assert.LessOrEqual(t, l.OthersPct, 100.0)
		assert.GreaterOrEqual(t, l.WaitPerRun, 0.0)
		assert.InDelta(t, 0.3, l.Seconds, 0.3)
	}
}

// TestWindowReadsThisProcess: Window's end gives a load of this process's
// tree over the interval, its own busy loop counted as the run's.
func TestWindowReadsThisProcess(t *testing.T) {
	end := Window()
	for t0 := time.Now(); time.Since(t0) < 100*time.Millisecond; {
	}
	h := end()
	require.NotNil(t, h)
	assert.GreaterOrEqual(t, h.OthersCPUPct, 0.0)
	assert.LessOrEqual(t, h.OthersCPUPct, 100.0)
	assert.GreaterOrEqual(t, h.WaitPerRun, 0.0)
}
