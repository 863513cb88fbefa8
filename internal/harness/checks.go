package harness

import (
	"fmt"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// offPhaseChecks are the checks of the thresholds the user set whose phase the
// config turns off (max_sleeping_power_w with protocol.cost_dwell_s 0, say):
// each NOT EVALUATED with the key that turned it off, and required, so a
// limit the user asked for is never dropped in silence (as the traffic
// thresholds with traffic.rate 0: package traffic's notEvaluatedTraffic). A limit set to 0
// turns the threshold off, so it adds nothing. Only phases the config
// turns off are listed: none of them writes a check of these names. (The
// soak is not: it runs by its own test, TestSoak, whatever the config
// says, and one config serves both; its threshold is judged where it runs.)
func offPhaseChecks(cfg config.Config) []record.Check {
	p := cfg.Protocol
	var out []record.Check
	off := func(name, label, op string, limit float64, why string) {
		if limit <= 0 { // the user turned the threshold off
			return
		}
		out = append(out, record.Check{Name: name, Model: label, Op: op, Limit: limit, Verdict: record.NotEvaluated,
			Reason: why + ": the threshold you set cannot be evaluated", Required: true})
	}
	for _, m := range cfg.Models {
		l, t := m.Label, cfg.ThresholdsFor(m.Label)
		if p.CostDwellS == 0 && cfg.ThresholdSetByUser(l, "max_sleeping_power_w") {
			for _, name := range []string{"cost.level1.own_power_w", "cost.level2.own_power_w"} {
				off(name, l, "<=", t.MaxSleepingPowerW, "protocol.cost_dwell_s is 0: the state-cost phase is off")
			}
		}
		if p.SleepL0Cycles == 0 && cfg.ThresholdSetByUser(l, "max_l0_wake_to_first_token_s") {
			off("sleep.level0.to_first_token_s.p95", l, "<=", t.MaxL0WakeToFirstTokenS, "protocol.sleep_l0_cycles is 0: the level-0 cycles are off")
		}
		if p.KVReleaseCycles == 0 && cfg.ThresholdSetByUser(l, "max_kv_wake_to_first_token_s") {
			off("kv_release.to_first_token_s.p95", l, "<=", t.MaxKVWakeToFirstTokenS, "protocol.kv_release_cycles is 0: the KV-only release cycles are off")
		}
	}
	if !cfg.Kubernetes.On() && cfg.ThresholdSetByUser("", "max_pod_switch_routable_s") {
		off("kubernetes.switch.routable_s.p95", "", "<=", cfg.Thresholds.MaxPodSwitchRoutableS, "kubernetes.control_plane is empty: the Kubernetes phase is off")
	}
	return out
}

// unverifiedCheck is the check of a model whose sleep-mode verifications after
// a sleep or wake (no resource left unknown, no operation hung) could not
// all be made, its /metrics unreadable (why, in the order tried): NOT
// EVALUATED with the reason, and required, so that a hung operation a
// broken /metrics hides is never a silent PASS.
func unverifiedCheck(label string, why []string) record.Check {
	reason := fmt.Sprintf("%d sleep-mode verification(s) could not be made; first: %s", len(why), why[0])
	return record.Check{Name: "engine.verified", Model: label, Op: "==", Limit: 0, Verdict: record.NotEvaluated, Reason: reason, Required: true}
}
