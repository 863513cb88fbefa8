package vllmsim

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/vllm"
)

// counters scrapes s's /metrics into the engine counters.
func counters(t *testing.T, s *sim) vllm.Counters {
	t.Helper()
	text, err := s.c.Metrics(t.Context())
	require.NoError(t, err)
	m, err := vllm.ParseMetrics(text)
	require.NoError(t, err)
	return m.Counters()
}

// generate completes prompt greedily on model (40 tokens) and returns its text.
func generate(t *testing.T, s *sim, model, prompt string) string {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 40, "ignore_eos": true, "temperature": 0})
	code, body := post(t, s.url+"/v1/completions", string(req))
	require.Equal(t, 200, code, body)
	var ans struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ans))
	require.Len(t, ans.Choices, 1)
	return ans.Choices[0].Text
}

// TestSpeculativeDecoding: under --speculative-config the spec-decode
// counters are exported, each step past a request's first token drafts
// num_speculative_tokens and the target accepts the profile's share
// (spread evenly: exact to a token per window), the tokens are those
// without speculation, and the decode rate (the engine's own, from
// vllm:request_decode_time_seconds) rises. Fault spec-off-after-wake:
// from the first level-2 wake on the drafts are all rejected, the tokens the
// same, the rate back below a server without speculation's. Without the
// flag no spec-decode series exists. The fault waits for a level-2 wake
// (the reload path): a level-1 wake keeps the draft model.
func TestSpeculativeDecoding(t *testing.T) {
	const prompt = "speculate on the next few tokens"
	plain := startSim(t, "tiny-a", map[string]string{EnvTimeScale: "5"})
	spec := startSim(t, "tiny-a", map[string]string{EnvTimeScale: "5", EnvFaults: "spec-off-after-wake"},
		"--speculative-config", `{"method": "mtp", "num_speculative_tokens": 3}`)
	plain.ready(t)
	spec.ready(t)

	window := func(s *sim) (string, vllm.Rates) {
		a := counters(t, s)
		text := generate(t, s, "tiny-a", prompt)
		return text, vllm.RatesOver(a, counters(t, s))
	}
	want, base := window(plain)
	assert.False(t, counters(t, plain).HasSpec, "no spec-decode series without --speculative-config")
	got, on := window(spec)
	assert.Equal(t, want, got, "speculation keeps the tokens")
	// 40 tokens: the first from the prefill step, then steps of 1 + accepted
	// (2.1 on average at 0.7 of 3): 13 steps, 39 draft tokens.
	assert.InDelta(t, DefaultSpecAcceptance, on.SpecAcceptance, 1.0/13, "accepted / drafted")
	assert.Greater(t, on.DecodeTPS, 1.3*base.DecodeTPS, "speculation decodes faster: %.0f against %.0f tok/s", on.DecodeTPS, base.DecodeTPS)
	assert.True(t, counters(t, spec).HasPrefix, "the prefix-cache counters are exported")

	require.NoError(t, spec.c.Sleep(t.Context(), 1))
	require.NoError(t, spec.c.WakeUp(t.Context()))
	got, l1 := window(spec)
	assert.Equal(t, want, got)
	assert.InDelta(t, DefaultSpecAcceptance, l1.SpecAcceptance, 1.0/13, "a level-1 wake keeps the draft model")

	require.NoError(t, spec.c.Sleep(t.Context(), 2))
	_, err := spec.c.Wake(t.Context(), 2) // vLLM's level-2 sequence: weights, reload_weights, kv_cache, reset_prefix_cache
	require.NoError(t, err)
	got, off := window(spec)
	assert.Equal(t, want, got, "the fault keeps the tokens")
	assert.Zero(t, off.SpecAcceptance, "spec-off-after-wake: every draft rejected")
	assert.Less(t, off.DecodeTPS, 0.7*on.DecodeTPS, "and decoding slower: %.0f against %.0f tok/s", off.DecodeTPS, on.DecodeTPS)
}

// TestAdapterIgnoredAfterWake: an adapter's prefix-cache blocks are its
// own (its first request after the base model's of the same prompt hits
// nothing); with fault adapter-ignored-after-wake, after a wake the
// adapter's requests run as the base model's and hit its blocks, the
// adapter's tokens unchanged.
func TestAdapterIgnoredAfterWake(t *testing.T) {
	s := startSim(t, "tiny-a", map[string]string{EnvFaults: "adapter-ignored-after-wake"},
		"--enable-lora", "--lora-modules", "sql=/adapters/sql")
	s.ready(t)
	hits := func(model string) (string, float64) {
		a := counters(t, s)
		text := generate(t, s, model, longPrompt)
		b := counters(t, s)
		return text, b.PrefixHits - a.PrefixHits
	}
	_, h := hits("tiny-a")
	require.Zero(t, h, "the base model's first request")
	sqlText, h := hits("sql")
	assert.Zero(t, h, "the adapter's blocks are its own")
	_, h = hits("sql")
	assert.Equal(t, 32.0, h, "its second request hits its own blocks")

	require.NoError(t, s.c.Sleep(t.Context(), 1))
	require.NoError(t, s.c.WakeUp(t.Context()))
	_, h = hits("tiny-a")
	require.Zero(t, h, "the sleep dropped the cache")
	text, h := hits("sql")
	assert.Equal(t, 32.0, h, "after the wake the adapter's request hits the base model's blocks")
	assert.Equal(t, sqlText, text, "the tokens are still the adapter's")
}
