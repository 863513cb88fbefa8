package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ErrUnsupported means the server lacks the endpoint: it answered 404 or
// 405 (an older vLLM without the route, or one started without
// VLLM_SERVER_DEV_MODE=1). Callers say "not supported" rather than fail.
var ErrUnsupported = errors.New("endpoint not supported by this server")

// ErrNoDevMode means the server answered 404 or 405 on a sleep endpoint
// (/sleep, /wake_up, /is_sleeping): vLLM mounts them only with
// VLLM_SERVER_DEV_MODE=1 in the server's environment (docs/vllm-api.md:
// every release from 0.7.3 on has them so), and wakebench sets it for the
// servers it starts, so the variable did not reach this one (a wrapper
// that drops the environment, a server wakebench did not start) or its
// vLLM is too old. Unlike ErrUnsupported's optional endpoints, a sleep
// cannot do without them: callers fail. It is an ErrUnsupported too.
var ErrNoDevMode error = noDevMode{}

type noDevMode struct{}

func (noDevMode) Error() string {
	return "the server has no sleep endpoints: start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (a vLLM older than 0.7.3 may have none)"
}

func (noDevMode) Is(target error) bool { return target == ErrUnsupported }

// ErrSleepModeOff means the server refused /sleep because it runs without
// sleep mode (--enable-sleep-mode not given, or turned off by a later
// --no-enable-sleep-mode): vLLM's engine asserts enable_sleep_mode ("Sleep
// mode is not enabled in the model config", a 500).
var ErrSleepModeOff = errors.New("the server runs without sleep mode: start vLLM with --enable-sleep-mode")

// callSleepAPI is call for a sleep endpoint (/sleep, /wake_up,
// /is_sleeping): a 404 or 405 wraps ErrNoDevMode and an answer saying
// sleep mode is not enabled ErrSleepModeOff, each with the server's
// error, so the error says what to change.
func (c *Client) callSleepAPI(ctx context.Context, method, path string, query url.Values) ([]byte, error) {
	st, b, err := c.do(ctx, method, path, query, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if st < 400 {
		return b, nil
	}
	ae := ParseError(st, b)
	switch {
	case st == http.StatusNotFound || st == http.StatusMethodNotAllowed:
		return nil, fmt.Errorf("%s %s: %w: %w", method, path, ae, ErrNoDevMode)
	case strings.Contains(strings.ToLower(ae.Error()), "sleep mode is not enabled"):
		return nil, fmt.Errorf("%s %s: %w: %w", method, path, ae, ErrSleepModeOff)
	}
	return nil, fmt.Errorf("%s %s: %w", method, path, ae)
}

// SleepAnswer is what POST /sleep answered. vLLM ≥ 0.32 (#52864;
// docs/vllm-api.md §2; route test
// test_sleep_route_response_and_engine_arguments) answers 200
// {"status":"sleeping","level":N}; v0.31 and older answer 200 with an
// empty body. Extra fields (the unattributed "elapsed_ms" variant, §1) are
// ignored.
type SleepAnswer struct {
	Status string // "sleeping"; "" for an empty body (v0.31 and older)
	Level  int    // the level the server says it slept at; -1 when it did not say
}

// WakeAnswer is what POST /wake_up answered. vLLM ≥ 0.32 (#52864; docs/vllm-api.md §3;
// test_wake_route_maps_engine_result_without_state_query) answers 200
// {"status":"awake"|"sleeping","tags_woken":<the request's tags or null>}:
// "sleeping" means the engine is not fully awake (a partial wake, or tags
// that were not asleep). tags_woken echoes the request, it does not name
// what is still asleep. v0.31 and older answer 200 with an empty body.
type WakeAnswer struct {
	Status    string   // "awake", "sleeping"; "" for an empty body (v0.31 and older)
	TagsWoken []string // the request's tags as echoed (nil: none given, or not said)
}

// Asleep reports whether the server said it is not fully awake.
func (a WakeAnswer) Asleep() bool { return a.Status == "sleeping" }

// SleepModeAnswer is SleepMode, returning the server's answer. A body that
// is not empty must say status "sleeping" and, when it names a level, the
// level asked for.
func (c *Client) SleepModeAnswer(ctx context.Context, level int, mode string) (SleepAnswer, error) {
	q := url.Values{"level": {strconv.Itoa(level)}}
	if mode != "" {
		q.Set("mode", mode)
	}
	a := SleepAnswer{Level: -1}
	b, err := c.callSleepAPI(ctx, http.MethodPost, "/sleep", q)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return a, err
	}
	var v struct {
		Status string `json:"status"`
		Level  *int   `json:"level"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Status == "" {
		return a, fmt.Errorf("POST /sleep: unexpected body %q", b)
	}
	a.Status = v.Status
	if v.Level != nil {
		a.Level = *v.Level
	}
	if a.Status != "sleeping" {
		return a, fmt.Errorf("POST /sleep?level=%d: answered status %q, not \"sleeping\"", level, a.Status)
	}
	if v.Level != nil && a.Level != level {
		return a, fmt.Errorf("POST /sleep?level=%d: answered level %d", level, a.Level)
	}
	return a, nil
}

// WakeUpAnswer is WakeUp, returning the server's answer. "sleeping" is an
// answer, not an error: the caller decides whether this step had to wake
// the server fully (the level-2 sequence's first step does not).
func (c *Client) WakeUpAnswer(ctx context.Context, tags ...string) (WakeAnswer, error) {
	var q url.Values
	if len(tags) > 0 {
		q = url.Values{"tags": tags}
	}
	var a WakeAnswer
	b, err := c.callSleepAPI(ctx, http.MethodPost, "/wake_up", q)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return a, err
	}
	var v struct {
		Status    string   `json:"status"`
		TagsWoken []string `json:"tags_woken"`
	}
	if err := json.Unmarshal(b, &v); err != nil || (v.Status != "awake" && v.Status != "sleeping") {
		return a, fmt.Errorf("POST /wake_up: unexpected body %q", b)
	}
	return WakeAnswer{Status: v.Status, TagsWoken: v.TagsWoken}, nil
}

// callOptional is call for an endpoint older servers lack: a 404 or 405
// wraps ErrUnsupported (and the server's error).
func (c *Client) callOptional(ctx context.Context, method, path string, query url.Values) ([]byte, error) {
	st, b, err := c.do(ctx, method, path, query, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if st == http.StatusNotFound || st == http.StatusMethodNotAllowed {
		return nil, fmt.Errorf("%s %s: %w (%w)", method, path, ErrUnsupported, ParseError(st, b))
	}
	if st >= 400 {
		return nil, fmt.Errorf("%s %s: %w", method, path, ParseError(st, b))
	}
	return b, nil
}

// status reads {"status": …} from an optional endpoint's answer and checks
// it is want; an empty body is taken as success.
func status(method, path string, b []byte, want string) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var v struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Status != want {
		return fmt.Errorf("%s %s: unexpected body %q (want status %q)", method, path, b, want)
	}
	return nil
}

// Pause is POST /pause?mode=M&clear_cache=B (vLLM's RLHF router,
// vllm@6fbea117 vllm/entrypoints/serve/dev/rlhf/api_router.py;
// docs/vllm-api.md §5): the scheduler stops, nothing is freed. mode ""
// sends none (the server's default, abort). 200 {"status":"paused"}; its
// errors are flat {"error": "…"} bodies (400 for a ValueError, 500 else),
// which become an *APIError's Message. ErrUnsupported where the route is
// missing.
func (c *Client) Pause(ctx context.Context, mode string, clearCache bool) error {
	q := url.Values{"clear_cache": {strconv.FormatBool(clearCache)}}
	if mode != "" {
		q.Set("mode", mode)
	}
	b, err := c.callOptional(ctx, http.MethodPost, "/pause", q)
	if err != nil {
		return err
	}
	return status(http.MethodPost, "/pause", b, "paused")
}

// Resume is POST /resume: 200 {"status":"resumed"} (same router).
func (c *Client) Resume(ctx context.Context) error {
	b, err := c.callOptional(ctx, http.MethodPost, "/resume", nil)
	if err != nil {
		return err
	}
	return status(http.MethodPost, "/resume", b, "resumed")
}

// IsPaused is GET /is_paused: 200 {"is_paused": bool} (same router).
func (c *Client) IsPaused(ctx context.Context) (bool, error) {
	b, err := c.callOptional(ctx, http.MethodGet, "/is_paused", nil)
	if err != nil {
		return false, err
	}
	var v struct {
		IsPaused *bool `json:"is_paused"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.IsPaused == nil {
		return false, fmt.Errorf("GET /is_paused: unexpected body %q", b)
	}
	return *v.IsPaused, nil
}

// ReleaseKVCacheMemory is POST /release_kv_cache_memory (vLLM PR #44890;
// docs/vllm-api.md §6): it discards the KV cache and keeps the weights,
// only after a completed pause (level 0 or /pause) with nothing else
// asleep, else 500. 200 {"status":"kv_cache_released"};
// /wake_up?tags=kv_cache restores it. ErrUnsupported where the route is
// missing (every vLLM before #44890).
func (c *Client) ReleaseKVCacheMemory(ctx context.Context) error {
	b, err := c.callOptional(ctx, http.MethodPost, "/release_kv_cache_memory", nil)
	if err != nil {
		return err
	}
	return status(http.MethodPost, "/release_kv_cache_memory", b, "kv_cache_released")
}
