package vllm

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzStreamRead: any bytes as an SSE body. The parser never panics; a
// stream it accepts has a token, usage and [DONE].
func FuzzStreamRead(f *testing.F) {
	for _, name := range []string{"stream-ok.sse", "stream-error-event.sse", "stream-truncated.sse"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "vllm", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := &Stream{}
		err := s.read(bytes.NewReader(body), time.Now, nil)
		if err == nil && (len(s.Tokens) == 0 || !bytes.Contains(body, []byte("[DONE]"))) {
			t.Fatalf("accepted a stream without tokens or [DONE]: %q", body)
		}
	})
}

// FuzzParseError: any status and body. ParseError never panics and always
// says something.
func FuzzParseError(f *testing.F) {
	for _, name := range []string{"error-nested.json", "error-flat.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "vllm", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(400, b)
	}
	f.Add(401, []byte(`{"error":"Unauthorized"}`))
	f.Add(400, []byte(`{"detail":{"loc":["body"]}}`))
	f.Add(502, []byte("<html>"))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := ParseError(status, body)
		if e.Error() == "" {
			t.Fatal("empty error text")
		}
		if len(e.Body) > 512+len("…") {
			t.Fatalf("raw body kept at %d bytes", len(e.Body))
		}
	})
}

// FuzzChunkDecode: any text as a chunk. The decoder never panics, and on
// valid JSON (keys spelled exactly, as vLLM does) it accepts and refuses
// what encoding/json does and reads the same texts, finish reason and usage.
func FuzzChunkDecode(f *testing.F) {
	f.Add(`{"id":"cmpl-1","object":"text_completion","created":1730000000,"model":"qwen","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`)
	f.Add(`{"choices":[],"usage":{"prompt_tokens":26,"completion_tokens":3,"total_tokens":29},"vllmsim_sent_ns":1}`)
	f.Add(`{"choices":[],"usage":{"prompt_tokens":48,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":32}}}`)
	f.Add(`{"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}`)
	f.Add(`{"choices":[{"text":"\u00e9\n","finish_reason":"stop"}]}`)
	var d chunkDecoder
	f.Fuzz(func(t *testing.T, data string) {
		got, err := d.decode(data)
		if !json.Valid([]byte(data)) || !exactKeys(data) || !utf8.ValidString(data) {
			// By design: leniency on invalid JSON (see decode), encoding/json's
			// case-insensitive keys and its U+FFFD for invalid UTF-8.
			return
		}
		want, werr := refChunk(data)
		if strings.TrimSpace(data) == "null" {
			// encoding/json leaves a struct untouched for null; a chunk is an
			// object, and the decoder says so (vLLM never sends null).
			if err == nil {
				t.Fatalf("%q: a null chunk is accepted", data)
			}
			return
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: encoding/json says %v, fastjson %v", data, werr, err)
		}
		if err != nil {
			return
		}
		if len(got.texts) == 0 {
			got.texts = nil
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q: encoding/json %+v, fastjson %+v", data, want, got)
		}
	})
}

// exactKeys reports whether every object key in data is unique within its
// object and spelled in lower case: where encoding/json (case-insensitive,
// last duplicate wins) and a JSON parser may disagree, vLLM never goes.
func exactKeys(data string) bool {
	dec := json.NewDecoder(strings.NewReader(data))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // next string token in an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return err == io.EOF
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expect {
			k, _ := tok.(string)
			if k != strings.ToLower(k) || top.keys[k] {
				return false
			}
			top.keys[k], top.expect = true, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expect = true
		}
	}
}
