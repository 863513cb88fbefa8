package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSleepLevel1 runs the level-1 sleep/wake cycles of every model.
func TestSleepLevel1(t *testing.T) { testSleep(t, 1) }

// TestAfterWake measures serving again right after a level-1 sleep and wake
// and compares output tok/s with the baseline.
func TestAfterWake(t *testing.T) {
	h, ctx := begin(t)
	for _, l := range h.Labels() {
		t.Run(l, func(t *testing.T) {
			runs, err := h.AfterWake(ctx, l, progress(t))
			assert.NoError(t, err)
			require.Len(t, runs, len(h.Config().Protocol.Concurrency), "one run per concurrency")
			passes(t, h.AfterWakeChecks(l, runs))
		})
	}
}

// TestSleepLevel2 runs the level-2 cycles: the wake reloads the weights and
// every first token after it is checked for garbage.
func TestSleepLevel2(t *testing.T) { testSleep(t, 2) }

func testSleep(t *testing.T, level int) {
	h, ctx := begin(t)
	for _, l := range h.Labels() {
		t.Run(l, func(t *testing.T) {
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
