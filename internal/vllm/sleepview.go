package vllm

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The sleep-mode metric families (docs/vllm-api.md §7). The resource-state
// families are from vLLM's docs/design/engine_sleep_state.md; the
// operation families from .../serve/dev/sleep/metrics.py, in two name sets:
// plain (vllm@47e7f394, no counter) and rl_ (vllm@d26ebba4, with a
// counter). Both are looked for.
const (
	famFullyAwake    = "vllm:engine_fully_awake"
	famResourceState = "vllm:engine_sleep_resource_state"
	famLegacyState   = "vllm:engine_sleep_state"
)

var (
	famInFlight = []string{"vllm:sleep_mode_operations_in_flight", "vllm:rl_sleep_mode_operations_in_flight"}
	famOpTotal  = "vllm:rl_sleep_mode_operations_total"
	famOpDur    = []string{"vllm:sleep_mode_operation_duration_seconds", "vllm:rl_sleep_mode_operation_duration_seconds"}
)

// SleepView is a scrape's account of sleep mode.
//
// Exported is false when neither vllm:engine_fully_awake nor
// vllm:engine_sleep_resource_state is present: vLLM creates those gauges
// only once a snapshot arrives, and no release has them (they are
// proposed, docs/vllm-api.md §0), so absent means "not exported", never
// "not awake". The legacy vllm:engine_sleep_state{sleep_state} is read
// apart: present with its three labels all 0 is "not fully awake" (a
// level-0 pause, a KV-only release; in the proposed API also a partial
// wake or an unknown resource: a release says awake after any wake, so
// /is_sleeping is read first), never "not exported".
type SleepView struct {
	Exported   bool              // the resource-state families are present
	FullyAwake bool              // engine_fully_awake 1 (or, without it, every resource resident and the scheduler running)
	Resources  map[string]string // resource (scheduler, weights, kv_cache, …) → the state marked 1 ("" none)
	Unknown    []string          // resources in state "unknown", sorted: only a restart recovers them
	// OpsExported: an operation family (in-flight gauge, duration
	// histogram or counter) is present, in either name set.
	OpsExported bool
	InFlight    map[string]float64 // operation → operations in flight, those above 0 only
	OpCount     map[string]float64 // operation → observations of its duration histogram
	OpErrors    map[string]float64 // operation → rl_…operations_total{status="error"}
	// Legacy is engine_sleep_state: "awake", "weights_offloaded",
	// "discard_all", "not fully awake" (all three 0), "" (not exported).
	Legacy string
}

// LegacyNotFullyAwake is SleepView.Legacy when engine_sleep_state's labels
// are all 0.
const LegacyNotFullyAwake = "not fully awake"

// splitKey splits a Metrics key name{a="x",b="y"} into its name and labels.
func splitKey(key string) (string, map[string]string) {
	i := strings.IndexByte(key, '{')
	if i < 0 || !strings.HasSuffix(key, "}") {
		return key, nil
	}
	labels := map[string]string{}
	rest := key[i+1 : len(key)-1]
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			break
		}
		name := rest[:eq]
		v, err := strconv.QuotedPrefix(rest[eq+1:])
		if err != nil {
			break
		}
		labels[name], _ = strconv.Unquote(v)
		rest = strings.TrimPrefix(rest[eq+1+len(v):], ",")
	}
	return key[:i], labels
}

// SleepView reads the scrape's sleep-mode families.
func (m Metrics) SleepView() SleepView {
	v := SleepView{Resources: map[string]string{}, InFlight: map[string]float64{}, OpCount: map[string]float64{}, OpErrors: map[string]float64{}}
	fully, haveFully := 0.0, false
	legacy, haveLegacy := "", false
	for _, key := range slices.Sorted(maps.Keys(m)) {
		val := m[key]
		name, l := splitKey(key)
		switch {
		case name == famFullyAwake:
			fully, haveFully = val, true
		case name == famResourceState:
			v.Exported = true
			if _, seen := v.Resources[l["resource"]]; !seen {
				v.Resources[l["resource"]] = ""
			}
			if val == 1 {
				v.Resources[l["resource"]] = l["state"]
			}
		case name == famLegacyState:
			haveLegacy = true
			if val == 1 && legacy == "" {
				legacy = l["sleep_state"]
			}
		case slices.Contains(famInFlight, name):
			v.OpsExported = true
			if val > 0 {
				v.InFlight[l["operation"]] += val
			}
		case name == famOpTotal:
			v.OpsExported = true
			if l["status"] == "error" {
				v.OpErrors[l["operation"]] += val
			}
		case slices.ContainsFunc(famOpDur, func(f string) bool { return name == f+"_count" }):
			v.OpsExported = true
			v.OpCount[l["operation"]] += val
		}
	}
	if haveFully {
		v.Exported = true
		v.FullyAwake = fully == 1
	} else if v.Exported {
		v.FullyAwake = v.Resources["scheduler"] == "running" && v.Resources["weights"] == "resident" && v.Resources["kv_cache"] == "resident"
	}
	for r, s := range v.Resources {
		if s == "unknown" {
			v.Unknown = append(v.Unknown, r)
		}
	}
	slices.Sort(v.Unknown)
	if haveLegacy {
		v.Legacy = legacy
		if legacy == "" {
			v.Legacy = LegacyNotFullyAwake
		}
	}
	return v
}

// NotResident lists the resources not in their awake state (scheduler not
// running, memory not resident) as "resource=state", sorted: what a wake
// that answered "sleeping" left asleep.
func (v SleepView) NotResident() []string {
	var out []string
	for _, r := range slices.Sorted(maps.Keys(v.Resources)) {
		s := v.Resources[r]
		if s != "running" && s != "resident" {
			if s == "" {
				s = "none marked"
			}
			out = append(out, r+"="+s)
		}
	}
	return out
}

// State is the one-word sleep state the scrape shows. From the resource
// states where exported: "awake"; "unknown" (any resource unknown);
// "weights_offloaded" (level 1) and "discard_all" (level 2) as the legacy
// gauge names them; "paused" (the scheduler paused, all memory resident: a
// level-0 sleep or /pause); "kv_released" (weights resident, the KV cache
// released: a KV-only release, or a level-1/2 wake of the weights alone);
// "partial" (any other mix). Else from the legacy gauge: its label, or
// "not fully awake" when all three are 0; "" when neither is exported.
func (v SleepView) State() string {
	if !v.Exported {
		return v.Legacy
	}
	w, kv := v.Resources["weights"], v.Resources["kv_cache"]
	switch {
	case len(v.Unknown) > 0:
		return "unknown"
	case v.FullyAwake:
		return "awake"
	case w == "offloaded" && kv == "released":
		return "weights_offloaded"
	case w == "discarded" && kv == "released":
		return "discard_all"
	case w == "resident" && kv == "resident":
		return "paused"
	case w == "resident" && kv == "released":
		return "kv_released"
	}
	return "partial"
}
