package traffic_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/testmain"
)

// runWindow is a run's first planned arrival and its last request done.
func runWindow(tr record.Traffic, run string) (first, last time.Time) {
	for _, r := range tr.Requests {
		if r.Run != run {
			continue
		}
		if first.IsZero() || r.Planned.Before(first) {
			first = r.Planned
		}
		if r.Done.After(last) {
			last = r.Done
		}
	}
	return first, last
}

// runSpan is a run's first planned arrival → last request done, in seconds.
func runSpan(tr record.Traffic, run string) float64 {
	first, last := runWindow(tr, run)
	return last.Sub(first).Seconds()
}

// energyRun runs the traffic phase on fourRows with the shared and ideal
// runs only, the counter drawing 100 W through reads delayed by eDelay,
// every server with faults.
func energyRun(t *testing.T, wrap func(gpu.Source) gpu.Source, faults string) record.Traffic {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(trace, []byte(fourRows), 0o644))
	_, _, p := simPoolWith(t, wrap, func(cfg *config.Config) {
		cfg.Traffic.Trace, cfg.Traffic.InFlightRequests = trace, 0
		for i := range cfg.Models {
			cfg.Models[i].SimFaults = faults
		}
	})
	trOut, err := p.Run(t.Context(), t.Logf)
	tr := trOut.Value
	require.NoError(t, err)
	require.True(t, tr.IdealRan)
	t.Logf("shared %.3fs %.2f J, ideal %.3fs %.2f J (%s)", tr.DurationS, tr.SharedJ, runSpan(tr, record.RunIdeal), tr.IdealJ, tr.EnergyNote)
	return tr
}

// TestTrafficEnergy: at a constant 100 W each run's energy is 100 W × its
// span (first planned arrival → last request done: duration_s for the
// shared run): wakes 300 ms slower stretch the shared run and raise its
// energy, not the ideal's; energy reads of 200 ms (four times the trace's
// interval) leave both at 100 W × the span. Without a counter both are
// absent (NaN, never 0) with why.
func TestTrafficEnergy(t *testing.T) {
	testmain.Long(t)
	const w = 100.0
	power := func(delay time.Duration) func(gpu.Source) gpu.Source {
		origin := time.Now()
		return func(s gpu.Source) gpu.Source {
			return simtest.ConstPower{Source: s, Watts: w, Delay: delay, Origin: origin}
		}
	}
	plain := energyRun(t, power(0), "")
	slowWake := energyRun(t, power(0), "delay=/wake_up:0.3")
	slowRead := energyRun(t, power(200*time.Millisecond), "")
	// Each reading is stamped when the read returned; on a machine whose
	// cores are busy the tracing goroutine can lose milliseconds between
	// the counter's value and its stamp (CI saw 5.0 ms at one end), so
	// each figure holds to W × 20 ms. A stamp misplaced by the 200 ms
	// slow read (taken before the read, or its midpoint) would be 10-20 J
	// off; the slow wake's 300 ms are 30 J.
	const jitter = 0.020 // s
	for name, tr := range map[string]record.Traffic{"plain": plain, "slow wake": slowWake, "slow energy reads": slowRead} {
		assert.Empty(t, tr.EnergyNote, name)
		assert.InDelta(t, w*tr.DurationS, tr.SharedJ, w*jitter, "%s: shared J = W × duration_s", name)
		assert.InDelta(t, w*runSpan(tr, record.RunIdeal), tr.IdealJ, w*jitter, "%s: ideal J = W × its span", name)
	}
	// A wake 300 ms slower is in the shared run: a switch that woke its
	// model took the delay, and the run ends no sooner than its last
	// switch (a floor the server sets, one run: no two runs compared).
	woke := 0
	for _, sw := range slowWake.Switches {
		if sw.WakeS > 0 {
			woke++
			assert.GreaterOrEqual(t, sw.WakeS, 0.3, "%s→%s: the wake took its delay", sw.From, sw.To)
			end := slowWake.Start.Add(time.Duration(slowWake.DurationS * float64(time.Second)))
			assert.False(t, end.Before(sw.End), "%s→%s: the shared run's span holds the switch", sw.From, sw.To)
		}
	}
	assert.Positive(t, woke, "the shared run woke a model")
	assert.GreaterOrEqual(t, slowWake.SharedJ, w*0.3*float64(woke), "its wakes' time at %g W is in the shared J", w)
	// The ideal run (each model on a GPU of its own, both awake) wakes
	// nothing: no switch of the router falls inside its span.
	for _, tr := range []record.Traffic{plain, slowWake} {
		start, end := runWindow(tr, record.RunIdeal)
		for _, sw := range tr.Switches {
			assert.False(t, sw.Start.Before(end) && sw.End.After(start), "%s→%s inside the ideal run", sw.From, sw.To)
		}
	}

	none := energyRun(t, simtest.NoEnergy, "")
	assert.True(t, math.IsNaN(none.SharedJ))
	assert.True(t, math.IsNaN(none.IdealJ))
	assert.Contains(t, none.EnergyNote, gpu.ErrNoEnergy.Error())
}
