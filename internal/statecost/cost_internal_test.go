package statecost

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// TestSleepingPower: max_sleeping_power_w judges the power each model
// holds asleep at each level: the device's power with it asleep less the
// device's with it stopped, the other models as they were. By hand: a
// board of 30 W, the model 15 W asleep at level 1 and 14 W at level 2; B,
// modelled alike, is measured with A asleep beside it (5 W more in every
// reading): the same shares, the same verdicts at a 14.5 W limit (L1
// FAIL, L2 PASS), where the device's own figure failed B alone. Off when
// not set; not evaluated with why where a power or the stopped row is
// absent, failing only as a threshold the user set.
func TestSleepingPower(t *testing.T) {
	cost := func(l1, l2, stopped float64, note string) record.Cost {
		return record.Cost{EnergyNote: note, States: []record.StateCost{
			{State: record.StateL1, PowerW: l1}, {State: record.StateL2, PowerW: l2}, {State: record.StateStopped, PowerW: stopped}}}
	}
	cfg := config.SimDefault()
	assert.Empty(t, stateCostChecks(cfg, "A", cost(45, 44, 30, "")), "off by default")

	cfg.Thresholds.MaxSleepingPowerW = 14.5
	for label, c := range map[string]record.Cost{"A": cost(45, 44, 30, ""), "B": cost(50, 49, 35, "")} {
		cs := stateCostChecks(cfg, label, c)
		require.Len(t, cs, 2)
		assert.Equal(t, "cost.level1.own_power_w", cs[0].Name)
		assert.InDelta(t, 15, cs[0].Value, 1e-12, label)
		assert.InDelta(t, 14, cs[1].Value, 1e-12, label)
		assert.Equal(t, "FAIL", cs[0].Verdict, label)
		assert.Equal(t, "PASS", cs[1].Verdict, label)
	}

	nan := math.NaN()
	cs := stateCostChecks(cfg, "A", cost(nan, nan, nan, "GPU energy counter not available: no memory source"))
	for _, c := range cs {
		assert.Equal(t, record.NotEvaluated, c.Verdict)
		assert.Contains(t, c.Reason, "energy counter")
	}
	noStopped := record.Cost{States: []record.StateCost{{State: record.StateL1, PowerW: 45}, {State: record.StateL2, PowerW: 44}}}
	for _, c := range stateCostChecks(cfg, "A", noStopped) {
		assert.Equal(t, record.NotEvaluated, c.Verdict)
		assert.Contains(t, c.Reason, "stopped not measured")
	}
}
