package vllmsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/vllm"
)

func TestParseHumanInt(t *testing.T) {
	good := map[string]int64{"4096": 4096, "1k": 1000, "1K": 1024, "25.6k": 25600, "4G": 4 << 30, "4g": 4e9, "2.5g": 2.5e9, "4294967296": 4294967296}
	for in, want := range good {
		got, err := ParseHumanInt(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"4GiB", "4Gi", "2.5G", "", "x"} {
		_, err := ParseHumanInt(in)
		assert.Error(t, err, "%q must be rejected as vLLM rejects it", in)
	}
}

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs([]string{"serve", "Qwen3-1.7B", "--port", "8001", "--enable_sleep_mode", "--max-model-len=4k",
		"--kv-cache-memory-bytes", "4G", "--gpu-memory-utilization", "0.4", "--served-model-name", "qwen", "--dtype", "bfloat16"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "Qwen3-1.7B", a.Model)
	assert.Equal(t, 8001, a.Port)
	assert.True(t, a.EnableSleepMode, "underscores and dashes are the same")
	assert.Equal(t, 4000, a.MaxModelLen)
	assert.Equal(t, uint64(4<<30), a.KVCacheBytes)
	assert.Equal(t, "qwen", a.ServedName())

	for _, bad := range [][]string{
		{"serve", "m", "--disable-log-requests"}, // removed in vLLM 0.17
		{"serve", "m", "--kv-cache-memory-bytes", "4GiB"},
		{"serve", "m", "--gpu-memory-utilization", "1.5"},
		{"serve"},
		{"run", "m"},
		{"serve", "m", "n"},
	} {
		_, err := ParseArgs(bad, io.Discard)
		assert.Error(t, err, "%v", bad)
	}
}

func TestSettingsFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	st, err := SettingsFromEnv(env(EnvDevMode, "1", EnvProfile, "l20", EnvTimeScale, "0.1"))
	require.NoError(t, err)
	assert.True(t, st.DevMode)
	assert.Equal(t, "l20", st.Profile.Name)
	assert.Equal(t, 0.1, st.TimeScale)
	_, err = SettingsFromEnv(env(EnvDevMode, "true"))
	assert.ErrorContains(t, err, "invalid literal for int()", "vLLM parses VLLM_SERVER_DEV_MODE with int()")
	_, err = SettingsFromEnv(env(EnvProfile, "b200"))
	assert.ErrorContains(t, err, "known: a100, demo, h100, h100-pcie-gen3x8, l20, tiny")
	_, err = SettingsFromEnv(env(EnvTimeScale, "-1"))
	assert.ErrorContains(t, err, EnvTimeScale)
	st, err = SettingsFromEnv(env(EnvTimeScale, "0", EnvStamp, "1"))
	require.NoError(t, err, "time scale 0: no modelled delay")
	assert.Zero(t, st.TimeScale)
	assert.True(t, st.Stamp)
	_, err = SettingsFromEnv(env(EnvStamp, "yes"))
	assert.ErrorContains(t, err, EnvStamp)
}

// TestDeviceIDsBeforeVLLM024: with VLLMSIM_DEVICE_IDS=int vllmsim reads
// CUDA_VISIBLE_DEVICES as vLLM before 0.24 did, with int(): an index
// starts, a GPU UUID is the ValueError of vllm#13815; by default (vLLM
// 0.24 on) both start.
func TestDeviceIDsBeforeVLLM024(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	const uuid = "GPU-52a3a85d-3c55-ca3a-a955-82c69ed360fc"
	for _, tt := range []struct{ ids, visible, err string }{
		{ids: "int", visible: "3"},
		{ids: "int", visible: "2,GPU-aaa"}, // only the engine's entry is read
		{ids: "int"},
		{ids: "int", visible: uuid, err: "ValueError: invalid literal for int() with base 10: '" + uuid + "'"},
		{ids: "int", visible: uuid + ",1", err: "ValueError: invalid literal for int()"},
		{ids: "", visible: uuid},
		{ids: "any", visible: uuid},
		{ids: "0.11", visible: "0", err: EnvDeviceIDs + `="0.11": want int`},
	} {
		_, err := SettingsFromEnv(env(EnvDeviceIDs, tt.ids, "CUDA_VISIBLE_DEVICES", tt.visible))
		if tt.err == "" {
			assert.NoError(t, err, "%+v", tt)
		} else {
			assert.ErrorContains(t, err, tt.err, "%+v", tt)
		}
	}
}

// TestStreamChunks checks the streamed chunks byte for byte against vLLM's
// shape (the fixture testdata/vllm/stream-ok.sse follows vLLM's field order),
// with and without the send stamp, and that the client reads the stamps.
func TestStreamChunks(t *testing.T) {
	for _, stamp := range []bool{false, true} {
		t.Run(fmt.Sprint("stamp=", stamp), func(t *testing.T) {
			enc := newChunkEncoder("cmpl-1", 1730000000, `qwen "q"`, stamp)
			tok := string(enc.token(" \"the\"\n", ""))
			fin := string(enc.token(" cat", "length"))
			use := string(enc.usage(3, 2, -1))
			want := `data: {"id":"cmpl-1","object":"text_completion","created":1730000000,"model":"qwen \"q\"","choices":[{"index":0,"text":" \"the\"\n","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null`
			if !stamp {
				assert.Equal(t, want+"}\n\n", tok)
				assert.Contains(t, fin, `"finish_reason":"length"`)
				assert.Equal(t, `data: {"id":"cmpl-1","object":"text_completion","created":1730000000,"model":"qwen \"q\"","choices":[],"usage":{"prompt_tokens":3,"total_tokens":5,"completion_tokens":2}}`+"\n\n", use)
				return
			}
			assert.True(t, strings.HasPrefix(tok, want+`,"vllmsim_sent_ns":`), tok)
			var v struct {
				Sent int64 `json:"vllmsim_sent_ns"`
			}
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(use), "data: ")), &v))
			assert.InDelta(t, time.Now().UnixNano(), v.Sent, float64(time.Minute))
		})
	}
	s := startSim(t, "tiny-a", map[string]string{EnvStamp: "1"})
	s.ready(t)
	st, err := s.c.Complete(t.Context(), vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 6, IgnoreEOS: true})
	require.NoError(t, err)
	require.Len(t, st.Stamps, 6, "one stamp per token chunk")
	for i, at := range st.Stamps {
		assert.False(t, st.Tokens[i].Before(at), "token %d read before it was sent", i)
		assert.Less(t, st.Tokens[i].Sub(at), time.Second)
	}
	whole, err := s.c.Complete(t.Context(), vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 6, IgnoreEOS: true, NoStream: true})
	require.NoError(t, err, "non-streamed completion")
	assert.Equal(t, 6, whole.OutputTokens)
	assert.Equal(t, st.Text, whole.Text, "same text streamed or not")
	assert.Len(t, whole.Tokens, 1)
}

// sim runs Main in-process on a free port and returns its client once ready.
type sim struct {
	c      *vllm.Client
	url    string
	dir    string
	stderr *bytes.Buffer
	done   chan int
	stop   context.CancelFunc // ends Main (also at the test's end)
}

func startSim(t *testing.T, model string, env map[string]string, extra ...string) *sim {
	t.Helper()
	return startSimLog(t, model, env, io.Discard, extra...)
}

// portSet hands out free loopback ports, never the same twice in this
// test process: a port the kernel gave, closed and gave again before the
// first server bound it put two parallel tests' servers on one port, and
// one test's client on the other's server (TestSlowWake's wake found
// nothing asleep in make test).
type portSet struct {
	mu   sync.Mutex // guards used
	used map[int]bool
}

// testPorts is the test process's port set (the package's tests only).
var testPorts = &portSet{used: map[int]bool{}}

func (p *portSet) free(t *testing.T) int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !p.used[port] {
			p.used[port] = true
			return port
		}
	}
}

// startSimLog is startSim with the server's log written to stdout.
func startSimLog(t *testing.T, model string, env map[string]string, stdout io.Writer, extra ...string) *sim {
	t.Helper()
	return startSimOn(t, model, env, stdout, nil, extra...)
}

// startSimOn is startSimLog with real-device mode's GPU opened by openGPU (nil: the CUDA driver).
func startSimOn(t *testing.T, model string, env map[string]string, stdout io.Writer, openGPU func() (gpuMemory, error), extra ...string) *sim {
	t.Helper()
	port := testPorts.free(t)
	s := &sim{dir: t.TempDir(), stderr: &bytes.Buffer{}, done: make(chan int, 1)}
	// In-process servers share the test process's RSS, where their host
	// memory measures nothing: a hundredth of it keeps parallel tests'
	// level-1 sleeps from mapping GiBs (hostmem_test.go measures the real
	// thing in a sim process of its own).
	e := map[string]string{EnvDevMode: "1", simgpu.EnvDir: s.dir, EnvCacheDir: t.TempDir(), EnvHostScale: "0.01"}
	for k, v := range env {
		e[k] = v
	}
	args := append([]string{"serve", model, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--enable-sleep-mode",
		"--max-model-len", "4096", "--kv-cache-memory-bytes", "1073741824"}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() { s.done <- run(ctx, args, func(k string) string { return e[k] }, stdout, s.stderr, openGPU) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			t.Error("vllmsim did not stop")
		}
	})
	s.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	s.c = vllm.New(s.url)
	return s
}

func (s *sim) ready(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := s.c.WaitReady(ctx, 5*time.Millisecond)
	require.NoError(t, err, "stderr: %s", s.stderr)
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServerContract(t *testing.T) {
	s := startSim(t, "tiny-a", nil, "--served-model-name", "tiny")
	ctx := t.Context()
	assert.ErrorIs(t, s.c.Health(ctx), vllm.ErrNotReady, "port closed while loading")
	s.ready(t)

	ids, err := s.c.Models(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"tiny"}, ids)
	v, err := s.c.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, "0.33.0+vllmsim", v, "the default era, d, stands for v0.33")

	st, err := s.c.Complete(ctx, vllm.CompletionRequest{Model: "tiny", Prompt: "Hello there, how are you?", MaxTokens: 5, IgnoreEOS: true})
	require.NoError(t, err)
	assert.Equal(t, 5, st.OutputTokens)
	assert.Len(t, st.Tokens, 5)
	assert.Equal(t, "length", st.FinishReason)
	assert.Equal(t, countTokens("Hello there, how are you?"), st.PromptTokens)

	code, body := post(t, s.url+"/v1/completions", `{"model":"other","prompt":"x"}`)
	assert.Equal(t, 404, code)
	assert.Contains(t, body, `"type":"NotFoundError"`)
	code, body = post(t, s.url+"/v1/completions", `{"model":"tiny","prompt":"x","stream_options":{"include_usage":true}}`)
	assert.Equal(t, 400, code)
	assert.Contains(t, body, "Stream options can only be defined when `stream=True`.")
	code, body = post(t, s.url+"/v1/completions", `{"model":"tiny","prompt":"x","max_tokens":3,"ignore_eos":true}`)
	assert.Equal(t, 200, code, "non-streaming")
	assert.Contains(t, body, `"completion_tokens":3`)

	// Level 1: sleep, asleep, wake, awake, valid text.
	require.NoError(t, s.c.Sleep(ctx, 1))
	asleep, err := s.c.IsSleeping(ctx)
	require.NoError(t, err)
	assert.True(t, asleep)
	require.NoError(t, s.c.Sleep(ctx, 1), "sleeping again is a no-op")
	procs, err := simgpu.Processes(s.dir)
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, uint64(0.25*GiB), procs[0].UsedBytes, "only the residual stays while asleep")
	require.NoError(t, s.c.WakeUp(ctx))
	asleep, _ = s.c.IsSleeping(ctx)
	assert.False(t, asleep)
	procs, _ = simgpu.Processes(s.dir)
	assert.Equal(t, uint64(0.25*GiB+0.5*GiB+1*GiB), procs[0].UsedBytes, "residual + weights + KV once awake")

	// Level 2 without reload: garbage, as real vLLM.
	require.NoError(t, s.c.Sleep(ctx, 2))
	require.NoError(t, s.c.WakeUp(ctx, "weights"))
	asleep, _ = s.c.IsSleeping(ctx)
	assert.True(t, asleep, "still asleep until every tag is awake")
	require.NoError(t, s.c.WakeUp(ctx, "kv_cache"))
	st, err = s.c.Complete(ctx, vllm.CompletionRequest{Model: "tiny", Prompt: "hi", MaxTokens: 4, IgnoreEOS: true})
	require.NoError(t, err)
	assert.Equal(t, "!!!!", st.Text)
	// With the documented sequence the text is right again.
	require.NoError(t, s.c.Sleep(ctx, 2))
	require.NoError(t, s.c.WakeUp(ctx, "weights"))
	res, err := s.c.CollectiveRPC(ctx, "reload_weights")
	require.NoError(t, err)
	assert.Len(t, res, 1)
	require.NoError(t, s.c.WakeUp(ctx, "kv_cache"))
	require.NoError(t, s.c.ResetPrefixCache(ctx))
	st, err = s.c.Complete(ctx, vllm.CompletionRequest{Model: "tiny", Prompt: "hi", MaxTokens: 4, IgnoreEOS: true})
	require.NoError(t, err)
	assert.NotContains(t, st.Text, "!")

	code, body = post(t, s.url+"/collective_rpc", `{}`)
	assert.Equal(t, 400, code)
	assert.Contains(t, body, "Missing 'method' in request body")
	code, body = post(t, s.url+"/collective_rpc", `{not json`)
	assert.Equal(t, 400, code)
	assert.Contains(t, body, "JSON decode error")
	code, _ = post(t, s.url+"/sleep?level=x", "")
	assert.Equal(t, 400, code)

	metrics, err := s.c.Metrics(ctx)
	require.NoError(t, err)
	for _, name := range []string{"vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:time_to_first_token_seconds_bucket",
		"vllm:generation_tokens_total", `vllm:engine_sleep_state{engine="0",model_name="tiny",sleep_state="awake"} 1`} {
		assert.Contains(t, string(metrics), name)
	}
}

func TestRequestWhileAsleepWaitsForWake(t *testing.T) {
	s := startSim(t, "tiny-b", nil)
	s.ready(t)
	ctx := t.Context()
	require.NoError(t, s.c.Sleep(ctx, 1))
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := s.c.Complete(short, vllm.CompletionRequest{Model: "tiny-b", Prompt: "hi", MaxTokens: 2})
	assert.ErrorIs(t, err, context.DeadlineExceeded, "current vLLM queues requests while asleep: the client hangs")

	got := make(chan error, 1)
	go func() {
		_, err := s.c.Complete(ctx, vllm.CompletionRequest{Model: "tiny-b", Prompt: "hi", MaxTokens: 2, IgnoreEOS: true})
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, s.c.WakeUp(ctx))
	select {
	case err := <-got:
		assert.NoError(t, err, "the queued request runs after the wake")
	case <-time.After(5 * time.Second):
		t.Fatal("queued request never finished after wake")
	}
}

func TestWakeOutOfMemory(t *testing.T) {
	s := startSim(t, "tiny-a", nil)
	s.ready(t)
	ctx := t.Context()
	require.NoError(t, s.c.Sleep(ctx, 1))
	// Another process (pid 1 stands in; it is alive) takes almost all memory.
	dev, err := simgpu.ReadDevice(s.dir)
	require.NoError(t, err)
	require.NoError(t, simgpu.Publish(s.dir, simgpu.Process{PID: 1, Model: "other", UsedBytes: dev.TotalBytes - dev.ReservedBytes - uint64(0.5*GiB)}))
	err = s.c.WakeUp(ctx)
	var ae *vllm.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 500, ae.Status)
	assert.Contains(t, ae.Message, "CUDA Error: out of memory")
	require.NoError(t, simgpu.Remove(s.dir, 1))
	require.NoError(t, s.c.WakeUp(ctx), "wakes once memory is free")
}

func TestDevEndpointsNeedDevMode(t *testing.T) {
	s := startSim(t, "tiny-b", map[string]string{EnvDevMode: "0"}, "--api-key", "sekret")
	s.ready(t)
	code, _ := post(t, s.url+"/sleep?level=1", "")
	assert.Equal(t, 404, code, "/sleep exists only with VLLM_SERVER_DEV_MODE=1")
	err := vllm.New(s.url).Sleep(t.Context(), 1)
	assert.ErrorIs(t, err, vllm.ErrNoDevMode, "the client names the missing dev mode")
	assert.ErrorContains(t, err, "VLLM_SERVER_DEV_MODE=1")
	code, body := post(t, s.url+"/v1/completions", `{"model":"tiny-b","prompt":"x"}`)
	assert.Equal(t, 401, code)
	assert.JSONEq(t, `{"error":"Unauthorized"}`, body)
	c := vllm.New(s.url, vllm.WithAPIKey("sekret"))
	_, err = c.Complete(t.Context(), vllm.CompletionRequest{Model: "tiny-b", Prompt: "x", MaxTokens: 2})
	assert.NoError(t, err)
}

// TestSleepNeedsSleepMode: a server started without sleep mode (a later
// --no-enable-sleep-mode turns the flag off, as vLLM's parser does)
// refuses /sleep, and the client names the flag.
func TestSleepNeedsSleepMode(t *testing.T) {
	s := startSim(t, "tiny-b", nil, "--no-enable-sleep-mode")
	s.ready(t)
	err := s.c.Sleep(t.Context(), 1)
	assert.ErrorIs(t, err, vllm.ErrSleepModeOff)
	assert.ErrorContains(t, err, "--enable-sleep-mode")
}

func TestStartupFailures(t *testing.T) {
	t.Run("unknown model", func(t *testing.T) {
		s := startSim(t, "nope", nil)
		select {
		case code := <-s.done:
			s.done <- code
			assert.Equal(t, 1, code)
			assert.Contains(t, s.stderr.String(), `profile "tiny" has no model "nope"`)
		case <-time.After(5 * time.Second):
			t.Fatal("did not exit")
		}
	})
	t.Run("port in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		stderr := &bytes.Buffer{}
		code := Main(t.Context(), []string{"serve", "tiny-a", "--host", "127.0.0.1", "--port", fmt.Sprint(port)},
			func(k string) string { return map[string]string{simgpu.EnvDir: t.TempDir()}[k] }, io.Discard, stderr)
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr.String(), "address already in use")
	})
	t.Run("not enough free memory", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, simgpu.Create(dir, simgpu.Device{Name: "g", TotalBytes: 16 * GiB}))
		require.NoError(t, simgpu.Publish(dir, simgpu.Process{PID: 1, UsedBytes: 12 * GiB}))
		s := startSim(t, "tiny-a", map[string]string{simgpu.EnvDir: dir}, "--gpu-memory-utilization", "0.5")
		select {
		case code := <-s.done:
			s.done <- code
			assert.Equal(t, 1, code)
			assert.Contains(t, s.stderr.String(), "is less than desired GPU memory utilization")
		case <-time.After(5 * time.Second):
			t.Fatal("did not exit")
		}
	})
}

// TestEngineFollowsTheModel drives the engine of the l20 profile's 27B
// model at time scale 0.5 and checks that measured TTFT and TPOT, rescaled,
// follow the Physics formulas the calibration test checks: alone and with
// four requests batched. The engine keeps an absolute schedule and a
// timer never fires early, so each token's modelled time is a floor a
// busy machine cannot break; the ceiling (1.5 × the model, plus 0.1 s)
// is wide enough for a late timer and still catches a step twice as
// long. Each batch is queued before its engine runs, so it is admitted
// as one prefill.
func TestEngineFollowsTheModel(t *testing.T) {
	const scale = 0.5
	prof, err := LookupProfile("l20")
	require.NoError(t, err)
	p := Physics{GPU: prof.GPU, Model: prof.Models["Qwen3.8-27B-FP8"], KVBytes: 4 * GiB}
	const prompt, tokens = 26, 30
	for _, batch := range []int{1, 4} {
		e := newEngine(p, clock{scale: scale}, newMetrics("m", func(int) float64 { return 0 }, metricsOpts{newest: true, legacy: true}))
		ctx, cancel := context.WithCancel(t.Context())
		seqs := make([]*seq, batch)
		start := time.Now()
		for i := range seqs {
			seqs[i] = &seq{ctx: ctx, promptTokens: prompt, maxTokens: tokens, stopAt: tokens, gen: newGenerator("x", "", true)}
			e.submit(seqs[i])
		}
		done := make(chan struct{})
		go func() { defer close(done); e.run(ctx) }()
		model := func(k int) float64 { // token k's modelled time from the submit, unscaled
			return p.Prefill(prompt*batch) + float64(k+1)*p.DecodeStep(batch)
		}
		for _, s := range seqs {
			var times []time.Time
			for tok := range s.out {
				times = append(times, tok.at)
			}
			require.Len(t, times, tokens)
			for k, at := range times {
				require.GreaterOrEqual(t, at.Sub(start).Seconds()/scale, model(k)-1e-6, "token %d at batch %d before its modelled time", k, batch)
			}
			ttft := times[0].Sub(start).Seconds() / scale
			last := times[tokens-1].Sub(start).Seconds() / scale
			assert.Less(t, ttft, 1.5*model(0)+0.1/scale, "TTFT at batch %d: model %.4fs", batch, model(0))
			assert.Less(t, last, 1.5*model(tokens-1)+0.1/scale, "last token at batch %d: model %.4fs (TPOT %.4fs)", batch, model(tokens-1), p.DecodeStep(batch))
		}
		cancel()
		<-done
	}
}

func TestParseFaults(t *testing.T) {
	f, err := ParseFaults("crash-after=3, wake-fail, wake-hang=2,error-status=4:503,stall-stream=2:1.5,no-reload,no-release,asleep-crash,crash-at-start,start-hang,prefix-reset-false=2")
	require.NoError(t, err)
	assert.Equal(t, 3, f.CrashAfter)
	assert.Equal(t, -1, f.WakeFail, "no number: every wake")
	assert.Equal(t, 2, f.WakeHang)
	assert.Equal(t, 4, f.ErrorStatusN)
	assert.Equal(t, 503, f.ErrorStatusCode)
	assert.Equal(t, 1.5, f.StallStreamS)
	assert.True(t, f.NoReload && f.NoRelease && f.AsleepCrash && f.CrashAtStart && f.StartHang)
	assert.Equal(t, 2, f.PrefixResetFalse)
	assert.True(t, hits(f.WakeFail, 7))
	assert.False(t, hits(f.WakeHang, 1))
	f, err = ParseFaults("diverge-after-wake=4,lora-ignored,logprob-drift=0.25,leak-per-cycle=32,slow-decode-after-wake=1.5,tie-flip-after-wake")
	require.NoError(t, err)
	assert.Equal(t, 1.5, f.SlowDecodeAfter)
	assert.Equal(t, 4, f.DivergeAfterWake)
	assert.True(t, f.LoRAIgnored)
	assert.True(t, f.TieFlipAfterWake)
	assert.Equal(t, 0.25, f.LogprobDrift)
	assert.Equal(t, 32.0, f.LeakPerCycleMiB)
	f, err = ParseFaults("slow-wake=1.1")
	require.NoError(t, err)
	assert.Equal(t, 1.1, f.SlowWake)
	for _, bad := range []string{"crash-after=0", "error-status=1:200", "explode", "stall-stream=x", "diverge-after-wake=0", "logprob-drift=-1", "leak-per-cycle=NaN", "leak-per-cycle",
		"slow-decode-after-wake=0", "delay=/version", "delay=version:1", "delay=/version:0", "delay=/version:x", "slow-wake", "slow-wake=0", "slow-wake=-2", "slow-wake=Inf"} {
		_, err := ParseFaults(bad)
		assert.ErrorContains(t, err, EnvFaults, bad)
	}
}

// TestSlowWake: slow-wake=3 makes a level-1 wake three times its modelled
// time (weights and KV cache back in, at time scale 10); without it a
// wake takes its modelled time.
func TestSlowWake(t *testing.T) {
	const scale = 10
	p := tinyPhysics(t)
	model := (p.WakeWeights(1) + p.WakeKV()) * scale // a level-1 wake's modelled seconds
	for name, factor := range map[string]float64{"fault": 3, "no fault": 1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			faults := ""
			if factor != 1 {
				faults = fmt.Sprintf("slow-wake=%g", factor)
			}
			s := startSim(t, "tiny-a", map[string]string{EnvTimeScale: fmt.Sprint(scale), EnvFaults: faults})
			s.ready(t)
			require.NoError(t, s.c.Sleep(t.Context(), 1))
			start := time.Now()
			require.NoError(t, s.c.WakeUp(t.Context()))
			took := time.Since(start).Seconds()
			// A timer never fires early: factor × the model is a floor a busy
			// machine cannot break; the ceiling (half as much again, and
			// 0.2 s) still tells 3 × from 1 × the model (0.95 s from 0.32 s).
			assert.GreaterOrEqual(t, took, factor*model, "the wake takes %g × its modelled %.3fs", factor, model)
			assert.Less(t, took, 1.5*factor*model+0.2, "and not much more")
		})
	}
}

// TestSlowDecodeAfterWake: the fault leaves a process's decoding slower
// from its first wake on, and nothing before it; without the fault a wake
// leaves decoding as it was.
func TestSlowDecodeAfterWake(t *testing.T) {
	env := map[string]string{EnvTimeScale: "15"} // decode steps of ~9 ms: the machine's noise is small beside them
	tpot := func(t *testing.T, s *sim) time.Duration {
		t.Helper()
		st, err := s.c.Complete(t.Context(), vllm.CompletionRequest{Model: "tiny-a", Prompt: "decode for a while", MaxTokens: 20, IgnoreEOS: true})
		require.NoError(t, err)
		d, ok := st.TPOT()
		require.True(t, ok, "a stream of 20 tokens has a TPOT")
		return d
	}
	for name, tc := range map[string]struct {
		faults   string
		min, max float64 // after / before
	}{
		// Wide bands (3 × is the fault's factor): a busy machine makes
		// either TPOT a few ms longer, never the fault's 2 × more.
		"fault":    {"slow-decode-after-wake=3", 2, 4.5},
		"no fault": {"", 0.6, 1.6},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each start takes seconds at this time scale
			e := map[string]string{EnvFaults: tc.faults}
			for k, v := range env {
				e[k] = v
			}
			s := startSim(t, "tiny-a", e)
			s.ready(t)
			before := tpot(t, s)
			require.NoError(t, s.c.Sleep(t.Context(), 1))
			require.NoError(t, s.c.WakeUp(t.Context()))
			after := tpot(t, s)
			ratio := float64(after) / float64(before)
			assert.GreaterOrEqual(t, ratio, tc.min, "TPOT before %v, after the wake %v", before, after)
			assert.LessOrEqual(t, ratio, tc.max, "TPOT before %v, after the wake %v", before, after)
		})
	}
}

// TestDelayFault: delay=PATH:S answers that path S seconds late and no
// other; several paths may be delayed.
func TestDelayFault(t *testing.T) {
	f, err := ParseFaults("delay=/version:0.25,delay=/is_sleeping:0.5")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"/version": 0.25, "/is_sleeping": 0.5}, f.Delays)

	s := startSim(t, "tiny-a", map[string]string{EnvFaults: "delay=/version:0.3"})
	s.ready(t)
	took := func(call func() error) time.Duration {
		t0 := time.Now()
		require.NoError(t, call())
		return time.Since(t0)
	}
	ctx := t.Context()
	assert.GreaterOrEqual(t, took(func() error { _, err := s.c.Version(ctx); return err }), 300*time.Millisecond, "/version is delayed")
	assert.Less(t, took(func() error { _, err := s.c.IsSleeping(ctx); return err }), 300*time.Millisecond, "/is_sleeping is not")
}

// TestLateReleaseFault: with late-release=S the device shows a sleep's
// release S seconds after /sleep answered; a server that shuts down with
// that publish pending leaves no entry on the simulated GPU behind.
func TestLateReleaseFault(t *testing.T) {
	used := func(s *sim) uint64 {
		t.Helper()
		procs, err := simgpu.Processes(s.dir)
		require.NoError(t, err)
		var n uint64
		for _, p := range procs {
			n += p.UsedBytes
		}
		return n
	}
	s := startSim(t, "tiny-a", map[string]string{EnvFaults: "late-release=0.3"})
	s.ready(t)
	awake := used(s)
	require.NoError(t, s.c.Sleep(t.Context(), 1))
	assert.Equal(t, awake, used(s), "the device does not show the release yet")
	assert.Eventually(t, func() bool { return used(s) < awake }, 2*time.Second, 20*time.Millisecond, "it shows it later")

	s = startSim(t, "tiny-a", map[string]string{EnvFaults: "late-release=0.3"})
	s.ready(t)
	require.NoError(t, s.c.Sleep(t.Context(), 1))
	s.stop()
	code := <-s.done
	s.done <- code                     // for the test's cleanup
	time.Sleep(500 * time.Millisecond) // past the pending publish
	assert.Zero(t, used(s), "no process entry after the server stopped")
}
