// Package vllm is the client for a vLLM OpenAI-compatible server and its
// sleep-mode development endpoints (see docs/vllm-api.md): readiness,
// models, version, /sleep, /wake_up (their answers in every era), /pause,
// /resume, /is_paused, /release_kv_cache_memory, /is_sleeping,
// /collective_rpc, /reset_prefix_cache, /metrics (with the sleep state read
// from the new and the legacy families), and streaming completions that
// record the receive time of every chunk. Every call takes a context.
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
	"net/url"
	"syscall"
	"time"
)

// Client talks to one server.
type Client struct {
	base   string
	hc     *http.Client
	apiKey string
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends the key as a Bearer token on /v1 requests.
func WithAPIKey(k string) Option { return func(c *Client) { c.apiKey = k } }

// WithHTTPClient replaces the HTTP client.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// maxIdle bounds a client's idle keep-alive connections (one server each).
const maxIdle = 32

// New returns a client for baseURL, e.g. http://127.0.0.1:8001.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: baseURL, hc: &http.Client{Transport: &http.Transport{
		Proxy:       nil, // loopback servers: never through a proxy
		DialContext: dialRx(&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}),
		// A burst opens as many connections as requests in flight; once
		// it is over, at most maxIdle stay open for reuse, the rest are
		// closed (an open file each: a 1,000-request burst left 1,000).
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: maxIdle,
		IdleConnTimeout:     90 * time.Second,
	}}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// CloseIdle closes idle keep-alive connections.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any) (int, []byte, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read %s %s: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

// call is do plus: status ≥ 400 becomes an *APIError.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	st, b, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if st >= 400 {
		return nil, fmt.Errorf("%s %s: %w", method, path, ParseError(st, b))
	}
	return b, nil
}

// Health is GET /health: nil on 200. A refused or reset connection (the
// server is loading) and a non-200 status wrap ErrNotReady.
func (c *Client) Health(ctx context.Context) error {
	st, _, err := c.do(ctx, http.MethodGet, "/health", nil, nil)
	if err != nil {
		if isConnErr(err) {
			return fmt.Errorf("GET /health: %w: %v", ErrNotReady, err)
		}
		return fmt.Errorf("GET /health: %w", err)
	}
	if st != http.StatusOK {
		return fmt.Errorf("GET /health: %w: HTTP %d", ErrNotReady, st)
	}
	return nil
}

// isConnErr: the connection, not the server's answer, failed: refused
// while the server starts, reset or closed by it, or a broken pipe (a
// pooled connection to the process a restart just replaced on the same
// port, written before the transport saw it closed: make stress met it in
// a warm restart's first /health).
func isConnErr(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF)
}

// WaitReady polls /health every poll until it returns 200 and reports when it
// did. Errors other than not-ready end the wait; so does ctx.
func (c *Client) WaitReady(ctx context.Context, poll time.Duration) (time.Time, error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		err := c.Health(ctx)
		if err == nil {
			return time.Now(), nil
		}
		if !errors.Is(err, ErrNotReady) {
			return time.Time{}, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait for %s/health: %w (last: %v)", c.base, context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

// Models is GET /v1/models: the served model ids.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	b, err := c.call(ctx, http.MethodGet, "/v1/models", nil, nil)
	if err != nil {
		return nil, err
	}
	var ml struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ml); err != nil {
		return nil, fmt.Errorf("GET /v1/models: %w", err)
	}
	ids := make([]string, len(ml.Data))
	for i, d := range ml.Data {
		ids[i] = d.ID
	}
	return ids, nil
}

// Version is GET /version.
func (c *Client) Version(ctx context.Context) (string, error) {
	b, err := c.call(ctx, http.MethodGet, "/version", nil, nil)
	if err != nil {
		return "", err
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("GET /version: %w", err)
	}
	return v.Version, nil
}

// Sleep is POST /sleep?level=N; it returns when the server has fallen asleep.
func (c *Client) Sleep(ctx context.Context, level int) error { return c.SleepMode(ctx, level, "") }

// Pause modes of /sleep (vLLM ≥ 2026-02, PR #34528): what becomes of the
// requests in flight. Older servers ignore the parameter (and, with
// requests running, may crash: #28714).
const (
	SleepAbort = "abort" // end them now with finish_reason "abort" (vLLM's default)
	SleepWait  = "wait"  // admit nothing new, sleep once they have finished
	SleepKeep  = "keep"  // freeze them; they go on after the wake
)

// SleepMode is POST /sleep?level=N&mode=M ("" sends no mode: the server's
// default); SleepModeAnswer says what the server answered.
func (c *Client) SleepMode(ctx context.Context, level int, mode string) error {
	_, err := c.SleepModeAnswer(ctx, level, mode)
	return err
}

// WakeUp is POST /wake_up, with ?tags=… for each tag (none: wake
// everything); WakeUpAnswer says what the server answered (era C may
// answer "sleeping": not fully awake).
func (c *Client) WakeUp(ctx context.Context, tags ...string) error {
	_, err := c.WakeUpAnswer(ctx, tags...)
	return err
}

// IsSleeping is GET /is_sleeping.
func (c *Client) IsSleeping(ctx context.Context) (bool, error) {
	b, err := c.callSleepAPI(ctx, http.MethodGet, "/is_sleeping", nil)
	if err != nil {
		return false, err
	}
	var v struct {
		IsSleeping *bool `json:"is_sleeping"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.IsSleeping == nil {
		return false, fmt.Errorf("GET /is_sleeping: unexpected body %q", b)
	}
	return *v.IsSleeping, nil
}

// CollectiveRPC is POST /collective_rpc {"method": method}: the per-worker
// results (nil when the server answered with an empty body).
func (c *Client) CollectiveRPC(ctx context.Context, method string) ([]json.RawMessage, error) {
	b, err := c.call(ctx, http.MethodPost, "/collective_rpc", nil, map[string]string{"method": method})
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	var v struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("POST /collective_rpc %s: unexpected body %q", method, b)
	}
	return v.Results, nil
}

// ErrPrefixCacheNotReset is a /reset_prefix_cache that answered
// {"success": false} (the engine still held blocks) on every try.
var ErrPrefixCacheNotReset = errors.New(`POST /reset_prefix_cache answered {"success": false}: the engine kept prefix-cache blocks (requests still running?)`)

// ResetPrefixCache is POST /reset_prefix_cache. vLLM's source (up to
// 708d0f28) answers 200 with an empty body and does not check the reset;
// a server that answers {"success": false} is asked again (five tries, 100
// ms apart) before the reset fails with ErrPrefixCacheNotReset.
func (c *Client) ResetPrefixCache(ctx context.Context) error {
	for try := 1; ; try++ {
		b, err := c.call(ctx, http.MethodPost, "/reset_prefix_cache", nil, nil)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil
		}
		var v struct {
			Success *bool `json:"success"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.Success == nil {
			return fmt.Errorf("POST /reset_prefix_cache: unexpected body %q", b)
		}
		if *v.Success {
			return nil
		}
		if try == 5 {
			return ErrPrefixCacheNotReset
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("POST /reset_prefix_cache: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
}

// Metrics is GET /metrics, the Prometheus text as served.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	return c.call(ctx, http.MethodGet, "/metrics", nil, nil)
}
