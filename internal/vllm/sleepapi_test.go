package vllm

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eraServer answers each path with the status and body docs/vllm-api.md
// gives, and records the last request's query by path.
func eraServer(t *testing.T, answers map[string]struct {
	status int
	body   string
}, queries map[string]string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if queries != nil {
			queries[r.URL.Path] = r.URL.RawQuery
		}
		a, ok := answers[r.URL.Path]
		if !ok {
			// FastAPI's answer for a route it lacks.
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"detail":"Not Found"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return New(srv.URL)
}

type answer = struct {
	status int
	body   string
}

// TestSleepAndWakeAnswersPerEra: the releases' empty bodies, the proposed JSON
// (with extra fields tolerated), and a wake that answers "sleeping".
func TestSleepAndWakeAnswersPerEra(t *testing.T) {
	for name, tc := range map[string]struct {
		sleep, wake string
		wantSleep   SleepAnswer
		wantWake    WakeAnswer
	}{
		"A/B empty bodies": {"", "", SleepAnswer{Level: -1}, WakeAnswer{}},
		"C":                {`{"status":"sleeping","level":1}`, `{"status":"awake","tags_woken":null}`, SleepAnswer{"sleeping", 1}, WakeAnswer{Status: "awake"}},
		"C elapsed_ms":     {`{"status":"sleeping","level":1,"elapsed_ms":12.5}`, `{"status":"awake","tags_woken":null,"elapsed_ms":3}`, SleepAnswer{"sleeping", 1}, WakeAnswer{Status: "awake"}},
		"C partial": {`{"status":"sleeping","level":1}`, `{"status":"sleeping","tags_woken":["weights"]}`,
			SleepAnswer{"sleeping", 1}, WakeAnswer{Status: "sleeping", TagsWoken: []string{"weights"}}},
	} {
		t.Run(name, func(t *testing.T) {
			q := map[string]string{}
			c := eraServer(t, map[string]answer{"/sleep": {200, tc.sleep}, "/wake_up": {200, tc.wake}}, q)
			sa, err := c.SleepModeAnswer(t.Context(), 1, SleepKeep)
			require.NoError(t, err)
			assert.Equal(t, tc.wantSleep, sa)
			assert.Equal(t, "level=1&mode=keep", q["/sleep"])
			require.NoError(t, c.SleepMode(t.Context(), 1, ""), "SleepMode takes the same answers")
			wa, err := c.WakeUpAnswer(t.Context(), "weights")
			require.NoError(t, err, "a sleeping answer is an answer, not an error")
			assert.Equal(t, tc.wantWake, wa)
			assert.Equal(t, tc.wantWake.Status == "sleeping", wa.Asleep())
			assert.Equal(t, "tags=weights", q["/wake_up"])
			require.NoError(t, c.WakeUp(t.Context()))
		})
	}
}

func TestSleepAnswerMismatch(t *testing.T) {
	c := eraServer(t, map[string]answer{"/sleep": {200, `{"status":"sleeping","level":2}`}}, nil)
	assert.ErrorContains(t, c.SleepMode(t.Context(), 1, ""), "answered level 2")
	c = eraServer(t, map[string]answer{"/sleep": {200, `{"status":"awake","level":1}`}}, nil)
	assert.ErrorContains(t, c.SleepMode(t.Context(), 1, ""), `status "awake"`)
	c = eraServer(t, map[string]answer{"/wake_up": {200, `{"status":"maybe"}`}}, nil)
	assert.ErrorContains(t, c.WakeUp(t.Context()), "unexpected body")
	// v0.32's validation (#52864): 400 naming query.level (docs/vllm-api.md §2).
	c = eraServer(t, map[string]answer{"/sleep": {400, `{"error":{"message":"1 validation error","type":"Bad Request","param":"query.level","code":400}}`}}, nil)
	var ae *APIError
	require.ErrorAs(t, c.SleepMode(t.Context(), 3, ""), &ae)
	assert.Equal(t, 400, ae.Status)
}

// TestWakeSequenceLastAnswer: the level-2 sequence returns the kv_cache
// step's answer, not the weights step's "sleeping".
func TestWakeSequenceLastAnswer(t *testing.T) {
	var step int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/wake_up":
			step++
			if r.URL.Query().Get("tags") == "weights" {
				w.Write([]byte(`{"status":"sleeping","tags_woken":["weights"]}`))
				return
			}
			w.Write([]byte(`{"status":"awake","tags_woken":["kv_cache"]}`))
		case "/collective_rpc":
			time.Sleep(300 * time.Millisecond) // a slow reload: not a /wake_up call
			w.Write([]byte(`{"results":[null]}`))
		}
	}))
	defer srv.Close()
	began := time.Now()
	a, calls, step2, err := New(srv.URL).WakeSequence(t.Context(), 2)
	took := time.Since(began)
	require.NoError(t, err)
	assert.Positive(t, calls, "the /wake_up calls' time")
	assert.GreaterOrEqual(t, took-calls, 300*time.Millisecond, "the reload is not in the /wake_up calls' time")
	assert.Empty(t, step2)
	assert.Equal(t, WakeAnswer{Status: "awake", TagsWoken: []string{"kv_cache"}}, a)
	assert.Equal(t, 2, step)
}

// TestPauseReleaseEraC: era C's pause, resume, is_paused and KV release
// bodies, and the flat {"error": …} of /pause in the error.
func TestPauseReleaseEraC(t *testing.T) {
	q := map[string]string{}
	c := eraServer(t, map[string]answer{
		"/pause":                   {200, `{"status":"paused"}`},
		"/resume":                  {200, `{"status":"resumed"}`},
		"/is_paused":               {200, `{"is_paused":true}`},
		"/release_kv_cache_memory": {200, `{"status":"kv_cache_released"}`},
	}, q)
	ctx := t.Context()
	require.NoError(t, c.Pause(ctx, SleepWait, false))
	assert.Equal(t, "clear_cache=false&mode=wait", q["/pause"])
	require.NoError(t, c.Pause(ctx, "", true))
	assert.Equal(t, "clear_cache=true", q["/pause"])
	require.NoError(t, c.Resume(ctx))
	p, err := c.IsPaused(ctx)
	require.NoError(t, err)
	assert.True(t, p)
	require.NoError(t, c.ReleaseKVCacheMemory(ctx))

	c = eraServer(t, map[string]answer{
		"/pause":                   {400, `{"error":"Invalid pause mode: x"}`},
		"/release_kv_cache_memory": {500, `{"error":{"message":"release_kv_cache_memory() requires a completed pause first","type":"InternalServerError","param":null,"code":500}}`},
		"/resume":                  {200, `{"status":"paused"}`},
	}, nil)
	err = c.Pause(ctx, "x", true)
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "Invalid pause mode: x", ae.Message, "the flat error body")
	assert.False(t, errors.Is(err, ErrUnsupported))
	err = c.ReleaseKVCacheMemory(ctx)
	assert.ErrorContains(t, err, "requires a completed pause first")
	assert.False(t, errors.Is(err, ErrUnsupported), "a 500 is a refusal, not a missing endpoint")
	assert.ErrorContains(t, c.Resume(ctx), "unexpected body")
}

// TestNewEndpointsUnsupported: a server without the routes (eras A/B: 404;
// a 405 too) is ErrUnsupported, told apart from a failure.
func TestNewEndpointsUnsupported(t *testing.T) {
	c := eraServer(t, map[string]answer{"/resume": {405, `{"detail":"Method Not Allowed"}`}}, nil)
	ctx := t.Context()
	for name, err := range map[string]error{
		"pause":   c.Pause(ctx, "", true),
		"resume":  c.Resume(ctx),
		"release": c.ReleaseKVCacheMemory(ctx),
	} {
		assert.ErrorIs(t, err, ErrUnsupported, name)
		var ae *APIError
		assert.ErrorAs(t, err, &ae, "%s: the server's answer is kept", name)
	}
	_, err := c.IsPaused(ctx)
	assert.ErrorIs(t, err, ErrUnsupported)
	assert.ErrorContains(t, err, "Not Found")
}

// TestSleepEndpointsNeedDevMode: a server without the sleep endpoints
// (vLLM without VLLM_SERVER_DEV_MODE=1 answers 404; a 405 too) fails a
// sleep, a wake and /is_sleeping with an error that names the variable,
// keeps the server's answer, and is an ErrUnsupported.
func TestSleepEndpointsNeedDevMode(t *testing.T) {
	for status, body := range map[int]string{404: `{"detail":"Not Found"}`, 405: `{"detail":"Method Not Allowed"}`} {
		c := eraServer(t, map[string]answer{"/sleep": {status, body}, "/wake_up": {status, body}, "/is_sleeping": {status, body}}, nil)
		ctx := t.Context()
		_, isErr := c.IsSleeping(ctx)
		for name, err := range map[string]error{"sleep": c.Sleep(ctx, 1), "wake_up": c.WakeUp(ctx), "is_sleeping": isErr} {
			assert.ErrorIs(t, err, ErrNoDevMode, "%d %s", status, name)
			assert.ErrorIs(t, err, ErrUnsupported, "%d %s", status, name)
			assert.ErrorContains(t, err, "VLLM_SERVER_DEV_MODE=1", "%d %s: the error says what to set", status, name)
			var ae *APIError
			require.ErrorAs(t, err, &ae, "%d %s: the server's answer is kept", status, name)
			assert.Equal(t, status, ae.Status)
		}
	}
	err := eraServer(t, map[string]answer{"/sleep": {500, `{"error":{"message":"CUDA Error: out of memory","type":"InternalServerError","code":500}}`}}, nil).Sleep(t.Context(), 1)
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNoDevMode), "a 500 is the server's failure, not a missing endpoint")
	assert.False(t, errors.Is(err, ErrSleepModeOff))
	assert.NotContains(t, err.Error(), "VLLM_SERVER_DEV_MODE")
}

// TestSleepModeOffIsNamed: vLLM's refusal of a sleep by a server started
// without --enable-sleep-mode (its engine's assertion, a 500) is
// ErrSleepModeOff, naming the flag, with the server's message kept.
func TestSleepModeOffIsNamed(t *testing.T) {
	c := eraServer(t, map[string]answer{"/sleep": {500, `{"error":{"message":"Sleep mode is not enabled in the model config","type":"InternalServerError","param":null,"code":500}}`}}, nil)
	err := c.Sleep(t.Context(), 1)
	assert.ErrorIs(t, err, ErrSleepModeOff)
	assert.ErrorContains(t, err, "--enable-sleep-mode")
	assert.ErrorContains(t, err, "Sleep mode is not enabled in the model config")
	assert.False(t, errors.Is(err, ErrUnsupported), "the endpoint is there")
}
