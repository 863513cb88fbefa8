package vllm

import (
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fastjson"
)

// chunk is one completion chunk as the stream reader needs it. It is
// decoded with fastjson (no reflection, the parser's memory reused from
// chunk to chunk): encoding/json took more than half of the client's CPU
// time per token (docs/overhead.md).
type chunk struct {
	isError      bool
	choices      int
	texts        [][]byte // non-empty texts of the choices, in order (valid until the next decode)
	finish       string   // last finish_reason that was not null
	hasFinish    bool
	usage        bool
	promptTokens int
	outputTokens int
	cachedTokens int   // usage.prompt_tokens_details.cached_tokens; -1 when absent
	sentNS       int64 // vllmsim_sent_ns, 0 when absent
}

// chunkDecoder decodes the chunks of one stream; not for concurrent use.
type chunkDecoder struct {
	p     fastjson.Parser
	texts [][]byte
}

// field is obj[key] when present and not null.
func field(obj *fastjson.Value, key string) *fastjson.Value {
	v := obj.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil
	}
	return v
}

// decode parses data as a chunk: a JSON object whose choices (if any) are
// objects with a string text and a string-or-null finish_reason, whose
// usage (if any) has integer counts. Anything else is an error. On valid
// JSON it decides as encoding/json does (FuzzChunkDecode); on invalid JSON
// it is more lenient in places (raw control characters in strings, numbers
// like 00), which vLLM's encoder never produces. fastjson.Validate would
// close that gap only partly, at 40 % more CPU per chunk.
func (d *chunkDecoder) decode(data string) (chunk, error) {
	v, err := d.p.Parse(data)
	if err != nil {
		return chunk{}, err
	}
	if v.Type() != fastjson.TypeObject {
		return chunk{}, fmt.Errorf("a chunk is a JSON object, not %s", v.Type())
	}
	c := chunk{isError: field(v, "error") != nil}
	if c.isError {
		return c, nil
	}
	d.texts = d.texts[:0]
	if ch := field(v, "choices"); ch != nil {
		choices, err := ch.Array()
		if err != nil {
			return c, fmt.Errorf("choices: %w", err)
		}
		c.choices = len(choices)
		for i, x := range choices {
			if t := field(x, "text"); t != nil {
				b, err := t.StringBytes()
				if err != nil {
					return c, fmt.Errorf("choices[%d].text: %w", i, err)
				}
				if len(b) > 0 {
					d.texts = append(d.texts, b)
				}
			}
			if f := field(x, "finish_reason"); f != nil {
				b, err := f.StringBytes()
				if err != nil {
					return c, fmt.Errorf("choices[%d].finish_reason: %w", i, err)
				}
				c.finish, c.hasFinish = string(b), true
			}
		}
	}
	c.texts = d.texts
	if u := field(v, "usage"); u != nil {
		if u.Type() != fastjson.TypeObject {
			return c, fmt.Errorf("usage is %s, not an object", u.Type())
		}
		c.usage = true
		if c.promptTokens, err = count(u, "prompt_tokens"); err != nil {
			return c, err
		}
		if c.outputTokens, err = count(u, "completion_tokens"); err != nil {
			return c, err
		}
		c.cachedTokens = -1 // vLLM reports it with --enable-prompt-tokens-details only
		if d := field(u, "prompt_tokens_details"); d != nil {
			if d.Type() != fastjson.TypeObject {
				return c, fmt.Errorf("usage.prompt_tokens_details is %s, not an object", d.Type())
			}
			if field(d, "cached_tokens") != nil {
				if c.cachedTokens, err = count(d, "cached_tokens"); err != nil {
					return c, err
				}
			}
		}
	}
	if s := field(v, "vllmsim_sent_ns"); s != nil {
		if c.sentNS, err = s.Int64(); err != nil {
			return c, fmt.Errorf("vllmsim_sent_ns: %w", err)
		}
	}
	return c, nil
}

// count is usage[key]: an integer, 0 when absent.
func count(usage *fastjson.Value, key string) (int, error) {
	n := field(usage, key)
	if n == nil {
		return 0, nil
	}
	v, err := n.Int()
	if err != nil {
		return 0, fmt.Errorf("usage.%s: %w", key, err)
	}
	return v, nil
}

// apply adds a decoded chunk received at now to s, its text to text.
func (s *Stream) apply(c chunk, now time.Time, text *strings.Builder) {
	if c.choices > 0 && s.FirstChunk.IsZero() {
		s.FirstChunk = now
	}
	for _, t := range c.texts {
		s.Tokens = append(s.Tokens, now)
		if c.sentNS != 0 {
			s.Stamps = append(s.Stamps, time.Unix(0, c.sentNS))
		}
		text.Write(t)
	}
	if c.hasFinish {
		s.FinishReason = c.finish
	}
	if c.usage {
		s.PromptTokens, s.OutputTokens, s.CachedTokens = c.promptTokens, c.outputTokens, c.cachedTokens
	}
}
