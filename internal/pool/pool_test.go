package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

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
