package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"time"

	sse "github.com/tmaxmax/go-sse"
)

// CompletionRequest is a /v1/completions request. Streamed, with usage:
// token counts come from the server's usage chunk.
type CompletionRequest struct {
	Model     string
	Prompt    string
	MaxTokens int
	// IgnoreEOS (with MinTokens = MaxTokens) makes every output exactly MaxTokens long.
	IgnoreEOS bool
	// NoStream asks for one JSON response instead of a stream (request-rate
	// benchmarks): the Stream then holds one receive time, for the whole text.
	NoStream bool
	// OnFirstToken, when set on a streamed request, is called once with
	// the first non-empty token's receive time, as soon as it is read and
	// before the rest of the stream: what must happen at the first token
	// (the energy reading that closes a switch's interval, issue 50) is
	// not held back by the tokens after it. It runs on the reading
	// goroutine: the next chunks wait for it.
	OnFirstToken func(at time.Time)
}

type wireRequest struct {
	Model         string         `json:"model"`
	Prompt        string         `json:"prompt"`
	MaxTokens     int            `json:"max_tokens"`
	MinTokens     int            `json:"min_tokens,omitempty"`
	IgnoreEOS     bool           `json:"ignore_eos,omitempty"`
	Temperature   float64        `json:"temperature"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Stream is what one streamed completion returned, with receive times.
type Stream struct {
	Sent         time.Time   // just before the request was written
	Tokens       []time.Time // receive time of each chunk that carried non-empty text
	FirstChunk   time.Time   // first chunk with non-empty choices (vllm bench's TTFT event)
	Text         string
	FinishReason string
	PromptTokens int // from usage
	OutputTokens int // usage.completion_tokens
	// CachedTokens is usage.prompt_tokens_details.cached_tokens: the prompt
	// tokens the prefix cache held (-1 where the server does not say:
	// vLLM without --enable-prompt-tokens-details).
	CachedTokens int
	// Stamps, when the server is vllmsim with VLLMSIM_STAMP=1, is when it
	// wrote each chunk of Tokens: Tokens[i] − Stamps[i] is the delay the
	// measurement itself adds (write, loopback, read, parse).
	Stamps []time.Time
}

// TTFT is request sent → first chunk with a non-empty token.
func (s *Stream) TTFT() time.Duration {
	if len(s.Tokens) == 0 {
		return 0
	}
	return s.Tokens[0].Sub(s.Sent)
}

// TPOT is (last token − first token) / (output tokens − 1); false when fewer than two tokens.
func (s *Stream) TPOT() (time.Duration, bool) {
	if len(s.Tokens) < 1 || s.OutputTokens < 2 {
		return 0, false
	}
	return s.Tokens[len(s.Tokens)-1].Sub(s.Tokens[0]) / time.Duration(s.OutputTokens-1), true
}

// Last is the receive time of the last token.
func (s *Stream) Last() time.Time {
	if len(s.Tokens) == 0 {
		return time.Time{}
	}
	return s.Tokens[len(s.Tokens)-1]
}

// Complete streams a completion and records when each chunk arrived. The
// stream must end with [DONE] and carry a usage chunk; an error event inside
// the stream, a truncated stream or a malformed chunk is an error, returned
// together with what was received so far.
func (c *Client) Complete(ctx context.Context, r CompletionRequest) (*Stream, error) {
	wr := wireRequest{Model: r.Model, Prompt: r.Prompt, MaxTokens: r.MaxTokens, IgnoreEOS: r.IgnoreEOS,
		Temperature: 0, Stream: !r.NoStream}
	if !r.NoStream {
		wr.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if r.IgnoreEOS {
		wr.MinTokens = r.MaxTokens
	}
	body, err := json.Marshal(wr)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if !r.NoStream {
		req.Header.Set("Accept", "text/event-stream")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	var conn net.Conn
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn }}))
	s := &Stream{Sent: time.Now()}
	resp, err := c.hc.Do(req)
	if err != nil {
		return s, fmt.Errorf("POST /v1/completions: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return s, fmt.Errorf("POST /v1/completions: %w", ParseError(resp.StatusCode, b))
	}
	now := func() time.Time { return receiveTime(conn) }
	if r.NoStream {
		err = s.readWhole(resp.Body, now)
	} else {
		err = s.read(resp.Body, now, r.OnFirstToken)
	}
	if err != nil {
		return s, fmt.Errorf("POST /v1/completions: %w", err)
	}
	return s, nil
}

// readWhole reads a non-streamed completion into s: one receive time for
// the whole text.
func (s *Stream) readWhole(body io.Reader, now func() time.Time) error {
	b, err := io.ReadAll(io.LimitReader(body, 16<<20))
	if err != nil {
		return fmt.Errorf("read completion: %w", err)
	}
	var dec chunkDecoder
	c, err := dec.decode(string(b))
	switch {
	case err != nil:
		return fmt.Errorf("malformed completion %.80q: %w", b, err)
	case c.choices == 0 || !c.usage:
		return fmt.Errorf("completion without choices or usage: %.80q", b)
	}
	var text strings.Builder
	s.apply(c, now(), &text)
	s.Text = text.String()
	return nil
}

// receiveTime is when the data last read from conn reached this host (the
// kernel's receive timestamp), or now where that is not known. Token times
// are receive times: the client's own scheduling delay stays out of them.
func receiveTime(conn net.Conn) time.Time {
	now := time.Now()
	if t := received(conn); !t.IsZero() && t.Before(now) {
		return t
	}
	return now
}

// read consumes the SSE body into s; now says when the data just read arrived.
func (s *Stream) read(body io.Reader, now func() time.Time, onFirst func(time.Time)) error {
	var text strings.Builder
	defer func() { s.Text = text.String() }()
	done, sawUsage := false, false
	var dec chunkDecoder
	for ev, err := range sse.Read(body, &sse.ReadConfig{MaxEventSize: 1 << 20}) {
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		at := now()
		data := strings.TrimSpace(ev.Data)
		if data == "[DONE]" {
			done = true
			break
		}
		if data == "" {
			continue
		}
		c, err := dec.decode(data)
		if err != nil {
			return fmt.Errorf("malformed chunk %.80q: %w", data, err)
		}
		if c.isError {
			e := ParseError(http.StatusOK, []byte(data))
			e.InStream = true
			return e
		}
		had := len(s.Tokens)
		s.apply(c, at, &text)
		if had == 0 && len(s.Tokens) > 0 && onFirst != nil {
			onFirst(s.Tokens[0])
		}
		sawUsage = sawUsage || c.usage
	}
	switch {
	case !done:
		return ErrTruncated
	case s.FinishReason == "abort":
		return fmt.Errorf("request aborted by the server (finish_reason abort)")
	case !sawUsage:
		return fmt.Errorf("stream had no usage chunk (server ignored stream_options.include_usage)")
	case len(s.Tokens) == 0:
		return fmt.Errorf("stream carried no token")
	}
	return nil
}
