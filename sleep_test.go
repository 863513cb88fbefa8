// The sleep phases: level-1 and level-2 cycles of every model, and
// serving again right after a wake against the baseline.

package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/protocol"
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

// testAfterWake measures serving again right after a level-1 sleep and wake
// and compares output tok/s with the baseline.
func testAfterWake(t *testing.T) {
	h, _ := begin(t, protocol.PhaseAfterWake)
	testServing(t, h.AfterWake, h.AfterWakeChecks)
}
