package traffic_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/testmain"
)

// The traffic phase's intervals run between the events docs/metrics.md
// names: the harness's own work around them made slower leaves them where
// they were, the thing they measure made slower moves them.

// trafficRun runs the traffic phase alone (no ideal run, no in-flight
// sleeps) on a trace: A at 0 s, B at 0.1 s, A at 0.5 s; each server
// with its faults.
func trafficRun(t *testing.T, faultsA, faultsB string, mod func(*config.Config)) (record.Traffic, record.Raw) {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(trace, []byte("t_s,model,prompt_tokens,output_tokens\n0,A,20,8\n0.1,B,20,8\n0.5,A,20,8\n"), 0o644))
	_, rec, p := simPoolWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.Trace = trace
		cfg.Traffic.InFlightRequests = 0
		cfg.Traffic.Ideal = false
		cfg.Models[0].SimFaults, cfg.Models[1].SimFaults = faultsA, faultsB
		if mod != nil {
			mod(cfg)
		}
	})
	trOut, err := p.Run(t.Context(), t.Logf)
	tr := trOut.Value
	require.NoError(t, err)
	require.Len(t, tr.Requests, 3)
	for _, r := range tr.Requests {
		require.Empty(t, r.Err)
	}
	require.Len(t, tr.Switches, 2, "A→B, B→A")
	for _, s := range tr.Switches {
		t.Logf("%s→%s: %.3fs (sleep %.3fs, wake %.3fs)", s.From, s.To, s.End.Sub(s.Start).Seconds(), s.SleepS, s.WakeS)
	}
	return tr, rec.Raw()
}

// TestTrafficFirstSwitchHoldsNoReference: run alone, the traffic phase
// takes A's correctness reference (here 96 tokens a probe) before the
// router starts: its first switch is a sleep and a wake, not the
// reference; a wake answered 300 ms later is in it (the switch is A's
// sleep, then B's wake, answered no sooner than 300 ms after it was sent).
func TestTrafficFirstSwitchHoldsNoReference(t *testing.T) {
	bigReference := func(cfg *config.Config) { cfg.Protocol.CorrectnessMaxTokens = 96 }
	tr, raw := trafficRun(t, "", "", bigReference)
	ref := raw.References["A"].Seconds
	require.Positive(t, ref, "A's reference was taken")
	first := tr.Switches[0]
	overhead := first.End.Sub(first.Start).Seconds() - first.SleepS - first.WakeS
	assert.Less(t, overhead, ref, "A→B: its sleep and B's wake, not A's %.3fs reference", ref)

	slow, _ := trafficRun(t, "", "delay=/wake_up:0.3", bigReference)
	sw := slow.Switches[0]
	assert.GreaterOrEqual(t, sw.End.Sub(sw.Start).Seconds(), sw.SleepS+0.3, "B's slower wake is in the switch, after A's sleep")
}

// TestRouterSwitchEndsAtTheWakeAnswer: the router's switch_s ends when
// the woken model answered its wake, and the timeline's wake mark is the
// wake request sent: an /is_sleeping answered 300 ms late (the harness's
// confirmation after the answer) moves neither; a /wake_up answered 300 ms
// late is in the switch (a floor the server sets, not a comparison of two
// runs, which a busy machine upsets).
func TestRouterSwitchEndsAtTheWakeAnswer(t *testing.T) {
	testmain.Long(t)
	const delay = 300 * time.Millisecond
	toB := func(tr record.Traffic) record.RouterSwitch { return tr.Switches[0] }
	tr, raw := trafficRun(t, "", "delay=/is_sleeping:0.3", nil)
	sw := toB(tr)
	require.Equal(t, "B", sw.To)
	overhead := sw.End.Sub(sw.Start).Seconds() - sw.SleepS - sw.WakeS
	assert.Less(t, overhead, delay.Seconds(), "A→B ends at B's wake answer, before its confirmation")
	wakeSent := sw.End.Add(-time.Duration(sw.WakeS * float64(time.Second)))
	var mark time.Time
	for _, e := range raw.Events {
		if e.Label == "B" && e.Kind == "wake" && !e.Time.Before(sw.Start) && !e.Time.After(sw.End.Add(delay)) {
			mark = e.Time
		}
	}
	require.False(t, mark.IsZero(), "B's wake is on the timeline")
	assert.WithinDuration(t, wakeSent, mark, 5*time.Millisecond, "the wake mark is the wake request sent")

	slow, _ := trafficRun(t, "", "delay=/wake_up:0.3", nil)
	assert.GreaterOrEqual(t, toB(slow).End.Sub(toB(slow).Start).Seconds(), toB(slow).SleepS+delay.Seconds(), "a slower wake is in the switch, after the sleep")
}

// TestTrafficDurationIsTheRequests: traffic.duration_s runs from the
// first planned arrival to the last request done (its last token), not
// to the router's shutdown; with requests answered 300 ms late it ends no
// sooner than the last planned arrival plus 300 ms.
func TestTrafficDurationIsTheRequests(t *testing.T) {
	testmain.Long(t)
	spanOf := func(tr record.Traffic) float64 {
		first, _, last := requestSpan(tr)
		return last.Sub(first).Seconds()
	}
	tr, _ := trafficRun(t, "", "", nil)
	assert.InDelta(t, spanOf(tr), tr.DurationS, 1e-9, "first planned arrival → last request done")
	slow, _ := trafficRun(t, "delay=/v1/completions:0.3", "delay=/v1/completions:0.3", nil)
	assert.InDelta(t, spanOf(slow), slow.DurationS, 1e-9)
	first, lastPlanned, _ := requestSpan(slow)
	assert.GreaterOrEqual(t, slow.DurationS, lastPlanned.Sub(first).Seconds()+0.3, "the last request, answered 0.3 s late, is in the run")
}

// requestSpan is the first and last planned arrival of tr's requests and
// when the last of them was done.
func requestSpan(tr record.Traffic) (first, lastPlanned, lastDone time.Time) {
	for _, r := range tr.Requests {
		if first.IsZero() || r.Planned.Before(first) {
			first = r.Planned
		}
		if r.Planned.After(lastPlanned) {
			lastPlanned = r.Planned
		}
		if r.Done.After(lastDone) {
			lastDone = r.Done
		}
	}
	return first, lastPlanned, lastDone
}
