package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sh(t *testing.T, script string) (*Server, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "x.log")
	s, err := Start(Spec{Label: "X", Path: "/bin/sh", Args: []string{"-c", script}, Env: []string{"WB_TEST=1"}, LogPath: log})
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop(time.Second) })
	return s, log
}

func TestStopKillsTheWholeGroup(t *testing.T) {
	// A child in the background (like vLLM's engine core) and a leader.
	s, _ := sh(t, `sleep 30 & echo child $! ; sleep 30`)
	pgid := s.PID()
	require.Eventually(t, func() bool { p, _ := s.PIDs(); return len(p) >= 3 }, 2*time.Second, 10*time.Millisecond, "sh + two sleeps in the group")
	require.NoError(t, s.Stop(2*time.Second))
	assert.Eventually(t, func() bool { return !GroupAlive(pgid) }, 2*time.Second, 10*time.Millisecond, "no process of the group survives")
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	s, _ := sh(t, `trap "" TERM; while :; do sleep 0.05; done`)
	time.Sleep(100 * time.Millisecond) // let the trap install
	start := time.Now()
	err := s.Stop(200 * time.Millisecond)
	assert.ErrorContains(t, err, "did not exit within 200ms of SIGTERM; killed")
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Eventually(t, func() bool { return !GroupAlive(s.PID()) }, 2*time.Second, 10*time.Millisecond)
}

func TestExitIsReportedWithTheLog(t *testing.T) {
	s, log := sh(t, `echo "ValueError: bad flag" >&2; echo env=$WB_TEST; exit 3`)
	select {
	case <-s.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("did not exit")
	}
	assert.ErrorContains(t, s.ExitErr(), "exit status 3")
	assert.ErrorContains(t, s.ExitErr(), log)
	assert.ErrorContains(t, s.ExitErr(), "last log lines: ValueError: bad flag | env=1", "the cause is in the error")
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Contains(t, string(b), "ValueError: bad flag", "stderr goes to the log")
	assert.Contains(t, string(b), "env=1", "the spec's environment is passed")
	assert.Contains(t, string(b), "=== wakebench: X start at")
}

func TestAliveCancelsOnExit(t *testing.T) {
	s, _ := sh(t, `sleep 0.1; exit 1`)
	start := time.Now()
	err := s.Alive(t.Context(), func(ctx context.Context) error {
		<-ctx.Done() // a call that would otherwise wait forever
		return ctx.Err()
	})
	assert.ErrorContains(t, err, "server X exited: exit status 1")
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestRSSCountsTheGroup(t *testing.T) {
	s, _ := sh(t, `sleep 30 & sleep 30`)
	require.Eventually(t, func() bool { p, _ := s.PIDs(); return len(p) >= 3 }, 2*time.Second, 10*time.Millisecond)
	rss, err := s.RSS()
	require.NoError(t, err)
	assert.Greater(t, rss, uint64(3*100<<10), "three processes hold at least 100 KiB each")
	assert.Equal(t, rss, s.PeakRSS())
}

func TestStartErrorNamesTheProgram(t *testing.T) {
	_, err := Start(Spec{Label: "A", Path: "/nonexistent/vllm", LogPath: filepath.Join(t.TempDir(), "a.log")})
	assert.ErrorContains(t, err, "start A")
	assert.ErrorContains(t, err, "/nonexistent/vllm")
}

// TestStopKillsASetsidDescendant: a descendant that left the server's
// process group (setsid) is found through its parent while the tree runs
// and killed after the group's stop, named in the log (issue 48).
func TestStopKillsASetsidDescendant(t *testing.T) {
	s, log := sh(t, `setsid sleep 300 & echo "escaped $!"; sleep 30`)
	var pid int
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(log)
		if _, err := fmt.Sscanf(lineWith(string(b), "escaped "), "escaped %d", &pid); err != nil {
			return false
		}
		return cmdline(pid) == "sleep 300" // setsid has exec'd sleep
	}, 5*time.Second, 10*time.Millisecond, "the script starts its setsid sleep")
	p, err := procfs.NewProc(pid)
	require.NoError(t, err)
	st, err := p.Stat()
	require.NoError(t, err)
	require.NotEqual(t, s.PID(), st.PGRP, "setsid left the server's group")
	t.Cleanup(func() {
		if _, ok := living(pid, st.Starttime); ok {
			_ = syscall.Kill(pid, syscall.SIGKILL) // the old code left it
		}
	})

	require.NoError(t, s.Stop(2*time.Second))
	_, alive := living(pid, st.Starttime)
	assert.False(t, alive, "no descendant of the server outlives its stop")
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Contains(t, string(b), fmt.Sprintf("killed PID %d (sleep 300): started by the server, it had left its process group", pid))
}

// lineWith is the first line of text that starts with prefix ("" when none).
func lineWith(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// TestListensNamesAnotherProcess: a socket listening on the server's port
// that its tree does not hold is named by PID and command line; the port
// holder is named the same way before any spawn (issue 48).
func TestListensNamesAnotherProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	me := fmt.Sprintf("PID %d (", os.Getpid())

	assert.Contains(t, PortHolder("127.0.0.1", port), me)
	assert.Contains(t, PortHolder("0.0.0.0", port), me, "every address's listeners")
	s, _ := sh(t, `sleep 30`)
	err = s.Listens("127.0.0.1", port)
	require.ErrorIs(t, err, ErrNotOwned)
	assert.ErrorContains(t, err, me)
	assert.ErrorContains(t, err, fmt.Sprintf("on 127.0.0.1:%d", port))
	assert.Empty(t, PortHolder("127.0.0.2", port), "a listener on 127.0.0.1 only takes no connection to 127.0.0.2")
}

func TestParseHexAddr(t *testing.T) {
	a, ok := parseHexAddr("0100007F:1F40")
	require.True(t, ok)
	assert.Equal(t, "127.0.0.1:8000", a.String())
	a, ok = parseHexAddr("00000000000000000000000001000000:0050")
	require.True(t, ok)
	assert.Equal(t, "[::1]:80", a.String())
	_, ok = parseHexAddr("zz:1")
	assert.False(t, ok)
}

// TestSampledTreeIsTheTree: the sampled reads' tree (liveTree, walked down
// from the leader through the kernel's children lists) holds the processes
// treeProcs's scan of every process finds: the leader, a child in the
// background, one that left the group with setsid, a grandchild and a
// child in the foreground, all started after liveTree's first call (its
// scan), so the walk alone finds them. The scan, four times a second for
// each server, was 38 % of a child run's own CPU (issue 49).
func TestSampledTreeIsTheTree(t *testing.T) {
	if !childrenListed() {
		t.Skip("this kernel lists no children (CONFIG_PROC_CHILDREN): liveTree is treeProcs here, which the other tests hold")
	}
	gate := filepath.Join(t.TempDir(), "gate")
	require.NoError(t, syscall.Mkfifo(gate, 0o600))
	s, log := sh(t, `read x < `+gate+`; sleep 30 & setsid sleep 300 & sh -c 'sleep 30 & wait' & echo started; sleep 30`)
	pids := func(ps []procfs.Proc, err error) []int {
		require.NoError(t, err)
		out := make([]int, len(ps))
		for i, p := range ps {
			out[i] = p.PID
		}
		return out
	}
	assert.Equal(t, []int{s.PID()}, pids(s.liveTree()), "the first call scans: the leader alone, waiting at its gate")
	require.NoError(t, os.WriteFile(gate, []byte("go\n"), 0o600))
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(log)
		below := 0
		for _, c := range childrenOf(s.PID()) {
			below += 1 + len(childrenOf(c))
		}
		return strings.Contains(string(b), "started") && below == 5
	}, 5*time.Second, 10*time.Millisecond, "the script starts its four children and the grandchild")
	walked := pids(s.liveTree()) // the second call walks
	require.Eventually(t, func() bool { return len(pids(s.treeProcs())) == 6 }, 5*time.Second, 10*time.Millisecond, "sh, four children, a grandchild")
	assert.ElementsMatch(t, pids(s.treeProcs()), walked)
}
