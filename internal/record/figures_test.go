package record

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLevelOfByHand: a level's series hold its successful cycles alone,
// in order, the memory and pause figures where known, and a model across
// GPUs its worst GPU per cycle; worked out by hand from five cycles.
func TestLevelOfByHand(t *testing.T) {
	nan := math.NaN()
	cycles := []Cycle{
		{Level: 1, OK: true, SleepS: 1, WakeAPIS: 0.1, ToFirstTokenS: 0.2, ResidualGiB: 0.5, FreedGiB: nan, ReleaseS: nan, HeldS: nan, HeldPastWakeS: nan},
		{Level: 2, OK: true, SleepS: 9, WakeAPIS: 9, ToFirstTokenS: 9, ResidualGiB: 9},  // another level
		{Level: 1, OK: false, SleepS: 8, WakeAPIS: 8, ToFirstTokenS: 8, ResidualGiB: 8}, // failed
		{Level: 1, OK: true, SleepS: 2, WakeAPIS: 0.3, ToFirstTokenS: 0.4, ResidualGiB: nan, ResidualPerGPU: []float64{0.2, 0.7}, FreedGiB: 3, ReleaseS: nan, HeldS: 0.05, HeldPastWakeS: nan},
		{Level: 1, OK: true, SleepS: 3, WakeAPIS: 0.5, ToFirstTokenS: 0.6, ResidualGiB: 0.25, ResidualPerGPU: []float64{0.9, 0.1}, FreedGiB: nan, ReleaseS: 0.01, HeldS: nan, HeldPastWakeS: 0.02},
	}
	s := LevelOf(cycles, 1)
	assert.Equal(t, []float64{1, 2, 3}, s.Sleep)
	assert.Equal(t, []float64{0.1, 0.3, 0.5}, s.Wake)
	assert.Equal(t, []float64{0.2, 0.4, 0.6}, s.FirstToken)
	assert.Equal(t, []float64{0.5, 0.25}, s.Residual, "the unknown residual left out")
	assert.Equal(t, []float64{0.7, 0.9}, s.WorstGPUResidual)
	assert.Equal(t, []float64{3}, s.Freed)
	assert.Equal(t, []float64{0.01}, s.Release)
	assert.Equal(t, []float64{0.05}, s.Held)
	assert.Equal(t, []float64{0.02}, s.HeldPastWake)
	assert.Len(t, s.ReleaseEach, 3, "one for each cycle, known or not")
	assert.Equal(t, 0.01, s.ReleaseEach[2])
	assert.Len(t, s.Engines, 3, "one for each cycle, to pair with Sleep and Wake")
	assert.Equal(t, 0.375, Summary(s.Residual).Median, "(0.5 + 0.25) / 2")
	assert.Equal(t, 0.6, Summary(s.FirstToken).P95, "nearest rank: the 3rd of 3")
	assert.Zero(t, Summary(LevelOf(cycles, 0).FirstToken).N, "no cycle at level 0: the zero Summary")
}

// TestDirectionsOfByHand: handoffs by direction, the initial activation
// and the failed ones left out, the energy where known.
func TestDirectionsOfByHand(t *testing.T) {
	hs := []Handoff{
		{From: "", To: "A", Initial: true, OK: true, ToFirstTokenS: 9},
		{From: "A", To: "B", OK: true, SleepS: 1, WakeS: 2, ToFirstTokenS: 3, EnergyJ: 10},
		{From: "B", To: "A", OK: false, ToFirstTokenS: 8},
		{From: "B", To: "A", OK: true, SleepS: 4, WakeS: 5, ToFirstTokenS: 6, EnergyJ: math.NaN()},
		{From: "A", To: "B", OK: true, SleepS: 7, WakeS: 8, ToFirstTokenS: 9, EnergyJ: 20},
	}
	d := DirectionsOf(hs)
	assert.Len(t, d, 2)
	ab, ba := d[DirectionKey("A", "B")], d[DirectionKey("B", "A")]
	assert.Equal(t, []float64{3, 9}, ab.FirstToken)
	assert.Equal(t, []float64{1, 7}, ab.Sleep)
	assert.Equal(t, []float64{2, 8}, ab.Wake)
	assert.Equal(t, []float64{10, 20}, ab.EnergyJ)
	assert.Len(t, ab.Engines, 2)
	assert.Equal(t, []float64{6}, ba.FirstToken)
	assert.Empty(t, ba.EnergyJ, "the unknown energy left out")
	assert.Equal(t, 6.0, Summary(ab.FirstToken).Median, "(3 + 9) / 2")
}

// TestTrendNeedsThree: a series under three samples has no trend; three
// on a line have its slope.
func TestTrendNeedsThree(t *testing.T) {
	assert.Nil(t, Trend([]float64{1, 2}))
	tr := Trend([]float64{1, 3, 5})
	if assert.NotNil(t, tr) {
		assert.InDelta(t, 2, tr.Slope, 1e-12)
	}
}
