package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/record"
)

// TestNoteCrowded: a failed tok/s ratio of windows other processes
// crowded says so, with each window's share; a quiet machine, a passed
// ratio and another check are left as they were.
func TestNoteCrowded(t *testing.T) {
	checks := func() []record.Check {
		return []record.Check{
			{Name: "after-wake.conc1.tps_ratio", Model: "A", Value: 0.6, Op: ">=", Limit: 0.7, Verdict: "FAIL"},
			{Name: "after-wake.conc4.tps_ratio", Model: "A", Value: 0.9, Op: ">=", Limit: 0.7, Verdict: "PASS"},
			{Name: "after-wake.conc1.ttft_p95", Model: "A", Value: 9, Op: "<=", Limit: 1, Verdict: "FAIL"},
		}
	}
	busy := map[string]record.Window{
		"A-after-wake": {Host: &record.HostLoad{OthersCPUPct: 47}},
		"A-baseline":   {Host: &record.HostLoad{OthersCPUPct: 12}},
	}
	got := NoteCrowded(checks(), ".tps_ratio", busy, "A-after-wake", "A-baseline")
	assert.Equal(t, "other processes took 47 % during A-after-wake and 12 % during A-baseline of the machine's CPU: the ratio may be the machine's, not the server's; rerun on a quieter runner", got[0].Reason)
	assert.Equal(t, "FAIL", got[0].Verdict, "the verdict stands")
	assert.Empty(t, got[1].Reason, "a ratio that passed")
	assert.Empty(t, got[2].Reason, "not a ratio")

	quiet := map[string]record.Window{"A-after-wake": {Host: &record.HostLoad{OthersCPUPct: 24}}, "A-baseline": {}}
	assert.Equal(t, checks(), NoteCrowded(checks(), ".tps_ratio", quiet, "A-after-wake", "A-baseline"), "below BusyOthersPct, or no load read: nothing said")
}
