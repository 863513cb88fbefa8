package vllm

import (
	"fmt"
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
