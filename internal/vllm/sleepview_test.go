package vllm

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eraCMetrics is a scrape of the proposed API (docs/vllm-api.md §7) with the given
// resource states (resource → state), fully-awake value, legacy labels
// (nil: not exported, as the Rust frontend) and in-flight operations, in
// the plain or the rl_ name set.
func eraCMetrics(t *testing.T, states map[string]string, fully int, legacy []int, inFlight map[string]int, rl bool) Metrics {
	t.Helper()
	all := map[string][]string{"scheduler": {"running", "paused"}, "weights": {"resident", "offloaded", "discarded", "unknown"}, "kv_cache": {"resident", "released", "unknown"}}
	var b strings.Builder
	b.WriteString("# TYPE vllm:engine_fully_awake gauge\n")
	fmt.Fprintf(&b, "vllm:engine_fully_awake{engine=\"0\",model_name=\"m\"} %d\n", fully)
	b.WriteString("# TYPE vllm:engine_sleep_resource_state gauge\n")
	for r, ss := range all {
		for _, s := range ss {
			v := 0
			if states[r] == s {
				v = 1
			}
			fmt.Fprintf(&b, "vllm:engine_sleep_resource_state{engine=\"0\",model_name=\"m\",resource=%q,state=%q} %d\n", r, s, v)
		}
	}
	if legacy != nil {
		b.WriteString("# TYPE vllm:engine_sleep_state gauge\n")
		for i, s := range []string{"awake", "weights_offloaded", "discard_all"} {
			fmt.Fprintf(&b, "vllm:engine_sleep_state{engine=\"0\",model_name=\"m\",sleep_state=%q} %d\n", s, legacy[i])
		}
	}
	pre := "vllm:sleep_mode_"
	if rl {
		pre = "vllm:rl_sleep_mode_"
		b.WriteString("# TYPE " + pre + "operations_total counter\n")
		b.WriteString(pre + "operations_total{operation=\"wake\",status=\"error\"} 2\n")
		b.WriteString(pre + "operations_total{operation=\"wake\",status=\"success\"} 5\n")
	}
	b.WriteString("# TYPE " + pre + "operations_in_flight gauge\n")
	for _, op := range []string{"sleep", "wake", "release_kv_cache_memory"} {
		fmt.Fprintf(&b, "%soperations_in_flight{operation=%q} %d\n", pre, op, inFlight[op])
	}
	b.WriteString("# TYPE " + pre + "operation_duration_seconds histogram\n")
	b.WriteString(pre + "operation_duration_seconds_bucket{operation=\"sleep\",le=\"+Inf\"} 3\n")
	b.WriteString(pre + "operation_duration_seconds_sum{operation=\"sleep\"} 1.5\n")
	b.WriteString(pre + "operation_duration_seconds_count{operation=\"sleep\"} 3\n")
	m, err := ParseMetrics([]byte(b.String()))
	require.NoError(t, err)
	return m
}

func TestSleepViewEraC(t *testing.T) {
	awake := map[string]string{"scheduler": "running", "weights": "resident", "kv_cache": "resident"}
	for name, tc := range map[string]struct {
		states  map[string]string
		fully   int
		legacy  []int
		state   string
		legacyS string
		asleep  []string
		unknown []string
	}{
		"awake":            {awake, 1, []int{1, 0, 0}, "awake", "awake", nil, nil},
		"level 1":          {map[string]string{"scheduler": "paused", "weights": "offloaded", "kv_cache": "released"}, 0, []int{0, 1, 0}, "weights_offloaded", "weights_offloaded", []string{"kv_cache=released", "scheduler=paused", "weights=offloaded"}, nil},
		"level 2":          {map[string]string{"scheduler": "paused", "weights": "discarded", "kv_cache": "released"}, 0, []int{0, 0, 1}, "discard_all", "discard_all", []string{"kv_cache=released", "scheduler=paused", "weights=discarded"}, nil},
		"level 0":          {map[string]string{"scheduler": "paused", "weights": "resident", "kv_cache": "resident"}, 0, []int{0, 0, 0}, "paused", LegacyNotFullyAwake, []string{"scheduler=paused"}, nil},
		"kv only":          {map[string]string{"scheduler": "paused", "weights": "resident", "kv_cache": "released"}, 0, []int{0, 0, 0}, "kv_released", LegacyNotFullyAwake, []string{"kv_cache=released", "scheduler=paused"}, nil},
		"partial":          {map[string]string{"scheduler": "paused", "weights": "offloaded", "kv_cache": "resident"}, 0, []int{0, 0, 0}, "partial", LegacyNotFullyAwake, []string{"scheduler=paused", "weights=offloaded"}, nil},
		"unknown":          {map[string]string{"scheduler": "paused", "weights": "unknown", "kv_cache": "unknown"}, 0, []int{0, 0, 0}, "unknown", LegacyNotFullyAwake, []string{"kv_cache=unknown", "scheduler=paused", "weights=unknown"}, []string{"kv_cache", "weights"}},
		"rust (no legacy)": {map[string]string{"scheduler": "paused", "weights": "resident", "kv_cache": "resident"}, 0, nil, "paused", "", []string{"scheduler=paused"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			m := eraCMetrics(t, tc.states, tc.fully, tc.legacy, nil, false)
			v := m.SleepView()
			assert.True(t, v.Exported)
			assert.Equal(t, tc.fully == 1, v.FullyAwake)
			assert.Equal(t, tc.state, v.State())
			assert.Equal(t, tc.state, m.SleepState())
			assert.Equal(t, tc.legacyS, v.Legacy)
			assert.Equal(t, tc.asleep, v.NotResident())
			assert.Equal(t, tc.unknown, v.Unknown)
			assert.Empty(t, v.InFlight)
		})
	}
}

func TestSleepViewOperations(t *testing.T) {
	awake := map[string]string{"scheduler": "running", "weights": "resident", "kv_cache": "resident"}
	for _, rl := range []bool{false, true} {
		v := eraCMetrics(t, awake, 1, []int{1, 0, 0}, map[string]int{"wake": 1}, rl).SleepView()
		assert.True(t, v.OpsExported)
		assert.Equal(t, map[string]float64{"wake": 1}, v.InFlight, "rl_ %v", rl)
		assert.Equal(t, map[string]float64{"sleep": 3}, v.OpCount, "rl_ %v", rl)
		if rl {
			assert.Equal(t, map[string]float64{"wake": 2}, v.OpErrors)
		}
	}
}

// TestSleepViewLegacy: eras A/B export only engine_sleep_state; all three
// 0 is "not fully awake", and a scrape without it says nothing.
func TestSleepViewLegacy(t *testing.T) {
	legacy := func(a, w, d int) Metrics {
		return Metrics{
			`vllm:engine_sleep_state{sleep_state="awake"}`:             float64(a),
			`vllm:engine_sleep_state{sleep_state="weights_offloaded"}`: float64(w),
			`vllm:engine_sleep_state{sleep_state="discard_all"}`:       float64(d),
		}
	}
	v := legacy(0, 0, 0).SleepView()
	assert.False(t, v.Exported, "the new families are absent")
	assert.False(t, v.OpsExported)
	assert.Equal(t, LegacyNotFullyAwake, v.State(), "all zero is not fully awake, never not exported")
	assert.Equal(t, "discard_all", legacy(0, 0, 1).SleepState())
	assert.Equal(t, "awake", legacy(1, 0, 0).SleepState())
	assert.Equal(t, "", Metrics{"vllm:num_requests_running": 0}.SleepState())
	assert.Empty(t, Metrics{}.SleepView().NotResident())
}

func TestSplitKey(t *testing.T) {
	n, l := splitKey(`vllm:x{a="1",b="q\"uo,te"}`)
	assert.Equal(t, "vllm:x", n)
	assert.Equal(t, map[string]string{"a": "1", "b": `q"uo,te`}, l)
	n, l = splitKey("vllm:y")
	assert.Equal(t, "vllm:y", n)
	assert.Nil(t, l)
}

// TestRatesOver, by hand: over a window 30 draft tokens with 21 accepted
// (0.7); 80 of 100 prompt tokens cached (0.8); 4 requests finished with
// 132 tokens generated, 128 of them past each first, in 0.4 s of decode
// time (320 tok/s). A server without a family gives NaN; one that exports
// the spec counters and decoded past the first tokens but drafted nothing
// has acceptance 0 (a drafter gone); the legacy prefix names are read where
// the new ones are absent.
func TestRatesOver(t *testing.T) {
	a := Metrics{"vllm:spec_decode_num_draft_tokens_total": 100, "vllm:spec_decode_num_accepted_tokens_total": 50,
		"vllm:prefix_cache_queries_total": 1000, "vllm:prefix_cache_hits_total": 500,
		"vllm:generation_tokens_total": 1000, "vllm:request_decode_time_seconds_sum": 2, "vllm:request_decode_time_seconds_count": 10}
	b := Metrics{"vllm:spec_decode_num_draft_tokens_total": 130, "vllm:spec_decode_num_accepted_tokens_total": 71,
		"vllm:prefix_cache_queries_total": 1100, "vllm:prefix_cache_hits_total": 580,
		"vllm:generation_tokens_total": 1132, "vllm:request_decode_time_seconds_sum": 2.4, "vllm:request_decode_time_seconds_count": 14}
	r := RatesOver(a.Counters(), b.Counters())
	assert.InDelta(t, 0.7, r.SpecAcceptance, 1e-12)
	assert.InDelta(t, 0.8, r.PrefixHitRate, 1e-12)
	assert.InDelta(t, 320, r.DecodeTPS, 1e-9)

	none := RatesOver(Metrics{}.Counters(), Metrics{}.Counters())
	assert.True(t, math.IsNaN(none.SpecAcceptance) && math.IsNaN(none.PrefixHitRate) && math.IsNaN(none.DecodeTPS))

	b["vllm:spec_decode_num_draft_tokens_total"], b["vllm:spec_decode_num_accepted_tokens_total"] = 100, 50
	assert.Zero(t, RatesOver(a.Counters(), b.Counters()).SpecAcceptance, "decoded, drafted nothing")

	legacy := func(m Metrics) Metrics {
		return Metrics{"vllm:gpu_prefix_cache_queries_total": m["vllm:prefix_cache_queries_total"], "vllm:gpu_prefix_cache_hits_total": m["vllm:prefix_cache_hits_total"]}
	}
	assert.InDelta(t, 0.8, RatesOver(legacy(a).Counters(), legacy(b).Counters()).PrefixHitRate, 1e-12)
}
