package pool

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/vllm"
)

// metricsServer serves the proposed API's /metrics (docs/vllm-api.md §7): the resource
// states given, and the in-flight gauge of op at inFlight(n) on the n-th
// scrape (rl_ name set when rl).
func metricsServer(t *testing.T, states map[string]string, op string, inFlight func(n int64) int, rl bool) metricsRead {
	t.Helper()
	var n atomic.Int64
	return metricsOfHandler(t, func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		var b strings.Builder
		fully := 0
		if states["scheduler"] == "running" && states["weights"] == "resident" && states["kv_cache"] == "resident" {
			fully = 1
		}
		fmt.Fprintf(&b, "# TYPE vllm:engine_fully_awake gauge\nvllm:engine_fully_awake{engine=\"0\",model_name=\"m\"} %d\n", fully)
		b.WriteString("# TYPE vllm:engine_sleep_resource_state gauge\n")
		for res, st := range states {
			fmt.Fprintf(&b, "vllm:engine_sleep_resource_state{engine=\"0\",model_name=\"m\",resource=%q,state=%q} 1\n", res, st)
		}
		pre := "vllm:sleep_mode_"
		if rl {
			pre = "vllm:rl_sleep_mode_"
		}
		fmt.Fprintf(&b, "# TYPE %soperations_in_flight gauge\n%soperations_in_flight{operation=%q} %d\n", pre, pre, op, inFlight(k))
		w.Write([]byte(b.String()))
	})
}

// metricsOfHandler is the /metrics read of a server answering with h.
func metricsOfHandler(t *testing.T, h http.HandlerFunc) metricsRead {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := vllm.New(srv.URL)
	t.Cleanup(c.CloseIdle)
	return func(ctx context.Context) (vllm.Metrics, error) {
		text, err := c.Metrics(ctx)
		if err != nil {
			return nil, err
		}
		return vllm.ParseMetrics(text)
	}
}

var awake = map[string]string{"scheduler": "running", "weights": "resident", "kv_cache": "resident"}

func zero(int64) int { return 0 }

func TestCheckEngineUnknownResource(t *testing.T) {
	read := metricsServer(t, map[string]string{"scheduler": "paused", "weights": "unknown", "kv_cache": "unknown"}, "sleep", zero, false)
	_, _, err := checkEngine(t.Context(), "A", "sleep", read, time.Millisecond)
	require.Error(t, err)
	assert.ErrorContains(t, err, "model A: resource kv_cache, weights in state unknown")
	assert.ErrorContains(t, err, "only a restart recovers")
}

// TestCheckEngineHungOperation: an operation still in flight on the
// re-read is named, in either name set; one that ends by then is not.
func TestCheckEngineHungOperation(t *testing.T) {
	for _, rl := range []bool{false, true} {
		read := metricsServer(t, awake, "wake", func(int64) int { return 1 }, rl)
		t0 := time.Now()
		_, _, err := checkEngine(t.Context(), "A", "wake", read, 60*time.Millisecond)
		assert.ErrorContains(t, err, "model A: hung sleep-mode operation wake (1 in flight)", "rl_ %v", rl)
		assert.GreaterOrEqual(t, time.Since(t0), 120*time.Millisecond, "re-read after 2 × poll")

		read = metricsServer(t, awake, "wake", func(n int64) int { return int(2 - min(n, 2)) }, rl) // 1, then 0
		_, why, err := checkEngine(t.Context(), "A", "wake", read, time.Millisecond)
		assert.NoError(t, err, "a gauge that drops by the re-read is no hang")
		assert.Empty(t, why)
	}
	read := metricsServer(t, awake, "wake", func(int64) int { return 1 }, false)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, _, err := checkEngine(ctx, "A", "wake", read, time.Hour)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the wait ends with ctx")
	assert.Less(t, time.Since(t0), 10*time.Second)
}

func TestCheckEngineNotExported(t *testing.T) {
	read := metricsOfHandler(t, func(w http.ResponseWriter, r *http.Request) {
		// Era A/B: the legacy gauge only, all zero (a level-0 pause).
		w.Write([]byte("vllm:engine_sleep_state{sleep_state=\"awake\"} 0\nvllm:engine_sleep_state{sleep_state=\"weights_offloaded\"} 0\nvllm:engine_sleep_state{sleep_state=\"discard_all\"} 0\n"))
	})
	_, why, err := checkEngine(t.Context(), "A", "sleep", read, time.Millisecond)
	assert.NoError(t, err)
	assert.Empty(t, why, "nothing exported, nothing to verify: the answer stands")
	err = wakeVerdict(t.Context(), vllm.WakeAnswer{Status: "sleeping"}, read, sleptBy(1))
	assert.ErrorContains(t, err, "still asleep: weights, kv_cache, scheduling (what the pool slept; the server exports no resource state)")
}

// TestCheckEngineUnreadable: a /metrics that answers 500 or garbage is
// no pass: the verification it left undone is named (the run reports it
// NOT EVALUATED), where the same server's hung operation with readable
// metrics is an error.
func TestCheckEngineUnreadable(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"500":     func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
		"garbage": func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("{{{ not prometheus\n")) },
	} {
		t.Run(name, func(t *testing.T) {
			read := metricsOfHandler(t, h)
			_, why, err := checkEngine(t.Context(), "A", "wake", read, time.Millisecond)
			assert.NoError(t, err)
			assert.Contains(t, why, "after wake: GET /metrics: ")
			assert.Contains(t, why, "no check for an unknown resource, a hung operation or an errored one could be made")
		})
	}
}

// TestWakeVerdict: only a "sleeping" answer fails, naming what the
// resource-state metric shows still asleep.
func TestWakeVerdict(t *testing.T) {
	read := metricsServer(t, map[string]string{"scheduler": "paused", "weights": "resident", "kv_cache": "released"}, "wake", zero, false)
	for _, a := range []vllm.WakeAnswer{{}, {Status: "awake", TagsWoken: []string{"kv_cache"}}} {
		assert.NoError(t, wakeVerdict(t.Context(), a, read, sleptBy(2)), "%+v", a)
	}
	err := wakeVerdict(t.Context(), vllm.WakeAnswer{Status: "sleeping", TagsWoken: []string{"kv_cache"}}, read, sleptBy(2))
	assert.ErrorContains(t, err, `answered {"status":"sleeping"} (tags woken: kv_cache): not fully awake; still asleep: kv_cache=released, scheduler=paused`)
}

// TestNotFullyAwakeFailsAWakeThatSaysSo: a wake answered and /is_sleeping
// false, but the server's own state says it is not fully awake (a KV
// cache still released; the proposed engine_fully_awake 0, or the legacy gauge
// with all three labels 0): a failed wake naming what is not resident. A
// fully awake server and one that exports nothing pass.
func TestNotFullyAwakeFailsAWakeThatSaysSo(t *testing.T) {
	zero := func(int64) int { return 0 }
	awake := metricsServer(t, map[string]string{"scheduler": "running", "weights": "resident", "kv_cache": "resident"}, "wake", zero, false)
	assert.NoError(t, notFullyAwake(t.Context(), awake))
	partial := metricsServer(t, map[string]string{"scheduler": "running", "weights": "resident", "kv_cache": "released"}, "wake", zero, false)
	err := notFullyAwake(t.Context(), partial)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "vllm:engine_fully_awake is 0: kv_cache=released")
	legacy := func(context.Context) (vllm.Metrics, error) {
		return vllm.ParseMetrics([]byte("vllm:engine_sleep_state{sleep_state=\"awake\"} 0\nvllm:engine_sleep_state{sleep_state=\"weights_offloaded\"} 0\nvllm:engine_sleep_state{sleep_state=\"discard_all\"} 0\n"))
	}
	assert.ErrorContains(t, notFullyAwake(t.Context(), legacy), "all three labels 0")
	none := func(context.Context) (vllm.Metrics, error) {
		return vllm.ParseMetrics([]byte("vllm:num_requests_running 0\n"))
	}
	assert.NoError(t, notFullyAwake(t.Context(), none), "nothing exported: the wake's own answer stands")
}
