package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m, "") }

// writeRun writes one run's bench.txt into dir: the serving TTFT of four
// rounds of 8 requests at concurrency 4 (tailKey, with a tok/s line a
// round), each wave of 4 off by its own 5 % and the first twice as slow,
// under a hog (others > 50 %) one wave in seven or so stalled 3×,
// a wake of 5 samples, and the host load of both windows; every time is
// scaled by f, the wake by wake too.
func writeRun(t *testing.T, rng *rand.Rand, dir string, f, wake, others float64) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var b strings.Builder
	b.WriteString("# wakebench run started 2026-12-05T00:00:00Z\nUnit sec/ttft better=lower\nUnit sec/wake better=lower\nUnit tok/s better=higher\ngpu: g\n")
	run := math.Exp(0.02 * rng.NormFloat64())
	for round := range 4 {
		fmt.Fprintf(&b, "BenchmarkServe/model=A/stage=baseline/conc=4 1 %g tok/s\n", 2000/f/run)
		for wave := range 2 {
			w := math.Exp(0.05 * rng.NormFloat64())
			if round == 0 && wave == 0 {
				w *= 2 // the first wave after a start
			}
			if others > 50 && rng.Float64() < 0.15 {
				w *= 3 // under a hog a wave stalls whole now and then
			}
			for range 4 {
				fmt.Fprintf(&b, "BenchmarkServe/model=A/stage=baseline/conc=4 1 %g sec/ttft\n", 0.015*f*run*w*math.Exp(0.01*rng.NormFloat64()))
			}
		}
	}
	for range 5 {
		fmt.Fprintf(&b, "BenchmarkSleep/model=A/level=1 1 %g sec/wake\n", 0.03*f*wake*run*math.Exp(0.01*rng.NormFloat64()))
	}
	for _, w := range []string{"A-baseline", "A-sleep-level1"} {
		fmt.Fprintf(&b, "BenchmarkHost/window=%s 1 %g %%-others-cpu %g wait/run\n", w, others, 0.2+others/50)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bench.txt"), []byte(b.String()), 0o644))
}

// TestTableMeetsItsGoalsOnRunsAsTheGateModelsThem: runs drawn as the
// runs rule models them (each run off by 2 %, its samples by 5 % and 1 %)
// give the table's rows by hand: the same code flagged in none, 1.5× and
// a 30 % slower wake in every run, the injected changes in every run; the
// same code under a busier machine is NOT EVALUATED against quiet runs,
// never flagged; each gated metric's stated power is injected once per
// run. A run without bench.txt is an error, not a row.
func TestTableMeetsItsGoalsOnRunsAsTheGateModelsThem(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 1))
	out := t.TempDir()
	for i := 1; i <= 10; i++ {
		writeRun(t, rng, filepath.Join(out, scBase, fmt.Sprint(i)), 1, 1, 2)
		writeRun(t, rng, filepath.Join(out, scBaseLoad, fmt.Sprint(i)), 1.3, 1, 80)
	}
	for i := 1; i <= 20; i++ {
		writeRun(t, rng, filepath.Join(out, scSame, fmt.Sprint(i)), 1, 1, 2)
		writeRun(t, rng, filepath.Join(out, scSameLoad, fmt.Sprint(i)), 1.3, 1, 80)
	}
	for i := 1; i <= 4; i++ {
		writeRun(t, rng, filepath.Join(out, scSlow, fmt.Sprint(i)), 1.5, 1, 2)
		writeRun(t, rng, filepath.Join(out, scSlowWake, fmt.Sprint(i)), 1, 1.3, 2)
		writeRun(t, rng, filepath.Join(out, scSlowLoad, fmt.Sprint(i)), 1.3*1.5, 1, 80)
	}
	var b strings.Builder
	ok, err := run(t.Context(), &b, out, true, 10, 0.05, true, false)
	require.NoError(t, err)
	assert.True(t, ok, "every goal met")
	table := b.String()
	t.Log(table)
	// Every goal of the false alarms and of the changes made is met; the
	// stated power's injections are a measurement of 100 correlated trials
	// (five gated metrics, twenty runs, each against half the baseline or,
	// the tail, all of it): counted and reported, not a goal (package
	// gate's TestStatedPowerHoldsByInjection holds it over 100 baselines).
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| runs") && !strings.Contains(l, "stated power") && !strings.Contains(l, "half of it") && !strings.Contains(l, "| — |") {
			assert.True(t, strings.HasSuffix(l, "| yes |"), "goal missed: %s", l)
		}
	}
	assert.Regexp(t, `stated power \(smallest flagged\), injected into each same-code run \(quiet\), one metric at a time \| 5 of the 10 runs \(quiet\), drawn for each run; all 10 for a metric gated only from more \| \d+ of 100 \|`, table)
	// Under the hog the tail's goal is issue 50's, nine runs in ten (a
	// run too busy to judge is NOT EVALUATED, never passed).
	assert.Regexp(t, `the p95 doubled \(of the requests after the first wave, at 28 requests, the 2 slowest by their times\), their median unchanged \| 10 runs \(under the hog\) \| \d+ of \d+ \| \d+ \| ≥ \d+ flagged \| yes \|`, table)
	assert.Regexp(t, `half of it, injected alike \(under the hog\) \| 5 of the 10 runs \(under the hog\), drawn for each run; all 10 for a metric gated only from more \| \d+ of 100 \|`, table)
	for _, want := range []string{
		"every request but the fastest twice as slow (Serve/model=A/stage=baseline/conc=4 sec/ttft) | 10 runs (quiet) | 20 of 20 |",
		"the p95 doubled (of the requests after the first wave, at 28 requests, the 2 slowest by their times), their median unchanged | 10 runs (quiet) | 20 of 20 |",
		"the first wave twice as slow (a stage's first requests, the prefix cache empty), the later waves unchanged | 10 runs (quiet) | 20 of 20 |",
		"the first wave twice as slow (a stage's first requests, the prefix cache empty), the later waves unchanged | 10 runs (under the hog) |",
		"machine: ",
		"quiet: Sleep/model=A/level=1 sec/wake: stated power flagged in",
	} {
		assert.Contains(t, table, want)
	}

	// The false-alarm rows say what each run judged: against five runs the
	// later waves' median and the wake (the tail, the first wave and the
	// rounds' tok/s are gated from ten), of nine metrics (the TTFT's
	// three, tok/s, the wake, the host load's four).
	for _, want := range []string{
		`\| same code \(quiet\) \| 5 runs \(quiet\); judged 2 of 9 metrics a run \| 0 of 20 \| 0 \| 0 flagged \| yes \|`,
		`\| same code \(quiet\) \| 1 run \(quiet\), each of 10 in turn; judged \d+ of \d+ metrics a run \|`,
		`\| 1\.5× slower \(quiet\) \| 5 runs \(quiet\); judged \d+ of 9 metrics a run \| 4 of 4 \|`,
		`\| every wake 10 % slower \(quiet\) \| 5 runs \(quiet\); judged \d+ of 9 metrics a run \| 4 of 4 \|`,
		`\| same code \(under the hog\) \| 5 runs \(under the hog\); judged \d+ of 9 metrics a run \| 0 of 20 \|`,
		`\| same code \(under the hog\) \| 5 runs \(quiet\); judged \d+ of 9 metrics a run \| 0 of 20 \| 20 \|`,
		`\| 1\.5× slower \(under the hog\) \| 5 runs \(under the hog\); judged \d+ of 9 metrics a run \| 4 of 4 \|`,
	} {
		assert.Regexp(t, want, table)
	}

	require.NoError(t, os.MkdirAll(filepath.Join(out, scSame, "21"), 0o755))
	_, err = run(t.Context(), &b, out, true, 10, 0.05, false, false)
	assert.ErrorContains(t, err, "a run wrote no bench.txt")
	_, err = run(t.Context(), &b, t.TempDir(), false, 10, 0.05, false, false)
	assert.ErrorContains(t, err, "no runs of base or same")
}

// TestInjectKeepsTheWaves: the gate reads a serving metric's waves from
// its samples' order, so an injection changes samples in their places.
// Two rounds of 8 at concurrency 4: the first wave, a wave near 10, a wave
// stalled near 30, a wave near 10 with one request 3 % above the median of
// its wave-mates (10.4 over 10.1, the median of 10.2, 10 and 10.1). The
// stated power's injection into the tail doubles that request (the top
// ratio: the gate's p95 of 12 ratios) and so the gate's tail, exactly (its
// wave-mates are its ratio's denominator, and they stay); the slower tail
// users fear doubles the slowest request (30.9, in the stalled wave); the
// first wave's injection doubles the first four; each leaves every other
// request where and as it was, the later median, and the run injected
// into.
func TestInjectKeepsTheWaves(t *testing.T) {
	k := tailKey
	xs := []float64{20, 21, 22, 23, 10, 10.1, 10.2, 10.3, 30, 30.3, 30.6, 30.9, 10.2, 10, 10.4, 10.1}
	r := gate.Run{Bench: benchOf(map[gate.BenchKey][]float64{k: xs, {Name: k.Name, Unit: "tok/s"}: {1, 1}})}
	m0, _ := r.Stat(k, gate.StatMedian)
	assert.InDelta(t, 10.25, m0, 1e-12, "the later waves' median: (10.2 + 10.3) / 2")
	t0, _ := r.Stat(k, gate.StatP95)
	assert.InDelta(t, 10.4/10.1, t0, 1e-12, "the top ratio to its wave-mates' median")

	stated := inject(r, k, gate.StatP95, -1, 100)
	want := slices.Clone(xs)
	want[14] = 20.8
	assert.Equal(t, want, stated.Bench.Values[k])
	t1, _ := stated.Stat(k, gate.StatP95)
	assert.InDelta(t, 2*t0, t1, 1e-9, "the gate's tail doubled")

	fear := tailSlower(r)
	want = slices.Clone(xs)
	want[11] = 61.8 // of 12 later requests the p95 (nearest rank 12) is the slowest, 30.9
	assert.Equal(t, want, fear.Bench.Values[k])

	first := inject(r, k, gate.StatFirstWave, -1, 100)
	assert.Equal(t, append([]float64{40, 42, 44, 46}, xs[4:]...), first.Bench.Values[k])
	f, _ := first.Stat(k, gate.StatFirstWave)
	assert.Equal(t, 2*21.5, f)

	for _, inj := range []gate.Run{stated, fear, first} {
		m, _ := inj.Stat(k, gate.StatMedian)
		assert.Equal(t, m0, m, "the later median unchanged")
	}
	assert.Equal(t, xs, r.Bench.Values[k], "the run injected into is left as it was")
}

// TestInjectMovesExactlyItsStatistic: a tail injected into 16 and into 20
// requests (the p95 the slowest, then the second slowest) doubles that
// run's p95, or halves its p5, by nearest rank, and leaves its median; the
// median's injection moves every sample.
func TestInjectMovesExactlyItsStatistic(t *testing.T) {
	k := gate.BenchKey{Name: "Serve/model=A/stage=baseline/conc=4", Unit: "sec/ttft"}
	for _, n := range []int{16, 20} {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(i + 1)
		}
		r := gate.Run{Bench: benchOf(map[gate.BenchKey][]float64{k: xs})}
		for _, c := range []struct {
			stat   string
			better int
			f      float64
		}{{gate.StatP95, -1, 2}, {gate.StatP5, 1, 0.5}, {gate.StatMedian, -1, 2}} {
			before, _ := r.Stat(k, c.stat)
			med, _ := r.Stat(k, gate.StatMedian)
			inj := inject(r, k, c.stat, c.better, 100*math.Abs(c.f-1))
			after, _ := inj.Stat(k, c.stat)
			assert.InDelta(t, c.f*before, after, 1e-12, "n %d %s", n, c.stat)
			if c.stat != gate.StatMedian {
				m, _ := inj.Stat(k, gate.StatMedian)
				assert.Equal(t, med, m, "n %d %s: the median unchanged", n, c.stat)
			}
			assert.Equal(t, float64(n), xs[n-1], "the run injected into is left as it was")
		}
	}
}

// benchOf is a Bench of vals, each name split as a bench file's is read
// (its samples copied).
func benchOf(vals map[gate.BenchKey][]float64) gate.Bench {
	var b gate.Bench
	for k, xs := range vals {
		b.Add(record.ParseBenchName(k.Name), k.Unit, xs...)
	}
	return b
}
