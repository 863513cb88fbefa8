package vllmsim

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/vllm"
)

type flight struct {
	s   *vllm.Stream
	err error
}

// inFlight starts n streams of 200 tokens and returns once they decode.
func inFlight(t *testing.T, s *sim, n int) (wait func() []flight) {
	t.Helper()
	out := make([]flight, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.c.Complete(t.Context(), vllm.CompletionRequest{Model: "tiny-a", Prompt: "decode for a while", MaxTokens: 200, IgnoreEOS: true})
			out[i] = flight{st, err}
		}()
	}
	// Until the engine runs them all (200 tokens take ≈ 0.9 s at time scale 5).
	require.Eventually(t, func() bool {
		text, err := s.c.Metrics(t.Context())
		if err != nil {
			return false
		}
		m, err := vllm.ParseMetrics(text)
		return err == nil && m["vllm:num_requests_running"] == float64(n)
	}, 5*time.Second, 2*time.Millisecond, "the requests never ran")
	return func() []flight { wg.Wait(); return out }
}

// TestSleepModes: a sleep with requests decoding, in each of vLLM's pause
// modes (PR #34528): abort ends them with finish_reason "abort"; wait
// answers once they have finished; keep freezes them until the wake, after
// which they finish.
func TestSleepModes(t *testing.T) {
	testmain.Long(t)
	env := map[string]string{EnvTimeScale: "5"}
	t.Run("abort", func(t *testing.T) {
		s := startSim(t, "tiny-a", env)
		s.ready(t)
		wait := inFlight(t, s, 3)
		require.NoError(t, s.c.SleepMode(t.Context(), 1, vllm.SleepAbort))
		for _, f := range wait() {
			assert.ErrorContains(t, f.err, "aborted")
			assert.Equal(t, "abort", f.s.FinishReason)
			assert.Less(t, len(f.s.Tokens), 200)
		}
	})
	t.Run("wait", func(t *testing.T) {
		s := startSim(t, "tiny-a", env)
		s.ready(t)
		wait := inFlight(t, s, 3)
		require.NoError(t, s.c.SleepMode(t.Context(), 1, vllm.SleepWait))
		answered := time.Now()
		for _, f := range wait() {
			require.NoError(t, f.err)
			assert.Equal(t, 200, f.s.OutputTokens)
			assert.False(t, f.s.Last().After(answered), "finished before /sleep answered")
		}
		asleep, err := s.c.IsSleeping(t.Context())
		require.NoError(t, err)
		assert.True(t, asleep)
	})
	t.Run("keep", func(t *testing.T) {
		s := startSim(t, "tiny-a", env)
		s.ready(t)
		wait := inFlight(t, s, 3)
		require.NoError(t, s.c.SleepMode(t.Context(), 1, vllm.SleepKeep))
		asleepAt := time.Now()
		time.Sleep(300 * time.Millisecond)
		woke := time.Now()
		require.NoError(t, s.c.WakeUp(t.Context()))
		for _, f := range wait() {
			require.NoError(t, f.err, "held through the sleep, then finished")
			assert.Equal(t, 200, f.s.OutputTokens)
			assert.True(t, f.s.Last().After(woke), "its last token came after the wake")
			for _, tok := range f.s.Tokens {
				assert.False(t, tok.After(asleepAt) && tok.Before(woke), "no token while asleep: frozen")
			}
		}
	})
	t.Run("keep then a KV release", func(t *testing.T) {
		// #44890 (docs/vllm-api.md §6): a keep pause is complete at once,
		// so the KV cache may be released with requests kept; they are
		// preempted and recomputed after the wake, then finish.
		s := startSim(t, "tiny-a", env)
		s.ready(t)
		wait := inFlight(t, s, 2)
		require.NoError(t, s.c.SleepMode(t.Context(), 0, vllm.SleepKeep))
		code, body := send(t, s, "POST /release_kv_cache_memory")
		require.Equal(t, 200, code, "%v", body)
		require.NoError(t, s.c.WakeUp(t.Context(), "kv_cache"))
		for _, f := range wait() {
			require.NoError(t, f.err, "kept through the release, recomputed, finished")
			assert.Equal(t, 200, f.s.OutputTokens)
		}
	})
	t.Run("bad mode", func(t *testing.T) {
		s := startSim(t, "tiny-a", map[string]string{EnvTimeScale: "5", EnvEra: string(eraProposed)})
		s.ready(t)
		err := s.c.SleepMode(t.Context(), 1, "later")
		assert.ErrorContains(t, err, "HTTP 400", "era proposed: FastAPI validation, rewritten to 400")
		assert.ErrorContains(t, err, "('query', 'mode')")
		for _, e := range []era{eraB, eraC} {
			b := startSim(t, "tiny-a", map[string]string{EnvTimeScale: "5", EnvEra: string(e)})
			b.ready(t)
			err = b.c.SleepMode(t.Context(), 1, "later")
			assert.ErrorContains(t, err, "HTTP 400", "era %s: pause_scheduler's ValueError", e)
			assert.ErrorContains(t, err, "Invalid pause mode: later", e)
			asleep, err := b.c.IsSleeping(t.Context())
			require.NoError(t, err)
			assert.False(t, asleep, "era %s: refused before the pause", e)
		}
	})
}
