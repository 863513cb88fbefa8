package record

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestGoodputSpansTheWarmUp (issue 50): a run's goodput divides its good
// requests (the warm-up not counted) by the one span duration_s and the
// energies use, first planned arrival (the warm-up's) → last request
// done. By hand, as the demo run: the warm-up planned at 0 and done at
// 0.40 s, 24 good requests planned from 0.42 s on, the last done at
// 6.92 s: 24 / 6.92 = 3.468 req/s (650cbfc divided by 6.92 − 0.42 = 6.50:
// 3.692). The ideal run is counted over its own span.
func TestGoodputSpansTheWarmUp(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := Traffic{Requests: []TrafficRequest{{Run: RunShared, WarmUp: true, Planned: at(0), Done: at(0.40), Good: true}}}
	for i := range 24 {
		p := 0.42 + float64(i)*0.25
		tr.Requests = append(tr.Requests, TrafficRequest{Run: RunShared, Planned: at(p), Done: at(p + 0.1), Good: true})
	}
	tr.Requests[len(tr.Requests)-1].Done = at(6.92)
	tr.Requests = append(tr.Requests, TrafficRequest{Run: RunShared, Planned: at(3), Done: at(3.5), Err: "boom"}) // not good, in the span
	tr.Requests = append(tr.Requests, TrafficRequest{Run: RunIdeal, WarmUp: true, Planned: at(10), Done: at(10.5), Good: true},
		TrafficRequest{Run: RunIdeal, Planned: at(10.5), Done: at(12), Good: true})

	assert.InDelta(t, 6.92, tr.SpanS(RunShared), 1e-9, "first planned arrival (the warm-up's) → last done")
	assert.InDelta(t, 24/6.92, tr.GoodputRPS(RunShared), 1e-9)
	assert.InDelta(t, 3.468, tr.GoodputRPS(RunShared), 0.0005)
	assert.InDelta(t, 1/2.0, tr.GoodputRPS(RunIdeal), 1e-9, "the ideal run: its own span, its warm-up in it")
	assert.Zero(t, Traffic{}.GoodputRPS(RunShared), "no requests: no span")
}
