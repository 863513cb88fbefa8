// The sleep phases' invariants: level-1 and level-2 cycles, the level-0
// and KV-only release cycles, and what each state costs.

package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/record"
)

// cycleInvariants: in every cycle that succeeded the first token came
// after the wake calls (the sleep phases at every level, the KV-only
// release).
func cycleInvariants(t *testing.T, v any) {
	for _, c := range v.([]record.Cycle) {
		if c.OK {
			assert.GreaterOrEqual(t, c.ToFirstTokenS, c.WakeAPIS, "first token comes after the wake calls")
		}
	}
}

// costInvariants: a level-1 sleep frees GPU memory and every transition
// takes time (a model's state costs); the fit table has one row per level.
func costInvariants(t *testing.T, v any) {
	switch c := v.(type) {
	case record.Cost:
		awake, _ := c.State(record.StateAwake)
		l1, _ := c.State(record.StateL1)
		if awake.GPUGiB != nil && l1.GPUGiB != nil {
			assert.Less(t, l1.GPUGiB[0], awake.GPUGiB[0], "a level-1 sleep frees GPU memory")
		}
		for _, tr := range c.Transitions {
			assert.Positive(t, tr.S, tr.Op)
		}
	case *record.Fit:
		assert.Len(t, c.Levels, 2, "the fit table's levels 1 and 2")
	default:
		t.Errorf("state-cost step measured a %T", v)
	}
}
