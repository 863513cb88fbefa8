package vllmsim_test

import (
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
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/vllm"
	"github.com/wakebench/wakebench/internal/vllmsim"
)

// crashSim runs the vllmsim binary with faults (crashes end the process).
func crashSim(t *testing.T, faults string, env ...string) (c *vllm.Client, logs *syncLog, done chan error) {
	sc, logs, done, _ := crashSimPID(t, faults, env...)
	return sc.Client, logs, done
}

// crashSimPID is crashSim with the base URL and the process's pid (whose
// /proc the host-memory tests read).
func crashSimPID(t *testing.T, faults string, env ...string) (c *simClient, logs *syncLog, done chan error, pid int) {
	bin, err := backend.BuildSim(t.Context())
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "serve", "tiny-b", "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--enable-sleep-mode", "--kv-cache-memory-bytes", "1G")
	logs = &syncLog{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(append(os.Environ(), vllmsim.EnvDevMode+"=1", vllmsim.EnvFaults+"="+faults, simgpu.EnvDir+"="+t.TempDir(), vllmsim.EnvCacheDir+"="+t.TempDir()), env...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	c = &simClient{Client: vllm.New(url), url: url}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = c.WaitReady(ctx, 10*time.Millisecond)
	require.NoError(t, err)
	return c, logs, done, cmd.Process.Pid
}

// syncLog is a process's output, read while the process writes it.
// syncLog is a log the server writes while the test reads it (SyncLog).
type syncLog = vllmsim.SyncLog

// simClient is a client of one sim process and its base URL.
type simClient struct {
	*vllm.Client
	url string
}

func (c *simClient) BaseURL() string { return c.url }

// TestCrashFaults checks the old-vLLM behaviour: a request while asleep
// kills the engine.
func TestCrashFaults(t *testing.T) {
	testmain.Long(t)
	c, logs, done := crashSim(t, "asleep-crash")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Sleep(ctx, 1))
	_, err := c.Complete(ctx, vllm.CompletionRequest{Model: "tiny-b", Prompt: "hi", MaxTokens: 2})
	assert.Error(t, err)
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "exit status 1")
		logs.Has(t, "an illegal memory access was encountered")
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not crash")
	}
}

// runningStream starts a 500-token request and returns once the engine
// runs it (a fixed wait is too short on a busy machine); the channel gets
// the request's error when it ends.
func runningStream(t *testing.T, ctx context.Context, c *vllm.Client) <-chan error {
	t.Helper()
	streamErr := make(chan error, 1)
	go func() {
		_, err := c.Complete(ctx, vllm.CompletionRequest{Model: "tiny-b", Prompt: "hi", MaxTokens: 500, IgnoreEOS: true})
		streamErr <- err
	}()
	require.Eventually(t, func() bool {
		text, err := c.Metrics(ctx)
		if err != nil {
			return false
		}
		m, err := vllm.ParseMetrics(text)
		return err == nil && m["vllm:num_requests_running"] == 1
	}, 5*time.Second, 2*time.Millisecond, "the request never ran")
	return streamErr
}

// TestInFlightCrash: fault inflight-crash, a server with the pause API
// that still dies when put to sleep with requests running (#45520 on a
// 2026 main; era a dies so without the fault).
func TestInFlightCrash(t *testing.T) {
	c, logs, done := crashSim(t, "inflight-crash", vllmsim.EnvTimeScale+"=5")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	streamErr := runningStream(t, ctx, c)
	assert.Error(t, c.SleepMode(ctx, 1, vllm.SleepWait), "the sleep never answers")
	assert.Error(t, <-streamErr, "the stream is cut")
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "exit status 1")
		logs.Has(t, "injected fault inflight-crash")
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not crash")
	}
}

// TestEraASleepWithRequestsRunningKillsTheEngine: vLLM before PR #34528
// (era a) does not pause before a sleep: the sleep frees the memory its
// running requests decode on, answers 200, and the engine dies (vllm#28714
// on v0.11.1rc7: "POST /sleep 200 OK", then "CUDA error: an illegal memory
// access was encountered"). No fault is needed: it is that era's behaviour.
// Era b (pause first) lives on.
func TestEraASleepWithRequestsRunningKillsTheEngine(t *testing.T) {
	testmain.Long(t)
	for _, era := range []string{"a", "b"} {
		t.Run(era, func(t *testing.T) {
			c, logs, done := crashSim(t, "", vllmsim.EnvTimeScale+"=5", "VLLMSIM_ERA="+era)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			streamErr := runningStream(t, ctx, c)
			require.NoError(t, c.Sleep(ctx, 1), "the sleep answers 200")
			assert.Error(t, <-streamErr, "the running request does not finish")
			select {
			case err := <-done:
				require.Equal(t, "a", era, "era b paused first and must live on: %v", err)
				assert.ErrorContains(t, err, "exit status 1")
				logs.Has(t, "an illegal memory access was encountered")
				logs.Has(t, "PR #34528")
			case <-time.After(2 * time.Second):
				require.Equal(t, "b", era, "era a's engine did not die")
				require.NoError(t, c.WakeUp(ctx))
				_, err := c.Complete(ctx, vllm.CompletionRequest{Model: "tiny-b", Prompt: "hi", MaxTokens: 2})
				assert.NoError(t, err, "era b serves after the wake")
			}
		})
	}
}
