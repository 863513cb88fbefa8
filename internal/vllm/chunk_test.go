package vllm

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refChunk decodes a chunk with encoding/json, the way the client did
// before it used fastjson: the reference the fast decoder must agree with.
func refChunk(data string) (chunk, error) {
	var w struct {
		Choices []struct {
			Text         string  `json:"text"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			Details          *struct {
				Cached *int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		Error  json.RawMessage `json:"error"`
		SentNS int64           `json:"vllmsim_sent_ns"`
	}
	if err := json.Unmarshal([]byte(data), &w); err != nil {
		return chunk{}, err
	}
	c := chunk{isError: len(w.Error) > 0 && string(w.Error) != "null", choices: len(w.Choices), sentNS: w.SentNS}
	if c.isError {
		return c, nil
	}
	for _, x := range w.Choices {
		if x.Text != "" {
			c.texts = append(c.texts, []byte(x.Text))
		}
		if x.FinishReason != nil {
			c.finish, c.hasFinish = *x.FinishReason, true
		}
	}
	if w.Usage != nil {
		c.usage, c.promptTokens, c.outputTokens, c.cachedTokens = true, w.Usage.PromptTokens, w.Usage.CompletionTokens, -1
		if d := w.Usage.Details; d != nil && d.Cached != nil {
			c.cachedTokens = *d.Cached
		}
	}
	return c, nil
}

// TestChunkDecoderMatchesEncodingJSON: on every chunk of the vLLM fixtures
// and on malformed and unusual chunks, the fastjson decoder accepts and
// rejects what encoding/json does and reads the same fields.
func TestChunkDecoderMatchesEncodingJSON(t *testing.T) {
	var cases []string
	for _, name := range []string{"stream-ok.sse", "stream-error-event.sse", "stream-truncated.sse"} {
		f, err := os.Open(filepath.Join("..", "..", "testdata", "vllm", name))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "[DONE]" {
				cases = append(cases, d)
			}
		}
		f.Close()
	}
	require.NotEmpty(t, cases)
	cases = append(cases,
		`{"choices":[{"text":" a\"b\\n\u00e9","finish_reason":"stop"}],"usage":null,"vllmsim_sent_ns":1764687000123456789}`,
		`{"choices":[{"text":"x"},{"text":"","finish_reason":"length"},{"text":"y"}]}`,
		`{"choices":null,"usage":{"prompt_tokens":3,"completion_tokens":0}}`,
		`{"choices":[],"usage":{}}`,
		`{"error":null,"choices":[{"text":"ok"}]}`,
		`{"error":"boom"}`,
		`{}`,
		// malformed: both must refuse
		`{"choices":[{"text":5}]}`,
		`{"choices":{"text":"a"}}`,
		`{"choices":[{"text":"a","finish_reason":1}]}`,
		`{"usage":{"prompt_tokens":"3"}}`,
		`{"usage":{"completion_tokens":1.5}}`,
		`{"usage":[]}`,
		`{"vllmsim_sent_ns":"now"}`,
		`[{"choices":[]}]`,
		`5`,
		`{"choices":[{"text":"a"}]`,
		`{"choices":[{"text":"a"}]} trailing`,
	)
	var d chunkDecoder
	for _, data := range cases {
		want, wantErr := refChunk(data)
		got, err := d.decode(data)
		if wantErr != nil {
			assert.Error(t, err, "encoding/json refuses %s (%v)", data, wantErr)
			continue
		}
		if !assert.NoError(t, err, data) {
			continue
		}
		if len(got.texts) == 0 {
			got.texts = nil
		}
		assert.Equal(t, want, got, data)
	}
}

// BenchmarkStreamRead is the client's per-chunk cost on a recorded-shape
// stream of 256 tokens (vLLM's chunk layout), without any network.
func BenchmarkStreamRead(b *testing.B) {
	var sb strings.Builder
	for range 256 {
		sb.WriteString(`data: {"id":"cmpl-0123456789abcdef","object":"text_completion","created":1730000000,"model":"Qwen3-4B","choices":[{"index":0,"text":" word","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}` + "\n\n")
	}
	sb.WriteString(`data: {"id":"cmpl-0123456789abcdef","object":"text_completion","created":1730000000,"model":"Qwen3-4B","choices":[],"usage":{"prompt_tokens":26,"total_tokens":282,"completion_tokens":256}}` + "\n\ndata: [DONE]\n\n")
	body := sb.String()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s := &Stream{}
		if err := s.read(strings.NewReader(body), time.Now, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/257, "ns/chunk")
}

// TestOnFirstTokenBeforeTheRest: the hook runs once, at the first chunk
// with text (not at the role-only or empty chunk before it), with that
// chunk's receive time, and before any later chunk is read.
func TestOnFirstTokenBeforeTheRest(t *testing.T) {
	chunk := func(text string) string {
		return `data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"` + text + `","finish_reason":null}],"usage":null}` + "\n\n"
	}
	body := chunk("") + chunk(" one") + chunk(" two") + chunk(" three") +
		`data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":2,"total_tokens":5,"completion_tokens":3}}` + "\n\ndata: [DONE]\n\n"
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	reads := 0
	now := func() time.Time { reads++; return t0.Add(time.Duration(reads) * time.Second) }
	var calls []time.Time
	readsAtCall := 0
	s := &Stream{}
	require.NoError(t, s.read(strings.NewReader(body), now, func(at time.Time) {
		calls = append(calls, at)
		readsAtCall = reads
	}))
	require.Len(t, calls, 1, "once")
	assert.Equal(t, s.Tokens[0], calls[0], "the first token's receive time")
	assert.Equal(t, t0.Add(2*time.Second), calls[0], "the second chunk, the first with text")
	assert.Equal(t, 2, readsAtCall, "before the third chunk was read")
	assert.Len(t, s.Tokens, 3)
}
