package record

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRuntimeString(t *testing.T) {
	assert.Equal(t, "vLLM 0.31.0 / CUDA 13.0", RuntimeString("0.31.0", false, "13.0"))
	assert.Equal(t, "vLLM 0.31.0", RuntimeString("0.31.0", false, ""))
	assert.Equal(t, "vLLM 0.31.0+vllmsim (vllmsim) / simulated GPU", RuntimeString("0.31.0+vllmsim", true, ""))
	assert.Equal(t, "vLLM 0.31.0+vllmsim (vllmsim) / CUDA 13.0", RuntimeString("0.31.0+vllmsim", true, "13.0"))
}

// TestServerVersionLabelsSimulated: a server reporting a vllmsim version is
// labelled simulated even when the run started it by path.
func TestServerVersionLabelsSimulated(t *testing.T) {
	r := New([]string{"A"}, map[string]string{"A": "m"})
	r.SetServerVersion("0.31.0", "13.0")
	assert.Nil(t, r.Raw().Simulated)
	assert.Equal(t, "vLLM 0.31.0 / CUDA 13.0", r.Raw().Runtime)
	r.SetServerVersion("0.31.0+vllmsim", "")
	require.NotNil(t, r.Raw().Simulated)
	assert.Equal(t, "vLLM 0.31.0+vllmsim (vllmsim) / simulated GPU", r.Raw().Runtime)
}

// TestRepeatsAreRecordedOnce: checks evaluated twice, the same failure
// twice and a phase run twice each appear once; the latest check wins.
func TestRepeatsAreRecordedOnce(t *testing.T) {
	r := New([]string{"A"}, map[string]string{"A": "m"})
	r.AddChecks(Check{Name: "sleep.level1.successful_cycles", Model: "A", Value: 4, Verdict: "FAIL"}, Check{Name: "x", Model: "B", Verdict: "PASS"})
	r.AddChecks(Check{Name: "sleep.level1.successful_cycles", Model: "A", Value: 5, Verdict: "PASS"})
	r.AddChecks(Check{Name: "sleep.level1.successful_cycles", Model: "B", Value: 5, Verdict: "PASS"})
	raw := r.Raw()
	require.Len(t, raw.Checks, 3)
	assert.Equal(t, 5.0, raw.Checks[0].Value, "re-evaluated in place")
	assert.Equal(t, "PASS", raw.Checks[0].Verdict)

	f := Failure{Phase: "switch", Model: "B", Step: "wake A→B", Error: "boom"}
	r.Fail(f)
	r.Fail(f)
	r.Fail(Failure{Phase: "switch", Model: "B", Step: "wake B→A", Error: "boom"})
	assert.Len(t, r.Raw().Failures, 2)
	assert.True(t, r.Failed("switch"))
	assert.False(t, r.Failed("restart"))

	r.PhaseRan("restart")
	r.PhaseRan("baseline")
	r.PhaseRan("restart")
	assert.Equal(t, []string{"restart", "baseline"}, r.Raw().Phases)
}

// TestRawIsACopy: what a reader holds does not change under later writes.
func TestRawIsACopy(t *testing.T) {
	r := New([]string{"A"}, map[string]string{"A": "m"})
	r.Writers().Cycles.Add("A", Cycle{Level: 1, OK: true, ResidualGiB: math.NaN()})
	r.PlanCycles("A", 1, 5)
	got := r.Raw()
	r.Writers().Cycles.Add("A", Cycle{Level: 2})
	r.PlanCycles("A", 1, 5)
	got.Names["A"] = "changed"
	assert.Len(t, got.Cycles["A"], 1)
	assert.Equal(t, 5, got.Planned["A"][1])
	assert.Equal(t, 10, r.Raw().Planned["A"][1])
	assert.Equal(t, "m", r.Raw().Names["A"])

	r.Window("A-restart", time.Unix(100, 0), time.Unix(110, 0), 2*time.Second, nil)
	r.Finish([]float64{1, 2}, map[string]uint64{"A": 7}, time.Unix(120, 0))
	raw := r.Raw()
	assert.Equal(t, Window{Start: 98, End: 112}, raw.Windows["A-restart"])
	assert.Equal(t, []float64{1, 2}, raw.DeviceUsedGiB)
	assert.Equal(t, uint64(7), raw.RSSPeak["A"])
	assert.Equal(t, time.Unix(120, 0), raw.Finished)
}

// A simulated run's one-phrase label says, in real-device mode, what of it is real.
func TestSimulatedLabel(t *testing.T) {
	assert.Equal(t, "vllmsim profile tiny, time scale 0.5", Simulated{Profile: "tiny", TimeScale: 0.5}.Label())
	assert.Equal(t, "vllmsim profile p, time scale unknown", Simulated{Profile: "p"}.Label(), "a vllmsim the run did not start: not \"time scale 0\"")
	assert.Equal(t, "vllmsim profile demo, time scale 0.05; real device: GPU memory, copies and weight reads real and unscaled",
		Simulated{Profile: "demo", TimeScale: 0.05, RealDevice: true}.Label())
}

// TestFailureWhere: the phase, model and step a failure names, the empty
// ones left out (a run-level failure with a step but no model has no
// empty slot between them).
func TestFailureWhere(t *testing.T) {
	assert.Equal(t, "sleep-level1 / A / wake", Failure{Phase: "sleep-level1", Model: "A", Step: "wake"}.Where(" / "))
	assert.Equal(t, "switch/handoff 2", Failure{Phase: "switch", Step: "handoff 2"}.Where("/"))
	assert.Equal(t, "", Failure{Error: "x"}.Where(" / "))
}

// TestFromUnix: Unix seconds back to the instant, in UTC, to the
// microsecond (a float64 of today's seconds holds no finer).
func TestFromUnix(t *testing.T) {
	at := time.Date(2026, 12, 5, 13, 1, 4, 627_000_000, time.UTC)
	assert.Equal(t, "2026-12-05T13:01:04.627Z", FromUnix(1796475664.627).Format("2006-01-02T15:04:05.000Z07:00"))
	assert.WithinDuration(t, at, FromUnix(Unix(at)), time.Microsecond)
	assert.Equal(t, time.UTC, FromUnix(0).Location())
}

// TestReadReadsInPlace: Read hands f the record itself under its lock: a
// cycle added is seen by the next Read without a copy, and writers beside
// readers are race-free (go test -race).
func TestReadReadsInPlace(t *testing.T) {
	r := New([]string{"A"}, map[string]string{"A": "m"})
	var done sync.WaitGroup
	done.Add(1)
	go func() {
		defer done.Done()
		for range 100 {
			r.Writers().Cycles.Add("A", Cycle{Level: 1, OK: true})
		}
	}()
	for range 100 {
		r.Read(func(raw *Raw) {
			n := len(raw.Cycles["A"])
			assert.LessOrEqual(t, n, 100)
		})
	}
	done.Wait()
	// Where the first cycle lives, as text (nothing of the record kept).
	at := func(raw *Raw) string { return fmt.Sprintf("%p", &raw.Cycles["A"][0]) }
	var first, second string
	r.Read(func(raw *Raw) { first = at(raw) })
	r.Read(func(raw *Raw) { second = at(raw) })
	assert.Equal(t, first, second, "the record itself, not a copy")
	c := r.Raw()
	assert.NotEqual(t, first, at(&c), "Raw copies")
}

func TestEvaluate(t *testing.T) {
	assert.Equal(t, "PASS", Evaluate("x", "", 5, "within", 10).Verdict)
	assert.Equal(t, "FAIL", Evaluate("x", "", -11, "within", 10).Verdict)
	assert.Equal(t, "FAIL", Evaluate("x", "A", 3, "==", 5).Verdict)
	assert.Panics(t, func() { Evaluate("x", "", 1, "<", 2) })
}
