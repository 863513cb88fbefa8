// The sleep phases: level-1 and level-2 cycles of every model, and
// serving again right after a wake against the baseline.

package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"

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

// testAfterWake measures serving again right after a level-1 sleep and wake
// and compares output tok/s with the baseline.
func testAfterWake(t *testing.T) {
	h, _ := begin(t, protocol.PhaseAfterWake)
	testServing(t, h.AfterWake, h.AfterWakeChecks)
}
