package gate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/stats"
)

// serveRun is a run of make gate-power's serving stage as it was measured
// (issue 50): two rounds of eight requests at concurrency 4, four waves of
// four whose requests lie within 1 % of each other, waves 4 % apart, the
// first wave after the wake 1.6× the others; stalled names later waves the
// host stalled (×3); first scales the first wave, later the later waves.
func serveRun(t *testing.T, rng *rand.Rand, i int, first, later float64, stalled ...int) Run {
	t.Helper()
	var xs []float64
	run := math.Exp(0.02 * rng.NormFloat64())
	for w := range 4 {
		f := run * math.Exp(0.04*rng.NormFloat64()) * later
		if w == 0 {
			f = run * 1.6 * first
		}
		for _, s := range stalled {
			if s == w {
				f *= 3
			}
		}
		for range 4 {
			xs = append(xs, 0.0055*f*math.Exp(0.01*rng.NormFloat64()))
		}
	}
	const tokS = "Serve/model=A/stage=after-wake/conc=4 tok/s"
	return mkRun(t, i, map[string][]float64{ttft: xs, tokS: {1000, 1000}, wake: around(1, 0.01, 5)})
}

// statVerdict is key's verdict of statistic st.
func statVerdict(t *testing.T, vs []Verdict, key, st string) Verdict {
	t.Helper()
	for _, v := range vs {
		if v.Name+" "+v.Unit == key && v.Stat == st {
			return v
		}
	}
	require.Failf(t, "no verdict", "%s %q", key, st)
	return Verdict{}
}

// TestServeWavesAreJudgedApart is issue 50's miss: a same-code run with
// one later wave stalled by the host was flagged against five runs (+28 to
// +34 % on B's after-wake-l2 TTFT), because its median over sixteen
// requests mixed the slow first wave with the stalled one: eight slow of
// sixteen. Judged on the requests after the first wave, a stalled wave
// moves nothing; the first wave is a statistic of its own, judged as one
// event a run (from ten runs); a slower first wave is caught there and
// a slower steady state on the median.
func TestServeWavesAreJudgedApart(t *testing.T) {
	rng := rand.New(rand.NewPCG(50, 7))
	var base []Run
	for i := range 10 {
		base = append(base, serveRun(t, rng, i, 1, 1))
	}
	stalled := serveRun(t, rng, 20, 1, 1, 2)
	k := BenchKey{Name: "Serve/model=A/stage=after-wake/conc=4", Unit: "sec/ttft"}
	before := median(stalled.Bench.Values[k])
	mid := median(base[0].Bench.Values[k])
	require.Greater(t, before/mid, 1.2, "the stalled run's median over all its requests: half of them slow")

	vs, err := Judge(t.Context(), base[:5], stalled, 10, 0.05)
	require.NoError(t, err)
	v := statVerdict(t, vs, ttft, StatMedian)
	assert.False(t, v.Regression, "one stalled wave: %+.1f %%, %s", v.ChangePct, v.How)
	assert.Less(t, math.Abs(v.ChangePct), 10.0, "the later waves' median: the stalled wave is one of three")
	f := statVerdict(t, vs, ttft, StatFirstWave)
	assert.False(t, f.Judged(), "a first wave is one event a run: five runs do not gate it")
	assert.Equal(t, UnjudgedFirstWave, f.Unjudged)
	assert.Equal(t, FewMinRuns-5, f.NeedRuns)

	vs, err = Judge(t.Context(), base, serveRun(t, rng, 21, 2, 1), 10, 0.05)
	require.NoError(t, err)
	f = statVerdict(t, vs, ttft, StatFirstWave)
	assert.True(t, f.Regression, "the first wave twice as slow, against ten runs: %s", f.How)
	assert.InDelta(t, 100, f.ChangePct, 15)
	assert.Contains(t, f.How, "t-test of this run's median of the first wave against the 10 baseline runs")
	assert.Contains(t, statVerdict(t, vs, ttft, StatMedian).How, "t-test of this run's median of the requests after the first wave")
	tail := statVerdict(t, vs, ttft, StatP95)
	assert.Equal(t, "sec/ttft p95 ratio to wave-mates", tail.StatLabel(), "16 requests: the tail judged, on the 12 after the first wave, each over its wave-mates' median")
	assert.Equal(t, "sec/ttft later-waves", v.StatLabel())
	assert.Equal(t, "sec/ttft first-wave", f.StatLabel())
	assert.False(t, statVerdict(t, vs, ttft, StatMedian).Regression, "the later waves as they were")

	vs, err = Judge(t.Context(), base[:5], serveRun(t, rng, 22, 1, 1.3), 10, 0.05)
	require.NoError(t, err)
	v = statVerdict(t, vs, ttft, StatMedian)
	assert.True(t, v.Regression, "every later wave 30 %% slower: %s", v.How)
	assert.InDelta(t, 30, v.ChangePct, 8)
}

// TestOneProcessSleepsNeedTenRuns is issue 50's other miss: against one
// baseline run in turn, same-code runs were flagged on a level-1 sleep in
// 17 of 200 (A's five sleeps of a run within 5 % of each other, runs
// near 0.35 s or near 0.45 s). The five are one process's: one draw of
// its level, which one run cannot tell from a change, nor five runs that
// all drew one level. So the sleep is gated from ten runs, as one event a
// run, and says why; a level-1 wake of the same runs is still judged on
// its own five against one run; ten runs of both levels catch a sleep
// twice as slow as the slower level.
func TestOneProcessSleepsNeedTenRuns(t *testing.T) {
	const sleep = "Sleep/model=A/level=1 sec/sleep"
	mk := func(i int, s, w float64) Run {
		return mkRun(t, i, map[string][]float64{sleep: around(s, 0.03, 5), wake: around(w, 0.01, 5)})
	}
	vs, err := Judge(t.Context(), []Run{mk(0, 0.35, 0.035)}, mk(1, 0.45, 0.035), 10, 0.05)
	require.NoError(t, err)
	v := verdict(t, vs, sleep)
	assert.False(t, v.Regression, "the process's level, +%.0f %%", v.ChangePct)
	assert.False(t, v.Judged())
	assert.Equal(t, UnjudgedOneProcess, v.Unjudged)
	assert.Equal(t, FewMinRuns-1, v.NeedRuns)
	assert.Contains(t, v.How, "5 level-1 sleeps of one server process")
	assert.Contains(t, v.Why, "one draw of its level")
	assert.Contains(t, CoverageOf(vs).String(), "1 level-1 sleeps of one server process a run (the process sets their level: a run is one draw of it): 9 more baseline runs needed (gated from 10 runs: the spread from process to process)")

	vs, err = Judge(t.Context(), []Run{mk(0, 0.35, 0.035)}, mk(1, 0.35, 0.042), 10, 0.05)
	require.NoError(t, err)
	assert.True(t, verdict(t, vs, wake).Regression, "a level-1 wake 20 %% slower: five wakes judged against one run")

	var five []Run
	for i, s := range []float64{0.35, 0.36, 0.35, 0.34, 0.355} {
		five = append(five, mk(i, s, 0.035))
	}
	vs, err = Judge(t.Context(), five, mk(9, 0.45, 0.035), 10, 0.05)
	require.NoError(t, err)
	v = verdict(t, vs, sleep)
	assert.False(t, v.Regression, "five runs of one level, this run of the other: %s", v.Why)
	assert.Equal(t, UnjudgedOneProcess, v.Unjudged)
	assert.Contains(t, v.Why, "a run's level-1 sleeps are one process's: the process sets their level")

	var ten []Run
	for i, s := range []float64{0.35, 0.45, 0.36, 0.44, 0.35, 0.46, 0.34, 0.45, 0.36, 0.35} {
		ten = append(ten, mk(i, s, 0.035))
	}
	vs, err = Judge(t.Context(), ten, mk(19, 0.9, 0.035), 10, 0.05)
	require.NoError(t, err)
	v = verdict(t, vs, sleep)
	assert.Equal(t, RuleRuns, v.Rule)
	assert.True(t, v.Regression, "twice the slower level's sleep, against ten runs of both: %s", v.How)
	vs, err = Judge(t.Context(), ten, mk(19, 0.45, 0.035), 10, 0.05)
	require.NoError(t, err)
	assert.False(t, verdict(t, vs, sleep).Regression, "the slower level again")
}

// TestWaveTailSeesAStragglerNotAStall computes the tail by hand: two
// rounds of 8 at concurrency 4, the first wave at 2 s, three later waves
// of 0.5 s. A later wave stalled whole (1.5 s) leaves the tail at 1 (every
// request at its wave-mates' median), where the plain p95 of the twelve
// is 1.5 s; one request at 1 s beside wave-mates at 0.5 s puts it at 2
// (its ratio, the nearest rank 12 of 12); so do two of a wave (each over
// the median of 0.5, 0.5 and the other: 0.5), where over the wave's own
// median (0.75) they would read 1.33. At concurrency 1 every request is
// its own wave: the plain p95, in seconds.
func TestWaveTailSeesAStragglerNotAStall(t *testing.T) {
	run := func(name string, later ...float64) Run {
		xs := append([]float64{2, 2, 2, 2}, later...)
		r, err := ParseRun([]byte(benchText(t0, map[string][]float64{
			name + " sec/ttft": xs, name + " tok/s": {100, 100},
		})), "run/bench.txt", time.Time{})
		require.NoError(t, err)
		return r
	}
	const c4 = "Serve/model=A/stage=baseline/conc=4"
	k := BenchKey{Name: c4, Unit: "sec/ttft"}
	halves := []float64{0.5, 0.5, 0.5, 0.5}
	stall := []float64{1.5, 1.5, 1.5, 1.5}
	for _, c := range []struct {
		what        string
		later       []float64
		tail, plain float64
	}{
		{"steady", slices.Concat(halves, halves, halves), 1, 0.5},
		{"one wave stalled", slices.Concat(halves, stall, halves), 1, 1.5},
		{"one straggler", slices.Concat(halves, []float64{0.5, 0.5, 0.5, 1}, halves), 2, 1},
		{"two stragglers of a wave", slices.Concat(halves, []float64{0.5, 1, 0.5, 1}, halves), 2, 1},
	} {
		r := run(c4, c.later...)
		tail, ok := r.Stat(k, StatP95)
		require.True(t, ok)
		assert.Equal(t, c.tail, tail, c.what)
		lo, hi := r.Span(k, StatP95)
		assert.Equal(t, c.plain, stats.NearestRank(slices.Sorted(slices.Values(r.Bench.Values[k][lo:hi])), 95), "%s: the later requests' plain p95", c.what)
	}
	const c1 = "Serve/model=A/stage=baseline/conc=1"
	r := run(c1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3)
	tail, _ := r.Stat(BenchKey{Name: c1, Unit: "sec/ttft"}, StatP95)
	assert.Equal(t, 3.0, tail, "concurrency 1: each request its own wave, the plain p95")
}

// TestMomentLevelsAreWavesOrSamples: the moments a run's median reads
// (momentsVar's levels), by hand. Two rounds of 8 at concurrency 4, the
// first wave apart: the later waves' medians, a stalled wave's 1.5 among
// them; a serving metric read whole (its waves not told): none; a cycle
// metric: its samples.
func TestMomentLevelsAreWavesOrSamples(t *testing.T) {
	const c4 = "Serve/model=A/stage=baseline/conc=4"
	xs := []float64{2, 2, 2, 2, 0.5, 0.6, 0.4, 0.5, 1.5, 1.4, 1.6, 1.5, 0.5, 0.5, 0.5, 1}
	r, err := ParseRun([]byte(benchText(t0, map[string][]float64{
		c4 + " sec/ttft": xs, c4 + " tok/s": {100, 100}, wake: {1, 2, 3, 4, 5},
	})), "run/bench.txt", time.Time{})
	require.NoError(t, err)
	k := BenchKey{Name: c4, Unit: "sec/ttft"}
	assert.Equal(t, []float64{0.5, 1.5, 0.5}, momentLevels(r, k, true))
	assert.Nil(t, momentLevels(r, k, false))
	assert.Equal(t, []float64{1, 2, 3, 4, 5}, momentLevels(r, BenchKey{Name: "Sleep/model=A/level=1", Unit: "sec/wake"}, true))
}

// TestJudgeSeesAStragglerNotAStall: against ten runs of serveRun, a run
// with one later wave stalled whole (×3) leaves the tail of ratios to wave-mates
// unflagged; a run with one later request twice as slow as the others of
// its wave (its wave-mates unchanged) is flagged there, its median not.
// A throughput (req-tok/s, higher is better) is judged on its p5 alike:
// one request at half its wave-mates' rate is flagged.
func TestJudgeSeesAStragglerNotAStall(t *testing.T) {
	rng := rand.New(rand.NewPCG(50, 9))
	var base []Run
	for i := range 10 {
		base = append(base, serveRun(t, rng, i, 1, 1))
	}
	vs, err := Judge(t.Context(), base, serveRun(t, rng, 20, 1, 1, 2), 10, 0.05)
	require.NoError(t, err)
	tail := statVerdict(t, vs, ttft, StatP95)
	assert.True(t, tail.WaveTail)
	assert.False(t, tail.Regression, "a wave stalled whole: %+.1f %%", tail.ChangePct)

	straggler := serveRun(t, rng, 21, 1, 1)
	k := BenchKey{Name: "Serve/model=A/stage=after-wake/conc=4", Unit: "sec/ttft"}
	straggler.Bench.Values[k][9] *= 2 // the second request of the third wave
	vs, err = Judge(t.Context(), base, straggler, 10, 0.05)
	require.NoError(t, err)
	tail = statVerdict(t, vs, ttft, StatP95)
	assert.True(t, tail.Regression, "one request twice as slow beside its wave: %s", tail.How)
	assert.Contains(t, tail.How, "each over the median of its wave-mates")
	assert.Equal(t, "sec/ttft p95 ratio to wave-mates", tail.StatLabel())
	assert.False(t, statVerdict(t, vs, ttft, StatMedian).Regression)

	const rate = "Serve/model=A/stage=after-wake/conc=4 req-tok/s"
	rk := BenchKey{Name: "Serve/model=A/stage=after-wake/conc=4", Unit: "req-tok/s"}
	withRate := func(r Run) Run {
		xs := r.Bench.Values[k]
		rs := make([]float64, len(xs))
		for i, x := range xs {
			rs[i] = 1 / x
		}
		r.Bench.Values[rk] = rs
		return r
	}
	for i := range base {
		base[i] = withRate(base[i])
	}
	slow := withRate(serveRun(t, rng, 22, 1, 1))
	slow.Bench.Values[rk][9] /= 2
	vs, err = Judge(t.Context(), base, slow, 10, 0.05)
	require.NoError(t, err)
	p5 := statVerdict(t, vs, rate, StatP5)
	assert.True(t, p5.WaveTail)
	assert.True(t, p5.Regression, "one request at half its wave-mates' rate: %s", p5.How)
}

// TestWavesSplitOnlyWhereEveryRunCan: a run with a failed request (15
// requests in two rounds) cannot be split; judged against a run that
// can, both are read on every request, the baseline's centre too, and
// the row is labelled as the plain metric.
func TestWavesSplitOnlyWhereEveryRunCan(t *testing.T) {
	rng := rand.New(rand.NewPCG(50, 11))
	b := serveRun(t, rng, 0, 1, 1)
	cur := serveRun(t, rng, 1, 1, 1)
	k := BenchKey{Name: "Serve/model=A/stage=after-wake/conc=4", Unit: "sec/ttft"}
	cur.Bench.Values[k] = cur.Bench.Values[k][:15]
	vs, err := Judge(t.Context(), []Run{b}, cur, 10, 0.05)
	require.NoError(t, err)
	v := statVerdict(t, vs, ttft, StatMedian)
	assert.False(t, v.Waves)
	assert.Equal(t, "sec/ttft", v.StatLabel())
	all, err := stats.Summarize(b.Bench.Values[k])
	require.NoError(t, err)
	assert.Equal(t, all.Median, v.Base, "the baseline's median over every request")
	for _, v := range vs {
		assert.NotEqual(t, StatFirstWave, v.Stat)
	}
	assert.False(t, v.Regression)
}
