package server

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envWatchdogHarness makes this test binary a harness for
// TestWatchdogKillsWhatAKilledHarnessLeft: the value is its folder.
const envWatchdogHarness = "WB_TEST_WATCHDOG_HARNESS"

// watchdogHarness starts a watchdog and a server whose process group holds
// a child and whose tree holds a setsid'd grandchild, waits until its tree
// has been read (as the sampler reads it), says "ready PID" (the
// watchdog's) and waits to be killed.
func watchdogHarness(t *testing.T, dir string) {
	d, err := StartWatchdog()
	require.NoError(t, err)
	script := fmt.Sprintf(`sleep 300 & echo $! > %[1]s/child.tmp && mv %[1]s/child.tmp %[1]s/child
setsid sh -c 'echo $$ > %[1]s/escaped.tmp && mv %[1]s/escaped.tmp %[1]s/escaped; exec sleep 300' &
exec sleep 300`, dir)
	s, err := Start(Spec{Label: "X", Path: "/bin/sh", Args: []string{"-c", script}, LogPath: filepath.Join(dir, "x.log"), Watchdog: d})
	require.NoError(t, err)
	escaped := readPID(t, filepath.Join(dir, "escaped"))
	readPID(t, filepath.Join(dir, "child"))
	require.Eventually(t, func() bool { p, _ := s.PIDs(); return slices.Contains(p, escaped) }, 5*time.Second, 10*time.Millisecond)
	fmt.Printf("ready %d\n", d.PID())
	time.Sleep(time.Minute) // until the test kills it
	t.Fatal("not killed")
}

// readPID waits for a file holding a PID.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "%s", path)
	return pid
}

func startOf(t *testing.T, pid int) uint64 {
	t.Helper()
	p, err := procfs.NewProc(pid)
	require.NoError(t, err)
	st, err := p.Stat()
	require.NoError(t, err)
	return st.Starttime
}

// A harness killed by SIGKILL stops nothing itself and Pdeathsig reaches
// the server's leader only: the watchdog kills the child in the server's
// group and the descendant that left it, and says so in the server's log
// (issue 48). Without it both ran on as init's children.
func TestWatchdogKillsWhatAKilledHarnessLeft(t *testing.T) {
	if dir := os.Getenv(envWatchdogHarness); dir != "" {
		watchdogHarness(t, dir)
		return
	}
	dir := t.TempDir()
	h := exec.Command(os.Args[0], "-test.run=^TestWatchdogKillsWhatAKilledHarnessLeft$", "-test.count=1")
	h.Env = append(os.Environ(), envWatchdogHarness+"="+dir)
	out, err := h.StdoutPipe()
	require.NoError(t, err)
	h.Stderr = os.Stderr
	require.NoError(t, h.Start())
	t.Cleanup(func() { _ = h.Process.Kill(); _ = h.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the harness says ready")
	var watchdog int
	_, err = fmt.Sscanf(line, "ready %d", &watchdog)
	require.NoError(t, err, "%q", line)
	child, escaped := readPID(t, filepath.Join(dir, "child")), readPID(t, filepath.Join(dir, "escaped"))
	procs := map[string]int{"the child in the server's group": child, "the setsid'd descendant": escaped, "the watchdog": watchdog}
	starts := map[int]uint64{}
	for _, pid := range procs {
		starts[pid] = startOf(t, pid)
		t.Cleanup(func() {
			if _, ok := living(pid, starts[pid]); ok {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}

	require.NoError(t, h.Process.Signal(syscall.SIGKILL))
	_ = h.Wait()
	for what, pid := range procs {
		assert.Eventually(t, func() bool { _, ok := living(pid, starts[pid]); return !ok }, 5*time.Second, 10*time.Millisecond, "%s (pid %d) outlived the killed harness", what, pid)
	}
	b, err := os.ReadFile(filepath.Join(dir, "x.log"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "died with this server running: SIGKILL to its process group", "the log says what the watchdog did")
	assert.Contains(t, string(b), fmt.Sprintf("SIGKILL to pid %d (sleep 300 )", escaped))
}

// A run that stopped its servers says goodbye: the watchdog exits killing
// nothing, even a process seen in a tree that still runs.
func TestWatchdogGoodbyeKillsNothing(t *testing.T) {
	d, err := StartWatchdog()
	require.NoError(t, err)
	log := filepath.Join(t.TempDir(), "x.log")
	s, err := Start(Spec{Label: "X", Path: "/bin/sh", Args: []string{"-c", "sleep 30 & exec sleep 30"}, LogPath: log, Watchdog: d})
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop(time.Second) })
	require.Eventually(t, func() bool { p, _ := s.PIDs(); return len(p) == 2 }, 5*time.Second, 10*time.Millisecond)
	d.forget(s.PID()) // as its Stop would, once its group is gone
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "twice")
	assert.True(t, GroupAlive(s.PID()), "the goodbye killed nothing")
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "watchdog")
}

// dieWithoutGoodbye ends d's pipe as the harness's death would.
func dieWithoutGoodbye(t *testing.T, d *Watchdog) {
	t.Helper()
	d.mu.Lock()
	d.w.Close()
	d.w = nil
	d.mu.Unlock()
	require.NoError(t, d.cmd.Wait())
}

// A server forgotten (its stop saw its group gone, so the group's number
// may be another's) is not killed when the harness dies; one watched is.
func TestWatchdogKillsOnlyWhatItWatches(t *testing.T) {
	d, err := StartWatchdog()
	require.NoError(t, err)
	dir := t.TempDir()
	forgotten, err := Start(Spec{Label: "F", Path: "/bin/sh", Args: []string{"-c", "exec sleep 30"}, LogPath: filepath.Join(dir, "f.log"), Watchdog: d})
	require.NoError(t, err)
	t.Cleanup(func() { forgotten.Stop(time.Second) })
	watched, err := Start(Spec{Label: "W", Path: "/bin/sh", Args: []string{"-c", "exec sleep 30"}, LogPath: filepath.Join(dir, "w.log"), Watchdog: d})
	require.NoError(t, err)
	t.Cleanup(func() { watched.Stop(time.Second) })
	d.forget(forgotten.PID())
	dieWithoutGoodbye(t, d)
	assert.Eventually(t, func() bool { return !GroupAlive(watched.PID()) }, 5*time.Second, 10*time.Millisecond, "the watched group is killed")
	assert.True(t, GroupAlive(forgotten.PID()), "the forgotten group is left alone")
	b, err := os.ReadFile(filepath.Join(dir, "f.log"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "watchdog")
}

// Stop forgets the server it stopped: a watchdog whose harness then dies
// is told nothing of it.
func TestStopForgetsTheServer(t *testing.T) {
	d, err := StartWatchdog()
	require.NoError(t, err)
	s, err := Start(Spec{Label: "X", Path: "/bin/sh", Args: []string{"-c", "exec sleep 30"}, LogPath: filepath.Join(t.TempDir(), "x.log"), Watchdog: d})
	require.NoError(t, err)
	_, _ = s.PIDs()
	require.NoError(t, s.Stop(time.Second))
	assert.Empty(t, d.watching(), "the stop forgot the group")
	require.NoError(t, d.Close(), "goodbye: nothing left to kill")
}

// A server left running at Close (not stopped) is killed by the watchdog
// and named in Close's error and in its log.
func TestWatchdogCloseKillsWhatStillRuns(t *testing.T) {
	d, err := StartWatchdog()
	require.NoError(t, err)
	log := filepath.Join(t.TempDir(), "x.log")
	s, err := Start(Spec{Label: "X", Path: "/bin/sh", Args: []string{"-c", "exec sleep 30"}, LogPath: log, Watchdog: d})
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop(time.Second) })
	err = d.Close()
	require.ErrorContains(t, err, fmt.Sprintf("server process groups [%d] still ran at the end; the watchdog killed them", s.PID()))
	assert.Eventually(t, func() bool { return !GroupAlive(s.PID()) }, 5*time.Second, 10*time.Millisecond)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Contains(t, string(b), "SIGKILL to its process group")
}
