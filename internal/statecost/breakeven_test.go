package statecost

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/record"
)

// TestBreakEvenByHand: the break-even from the device's figures as the
// phase measures them (the board's 30 W in every reading), by hand. Above
// stopped: awake 60 W, asleep 15 W (level 1) and 14 W (level 2); the cold
// start 9000 − 30 × 60 = 7200 J, the level-1 wake 300 − 30 × 2 = 240 J,
// the level-2 wake 1400 − 30 × 9 = 1130 J, the level-1 sleep 120 − 30 ×
// 1 = 90 J, the level-2 sleep 50 − 30 × 0.5 = 35 J. Both paths over one
// span, the asleep one beginning with its sleep call (asleep from its
// answer on): level 1 (7200 − 90 − 240 − 60 × 58) / 15 + 1 = 227 s, level
// 2 (7200 − 35 − 1130 − 60 × 51) / 14 + 0.5 = 213 s. (Counting the board's draw during the cold start as its
// cost read 580 s and 542.9 s; leaving the sleep call out, as 650cbfc
// did, 232 s and 215 s.)
func TestBreakEvenByHand(t *testing.T) {
	st := func(name string, w float64) record.StateCost {
		return record.StateCost{State: name, GPUGiB: []float64{1}, PowerW: w}
	}
	c := record.Cost{
		States: []record.StateCost{st(record.StateAwake, 90), st(record.StateL1, 45), st(record.StateL2, 44), st(record.StateStopped, 30)},
		Transitions: []record.Transition{{Op: record.OpSleepL1, S: 1, J: 120}, {Op: record.OpWakeL1, S: 2, J: 300},
			{Op: record.OpSleepL2, S: 0.5, J: 50}, {Op: record.OpWakeL2, S: 9, J: 1400},
			{Op: record.OpStart, S: 60, J: 9000}},
	}
	got := breakEvens(c)
	assert.Len(t, got, 2)
	want := map[int]float64{1: 227, 2: 213}
	for _, b := range got {
		assert.InDelta(t, want[b.Level], b.IdleS, 1e-9, "level %d", b.Level)
		assert.Equal(t, 60.0, b.ColdStartS)
	}
}
