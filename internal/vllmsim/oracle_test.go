package vllmsim

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/oracle"
	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/vllm"
)

func gen(t *testing.T, s *sim, model, prompt string) vllm.Generation {
	t.Helper()
	g, err := s.c.Generate(t.Context(), vllm.GenerateRequest{Model: model, Prompt: prompt, MaxTokens: 8, Logprobs: 5})
	require.NoError(t, err)
	return g
}

// TestGreedyAnswersAreReplayable: the simulated model answers a greedy
// request with token ids and top-k logprobs as vLLM does, the same before
// and after sleeps of either level; a LoRA adapter answers differently
// from its base model.
func TestGreedyAnswersAreReplayable(t *testing.T) {
	s := startSim(t, "tiny-a", nil, "--enable-lora", "--lora-modules", "sql=/adapters/sql", `{"name": "chat", "path": "/adapters/chat"}`)
	s.ready(t)
	ctx := t.Context()
	ids, err := s.c.Models(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"tiny-a", "sql", "chat"}, ids, "the base model and each adapter")

	ref := gen(t, s, "tiny-a", "The capital of France is")
	require.Len(t, ref.IDs, 8)
	require.Len(t, ref.Logprobs, 8)
	require.Len(t, ref.Top, 8)
	for i, top := range ref.Top {
		assert.Len(t, top, 5, "top-5 at token %d", i+1)
		chosen := ref.Tokens[i]
		assert.Equal(t, "token_id:"+strconv.Itoa(ref.IDs[i]), chosen, "return_tokens_as_token_ids names tokens by id")
		for name, lp := range top {
			assert.LessOrEqual(t, lp, top[chosen], "greedy: %s is no likelier than the chosen token", name)
		}
	}
	lora := gen(t, s, "sql", "The capital of France is")
	assert.NotEqual(t, ref.IDs, lora.IDs, "an adapter changes the answer")

	require.NoError(t, s.c.Sleep(ctx, 1))
	require.NoError(t, s.c.WakeUp(ctx))
	assert.Equal(t, ref, gen(t, s, "tiny-a", "The capital of France is"), "level 1: the same ids and logprobs")
	assert.Equal(t, lora, gen(t, s, "sql", "The capital of France is"))
	require.NoError(t, s.c.Sleep(ctx, 2))
	_, err = s.c.Wake(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, ref, gen(t, s, "tiny-a", "The capital of France is"), "level 2 with reload_weights: the same")

	code, body := post(t, s.url+"/v1/completions", `{"model":"tiny-a","prompt":"x","logprobs":21}`)
	assert.Equal(t, 400, code)
	assert.Contains(t, body, "greater than max allowed: 20")
	_, err = ParseArgs([]string{"serve", "m", "--lora-modules", "nopath"}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "want name=path")
}

// TestCorruptionFaults: each fault answers plausibly (no "!!!!") and
// leaves the answers before any sleep alone; after a wake it corrupts them
// as its bug does.
func TestCorruptionFaults(t *testing.T) {
	const prompt = "A longer prompt for the oracle to replay after the wake."
	clean := startSim(t, "tiny-a", nil, "--enable-lora", "--lora-modules", "sql=/a/sql")
	clean.ready(t)
	base, lora := gen(t, clean, "tiny-a", prompt), gen(t, clean, "sql", prompt)

	for fault, check := range map[string]func(t *testing.T, before, after, loraAfter vllm.Generation){
		"diverge-after-wake=3": func(t *testing.T, before, after, _ vllm.Generation) {
			assert.Equal(t, before.IDs[:2], after.IDs[:2], "tokens 1 and 2 unchanged")
			assert.NotEqual(t, before.IDs[2], after.IDs[2], "token 3 differs")
		},
		"lora-ignored": func(t *testing.T, _, after, loraAfter vllm.Generation) {
			assert.Equal(t, base.IDs, loraAfter.IDs, "the adapter's request gets the base model's answer")
			assert.Equal(t, base, after)
		},
		"logprob-drift=0.3": func(t *testing.T, before, after, _ vllm.Generation) {
			assert.Equal(t, before.IDs, after.IDs, "the same tokens")
			for i := range before.Logprobs {
				assert.InDelta(t, before.Logprobs[i]-0.3, after.Logprobs[i], 1e-9)
			}
		},
	} {
		t.Run(fault, func(t *testing.T) {
			s := startSim(t, "tiny-a", map[string]string{EnvFaults: fault}, "--enable-lora", "--lora-modules", "sql=/a/sql")
			s.ready(t)
			before := gen(t, s, "tiny-a", prompt)
			assert.Equal(t, base, before, "before any sleep the fault changes nothing")
			assert.Equal(t, lora, gen(t, s, "sql", prompt))
			require.NoError(t, s.c.Sleep(t.Context(), 1))
			require.NoError(t, s.c.WakeUp(t.Context()))
			after, loraAfter := gen(t, s, "tiny-a", prompt), gen(t, s, "sql", prompt)
			assert.NotContains(t, after.Text, "!!", "plausible text: the garbage check cannot see it")
			check(t, before, after, loraAfter)
		})
	}
}

// TestOracleMeetsATie: the simulated model has near-ties (a runner-up
// within TieMargin of the greedy token, inside the oracle's 0.05 nats);
// after a wake that reorders the first one the oracle replay accepts the
// tie, and a logprob drift before it is still the divergence at token 1.
func TestOracleMeetsATie(t *testing.T) {
	const tol = 0.05 // the default logprob_tolerance
	probe := func(t *testing.T, s *sim) vllm.Generation {
		t.Helper()
		g, err := s.c.Generate(t.Context(), vllm.GenerateRequest{Model: "tiny-a", Prompt: oracle.ShortPrompt, MaxTokens: 16, Logprobs: 5})
		require.NoError(t, err)
		return g
	}
	for fault, check := range map[string]func(t *testing.T, ref, got vllm.Generation){
		"tie-flip-after-wake": func(t *testing.T, ref, got vllm.Generation) {
			r := oracle.Compare(ref, got, tol)
			assert.True(t, r.Match, "a reordered near-tie is numerics: %+v", r)
			assert.Equal(t, 5, r.Tie, "the short probe's first near-tie is its 5th token")
			assert.Equal(t, ref.IDs[:4], got.IDs[:4], "the same tokens before the tie")
			assert.NotEqual(t, ref.IDs[4], got.IDs[4], "the runner-up won: a genuine tie, not an identical replay")
			assert.NotEqual(t, ref.IDs[5:], got.IDs[5:], "another token, another continuation")
			lp, ok := ref.Top[4][got.Tokens[4]]
			require.True(t, ok, "the replayed token is in the reference's top-k")
			assert.InDelta(t, ref.Logprobs[4], lp, TieMargin, "a near-tie of the reference")
		},
		"tie-flip-after-wake,logprob-drift=0.3": func(t *testing.T, ref, got vllm.Generation) {
			r := oracle.Compare(ref, got, tol)
			assert.False(t, r.Match, "drift before the tie is no tie: %+v", r)
			assert.Zero(t, r.Tie)
			assert.Equal(t, 1, r.Position)
			assert.Equal(t, oracle.KindLogprob, r.Kind)
			assert.InDelta(t, 0.3, r.MaxDelta, 1e-9)
		},
	} {
		t.Run(fault, func(t *testing.T) {
			s := startSim(t, "tiny-a", map[string]string{EnvFaults: fault})
			s.ready(t)
			ref := probe(t, s)
			require.Len(t, ref.IDs, 16)
			assert.Equal(t, ref, probe(t, s), "before any sleep the same answer")
			require.NoError(t, s.c.Sleep(t.Context(), 1))
			require.NoError(t, s.c.WakeUp(t.Context()))
			check(t, ref, probe(t, s))
		})
	}
}

// TestSleepAsTheEngineLogsIt: vLLM's own lines for a sleep and a wake, a
// leak that grows the residual each sleep, the first level-1 sleep's
// pinned-buffer cost, and, from era d (vLLM ≥ 0.32, #52864), the
// sleep-mode operation metric (v0.31 has none).
func TestSleepAsTheEngineLogsIt(t *testing.T) {
	testmain.Long(t)
	for _, e := range []era{eraC, eraD, eraProposed} {
		t.Run(string(e), func(t *testing.T) { sleepAsTheEngineLogsIt(t, e) })
	}
}

func sleepAsTheEngineLogsIt(t *testing.T, ev era) {
	logs := &SyncLog{}
	s := startSimLog(t, "tiny-a", map[string]string{EnvFaults: "leak-per-cycle=64", EnvTimeScale: "4", EnvEra: string(ev)}, logs)
	s.ready(t)
	ctx := t.Context()
	// calls is the sleeps' wall time as the client saw it: each sleep's
	// metric observation lies inside its call.
	var calls time.Duration
	sleep := func(level int) {
		t.Helper()
		start := time.Now()
		require.NoError(t, s.c.Sleep(ctx, level))
		calls += time.Since(start)
	}
	for range 3 {
		sleep(1)
		require.NoError(t, s.c.WakeUp(ctx))
	}
	sleep(2)
	_, err := s.c.Wake(ctx, 2)
	require.NoError(t, err)

	e := vllm.ParseEngineLog(logs.Bytes())
	require.Len(t, e.SleepS, 4)
	require.Len(t, e.WakeS, 5, "one line per /wake_up: three level-1 wakes, two level-2 calls")
	require.Len(t, e.FreedGiB, 4)
	// Each sleep frees the weights (0.5 GiB) and the KV cache (1 GiB)
	// less what the leak keeps: 64 MiB more every sleep.
	assert.InDelta(t, 1.5-1.0/16, e.FreedGiB[0], 0.005)
	assert.InDelta(t, 1.5-1.0/16, e.FreedGiB[2], 0.005)
	procs, err := simgpu.Processes(s.dir)
	require.NoError(t, err)
	assert.Equal(t, uint64(0.25*GiB+4*64<<20+1.5*GiB), procs[0].UsedBytes, "awake after 4 sleeps: 4 × 64 MiB leaked")
	// The first level-1 sleep also allocates the pinned buffer: 0.537 GB
	// at 10 GB/s, × 4 time scale = 0.215 s more than the others.
	assert.Greater(t, e.SleepS[0]-e.SleepS[1], 0.1, "first sleep %v, second %v", e.SleepS[0], e.SleepS[1])
	assert.Contains(t, string(logs.Bytes()), "It took", "seconds to wake up tags ['weights', 'kv_cache'].")
	assert.Contains(t, string(logs.Bytes()), "seconds to wake up tags ['weights'].")

	text, err := s.c.Metrics(ctx)
	require.NoError(t, err)
	m, err := vllm.ParseMetrics(text)
	require.NoError(t, err)
	sum, n, ok := m.SleepOp("sleep")
	if !ev.since(eraD) {
		assert.False(t, ok, "era %s: no operation metrics", ev)
		return
	}
	require.True(t, ok, "vllm:rl_sleep_mode_operation_duration_seconds")
	assert.Equal(t, 4.0, n)
	// The metric times the whole /sleep operation, the log line the
	// engine's part of it, and the client's call holds both: the order of
	// the three, not a tolerance, is what a busy machine cannot break. The
	// log prints microseconds, so each line may round down by 0.5 µs.
	logged := e.SleepS[0] + e.SleepS[1] + e.SleepS[2] + e.SleepS[3]
	assert.GreaterOrEqual(t, sum, logged-4*0.5e-6, "the metric holds the engine's sleep the log times")
	assert.LessOrEqual(t, sum, calls.Seconds(), "the metric lies inside the client's calls")
	assert.Greater(t, logged, 0.0)
	_, n, _ = m.SleepOp("wake")
	assert.Equal(t, 5.0, n)
}
