package gate

import (
	"cmp"
	"fmt"
	"math"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// StateCost judges one model's state costs: thresholds.max_sleeping_power_w
// against the power the model holds asleep at each level (when set). NVML
// has no per-process energy, so the model's power is a difference on the
// same device: the state's power less the stopped row's, every other
// model held as it was in both dwells (asleep beside it). The device's
// own figure would judge the board and the other models too (A asleep
// beside B reads as B's). Not evaluated, with why, where a power is
// absent (no energy counter, the state not measured).
func StateCost(cfg config.Config, label string, c record.Cost) []record.Check {
	limit := cfg.ThresholdsFor(label).MaxSleepingPowerW
	if limit == 0 {
		return nil
	}
	stopped, stoppedOK := c.State(record.StateStopped)
	var out []record.Check
	for _, lv := range []struct {
		level int
		state string
	}{{1, record.StateL1}, {2, record.StateL2}} {
		name := fmt.Sprintf("cost.level%d.own_power_w", lv.level)
		s, ok := c.State(lv.state)
		why := ""
		switch {
		case !ok || s.Skipped != "":
			why = "state " + lv.state + " not measured"
		case !stoppedOK || stopped.Skipped != "":
			why = "state " + record.StateStopped + " not measured: the model's share of the device's power is unknown"
		case math.IsNaN(s.PowerW) || math.IsNaN(stopped.PowerW):
			why = cmp.Or(c.EnergyNote, "the power asleep or stopped is unknown")
		}
		if why != "" {
			required, none := memoryRequired(cfg, label, "max_sleeping_power_w")
			out = append(out, record.Check{Name: name, Model: label, Op: "<=", Limit: limit, Verdict: record.NotEvaluated,
				Reason: cmp.Or(none, why), Required: required})
			continue
		}
		out = append(out, Evaluate(name, label, c.OwnPowerW(lv.state), "<=", limit))
	}
	return out
}
