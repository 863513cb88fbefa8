package gate

import (
	"fmt"
	"math"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// StateCost judges one model's state costs: thresholds.max_sleeping_power_w
// against the GPU power held asleep at each level (when set); not
// evaluated, with why, where the power is absent (no energy counter, or
// the state not measured).
func StateCost(cfg config.Config, label string, c record.Cost) []record.Check {
	limit := cfg.ThresholdsFor(label).MaxSleepingPowerW
	if limit == 0 {
		return nil
	}
	var out []record.Check
	for _, lv := range []struct {
		level int
		state string
	}{{1, record.StateL1}, {2, record.StateL2}} {
		name := fmt.Sprintf("cost.level%d.power_w", lv.level)
		s, ok := c.State(lv.state)
		if !ok || math.IsNaN(s.PowerW) {
			why := c.EnergyNote
			if why == "" {
				why = "state " + lv.state + " not measured"
			}
			out = append(out, record.Check{Name: name, Model: label, Op: "<=", Limit: limit, Verdict: record.NotEvaluated,
				Reason: why, Required: cfg.ThresholdSetByUser(label, "max_sleeping_power_w")})
			continue
		}
		out = append(out, Evaluate(name, label, s.PowerW, "<=", limit))
	}
	return out
}
