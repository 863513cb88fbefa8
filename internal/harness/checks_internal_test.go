package harness

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// TestOffPhasesKeepTheUsersThresholds: a threshold the user set whose phase
// the config turns off is a required NOT EVALUATED check naming the key
// (max_sleeping_power_w with cost_dwell_s 0 once gave no check and a PASS);
// one left at its default, or whose phase runs, adds nothing.
func TestOffPhasesKeepTheUsersThresholds(t *testing.T) {
	cfg := config.SimDefault()
	assert.Empty(t, offPhaseChecks(cfg), "nothing set by the user")

	cfg.Protocol.CostDwellS, cfg.Protocol.SleepL0Cycles, cfg.Protocol.KVReleaseCycles = 0, 0, 0
	cfg.Thresholds.MaxSleepingPowerW, cfg.Thresholds.MaxL0WakeToFirstTokenS, cfg.Thresholds.MaxPodSwitchRoutableS = 18, 2, 5
	cfg.UserThresholds = []string{"max_sleeping_power_w", "max_l0_wake_to_first_token_s", "max_pod_switch_routable_s"}
	got := map[string]record.Check{}
	for _, c := range offPhaseChecks(cfg) {
		assert.Equal(t, record.NotEvaluated, c.Verdict, c.Name)
		assert.True(t, c.Fails(), "%s: required", c.Name)
		got[c.Name+"/"+c.Model] = c
	}
	for _, m := range cfg.Models {
		assert.Contains(t, got["cost.level1.own_power_w/"+m.Label].Reason, "protocol.cost_dwell_s is 0")
		assert.Equal(t, 18.0, got["cost.level2.own_power_w/"+m.Label].Limit)
		assert.Contains(t, got["sleep.level0.to_first_token_s.p95/"+m.Label].Reason, "protocol.sleep_l0_cycles is 0")
		assert.NotContains(t, got, "kv_release.to_first_token_s.p95/"+m.Label, "left at its default: nothing to keep")
	}
	assert.Contains(t, got["kubernetes.switch.routable_s.p95/"].Reason, "kubernetes.control_plane is empty")
	assert.Len(t, got, 3*len(cfg.Models)+1)

	cfg.Thresholds.MaxSleepingPowerW = 0 // set to 0 by the user: the threshold is off
	for _, c := range offPhaseChecks(cfg) {
		assert.NotContains(t, c.Name, "cost.", "a limit of 0 is off, not required")
	}

	cfg.Protocol.CostDwellS, cfg.Protocol.SleepL0Cycles = 1, 3
	cfg.Kubernetes.ControlPlane = "local"
	assert.Empty(t, offPhaseChecks(cfg), "the phases run: their own checks judge the thresholds")
}
