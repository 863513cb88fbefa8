package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

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
