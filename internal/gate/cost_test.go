package gate

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// TestSleepingPower: max_sleeping_power_w judges each level's power asleep
// (a model drawing more asleep at level 1 fails there); off when not set;
// not evaluated with the energy note where the figure is absent, failing
// only as a threshold the user set.
func TestSleepingPower(t *testing.T) {
	cost := func(l1, l2 float64, note string) record.Cost {
		return record.Cost{EnergyNote: note, States: []record.StateCost{
			{State: record.StateL1, PowerW: l1}, {State: record.StateL2, PowerW: l2}}}
	}
	cfg := config.SimDefault()
	assert.Empty(t, StateCost(cfg, "A", cost(80, 40, "")), "off by default")

	cfg.Thresholds.MaxSleepingPowerW = 50
	cs := StateCost(cfg, "A", cost(80, 40, ""))
	require.Len(t, cs, 2)
	assert.Equal(t, "cost.level1.power_w", cs[0].Name)
	assert.Equal(t, "FAIL", cs[0].Verdict)
	assert.Equal(t, "PASS", cs[1].Verdict)
	cs = StateCost(cfg, "A", cost(45, 40, ""))
	assert.Equal(t, "PASS", cs[0].Verdict, "less power asleep passes")

	nan := math.NaN()
	cs = StateCost(cfg, "A", cost(nan, nan, "GPU energy counter not available: no memory source"))
	for _, c := range cs {
		assert.Equal(t, record.NotEvaluated, c.Verdict)
		assert.Contains(t, c.Reason, "energy counter")
	}
}
