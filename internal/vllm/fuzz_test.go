package vllm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
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
		err := s.read(bytes.NewReader(body), time.Now)
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
