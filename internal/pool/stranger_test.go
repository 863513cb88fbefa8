package pool_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/testmain"
)

// TestConfiguredPortAlreadyServedIsRefused: a process already listening on
// the port the config names is refused before the spawn, named by port,
// config key and PID, and nothing is sent to it (issue 48: real vLLM binds
// seconds late, so the stranger answered /health and was benchmarked).
func TestConfiguredPortAlreadyServedIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	var accepted atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	f, _, cfg := simtest.Pool(t, nil, func(c *config.Config) { c.Models[0].Port = port })

	_, err = f.Start(t.Context(), "A")
	require.Error(t, err)
	assert.ErrorContains(t, err, fmt.Sprintf("port %d, config models[0].port, is already in use", port))
	assert.ErrorContains(t, err, fmt.Sprintf("PID %d (", os.Getpid()), "the process holding the port")
	assert.False(t, f.Running("A"))
	_, statErr := os.Stat(filepath.Join(cfg.OutDir, "A.log"))
	assert.ErrorIs(t, statErr, os.ErrNotExist, "no server was spawned")

	require.NoError(t, ln.Close())
	wg.Wait()
	assert.Zero(t, accepted.Load(), "no connection reached the process on the port")
}

// TestHealthFromAnotherProcessIsNotReady: a process that takes the port
// after the check (here: the port picked for the model, every pick) and
// answers /health and /v1/models as the model would is not the run's
// server: the start fails naming it at the first /health 200, and it gets
// nothing but /health.
func TestHealthFromAnotherProcessIsNotReady(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	var mu sync.Mutex // guards paths
	var paths []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"tiny-a","object":"model"}]}`)
		}
	})}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	defer func() { srv.Close(); <-served }()

	// A server that binds late, as vLLM does after importing torch: it
	// never binds in this test.
	late := filepath.Join(t.TempDir(), "late-vllm")
	require.NoError(t, os.WriteFile(late, []byte("#!/bin/sh\nexec sleep 300\n"), 0o755))
	f, _, _ := simtest.PoolWith(t, nil, func(c *config.Config) { c.Models[0].Name = "tiny-a" }, func(o *pool.Options) {
		o.Command = late
		o.FreePort = func(string) (int, error) { return port, nil }
	})
	_, err = f.Start(t.Context(), "A")
	require.Error(t, err, "the other process's answers are not the server's")
	assert.ErrorContains(t, err, "not from this run's server")
	assert.ErrorContains(t, err, fmt.Sprintf("PID %d (", os.Getpid()), "the process that answered")
	assert.False(t, f.Running("A"))
	mu.Lock()
	defer mu.Unlock()
	for _, p := range paths {
		assert.Equal(t, "/health", p, "nothing but the readiness poll reached the other process")
	}
}

// TestSleepModeOffFails: a server that answers /sleep 200 and sleeps
// nothing (fault sleep-ignored: /is_sleeping false; =paused: /is_sleeping
// true, only its engine log's "freed 0.00 GiB" tells) fails the sleep
// naming --enable-sleep-mode, with no memory source, at both levels.
func TestSleepModeOffFails(t *testing.T) {
	for _, tc := range []struct {
		faults string
		level  int
		says   string
	}{
		{"sleep-ignored", 1, "/sleep?level=1 answered 200 but /is_sleeping is false"},
		{"sleep-ignored=paused", 1, `/sleep?level=1 answered 200 but the server did not sleep: its log`},
		{"sleep-ignored=paused", 2, `says "Sleep mode freed 0.00 GiB memory"`},
	} {
		t.Run(fmt.Sprintf("%s/level%d", tc.faults, tc.level), func(t *testing.T) {
			f, _, _ := simtest.PoolWith(t, nil, func(c *config.Config) { c.Models[0].SimFaults = tc.faults },
				func(o *pool.Options) { o.Sampler = nil }) // no memory source
			_, err := f.Start(t.Context(), "A")
			require.NoError(t, err)
			_, err = f.Run(t.Context(), "A", pool.Sleep(tc.level))
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.says)
			assert.ErrorContains(t, err, "the server did not sleep; start it with --enable-sleep-mode")
		})
	}
}

// TestHungStartIsNotRetried: once a model's start timed out, every later
// start of it (a later phase's Activate) fails at once naming the first
// failure, spawning nothing and putting no other model to sleep.
func TestHungStartIsNotRetried(t *testing.T) {
	testmain.Long(t)
	f, _, cfg := simtest.Pool(t, nil, func(c *config.Config) {
		c.Models[0].SimFaults = "start-hang"
		c.Timeouts.StartS = 5 // B's real start must fit it too, with both cores busy (make stress)
	})
	ctx := t.Context()
	_, err := f.Start(ctx, "A")
	require.Error(t, err)
	assert.ErrorContains(t, err, "no answer within 5s")

	require.NoError(t, f.Activate(ctx, "B"))
	_, err = f.Start(ctx, "A")
	require.Error(t, err)
	want := fmt.Sprintf("model A's server never became ready (timeouts.start_s 5 s) at an earlier start, so it is not started again: see %s", filepath.Join(cfg.OutDir, "A.log"))
	assert.ErrorContains(t, err, want)
	err = f.Activate(ctx, "A")
	assert.ErrorContains(t, err, want)
	assert.Equal(t, []string{"B"}, f.Awake(), "B was not put to sleep for A")
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, "A.log"))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(b), "=== wakebench: A start at"), "A was spawned once")
}
