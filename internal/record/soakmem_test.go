package record

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func heapBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestSoakRecordPerCycle measures what the record keeps per soak cycle:
// the cycle's row (with the engine's account), the soak replay of the
// woken model's probe set, the sleep and wake events of the timeline and
// the level-1 release. The report's exact medians and fitted slopes need
// every value, so this grows with the cycles, bounded per cycle; with
// protocol.soak_cycles at most config.MaxCycles (10,000), the soak's rows
// stay under 10 MiB. soak.csv streams the rows to disk as they come.
func TestSoakRecordPerCycle(t *testing.T) {
	const n = 10_000
	labels := []string{"A", "B", "C"}
	r := New(labels, nil)
	pool := &queued{}
	r.Register(pool)
	now := time.Now()
	h0 := heapBytes()
	for i := range n {
		l := labels[i%3]
		r.Writers().Soak.Add(SoakCycle{Cycle: i + 1, From: l, To: labels[(i+1)%3], Level: 1, OK: true, SleepS: 0.1, WakeS: 0.2,
			ResidualGiB: 0.5, ReleasePct: 90, FreeGiB: 10, NeedGiB: 2, HeadroomGiB: 8, RSSGiB: 1,
			Engine: &Engine{SleepS: 0.1, WakeS: 0.2, FreedGiB: 3}})
		r.Writers().Replays.Add(l, Replay{Stage: PhaseSoak, Seconds: 0.01, Results: []ProbeResult{{Probe: "short", Match: true}, {Probe: "long", Match: true}}})
		pool.add(Facts{Events: []Event{{Time: now, Label: l, Kind: "sleep L1"}, {Time: now, Label: l, Kind: "wake"}}}) // gathered at the next call
		r.Writers().Release.Add(l, 90)
	}
	perCycle := float64(heapBytes()-h0) / n
	runtime.KeepAlive(r)
	t.Logf("the record keeps %.0f bytes per soak cycle (%d cycles)", perCycle, n)
	assert.Less(t, perCycle, 1024.0, "a soak cycle's share of the record")
}
