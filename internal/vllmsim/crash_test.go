package vllmsim_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/vllm"
	"github.com/wakebench/wakebench/internal/vllmsim"
)

// TestCrashFaults runs the vllmsim binary (crashes end the process) and
// checks the old-vLLM behaviour: a request while asleep kills the engine.
func TestCrashFaults(t *testing.T) {
	bin, err := backend.BuildSim(t.Context())
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "serve", "tiny-b", "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--enable-sleep-mode", "--kv-cache-memory-bytes", "1G")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Env = append(os.Environ(), vllmsim.EnvDevMode+"=1", vllmsim.EnvFaults+"=asleep-crash", simgpu.EnvDir+"="+t.TempDir(), vllmsim.EnvCacheDir+"="+t.TempDir())
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	c := vllm.New(fmt.Sprintf("http://127.0.0.1:%d", port))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = c.WaitReady(ctx, 10*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, c.Sleep(ctx, 1))
	_, err = c.Complete(ctx, vllm.CompletionRequest{Model: "tiny-b", Prompt: "hi", MaxTokens: 2})
	assert.Error(t, err)
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "exit status 1")
		assert.Contains(t, logs.String(), "an illegal memory access was encountered")
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not crash")
	}
}
