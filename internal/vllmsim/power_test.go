package vllmsim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/vllm"
)

// powerOver is the simulated device's power (board + this server), in W,
// from its energy counter over a dwell of d.
func (s *sim) powerOver(t *testing.T, d time.Duration) float64 {
	t.Helper()
	t0 := time.Now()
	e0, err := simgpu.Energy(s.dir, t0)
	require.NoError(t, err)
	time.Sleep(d)
	t1 := time.Now()
	e1, err := simgpu.Energy(s.dir, t1)
	require.NoError(t, err)
	w := (e1 - e0) / t1.Sub(t0).Seconds()
	t.Logf("%.3f W over %v", w, t1.Sub(t0).Round(time.Millisecond))
	return w
}

// inState waits until the sim's server draws power in state st (its
// meter's record in the device directory says so): a dwell measured from
// then on sees that state alone, however late a busy machine made the
// change.
func (s *sim) inState(t *testing.T, st simgpu.State) {
	t.Helper()
	state := func() string {
		files, err := filepath.Glob(filepath.Join(s.dir, "power-*.json"))
		require.NoError(t, err)
		for _, f := range files {
			if filepath.Base(f) == "power-0.json" { // the board's
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return "" // being rewritten
			}
			var r struct {
				State string `json:"state"`
			}
			if json.Unmarshal(b, &r) == nil {
				return r.State
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return state() == string(st) }, 10*time.Second, 5*time.Millisecond, "the server's power state never became %s (last %q)", st, state())
}

// TestPowerFollowsTheServersState: the energy counter of the sim's GPU,
// read as the harness reads it, shows the profile's power per state: awake
// and idle, decoding while a request runs (and idle again when it ends),
// asleep at level 1 and 2 (only the CUDA context), awake idle at level 0
// (a pause keeps weights and KV cache mapped), and the board alone once
// the server stopped.
func TestPowerFollowsTheServersState(t *testing.T) {
	t.Parallel()
	// Level-1 sleeps below allocate no host memory in the test process.
	s := startSim(t, "tiny-a", map[string]string{EnvHostScale: "0"})
	s.ready(t)
	p, ok := simgpu.DefaultPower("Tiny Sim GPU")
	require.True(t, ok)
	const dwell = 300 * time.Millisecond
	want := func(st simgpu.State) float64 {
		w, err := p.Watts(st)
		require.NoError(t, err)
		return p.BoardIdleW + w
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	s.inState(t, simgpu.AwakeIdle)
	assert.InEpsilon(t, want(simgpu.AwakeIdle), s.powerOver(t, dwell), 0.1, "awake and idle")

	streamCtx, stopStream := context.WithCancel(ctx)
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		// ~1 ms a token on tiny-a: 3000 tokens outlast the dwell.
		_, _ = s.c.Complete(streamCtx, vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 3000, IgnoreEOS: true})
	}()
	s.inState(t, simgpu.Decoding) // past the prefill
	assert.InEpsilon(t, want(simgpu.Decoding), s.powerOver(t, dwell), 0.1, "decoding")
	stopStream()
	<-streamDone
	s.inState(t, simgpu.AwakeIdle) // the engine dropped the request at its next step
	assert.InEpsilon(t, want(simgpu.AwakeIdle), s.powerOver(t, dwell), 0.1, "idle again once no request runs")

	for _, level := range []int{1, 2} {
		require.NoError(t, s.c.Sleep(ctx, level))
		s.inState(t, simgpu.Asleep)
		assert.InEpsilon(t, want(simgpu.Asleep), s.powerOver(t, dwell), 0.1, "asleep at level %d: the CUDA context only", level)
		require.NoError(t, s.c.WakeUp(ctx))
		s.inState(t, simgpu.AwakeIdle)
		assert.InEpsilon(t, want(simgpu.AwakeIdle), s.powerOver(t, dwell), 0.1, "awake after level %d", level)
	}
	require.NoError(t, s.c.Sleep(ctx, 0))
	s.inState(t, simgpu.AwakeIdle)
	assert.InEpsilon(t, want(simgpu.AwakeIdle), s.powerOver(t, dwell), 0.1, "level 0 keeps weights and KV cache mapped")
	require.NoError(t, s.c.WakeUp(ctx))

	s.stop()
	<-s.done
	s.done <- 0 // for the cleanup
	assert.InEpsilon(t, p.BoardIdleW, s.powerOver(t, dwell), 0.1, "stopped: the board alone")
}
