package record

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWritersAreWired: every series Recorder.Writers hands out writes to
// that record (a field left out of Writers would be a zero series whose
// Add panics in the middle of a run).
func TestWritersAreWired(t *testing.T) {
	r := New([]string{"A"}, map[string]string{"A": "a"})
	w := reflect.ValueOf(r.Writers())
	for i := range w.NumField() {
		f := w.Field(i)
		name := w.Type().Field(i).Name
		assert.Equal(t, reflect.ValueOf(r).Pointer(), f.FieldByName("r").Pointer(), "Writers.%s writes another record", name)
		if put := f.FieldByName("put"); put.IsValid() {
			assert.False(t, put.IsNil(), "Writers.%s has no writer", name)
		}
	}
}

// TestSeriesWriteWhatTheyName: each kind of series writes its own part of
// the record: a replay numbered within its stage, copies of the slices it
// is given, a per-model value replaced, the request counter's sums.
func TestSeriesWriteWhatTheyName(t *testing.T) {
	r := New([]string{"A", "B"}, map[string]string{"A": "a", "B": "b"})
	w := r.Writers()
	assert.Equal(t, 1, w.Replays.Add("A", Replay{Stage: PhaseSleepL1}).Cycle)
	assert.Equal(t, 1, w.Replays.Add("A", Replay{Stage: PhaseSleepL2}).Cycle, "another stage counts apart")
	assert.Equal(t, 2, w.Replays.Add("A", Replay{Stage: PhaseSleepL1}).Cycle)
	assert.Equal(t, 1, w.Replays.Add("B", Replay{Stage: PhaseSleepL1}).Cycle, "another model counts apart")

	pcts := []float64{90, 80}
	w.ReleasePerGPU.Add("A", pcts)
	pcts[0] = 0
	w.Attribution.Add("A", "first")
	w.Attribution.Add("A", "second")
	w.Handoffs.Add(Handoff{From: "A", To: "B"})
	w.Gate.Set(Gate{Baseline: "one"})
	w.Gate.Set(Gate{Baseline: "two"})
	w.Requests.Done(true)
	w.Requests.Done(false)
	w.Requests.Aborted()

	r.Read(func(raw *Raw) {
		assert.Len(t, raw.Replays["A"], 3)
		assert.Equal(t, [][]float64{{90, 80}}, raw.ReleasePerGPU["A"], "the series keeps a copy")
		assert.Equal(t, "second", raw.Attribution["A"])
		assert.Equal(t, []Handoff{{From: "A", To: "B"}}, raw.Handoffs)
		require.NotNil(t, raw.Gate)
		assert.Equal(t, "two", raw.Gate.Baseline)
		assert.Equal(t, Requests{Executed: 3, Success: 1, Failure: 1, AbortedByDesign: 1}, raw.Requests)
	})
}
