package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/vllm"
)

func TestGarbage(t *testing.T) {
	assert.True(t, garbage("!!!!!!!!"))
	assert.True(t, garbage(" ! ! ! !"))
	assert.False(t, garbage("!!!"), "too short to tell")
	assert.False(t, garbage(" the model wakes"))
}

// TestExitWait: a connection that broke, as a client sees it wrapped (a
// cut stream, a reset), waits long for the server's exit; an error a live
// server answered does not.
func TestExitWait(t *testing.T) {
	long, short := exitWait(fmt.Errorf("POST /v1/completions: read stream: %w", io.ErrUnexpectedEOF)), exitWait(errors.New("HTTP 500: boom"))
	assert.Greater(t, long, short)
	assert.Equal(t, long, exitWait(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}))
	assert.Equal(t, short, exitWait(context.DeadlineExceeded))
	assert.Equal(t, long, exitWait(fmt.Errorf("write: %w", syscall.EPIPE)))
	// A start polls /health while nothing listens yet: the refused dial is
	// not ready (vllm.ErrNotReady), never a broken connection, or every
	// start whose poll failed would wait for an exit.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	herr := vllm.New("http://" + addr).Health(t.Context())
	assert.ErrorIs(t, herr, vllm.ErrNotReady)
	assert.Equal(t, short, exitWait(herr))
}

// TestLogWindows: a transition's window is the log's lines from where it
// stood before the request until where it stood before the next one (or
// the log's end while there is none), each line the window's it began in;
// a log shorter than the window's start is a new file, read whole; the
// first end set stands.
func TestLogWindows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "A.log")
	sleepLine := "INFO It took 1.25 seconds to fall asleep.\n"
	wakeLine := "INFO It took 0.50 seconds to wake up tags {'weights', 'kv_cache'}.\n"
	start := strings.Repeat("a start's line\n", 8) // longer than wakeLine: the new file below is shorter
	require.NoError(t, os.WriteFile(path, []byte(start+sleepLine), 0o644))
	tr := &Transition{log: path, logFrom: int64(len(start))}
	tr.logTo.Store(-1)
	lg, ok := tr.Engine()
	require.True(t, ok)
	assert.Equal(t, []float64{1.25}, lg.SleepS)

	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fh.WriteString(wakeLine)
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	lg, _ = tr.Engine()
	assert.Equal(t, []float64{0.5}, lg.WakeS, "open: up to the log's end")
	tr.closeLog(int64(len(start + sleepLine)))
	tr.closeLog(0)
	lg, _ = tr.Engine()
	assert.Equal(t, []float64{1.25}, lg.SleepS)
	assert.Empty(t, lg.WakeS, "closed before the wake's line; a later close is ignored")

	require.NoError(t, os.WriteFile(path, []byte(wakeLine), 0o644)) // shorter than logFrom: a new file
	lg, _ = tr.Engine()
	assert.Equal(t, []float64{0.5}, lg.WakeS)

	// A bound inside a line (a size read while the server wrote it): the
	// line is the window's it began in, whole, and none of the next's.
	require.NoError(t, os.WriteFile(path, []byte(start+sleepLine+wakeLine), 0o644))
	mid := int64(len(start) + 10)
	a := &Transition{log: path, logFrom: int64(len(start))}
	a.logTo.Store(-1)
	a.closeLog(mid)
	b := &Transition{log: path, logFrom: mid}
	b.logTo.Store(-1)
	la, _ := a.Engine()
	lb, _ := b.Engine()
	assert.Equal(t, []float64{1.25}, la.SleepS)
	assert.Empty(t, la.WakeS)
	assert.Empty(t, lb.SleepS)
	assert.Equal(t, []float64{0.5}, lb.WakeS)
}
