package gate

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// run is a synthetic run: five level-1 cycles whose wake takes wake s
// (with a little spread), and two serving rounds.
func run(wake float64) record.Raw {
	r := record.New([]string{"A"}, map[string]string{"A": "m"})
	r.SetSetup(record.Setup{GPU: "g", Runtime: "r"})
	for _, jitter := range []float64{-0.02, -0.01, 0, 0.01, 0.02} {
		r.AddCycle("A", record.Cycle{Level: 1, OK: true, SleepS: 1 + jitter, WakeAPIS: wake * (1 + jitter),
			ToFirstTokenS: wake*(1+jitter) + 0.1, ResidualGiB: 0.5})
	}
	r.AddPerf("A", record.PerfRun{Stage: "baseline", Concurrency: 1, Rounds: 2, Planned: 2, Success: 2, RoundsPassed: 2,
		RoundTPS: []float64{100, 101}, TTFT: []float64{0.1, 0.1}, TPOT: []float64{0.01, 0.01}})
	return r.Raw()
}

func bench(t *testing.T, raw record.Raw) *bytes.Buffer {
	var b bytes.Buffer
	require.NoError(t, report.WriteBench(&b, raw))
	return &b
}

func TestGateCatchesAPlantedWakeRegression(t *testing.T) {
	ds, err := CompareBench(bench(t, run(1.0)), bench(t, run(1.2)), 10, 0.05)
	require.NoError(t, err)
	var regressions []string
	for _, d := range ds {
		if d.Regression {
			regressions = append(regressions, d.Name+" "+d.Unit)
		}
	}
	assert.ElementsMatch(t, []string{"Sleep/model=A/level=1 sec/wake", "Sleep/model=A/level=1 sec/first-token"}, regressions)
	var out strings.Builder
	require.NoError(t, WriteDeltas(&out, ds))
	assert.Contains(t, out.String(), "+20.00%")
	assert.Contains(t, out.String(), "REGRESSION")
	assert.Contains(t, out.String(), "n = 2 vs 2 cannot be significant at 0.05: medians judged on ±20 %", "two rounds cannot be significant, and the table says so")
}

func TestGatePassesTheSameRun(t *testing.T) {
	ds, err := CompareBench(bench(t, run(1.0)), bench(t, run(1.0)), 10, 0.05)
	require.NoError(t, err)
	for _, d := range ds {
		assert.False(t, d.Regression, "%s %s", d.Name, d.Unit)
	}
}

func TestGateToleratesSmallSignificantChanges(t *testing.T) {
	ds, err := CompareBench(bench(t, run(1.0)), bench(t, run(1.08)), 10, 0.05)
	require.NoError(t, err)
	for _, d := range ds {
		if d.Name == "Sleep/model=A/level=1" && d.Unit == "sec/wake" {
			assert.True(t, d.Significant, "8 %% is significant with 5 separated samples")
			assert.False(t, d.Regression, "but within the 10 %% tolerance")
		}
	}
}

func TestGateImprovementIsNoRegression(t *testing.T) {
	ds, err := CompareBench(bench(t, run(1.2)), bench(t, run(1.0)), 10, 0.05)
	require.NoError(t, err)
	for _, d := range ds {
		assert.False(t, d.Regression, "%s %s got faster", d.Name, d.Unit)
	}
}

func TestGateErrors(t *testing.T) {
	_, err := CompareBench(strings.NewReader("not a benchmark\n"), bench(t, run(1)), 10, 0.05)
	assert.ErrorContains(t, err, "baseline: no benchmark results")
	_, err = CompareBench(strings.NewReader("BenchmarkOther 1 3 sec/x\n"), bench(t, run(1)), 10, 0.05)
	assert.ErrorContains(t, err, "share no benchmark")
	_, err = CompareBench(strings.NewReader(`{"status": "PASS"}`), bench(t, run(1)), 10, 0.05)
	assert.ErrorContains(t, err, "baseline is JSON (a report.json?): it holds summaries, not samples")
	// go test -bench output carries a -GOMAXPROCS suffix: it still matches.
	ds, err := CompareBench(strings.NewReader("BenchmarkSleep/model=A/level=1-16 1 1.0 sec/sleep\n"), bench(t, run(1)), 10, 0.05)
	require.NoError(t, err)
	assert.Equal(t, "Sleep/model=A/level=1", ds[0].Name)
}

// slowRun is a full synthetic run (the default protocol's counts: 1 + 2
// starts, 3 level-2 cycles, 2 rounds, 16 requests, one device peak), every
// figure scaled by worse: durations × worse, rates ÷ worse, memory × worse.
func slowRun(worse float64) record.Raw {
	r := record.New([]string{"A"}, map[string]string{"A": "m"})
	r.SetSetup(record.Setup{GPU: "g", Runtime: "r"})
	for i, warm := range []bool{false, true, true} {
		r.AddRestart("A", record.Restart{Warm: warm, ReadyS: (20 + float64(i)) * worse, FirstTokenS: (21 + float64(i)) * worse})
	}
	for i := range 3 {
		r.AddCycle("A", record.Cycle{Level: 2, OK: true, SleepS: 1, WakeAPIS: (9 + float64(i)/10) * worse, ToFirstTokenS: (9.5 + float64(i)/10) * worse, ResidualGiB: 0.5})
	}
	run := record.PerfRun{Stage: "baseline", Concurrency: 4, Rounds: 2, Planned: 16, Success: 16, RoundsPassed: 2, RoundTPS: []float64{3000 / worse, 3050 / worse}}
	for i := range 16 {
		run.TTFT = append(run.TTFT, 0.05)
		run.TPOT = append(run.TPOT, 0.01)
		run.ReqTPS = append(run.ReqTPS, (750+float64(i))/worse)
	}
	r.AddPerf("A", run)
	r.Finish([]float64{10, 20 * worse}, nil, time.Unix(0, 0))
	return r.Raw()
}

// TestGateCatchesWhatSmallSamplesHide: at the default counts no
// Mann-Whitney test of a level-2 wake (n = 3), a restart (n = 1, 2), a
// round's tok/s (n = 2) or the device peak (n = 1) can be significant, so a
// 10× slower wake and restart, 90 % fewer tok/s and a doubled peak used to
// pass. They are caught now: on the medians with twice the tolerance, said
// so, and per-request tok/s (n = 16) significantly.
func TestGateCatchesWhatSmallSamplesHide(t *testing.T) {
	ds, err := CompareBench(bench(t, slowRun(1)), bench(t, slowRun(1)), 10, 0.05)
	require.NoError(t, err)
	for _, d := range ds {
		assert.False(t, d.Regression, "the same run: %s %s", d.Name, d.Unit)
	}
	for _, c := range []struct {
		worse float64
		want  []string
	}{
		{10, []string{"Restart/model=A/kind=initial sec/ready", "Restart/model=A/kind=initial sec/first-token",
			"Restart/model=A/kind=warm sec/ready", "Restart/model=A/kind=warm sec/first-token",
			"Sleep/model=A/level=2 sec/wake", "Sleep/model=A/level=2 sec/first-token",
			"Serve/model=A/stage=baseline/conc=4 tok/s", "Serve/model=A/stage=baseline/conc=4 req-tok/s", "Memory/device GiB/peak"}},
	} {
		ds, err := CompareBench(bench(t, slowRun(1)), bench(t, slowRun(c.worse)), 10, 0.05)
		require.NoError(t, err)
		got := map[string]Delta{}
		for _, d := range ds {
			if d.Regression {
				got[d.Name+" "+d.Unit] = d
			}
		}
		for _, w := range c.want {
			d, ok := got[w]
			if assert.True(t, ok, "%s is a regression at %g× worse", w, c.worse) {
				assert.Equal(t, w != "Serve/model=A/stage=baseline/conc=4 req-tok/s", d.ToleranceOnly, "%s: judged on the medians only when n is too small", w)
			}
		}
		var out strings.Builder
		require.NoError(t, WriteDeltas(&out, ds))
		assert.Contains(t, out.String(), "REGRESSION (tolerance only: n = 3 vs 3 cannot be significant at 0.05: medians judged on ±20 %)")
	}
	// 15 % worse: within twice the tolerance where only medians are judged.
	ds, err = CompareBench(bench(t, slowRun(1)), bench(t, slowRun(1.15)), 10, 0.05)
	require.NoError(t, err)
	for _, d := range ds {
		if d.ToleranceOnly {
			assert.False(t, d.Regression, "%s %s: 15 %% is inside the ±20 %% band", d.Name, d.Unit)
		}
	}
}

func TestMinP(t *testing.T) {
	// Without ties: 2 / C(n1+n2, n1).
	assert.InDelta(t, 1.0/3, minP(distinct(2, 2)), 1e-12)
	assert.InDelta(t, 0.1, minP(distinct(3, 3)), 1e-12)
	assert.InDelta(t, 2.0/252, minP(distinct(5, 5)), 1e-12)
	assert.InDelta(t, 2.0/252, minP([]float64{9, 1, 5, 3, 7}, []float64{2, 8, 4, 10, 6}), 1e-12, "any order, any split")
	assert.Equal(t, 1.0, minP(distinct(1, 1)))
	assert.Equal(t, 1.0, minP(nil, []float64{1, 2, 3, 4, 5}))
	// Ties: seven values at 0.58 and three at 16. The most extreme split
	// puts all three 16s on one side: P = 2 · C(7,5) / C(10,5) = 42/252.
	resid := []float64{0.58, 0.58, 0.58, 0.58, 0.58}
	assert.InDelta(t, 42.0/252, minP(resid, []float64{0.58, 0.58, 16, 16, 16}), 1e-12)
	assert.Equal(t, 1.0, minP(resid, resid), "every value equal: no split differs")
}

// TestGateCatchesATiedRegression: the residuals, [0.58 ×5] then
// [0.58, 0.58, 16, 16, 16] (+2659 %). Ties leave the U test no split below
// p = 0.167, so it can never be significant at 0.05; the gate judged it as
// if five samples a side could (2/252 without ties) and let it pass. It is
// judged on the medians now, and the table says why.
func TestGateCatchesATiedRegression(t *testing.T) {
	lines := func(vals ...float64) *strings.Builder {
		var b strings.Builder
		b.WriteString("Unit GiB/residual better=lower\n")
		for _, v := range vals {
			fmt.Fprintf(&b, "BenchmarkSleep/model=A/level=1 1 %g GiB/residual\n", v)
		}
		return &b
	}
	old := lines(0.58, 0.58, 0.58, 0.58, 0.58)
	ds, err := CompareBench(strings.NewReader(old.String()), strings.NewReader(lines(0.58, 0.58, 16, 16, 16).String()), 10, 0.05)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	d := ds[0]
	assert.InDelta(t, 2658.6, d.ChangePct, 0.1)
	assert.InDelta(t, 42.0/252, d.Cmp.P, 1e-9, "benchstat's own p: the test is right, only never significant")
	assert.True(t, d.ToleranceOnly)
	assert.True(t, d.Regression, "+2659 %% residual")
	var out strings.Builder
	require.NoError(t, WriteDeltas(&out, ds))
	assert.Contains(t, out.String(), "REGRESSION (tolerance only: n = 5 vs 5 with ties (smallest p 0.167) cannot be significant at 0.05: medians judged on ±20 %)")

	// The same tied baseline and a value within twice the tolerance: no regression.
	ds, err = CompareBench(strings.NewReader(old.String()), strings.NewReader(lines(0.58, 0.58, 0.62, 0.62, 0.62).String()), 10, 0.05)
	require.NoError(t, err)
	assert.False(t, ds[0].Regression, "+6.9 %% is inside the ±20 %% band")
	// Without ties five samples a side can be significant: the U test decides.
	ds, err = CompareBench(strings.NewReader(lines(0.50, 0.51, 0.52, 0.53, 0.54).String()), strings.NewReader(lines(0.80, 0.81, 0.82, 0.83, 0.84).String()), 10, 0.05)
	require.NoError(t, err)
	assert.False(t, ds[0].ToleranceOnly)
	assert.True(t, ds[0].Significant)
	assert.True(t, ds[0].Regression)
}
