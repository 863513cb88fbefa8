package vllmsim

import (
	"encoding/json"
	"strconv"
	"time"
)

// chunkEncoder writes one request's stream chunks in vLLM's field order
// (id, object, created, model, choices, usage). The parts that do not change
// within a stream are encoded once, so a token costs one string encoding
// and one append: at zero modelled delay the simulator must out-run the
// client it serves, or the harness would be measuring the simulator.
type chunkEncoder struct {
	head  []byte // `data: {"id":…,"model":…,"choices":`
	stamp bool   // append "vllmsim_sent_ns"
	buf   []byte
}

func newChunkEncoder(id string, created int64, model string, stamp bool) *chunkEncoder {
	b := []byte(`data: {"id":`)
	b = appendJSON(b, id)
	b = append(b, `,"object":"text_completion","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = appendJSON(b, model)
	b = append(b, `,"choices":`...)
	return &chunkEncoder{head: b, stamp: stamp}
}

// token is the chunk of one generated token; finish is "" while the
// sequence goes on. The returned bytes are valid until the next call.
func (c *chunkEncoder) token(text, finish string) []byte {
	b := append(c.buf[:0], c.head...)
	b = append(b, `[{"index":0,"text":`...)
	b = appendJSON(b, text)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSON(b, finish)
	}
	b = append(b, `,"stop_reason":null}],"usage":null`...)
	return c.end(b)
}

// usage is the final chunk: no choices, the token counts; cached ≥ 0 adds
// prompt_tokens_details.cached_tokens (--enable-prompt-tokens-details).
func (c *chunkEncoder) usage(prompt, completion, cached int) []byte {
	b := append(c.buf[:0], c.head...)
	b = append(b, `[],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	if cached >= 0 {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(cached), 10)
		b = append(b, '}')
	}
	b = append(b, '}')
	return c.end(b)
}

func (c *chunkEncoder) end(b []byte) []byte {
	if c.stamp {
		b = append(b, `,"vllmsim_sent_ns":`...)
		b = strconv.AppendInt(b, time.Now().UnixNano(), 10)
	}
	b = append(b, "}\n\n"...)
	c.buf = b
	return b
}

// appendJSON appends v's JSON encoding (a string or number here: it cannot fail).
func appendJSON(b []byte, v any) []byte {
	j, _ := json.Marshal(v)
	return append(b, j...)
}
