package vllmsim

// Released vLLM's behaviour where the proposals differ (docs/vllm-api.md
// §1, the contract table's eras A, B, C), and the flags and endpoints the
// newest release has beside sleep mode.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/vllm"
)

// legacyState is vllm:engine_sleep_state's three series: awake,
// weights_offloaded, discard_all.
func legacyState(t *testing.T, s *sim) [3]float64 {
	t.Helper()
	m := s.metrics(t)
	var out [3]float64
	for i, st := range []string{"awake", "weights_offloaded", "discard_all"} {
		v, ok := m[`vllm:engine_sleep_state{sleep_state="`+st+`"}`]
		require.True(t, ok, "vllm:engine_sleep_state %s not exported", st)
		out[i] = v
	}
	return out
}

// TestLevelsBeyondOneDiscardEverything: released vLLM passes /sleep's level
// on with int() and Worker.sleep offloads the weights only at level 1
// (offload_tags = ("weights",) if level == 1 else ()): level 3 in the newest
// release, and level 0 in era a (before level 0 meant "pause only"), discard
// weights and KV cache alike with an empty 200. Only the residual stays,
// the weights come back uninitialised ("!") without reload_weights, and the
// legacy metric, recorded with the level asked for, is all zero.
func TestLevelsBeyondOneDiscardEverything(t *testing.T) {
	for _, tc := range []struct {
		e     era
		level int
	}{{eraC, 3}, {eraB, 2}, {eraA, 0}, {eraA, 3}} {
		t.Run(fmt.Sprintf("%s/level%d", tc.e, tc.level), func(t *testing.T) {
			s := startSim(t, "tiny-a", map[string]string{EnvEra: string(tc.e)})
			s.ready(t)
			code, body := call(t, s.url, fmt.Sprintf("POST /sleep?level=%d", tc.level))
			require.Equal(t, 200, code, body)
			assert.Empty(t, strings.TrimSpace(body), "an empty 200")
			assert.Equal(t, tinyPhysics(t).ResidualBytes(), s.used(t), "weights and KV cache discarded: the residual stays")
			asleep, err := s.c.IsSleeping(t.Context())
			require.NoError(t, err)
			assert.True(t, asleep)
			want := [3]float64{0, 0, 0}
			if tc.level == 2 {
				want = [3]float64{0, 0, 1}
			}
			assert.Equal(t, want, legacyState(t, s), "record_sleep_state(1, %d)", tc.level)

			code, _ = call(t, s.url, "POST /wake_up")
			require.Equal(t, 200, code)
			st, err := s.c.Complete(t.Context(), vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 4, IgnoreEOS: true})
			require.NoError(t, err)
			assert.Equal(t, "!!!!", st.Text, "the weights were discarded, not offloaded")
		})
	}
}

// TestLegacySleepStateAsReleased: in the newest release the legacy metric
// is what record_sleep_state last recorded: every wake (a partial one too)
// sets awake = 1, a level-0 sleep all three to 0, a level-1 sleep after a
// partial wake weights_offloaded (era proposed derives it from the
// resource states instead: 0 after a partial wake).
func TestLegacySleepStateAsReleased(t *testing.T) {
	s := startSim(t, "tiny-a", nil)
	s.ready(t)
	assert.Equal(t, [3]float64{1, 0, 0}, legacyState(t, s))
	send(t, s, "POST /sleep?level=1")
	assert.Equal(t, [3]float64{0, 1, 0}, legacyState(t, s))
	code, _ := send(t, s, "POST /wake_up?tags=weights")
	require.Equal(t, 200, code)
	assert.Equal(t, [3]float64{1, 0, 0}, legacyState(t, s), "a partial wake records awake")
	asleep, err := s.c.IsSleeping(t.Context())
	require.NoError(t, err)
	assert.True(t, asleep, "though the KV cache still sleeps")
	send(t, s, "POST /wake_up?tags=kv_cache")
	code, _ = send(t, s, "POST /sleep?level=0")
	require.Equal(t, 200, code)
	assert.Equal(t, [3]float64{0, 0, 0}, legacyState(t, s), "level 0: all zero")
	send(t, s, "POST /wake_up")
	assert.Equal(t, [3]float64{1, 0, 0}, legacyState(t, s))

	p := startSim(t, "tiny-a", map[string]string{EnvEra: string(eraProposed)})
	p.ready(t)
	send(t, p, "POST /sleep?level=1")
	send(t, p, "POST /wake_up?tags=weights")
	assert.Equal(t, [3]float64{0, 0, 0}, legacyState(t, p), "proposed: derived, a partial wake is not awake")
}

// TestFullSleepAfterKVRelease: since PR #44890 the executor's guard returns
// only when every tag is asleep, so a level-1 sleep after a KV-only release
// sleeps the weights (200, only the residual stays, weights_offloaded);
// era proposed rejects it as a sleep while partially awake (500, nothing
// freed).
func TestFullSleepAfterKVRelease(t *testing.T) {
	for _, e := range []era{eraC, eraProposed} {
		t.Run(string(e), func(t *testing.T) {
			logs := &SyncLog{}
			s := startSimLog(t, "tiny-a", map[string]string{EnvEra: string(e)}, logs)
			s.ready(t)
			awake := s.used(t)
			for _, req := range []string{"POST /pause", "POST /release_kv_cache_memory"} {
				code, body := send(t, s, req)
				require.Equal(t, 200, code, "%s: %v", req, body)
			}
			released := s.used(t)
			require.Equal(t, awake-1*GiB, released)
			code, body := send(t, s, "POST /sleep?level=1")
			if e == eraProposed {
				require.Equal(t, 500, code)
				assert.Regexp(t, "partially awake", errMessage(t, body))
				assert.Equal(t, released, s.used(t), "refused: nothing freed")
				return
			}
			require.Equal(t, 200, code, "%v", body)
			assert.Nil(t, body)
			assert.Equal(t, tinyPhysics(t).ResidualBytes(), s.used(t), "the weights are offloaded too")
			assert.Equal(t, [3]float64{0, 1, 0}, legacyState(t, s))
			logs.Has(t, "CuMemAllocator: sleep freed 0.50 GiB memory in total, of which 0.50 GiB is backed up in CPU", "only the weights were left to free")
			assert.NotContains(t, logs.String(), "Executor is already sleeping.")
			code, _ = send(t, s, "POST /wake_up")
			require.Equal(t, 200, code)
			assert.Equal(t, awake, s.used(t))
			asleep, err := s.c.IsSleeping(t.Context())
			require.NoError(t, err)
			assert.False(t, asleep)
		})
	}
}

// TestResetPrefixCacheSuccess: the newest release answers {"success": bool}:
// false while a request runs and holds its blocks, true with
// reset_running_requests=true; era b an empty 200 either way.
func TestResetPrefixCacheSuccess(t *testing.T) {
	testmain.Long(t)
	s := startSim(t, "tiny-a", map[string]string{EnvTimeScale: "5"})
	s.ready(t)
	code, body := send(t, s, "POST /reset_prefix_cache")
	require.Equal(t, 200, code)
	assert.Equal(t, map[string]any{"success": true}, body, "idle: every block is free")
	wait := inFlight(t, s, 1)
	code, body = send(t, s, "POST /reset_prefix_cache")
	require.Equal(t, 200, code)
	assert.Equal(t, map[string]any{"success": false}, body, "a running request holds its blocks")
	code, body = send(t, s, "POST /reset_prefix_cache?reset_running_requests=true")
	require.Equal(t, 200, code)
	assert.Equal(t, map[string]any{"success": true}, body)
	code, _ = send(t, s, "POST /abort_requests")
	require.Equal(t, 200, code)
	wait()

	b := startSim(t, "tiny-a", map[string]string{EnvTimeScale: "5", EnvEra: "b"})
	b.ready(t)
	wait = inFlight(t, b, 1)
	code, body = send(t, b, "POST /reset_prefix_cache")
	require.Equal(t, 200, code)
	assert.Nil(t, body, "era b: an empty 200, success unchecked")
	require.NoError(t, b.c.Sleep(t.Context(), 1)) // aborts the request
	wait()
}

// TestServerLoad: GET /load counts the completions in flight with
// --enable-server-load-tracking, and stays 0 without it.
func TestServerLoad(t *testing.T) {
	testmain.Long(t)
	for _, tracking := range []bool{false, true} {
		t.Run(fmt.Sprint(tracking), func(t *testing.T) {
			var extra []string
			if tracking {
				extra = []string{"--enable-server-load-tracking"}
			}
			s := startSim(t, "tiny-a", map[string]string{EnvTimeScale: "5"}, extra...)
			s.ready(t)
			load := func() float64 {
				code, body := send(t, s, "GET /load")
				require.Equal(t, 200, code)
				return body["server_load"].(float64)
			}
			assert.Equal(t, 0.0, load())
			wait := inFlight(t, s, 1)
			want := 0.0
			if tracking {
				want = 1
			}
			assert.Equal(t, want, load(), "one completion in flight")
			code, _ := send(t, s, "POST /abort_requests")
			require.Equal(t, 200, code)
			wait()
			assert.Eventually(t, func() bool { return load() == 0 }, 5*time.Second, 5*time.Millisecond, "back to 0 once answered")
		})
	}
}

// cachedTokens sends a non-streamed completion of prompt and returns its
// usage.prompt_tokens_details.cached_tokens (-1 when absent).
func cachedTokens(t *testing.T, s *sim, prompt string) int {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"model": "tiny-a", "prompt": prompt, "max_tokens": 2, "ignore_eos": true})
	code, body := post(t, s.url+"/v1/completions", string(req))
	require.Equal(t, 200, code, body)
	var ans struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      *struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ans))
	if ans.Usage.Details == nil {
		return -1
	}
	require.Less(t, ans.Usage.Details.Cached, ans.Usage.PromptTokens, "the last prompt token is always computed")
	return ans.Usage.Details.Cached
}

// longPrompt is 48 one-token words: three whole 16-token blocks.
var longPrompt = strings.Repeat("the cat sat on a mat and ate ", 6)

// TestPrefixCaching: with --enable-prompt-tokens-details the answer's
// cached_tokens is the whole 16-token blocks of the prompt's cached prefix
// (at most prompt_tokens − 1); what drops the KV cache drops it: a level-1
// sleep, a pause with clear_cache (not mode=keep), a successful
// /reset_prefix_cache. The streamed usage chunk carries it too;
// --no-enable-prefix-caching caches nothing.
func TestPrefixCaching(t *testing.T) {
	require.Equal(t, 48, countTokens(longPrompt))
	s := startSim(t, "tiny-a", nil, "--enable-prompt-tokens-details")
	s.ready(t)
	assert.Equal(t, 0, cachedTokens(t, s, longPrompt), "first time: nothing cached")
	assert.Equal(t, 32, cachedTokens(t, s, longPrompt), "48 tokens: two whole blocks within the first 47")
	assert.Equal(t, 0, cachedTokens(t, s, "a different start "+longPrompt), "a prefix of other tokens")

	for _, drop := range [][]string{
		{"POST /sleep?level=1", "POST /wake_up"},
		{"POST /pause?clear_cache=true", "POST /resume"},
		{"POST /reset_prefix_cache"},
	} {
		require.GreaterOrEqual(t, cachedTokens(t, s, longPrompt), 16)
		for _, req := range drop {
			code, body := send(t, s, req)
			require.Equal(t, 200, code, "%s: %v", req, body)
		}
		assert.Equal(t, 0, cachedTokens(t, s, longPrompt), "after %v", drop)
	}
	for _, keep := range [][]string{
		{"POST /pause?mode=keep&clear_cache=true", "POST /resume"},
		{"POST /pause?clear_cache=false", "POST /resume"},
		{"POST /sleep?level=0", "POST /wake_up"},
	} {
		for _, req := range keep {
			code, body := send(t, s, req)
			require.Equal(t, 200, code, "%s: %v", req, body)
		}
		assert.Equal(t, 32, cachedTokens(t, s, longPrompt), "kept across %v", keep)
	}

	// The streamed usage chunk.
	req, _ := json.Marshal(map[string]any{"model": "tiny-a", "prompt": longPrompt, "max_tokens": 2, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	code, body := post(t, s.url+"/v1/completions", string(req))
	require.Equal(t, 200, code)
	assert.Contains(t, body, `"prompt_tokens_details":{"cached_tokens":32}`)

	off := startSim(t, "tiny-a", nil, "--enable-prompt-tokens-details", "--no-enable-prefix-caching")
	off.ready(t)
	cachedTokens(t, off, longPrompt)
	assert.Equal(t, 0, cachedTokens(t, off, longPrompt), "prefix caching off")

	plain := startSim(t, "tiny-a", nil)
	plain.ready(t)
	assert.Equal(t, -1, cachedTokens(t, plain, longPrompt), "no prompt_tokens_details without the flag")
}

// TestAbortRequests: POST /abort_requests ends the requests it names (every
// one when it names none) with finish_reason "abort" and answers an empty
// 200; an id not in flight ends nothing.
func TestAbortRequests(t *testing.T) {
	s := startSim(t, "tiny-a", map[string]string{EnvTimeScale: "5"})
	s.ready(t)
	wait := inFlight(t, s, 1)
	code, body := post(t, s.url+"/abort_requests", `{"request_ids":["cmpl-nope"]}`)
	require.Equal(t, 200, code)
	assert.Empty(t, strings.TrimSpace(body))
	assert.Equal(t, 1.0, s.metrics(t)["vllm:num_requests_running"], "another id: still running")
	// The server's first completion: cmpl- and its number in 16 hex digits.
	code, _ = post(t, s.url+"/abort_requests", `{"request_ids":["cmpl-0000000000000001"]}`)
	require.Equal(t, 200, code)
	f := wait()[0]
	assert.ErrorContains(t, f.err, "aborted")
	assert.Equal(t, "abort", f.s.FinishReason)
	assert.Less(t, len(f.s.Tokens), 200)

	wait = inFlight(t, s, 2)
	code, _ = send(t, s, "POST /abort_requests") // no body: every request
	require.Equal(t, 200, code)
	for _, f := range wait() {
		assert.Equal(t, "abort", f.s.FinishReason)
	}
	st, err := s.c.Complete(t.Context(), vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 2, IgnoreEOS: true})
	require.NoError(t, err, "the engine serves on")
	assert.Equal(t, "length", st.FinishReason)
}

// TestParseArgsEveryFlag: every flag of vLLM's parser is accepted (the
// ones vllmsim does not model kept to be logged); a flag vLLM's parser
// does not have is argparse's "unrecognized arguments" (Main: exit 2), and
// era a refuses a flag newer than vLLM 0.11 the same way.
func TestParseArgsEveryFlag(t *testing.T) {
	a, err := ParseArgs([]string{"serve", "m", "--max-num-seqs", "8", "--enable-prompt-tokens-details", "--enable-server-load-tracking",
		"--worker-extension-cls", "x.Y", "--no-enable-prefix-caching", "-tp", "2"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.True(t, a.EnablePromptTokensDetails)
	assert.True(t, a.EnableServerLoadTracking)
	assert.False(t, a.EnablePrefixCaching)
	assert.Equal(t, 2, a.TensorParallelSize)
	assert.Equal(t, []string{"--max-num-seqs 8", "--worker-extension-cls x.Y"}, a.Unmodelled)
	a, err = ParseArgs([]string{"serve", "m", "--tensor_parallel_size=4", "--enable-prefix-caching"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 4, a.TensorParallelSize)
	assert.True(t, a.EnablePrefixCaching)

	_, err = ParseArgs([]string{"serve", "m", "--no-such-flag"}, &bytes.Buffer{})
	assert.EqualError(t, err, "unrecognized arguments: --no-such-flag")
	_, err = ParseArgs([]string{"serve", "m", "--no-max-num-seqs"}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "unrecognized arguments: --no-max-num-seqs", "--no- only for BooleanOptionalAction flags")

	// --enable-log-deltas: "NEW since v0.11" in serveflags.tsv.
	require.True(t, serveFlags["--enable-log-deltas"].newSince011)
	_, err = parseArgs([]string{"serve", "m", "--enable-log-deltas"}, eraA, &bytes.Buffer{})
	assert.EqualError(t, err, "unrecognized arguments: --enable-log-deltas")
	for _, e := range []era{eraB, eraC} {
		_, err = parseArgs([]string{"serve", "m", "--enable-log-deltas"}, e, &bytes.Buffer{})
		assert.NoError(t, err, e)
	}
	// --swap-space 4: in v0.11's parser, gone by 63344913.
	_, err = parseArgs([]string{"serve", "m", "--swap-space", "4", "--disable-log-requests"}, eraA, &bytes.Buffer{})
	assert.NoError(t, err, "vLLM 0.11 had them")
	for _, e := range []era{eraB, eraC, eraProposed} {
		_, err = parseArgs([]string{"serve", "m", "--swap-space", "4"}, e, &bytes.Buffer{})
		assert.EqualError(t, err, "unrecognized arguments: --swap-space", e)
	}

	for _, tc := range []struct {
		e   string
		arg string
	}{{"", "--no-such-flag"}, {"a", "--enable-log-deltas"}, {"b", "--sleep-mode-backend=cumem"}} {
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), []string{"serve", "tiny-a", tc.arg}, func(k string) string { return map[string]string{EnvEra: tc.e}[k] }, &stdout, &stderr)
		assert.Equal(t, 2, code, "%+v", tc)
		assert.Contains(t, stderr.String(), "vllm: error: unrecognized arguments: "+strings.Split(tc.arg, "=")[0], "%+v", tc)
	}

	logs := &SyncLog{}
	s := startSimLog(t, "tiny-a", nil, logs, "--max-num-seqs", "8", "--worker-extension-cls", "x.Y")
	s.ready(t)
	logs.Has(t, "vllmsim accepted, without modelling them: --max-num-seqs 8; --worker-extension-cls x.Y")
}

// TestTensorParallel: -tp 2 on two simulated GPUs runs a rank process on
// each, which the device lists under the rank's own PID (not the server's)
// with the same share: half the weights, the KV cache, the residual and
// NCCL's 256 MiB. A level-1 sleep leaves the residual and NCCL's buffers on
// each; fault tp-residual adds its GiB to what each keeps asleep; at the
// end the ranks' entries are gone. With fewer GPUs than ranks the start
// fails naming --tensor-parallel-size.
func TestTensorParallel(t *testing.T) {
	testmain.Long(t)
	p := tinyPhysics(t)
	for _, extraGiB := range []float64{0, 2} {
		t.Run(fmt.Sprint(extraGiB), func(t *testing.T) {
			base := t.TempDir()
			dirs := []string{filepath.Join(base, "gpu0"), filepath.Join(base, "gpu1")}
			env := map[string]string{simgpu.EnvDir: strings.Join(dirs, ":"), EnvHostScale: "1"}
			if extraGiB > 0 {
				env[EnvFaults] = fmt.Sprintf("tp-residual=%g", extraGiB)
			}
			// The default 0.92 of the 16 GiB GPU: NCCL's buffers and fault
			// tp-residual's 2 GiB come after the start's free-memory check,
			// as vLLM's distributed set-up does (only the CUDA context is
			// there before it).
			s := startSim(t, "tiny-a", env, "-tp", "2")
			s.ready(t)
			ranks := func() []simgpu.Process {
				t.Helper()
				var out []simgpu.Process
				for _, d := range dirs {
					procs, err := simgpu.Processes(d)
					require.NoError(t, err)
					require.Len(t, procs, 1, d)
					out = append(out, procs[0])
				}
				return out
			}
			residual := p.ResidualBytes() + 256<<20 + uint64(extraGiB*GiB)
			r := ranks()
			assert.NotEqual(t, os.Getpid(), r[0].PID, "a rank process, not the server")
			assert.NotEqual(t, os.Getpid(), r[1].PID)
			assert.NotEqual(t, r[0].PID, r[1].PID, "one process per rank")
			assert.Equal(t, residual+p.WeightBytes()/2+p.KVBytes, r[0].UsedBytes, "half the weights, the KV cache, the residual, NCCL")
			assert.Equal(t, r[0].UsedBytes, r[1].UsedBytes)

			code, _ := send(t, s, "POST /sleep?level=1")
			require.Equal(t, 200, code)
			for _, pr := range ranks() {
				assert.Equal(t, residual, pr.UsedBytes, "asleep: the residual and NCCL's buffers stay")
				// Each rank's worker pins its shard's backup (0.25 GiB of
				// tiny-a's 0.5 at host scale 1), as each vLLM worker does.
				proc, err := procfs.NewProc(pr.PID)
				require.NoError(t, err)
				st, err := proc.NewStatus()
				require.NoError(t, err)
				assert.GreaterOrEqual(t, float64(st.VmRSS), 0.95*float64(p.WeightBytes()/2), "rank %d holds its shard's pinned backup", pr.PID)
			}
			code, _ = send(t, s, "POST /wake_up")
			require.Equal(t, 200, code)
			assert.Equal(t, r[0].UsedBytes, ranks()[1].UsedBytes)

			s.stop()
			select {
			case code := <-s.done:
				assert.Zero(t, code)
				s.done <- code // for the cleanup
			case <-time.After(5 * time.Second):
				t.Fatal("the server did not stop")
			}
			for _, d := range dirs {
				procs, err := simgpu.Processes(d)
				require.NoError(t, err)
				assert.Empty(t, procs, "the ranks' memory is freed with the server")
			}
		})
	}

	one := startSim(t, "tiny-a", nil, "-tp", "2") // startSim's one GPU directory
	select {
	case code := <-one.done:
		assert.Equal(t, 1, code)
		assert.Contains(t, one.stderr.String(), "--tensor-parallel-size 2")
		one.done <- code // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("-tp 2 started on one GPU")
	}
}

// TestAbortInPrefill: a request in its prefill step (neither waiting nor
// running) is ended by /abort_requests and by an abort-mode sleep alike:
// one abort token, its channel closed once, and it never decodes; a
// wait-mode sleep waits for it. The prefill is made long with the slow
// fault's extra seconds.
func TestAbortInPrefill(t *testing.T) {
	inPrefill := func(t *testing.T) (*engine, *seq, func()) {
		t.Helper()
		e := newEngine(tinyPhysics(t), clock{scale: 1}, newMetrics("m", func(int) float64 { return 0 }, metricsOpts{legacy: true}))
		e.extraPrefill = 2 * time.Second
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); e.run(ctx) }()
		s := &seq{ctx: ctx, id: "cmpl-1", promptTokens: 8, maxTokens: 4, stopAt: 4, gen: newGenerator("x", "", true)}
		e.submit(s)
		require.Eventually(t, func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return len(e.admitting) == 1
		}, 5*time.Second, time.Millisecond, "the request is in its prefill")
		return e, s, func() { cancel(); <-done }
	}
	tokensOf := func(t *testing.T, s *seq) []token { // every token, once its channel is closed
		t.Helper()
		var toks []token
		for {
			select {
			case tok, ok := <-s.out:
				if !ok {
					return toks
				}
				toks = append(toks, tok)
			case <-time.After(5 * time.Second):
				t.Fatalf("the request was not ended: %d token(s) so far", len(toks))
			}
		}
	}
	only := func(t *testing.T, s *seq) {
		t.Helper()
		toks := tokensOf(t, s)
		require.Len(t, toks, 1, "one token, the abort")
		assert.Equal(t, "abort", toks[0].finish)
	}
	t.Run("abort_requests", func(t *testing.T) {
		e, s, stop := inPrefill(t)
		defer stop()
		assert.Equal(t, 0, e.abort([]string{"cmpl-other"}), "another id ends nothing")
		assert.True(t, e.busy(), "in its prefill, the engine is busy")
		assert.Equal(t, 1, e.abort([]string{"cmpl-1"}))
		assert.Equal(t, 0, e.abort(nil), "ended once")
		only(t, s)
		assert.False(t, e.busy(), "an aborted prefill holds nothing")
	})
	t.Run("abort-mode sleep", func(t *testing.T) {
		e, s, stop := inPrefill(t)
		defer stop()
		require.True(t, e.pause(t.Context(), modeAbort))
		only(t, s)
		require.Eventually(t, func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.admitting == nil
		}, 5*time.Second, time.Millisecond, "the prefill step ends")
		e.mu.Lock()
		defer e.mu.Unlock()
		assert.Empty(t, e.running, "the aborted request never decodes")
	})
	t.Run("wait-mode sleep", func(t *testing.T) {
		e, s, stop := inPrefill(t)
		defer stop()
		require.True(t, e.pause(t.Context(), modeWait), "returns once the request finished")
		assert.Len(t, s.out, 4, "every token was out before the sleep returned")
		toks := tokensOf(t, s)
		require.Len(t, toks, 4, "it decoded every token before the sleep")
		assert.Equal(t, "length", toks[3].finish)
	})
}
