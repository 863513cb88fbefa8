package vllm

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestArgvIsWhatVLLMTakes(t *testing.T) {
	got := ServeArgs(ServeOptions{Model: "Qwen/Qwen3-1.7B", Host: "127.0.0.1", Port: 8001, MaxModelLen: 4096,
		KVCacheBytes: 4 << 30, GPUMemoryUtilization: 0.3, Extra: []string{"--enforce-eager"}})
	assert.Equal(t, []string{"serve", "Qwen/Qwen3-1.7B",
		"--served-model-name", "Qwen/Qwen3-1.7B",
		"--host", "127.0.0.1", "--port", "8001",
		"--enable-sleep-mode",
		"--max-model-len", "4096",
		"--kv-cache-memory-bytes", "4294967296",
		"--gpu-memory-utilization", "0.3",
		"--enforce-eager"}, got)
	assert.NotContains(t, strings.Join(got, " "), "--disable-log-requests", "removed in vLLM 0.17")
	assert.Equal(t, []string{"VLLM_SERVER_DEV_MODE=1"}, ServerEnv(""), "vLLM parses it with int(): 1, never true")
	assert.Equal(t, []string{"VLLM_SERVER_DEV_MODE=1", "VLLM_API_KEY=k"}, ServerEnv("k"))
}

// TestWakeOrder: a level-2 wake reloads the weights between the two
// wake_up calls and resets the prefix cache last; a failed step stops the
// sequence and is named.
func TestWakeOrder(t *testing.T) {
	var mu sync.Mutex // the handler runs on the server's goroutines
	var calls []string
	fail := ""
	got := func() []string { mu.Lock(); defer mu.Unlock(); return calls }
	reset := func(f string) { mu.Lock(); defer mu.Unlock(); calls, fail = nil, f }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := r.URL.Path
		if q := r.URL.RawQuery; q != "" {
			call += "?" + q
		}
		mu.Lock()
		calls = append(calls, call)
		failed := call == fail
		mu.Unlock()
		if failed {
			http.Error(w, `{"error": {"message": "boom", "code": 500}}`, 500)
			return
		}
		if r.URL.Path == "/collective_rpc" {
			w.Write([]byte(`{"results": [null]}`))
		}
	}))
	defer srv.Close()
	c := New(srv.URL)
	defer c.CloseIdle()

	step, err := c.Wake(t.Context(), 1)
	require.NoError(t, err)
	assert.Empty(t, step)
	assert.Equal(t, []string{"/wake_up"}, got())

	reset("")
	_, err = c.Wake(t.Context(), 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"/wake_up?tags=weights", "/collective_rpc", "/wake_up?tags=kv_cache", "/reset_prefix_cache"}, got())

	reset("/collective_rpc")
	step, err = c.Wake(t.Context(), 2)
	assert.Error(t, err)
	assert.Equal(t, "collective_rpc reload_weights", step)
	assert.Equal(t, []string{"/wake_up?tags=weights", "/collective_rpc"}, got(), "nothing after the failed step")
}

// TestResetPrefixCacheChecksTheAnswer: vLLM's empty 200 is a reset; a
// {"success": false} is asked again and, if it stays so, an error.
func TestResetPrefixCacheChecksTheAnswer(t *testing.T) {
	var mu sync.Mutex
	answers := []string{}
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if len(answers) > 0 {
			w.Write([]byte(answers[0]))
			if len(answers) > 1 {
				answers = answers[1:]
			}
		}
	}))
	defer srv.Close()
	c := New(srv.URL)
	defer c.CloseIdle()
	set := func(a ...string) { mu.Lock(); defer mu.Unlock(); answers, calls = a, 0 }
	count := func() int { mu.Lock(); defer mu.Unlock(); return calls }

	set()
	require.NoError(t, c.ResetPrefixCache(t.Context()), "an empty 200, as vLLM answers")
	set(`{"success": false}`, `{"success": false}`, `{"success": true}`)
	require.NoError(t, c.ResetPrefixCache(t.Context()), "false, false, then true")
	assert.Equal(t, 3, count())
	set(`{"success": false}`)
	err := c.ResetPrefixCache(t.Context())
	assert.ErrorIs(t, err, ErrPrefixCacheNotReset)
	assert.Equal(t, 5, count(), "five tries")
	set(`<html>`)
	assert.ErrorContains(t, c.ResetPrefixCache(t.Context()), "unexpected body")
}

func TestCompileState(t *testing.T) {
	cold := "(EngineCore_DP0 pid=1) INFO 09-23 18:12:27 [backends.py:550] Dynamo bytecode transform time: 4.99 s\n" +
		"(EngineCore_DP0 pid=1) INFO 09-23 18:12:40 [backends.py:215] Compiling a graph for dynamic shape takes 12.31 s\n"
	warm := "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:30 [backends.py:161] Directly load the compiled graph(s) for dynamic shape from the cache, took 2.810 s\n"
	ranged := "(Worker_TP0 pid=57) INFO 06-21 07:20:13 [backends.py:292] Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 0.717 s\n"
	assert.Equal(t, Compiled, CompileState([]byte(cold)))
	assert.Equal(t, LoadedFromCache, CompileState([]byte(warm)))
	assert.Equal(t, LoadedFromCache, CompileState([]byte(ranged)), "newer vLLM names a compile range")
	assert.Equal(t, "", CompileState([]byte("INFO Model loading took 8.0 GiB\n")), "eager mode compiles nothing")
}
