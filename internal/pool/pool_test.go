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
}
