package vllm

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGenerateAsksForAReplayableAnswer: the request is greedy, fixed
// length, with logprobs and token ids; ids come from token_ids, else from
// "token_id:N" names, else are absent (text is all that is left).
func TestGenerateAsksForAReplayableAnswer(t *testing.T) {
	var got map[string]any
	answer := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = nil
		_ = json.Unmarshal(b, &got)
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	c := New(srv.URL)

	// vLLM ≥ 0.10.2: token_ids beside the text.
	answer = `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" a b","token_ids":[5,9],
		"logprobs":{"text_offset":[0,2],"token_logprobs":[-0.1,-0.25],"tokens":["token_id:5","token_id:9"],
		"top_logprobs":[{"token_id:5":-0.1,"token_id:3":-2.0},{"token_id:9":-0.25,"token_id:1":-1.5}]},"finish_reason":"length"}],
		"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	g, err := c.Generate(t.Context(), GenerateRequest{Model: "m", Prompt: "p", MaxTokens: 2, Logprobs: 2})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"model": "m", "prompt": "p", "max_tokens": 2.0, "min_tokens": 2.0, "ignore_eos": true, "temperature": 0.0,
		"logprobs": 2.0, "return_token_ids": true, "return_tokens_as_token_ids": true, "stream": false}, got)
	assert.Equal(t, []int{5, 9}, g.IDs)
	assert.Equal(t, []float64{-0.1, -0.25}, g.Logprobs)
	assert.Equal(t, -2.0, g.Top[0]["token_id:3"])
	assert.Equal(t, " a b", g.Text)

	// An older vLLM: no token_ids, the ids in the logprobs' names.
	answer = `{"choices":[{"index":0,"text":" a","logprobs":{"tokens":["token_id:5"],"token_logprobs":[-0.1],"top_logprobs":[{"token_id:5":-0.1}]},"finish_reason":"length"}]}`
	g, err = c.Generate(t.Context(), GenerateRequest{Model: "m", Prompt: "p", MaxTokens: 1, Logprobs: 1})
	require.NoError(t, err)
	assert.Equal(t, []int{5}, g.IDs)

	// No logprobs asked, none given, no ids: text only.
	answer = `{"choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":"length"}]}`
	g, err = c.Generate(t.Context(), GenerateRequest{Model: "m", Prompt: "p", MaxTokens: 1})
	require.NoError(t, err)
	assert.Nil(t, g.IDs)
	assert.Nil(t, g.Logprobs)
	_, present := got["logprobs"]
	assert.False(t, present, "logprobs 0 asks for none")

	for body, want := range map[string]string{
		`{"choices":[]}`: "without choices",
		`{"choices":[{"text":"","finish_reason":"abort"}]}`:                               "aborted",
		`{"choices":[{"text":" a","logprobs":{"tokens":["x"],"token_logprobs":[null]}}]}`: "null logprob",
		`not json`: "malformed",
	} {
		answer = body
		_, err := c.Generate(t.Context(), GenerateRequest{Model: "m", Prompt: "p", MaxTokens: 1})
		assert.ErrorContains(t, err, want, body)
	}
}

// TestEngineLogAsVLLMWritesIt reads the lines of a real vLLM log (a public
// run of vLLM 0.10 on 8 GPUs, abridged) and vllmsim's.
func TestEngineLogAsVLLMWritesIt(t *testing.T) {
	log := []byte(`2025-08-11 16:11:36 block_pool.py:321 INFO:vllm.v1.core.block_pool p:475091 t:139650923292480: Successfully reset prefix cache
2025-08-11 16:11:40 executor_base.py:203 INFO:vllm.executor.executor_base p:475091 t:139650923292480: It took 0.455951 seconds to wake up tags ['kv_cache'].
2025-08-11 16:12:02 gpu_worker.py:104 INFO:vllm.v1.worker.gpu_worker p:475095 t:140373120079680: Sleep mode freed 71.25 GiB memory, 1.38 GiB memory is still in use.
2025-08-11 16:12:02 executor_base.py:187 INFO:vllm.executor.executor_base p:475095 t:140373120079680: It took 2.756636 seconds to fall asleep.
INFO 2026-12-03 00:00:01.000001 It took 1.2e-05 seconds to fall asleep.
`)
	e := ParseEngineLog(log)
	assert.Equal(t, []float64{2.756636, 1.2e-05}, e.SleepS)
	assert.Equal(t, []float64{0.455951}, e.WakeS)
	assert.Equal(t, []float64{71.25}, e.FreedGiB)
	assert.Equal(t, []float64{1.38}, e.InUseGiB)
	assert.Empty(t, ParseEngineLog([]byte("INFO Started server process")).SleepS)

	m, err := ParseMetrics([]byte(`# TYPE vllm:rl_sleep_mode_operation_duration_seconds histogram
vllm:rl_sleep_mode_operation_duration_seconds_bucket{operation="sleep",le="+Inf"} 3
vllm:rl_sleep_mode_operation_duration_seconds_sum{operation="sleep"} 4.5
vllm:rl_sleep_mode_operation_duration_seconds_count{operation="sleep"} 3
`))
	require.NoError(t, err)
	sum, n, ok := m.SleepOp("sleep")
	assert.True(t, ok, "the renamed metric is read too")
	assert.Equal(t, 4.5, sum)
	assert.Equal(t, 3.0, n)
	_, _, ok = m.SleepOp("wake")
	assert.False(t, ok)
}

func TestLoRAModulesAreOneList(t *testing.T) {
	got := ServeArgs(ServeOptions{Model: "m", Host: "h", Port: 1, MaxModelLen: 8, KVCacheBytes: 1, GPUMemoryUtilization: 0.5,
		LoRA: []LoRA{{"chat", "/a/chat"}, {"sql", "/a/sql"}}, Extra: []string{"--max-lora-rank", "64"}})
	assert.Equal(t, []string{"--enable-lora", "--lora-modules", "chat=/a/chat", "sql=/a/sql", "--max-lora-rank", "64"}, got[len(got)-6:],
		"vLLM's --lora-modules takes a list (nargs='+'); given twice, the second replaces the first")
}
