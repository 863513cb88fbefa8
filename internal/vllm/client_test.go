package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "vllm", name))
	require.NoError(t, err)
	return b
}

// replay serves a fixture body with the given status and content type and
// records the last request.
func replay(t *testing.T, status int, ctype string, body []byte, got *http.Request) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got != nil {
			*got = *r.Clone(context.Background())
			b, _ := io.ReadAll(r.Body)
			got.Body = io.NopCloser(bytes.NewReader(b))
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return New(srv.URL)
}

func TestCompleteParsesStreamAndUsage(t *testing.T) {
	var req http.Request
	c := replay(t, 200, "text/event-stream", fixture(t, "stream-ok.sse"), &req)
	s, err := c.Complete(t.Context(), CompletionRequest{Model: "qwen", Prompt: "hi", MaxTokens: 3, IgnoreEOS: true})
	require.NoError(t, err)
	assert.Equal(t, " the cat sat", s.Text)
	assert.Len(t, s.Tokens, 3, "the empty first chunk is no token")
	assert.False(t, s.FirstChunk.After(s.Tokens[0]), "first chunk comes no later than the first token")
	assert.Equal(t, 26, s.PromptTokens)
	assert.Equal(t, 3, s.OutputTokens)
	assert.Equal(t, "length", s.FinishReason)
	assert.Positive(t, s.TTFT())
	_, ok := s.TPOT()
	assert.True(t, ok)

	var body map[string]any
	require.NoError(t, json.NewDecoder(req.Body).Decode(&body))
	assert.Equal(t, "/v1/completions", req.URL.Path)
	assert.Equal(t, map[string]any{"model": "qwen", "prompt": "hi", "max_tokens": 3.0, "min_tokens": 3.0, "ignore_eos": true,
		"temperature": 0.0, "stream": true, "stream_options": map[string]any{"include_usage": true}}, body)
}

func TestCompleteErrors(t *testing.T) {
	t.Run("error event in 200 stream", func(t *testing.T) {
		c := replay(t, 200, "text/event-stream", fixture(t, "stream-error-event.sse"), nil)
		s, err := c.Complete(t.Context(), CompletionRequest{Model: "qwen", Prompt: "hi", MaxTokens: 3})
		var ae *APIError
		require.ErrorAs(t, err, &ae)
		assert.True(t, ae.InStream)
		assert.Equal(t, "The engine is dead", ae.Message)
		assert.Len(t, s.Tokens, 1, "what arrived before the error is kept")
	})
	t.Run("truncated", func(t *testing.T) {
		c := replay(t, 200, "text/event-stream", fixture(t, "stream-truncated.sse"), nil)
		s, err := c.Complete(t.Context(), CompletionRequest{Model: "qwen", Prompt: "hi", MaxTokens: 3})
		assert.ErrorIs(t, err, ErrTruncated)
		assert.Len(t, s.Tokens, 2)
	})
	t.Run("malformed chunk", func(t *testing.T) {
		c := replay(t, 200, "text/event-stream", []byte("data: {not json\n\n"), nil)
		_, err := c.Complete(t.Context(), CompletionRequest{Model: "qwen", Prompt: "hi", MaxTokens: 3})
		assert.ErrorContains(t, err, "malformed chunk")
	})
	t.Run("no usage", func(t *testing.T) {
		c := replay(t, 200, "text/event-stream", []byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n"), nil)
		_, err := c.Complete(t.Context(), CompletionRequest{Model: "qwen", Prompt: "hi", MaxTokens: 3})
		assert.ErrorContains(t, err, "no usage chunk")
	})
	t.Run("404 nested error", func(t *testing.T) {
		c := replay(t, 404, "application/json", fixture(t, "error-nested.json"), nil)
		_, err := c.Complete(t.Context(), CompletionRequest{Model: "nope", Prompt: "hi", MaxTokens: 3})
		var ae *APIError
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, 404, ae.Status)
		assert.Equal(t, "NotFoundError", ae.Type)
		assert.Equal(t, "The model `nope` does not exist.", ae.Message)
	})
}

func TestParseErrorShapes(t *testing.T) {
	flat := ParseError(400, fixture(t, "error-flat.json"))
	assert.Equal(t, "BadRequestError", flat.Type)
	assert.Contains(t, flat.Message, "exceeds model's maximum context length")
	assert.Equal(t, "Unauthorized", ParseError(401, []byte(`{"error":"Unauthorized"}`)).Message)
	assert.Equal(t, "Missing 'method' in request body", ParseError(400, []byte(`{"detail":"Missing 'method' in request body"}`)).Message)
	raw := ParseError(502, []byte("<html>bad gateway</html>"))
	assert.Equal(t, "<html>bad gateway</html>", raw.Body)
	assert.Contains(t, raw.Error(), "HTTP 502")
}

func TestDevEndpoints(t *testing.T) {
	var req http.Request
	c := replay(t, 200, "application/json", fixture(t, "is-sleeping-true.json"), &req)
	asleep, err := c.IsSleeping(t.Context())
	require.NoError(t, err)
	assert.True(t, asleep)

	c = replay(t, 200, "application/json", fixture(t, "is-sleeping-false.json"), nil)
	asleep, err = c.IsSleeping(t.Context())
	require.NoError(t, err)
	assert.False(t, asleep)

	c = replay(t, 200, "application/json", fixture(t, "collective-rpc-reload.json"), &req)
	res, err := c.CollectiveRPC(t.Context(), "reload_weights")
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, "null", string(res[0]))
	b, _ := io.ReadAll(req.Body)
	assert.JSONEq(t, `{"method":"reload_weights"}`, string(b))

	c = replay(t, 200, "", nil, &req)
	require.NoError(t, c.Sleep(t.Context(), 2))
	assert.Equal(t, "/sleep", req.URL.Path)
	assert.Equal(t, "level=2", req.URL.RawQuery)
	require.NoError(t, c.WakeUp(t.Context(), "weights", "kv_cache"))
	assert.Equal(t, "tags=weights&tags=kv_cache", req.URL.RawQuery)
	require.NoError(t, c.WakeUp(t.Context()))
	assert.Empty(t, req.URL.RawQuery)
}

func TestWaitReadyTreatsRefusedAsNotReady(t *testing.T) {
	// Reserve a port, leave it closed while "loading", then serve.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	go func() {
		time.Sleep(100 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
		t.Cleanup(func() { srv.Close() })
		srv.Serve(l)
	}()
	c := New("http://" + addr)
	err = c.Health(t.Context())
	assert.True(t, errors.Is(err, ErrNotReady), "refused connection is not-ready: %v", err)
	// A broken pipe (a pooled connection to a replaced server) is the
	// connection's failure too: the next poll opens a new one.
	epipe := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	assert.True(t, isConnErr(fmt.Errorf("Get %q: %w", "http://"+addr+"/health", epipe)), "broken pipe is a connection error")
	assert.False(t, isConnErr(errors.New("HTTP 500")), "an answer is not")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	at, err := c.WaitReady(ctx, 10*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, at.IsZero())
}

func TestWaitReadyGivesUpAtDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = New("http://"+addr).WaitReady(ctx, 10*time.Millisecond)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "/health")
}

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(fixture(t, "metrics.txt"))
	require.NoError(t, err)
	assert.Equal(t, Metrics{
		"vllm:num_requests_running":                                0,
		"vllm:gpu_cache_usage_perc":                                0.25,
		`vllm:engine_sleep_state{sleep_state="awake"}`:             0,
		`vllm:engine_sleep_state{sleep_state="weights_offloaded"}`: 1,
		`vllm:engine_sleep_state{sleep_state="discard_all"}`:       0,
		"vllm:time_to_first_token_seconds_sum":                     0.12,
		"vllm:time_to_first_token_seconds_count":                   3,
		"vllm:generation_tokens_total":                             384,
	}, m, "only vllm:* series, without model_name and engine labels")
	kv, ok := m.KVCacheUsage()
	assert.True(t, ok)
	assert.Equal(t, 0.25, kv, "falls back to the old gpu_cache_usage_perc name")
	assert.Equal(t, "weights_offloaded", m.SleepState())
	assert.Equal(t, "", Metrics{}.SleepState())

	_, err = ParseMetrics([]byte("vllm:x{ 1\n"))
	assert.ErrorContains(t, err, "parse /metrics")
}

func TestWeightGiBFromServerLog(t *testing.T) {
	log := []byte(`INFO 12-02 10:00:01 [api_server.py:1] vLLM API server version 0.31.0
(EngineCore_DP0 pid=4242) INFO 12-02 10:00:09 [gpu_model_runner.py:2602] Model loading took 7.5488 GiB and 3.214133 seconds
INFO 12-02 10:01:02 [launcher.py:46] Route: /sleep, Methods: POST
(EngineCore_DP0 pid=4343) INFO 12-02 10:05:09 [gpu_model_runner.py:2602] Model loading took 7.5490 GiB and 2.9 seconds
INFO Application startup complete.`)
	gib, line, ok := WeightGiB(log)
	require.True(t, ok)
	assert.Equal(t, 7.549, gib, "the last start's line")
	assert.Equal(t, "(EngineCore_DP0 pid=4343) INFO 12-02 10:05:09 [gpu_model_runner.py:2602] Model loading took 7.5490 GiB and 2.9 seconds", line)
	gib, _, ok = WeightGiB([]byte("Model loading took 1.5 GiB and 1 seconds"))
	assert.True(t, ok)
	assert.Equal(t, 1.5, gib, "a log that ends on the line")
	gib, line, ok = WeightGiB([]byte("INFO 01-20 model_runner.py:1115] Loading model weights took 12.5523 GB\n"))
	assert.True(t, ok, "older vLLM's wording, same 2^30-byte unit")
	assert.Equal(t, 12.5523, gib)
	assert.Equal(t, "INFO 01-20 model_runner.py:1115] Loading model weights took 12.5523 GB", line)
	_, _, ok = WeightGiB([]byte("INFO Loading weights took 3.2 seconds\n"))
	assert.False(t, ok)
}

// The graph capture's line as a served vLLM logged it (a real log's
// "[gpu_model_runner.py:3480] Graph capturing finished in 8 secs, took
// 0.31 GiB"): the last start's; an older release's line, which has no
// size, is no figure.
func TestGraphGiBFromServerLog(t *testing.T) {
	log := []byte(`(EngineCore_DP0 pid=212) INFO 10-06 12:00:31 [kv_cache_utils.py:1087] GPU KV cache size: 49,152 tokens
(EngineCore_DP0 pid=212) INFO 10-06 12:00:40 [gpu_model_runner.py:3480] Graph capturing finished in 8 secs, took 0.31 GiB
INFO 10-06 12:00:41 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000
(EngineCore_DP0 pid=313) INFO 10-06 12:09:40 [gpu_model_runner.py:3480] Graph capturing finished in 1 secs, took 0.29 GiB
`)
	gib, line, ok := GraphGiB(log)
	require.True(t, ok)
	assert.Equal(t, 0.29, gib, "the last start's line")
	assert.Equal(t, "(EngineCore_DP0 pid=313) INFO 10-06 12:09:40 [gpu_model_runner.py:3480] Graph capturing finished in 1 secs, took 0.29 GiB", line)
	_, _, ok = GraphGiB([]byte("INFO 11-03 [model_runner.py:1671] Graph capturing finished in 2 secs.\n"))
	assert.False(t, ok, "an older release's line has no size")
	_, _, ok = GraphGiB([]byte("Model loading took 7.5 GiB and 3 seconds\n"))
	assert.False(t, ok)
}
