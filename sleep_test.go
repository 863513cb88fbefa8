// The sleep phases: level-1 and level-2 cycles of every model, and
// serving again right after a wake against the baseline.

package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/harness"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
)

// testSleep runs the sleep/wake cycles of every model at level; at level 2
// the wake reloads the weights and every first token is checked for garbage.
func testSleep(t *testing.T, level int) {
	phase := protocol.PhaseSleepL1
	if level == 2 {
		phase = protocol.PhaseSleepL2
	}
	h, ctx := begin(t, phase)
	for _, l := range h.Labels() {
		t.Run(l, func(t *testing.T) {
			skipIfStopped(t)
			cycles, err := h.SleepCycles(ctx, l, level, progress(t))
			assert.NoError(t, err)
			for _, c := range cycles {
				if c.OK {
					assert.GreaterOrEqual(t, c.ToFirstTokenS, c.WakeAPIS, "first token comes after the wake calls")
				}
			}
			passes(t, h.SleepChecks(l, level, cycles))
		})
	}
}

// testPause runs the level-0 cycles (level 0) or the KV-only release
// cycles (record.LevelKVRelease) of every model; a server without the
// endpoints has them off, which the checks say without failing.
func testPause(t *testing.T, level int) {
	phase, run := protocol.PhaseSleepL0, (*harness.Run).PauseCycles
	if level == record.LevelKVRelease {
		phase, run = protocol.PhaseKVRelease, (*harness.Run).KVReleaseCycles
	}
	h, ctx := begin(t, phase)
	for _, l := range h.Labels() {
		t.Run(l, func(t *testing.T) {
			skipIfStopped(t)
			cycles, err := run(h, ctx, l, progress(t))
			assert.NoError(t, err)
			for _, c := range cycles {
				if c.OK {
					assert.GreaterOrEqual(t, c.ToFirstTokenS, c.WakeAPIS, "first token comes after the wake calls")
				}
			}
			passes(t, h.PauseChecks(l, level, cycles))
		})
	}
}

// testStateCost measures what each state of every model costs (GPU
// memory, host memory, GPU power) and each transition's energy, then the
// node's fit table over every model (docs/cost.md).
func testStateCost(t *testing.T) {
	h, ctx := begin(t, protocol.PhaseStateCost)
	if h.Config().Protocol.CostDwellS == 0 {
		t.Skip("protocol.cost_dwell_s is 0: the state-cost phase is off")
	}
	for _, l := range h.Labels() {
		t.Run(l, func(t *testing.T) {
			skipIfStopped(t)
			c, err := h.StateCost(ctx, l, progress(t))
			require.NoError(t, err)
			awake, _ := c.State(record.StateAwake)
			l1, _ := c.State(record.StateL1)
			if awake.GPUGiB != nil && l1.GPUGiB != nil {
				assert.Less(t, l1.GPUGiB[0], awake.GPUGiB[0], "a level-1 sleep frees GPU memory")
			}
			for _, tr := range c.Transitions {
				assert.Positive(t, tr.S, tr.Op)
			}
			passes(t, h.CostChecks(l, c))
		})
	}
	t.Run("fit", func(t *testing.T) {
		skipIfStopped(t)
		fit, why, err := h.NodeFit(ctx)
		require.NoError(t, err)
		if fit == nil {
			t.Skipf("no fit table: %s", why)
		}
		binds := func(b string) string {
			if b == "" {
				return "every other model fits"
			}
			return b + " binds"
		}
		progress(t)("fit: %s awake; level 1: %d/%d asleep (%s), level 2: %d/%d (%s); choose level %d: %s",
			fit.Largest, fit.Levels[0].Fits, fit.Levels[0].Others, binds(fit.Levels[0].Binds), fit.Levels[1].Fits, fit.Levels[1].Others, binds(fit.Levels[1].Binds), fit.Choose, fit.Why)
	})
}

// testAfterWake measures serving again right after a level-1 sleep and wake
// and compares output tok/s with the baseline.
func testAfterWake(t *testing.T) {
	h, _ := begin(t, protocol.PhaseAfterWake)
	testServing(t, h.AfterWake, h.AfterWakeChecks)
}
