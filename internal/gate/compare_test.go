package gate

import (
	"bytes"
	"strings"
	"testing"

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
	assert.Contains(t, out.String(), "need >= 4 samples", "two rounds cannot be significant, and the table says so")
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
