package variants

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/gate"
)

// tCDF2 and tQuantile2 are Student's t with 2 degrees of freedom in
// closed form: the hand computation the paired interval is checked against.
func tCDF2(t float64) float64      { return 0.5 + t/(2*math.Sqrt(t*t+2)) }
func tQuantile2(p float64) float64 { return (2*p - 1) / math.Sqrt(2*p*(1-p)) }

// Three blocks: the variant's wake 10 %, 20 % and 15 % slower than the
// reference's in the same block.
func TestPairedIntervalByHand(t *testing.T) {
	pairs := []pair{{1, 1.10}, {2, 2.40}, {0.5, 0.575}}
	k := gate.BenchKey{Name: "Sleep/model=A/level=1", Unit: "sec/wake"}
	m := compareMetric("v2", k, -1, pairs, 10, 0.05)

	d := []float64{math.Log(1.10), math.Log(1.20), math.Log(1.15)}
	mean := (d[0] + d[1] + d[2]) / 3
	ss := 0.0
	for _, x := range d {
		ss += (x - mean) * (x - mean)
	}
	se := math.Sqrt(ss/2) / math.Sqrt(3)
	q := tQuantile2(0.975) // 4.3027
	assert.InDelta(t, 4.302653, q, 1e-6)
	assert.Equal(t, 3, m.Blocks)
	assert.InDelta(t, 100*(math.Exp(mean)-1), m.DeltaPct, 1e-9, "the geometric mean of the blocks' ratios: +14.9 %")
	assert.InDelta(t, 14.93, m.DeltaPct, 0.01)
	assert.InDelta(t, 100*(math.Exp(mean-q*se)-1), m.LoPct, 1e-6)
	assert.InDelta(t, 100*(math.Exp(mean+q*se)-1), m.HiPct, 1e-6)
	assert.InDelta(t, 2*(1-tCDF2(mean/se)), m.P, 1e-9, "p ≈ 0.031")
	assert.InDelta(t, 0.031, m.P, 0.001)
	// The columns are the geometric means of the blocks' medians, whose
	// ratio is 1 + Δ: (1·2·0.5)^(1/3) = 1 and (1.1·2.4·0.575)^(1/3).
	assert.InDelta(t, 1, m.Ref, 1e-12)
	assert.InDelta(t, math.Cbrt(1.1*2.4*0.575), m.Var, 1e-12)
	assert.InDelta(t, 1+m.DeltaPct/100, m.Var/m.Ref, 1e-12)
	// The rule flags an observed change beyond max(tolerance, q·se) on
	// the log scale: here q·se (0.108) is beyond log 1.1 (0.095), and the
	// change flagged 8 times in 10 is t(0.8)·se further.
	thr := math.Max(math.Log(1.10), q*se)
	assert.InDelta(t, q*se, thr, 1e-12)
	assert.InDelta(t, 100*(math.Exp(thr+tQuantile2(PowerLevel)*se)-1), m.DetectPct, 1e-6, "about +14 %")

	// Judged alone: significant and beyond ±10 %: worse (lower is better);
	// beyond no ±20 %: same; the same figures with higher better: better.
	for _, tc := range []struct {
		better int
		tol    float64
		want   string
	}{{-1, 10, Worse}, {-1, 20, Same}, {+1, 10, Better}} {
		ms := []Metric{compareMetric("v2", k, tc.better, pairs, tc.tol, 0.05)}
		judgeAll(ms, tc.tol, 0.05)
		assert.Equal(t, tc.want, ms[0].Verdict, "better %+d, tolerance %g", tc.better, tc.tol)
	}
}

// Benjamini-Hochberg is a step-up: with p 0.031 and 0.04 over two
// metrics, the larger passes 2·0.05/2 and takes the smaller with it,
// which alone (0.031 > 0.05/2) would not pass.
func TestFamilyIsStepUp(t *testing.T) {
	ms := []Metric{
		{Name: "a", Better: -1, DeltaPct: 30, P: 0.031, Verdict: Same},
		{Name: "b", Better: -1, DeltaPct: 30, P: 0.04, Verdict: Same},
		{Name: "c", Better: 0, Verdict: NotJudge},
	}
	judgeAll(ms, 10, 0.05)
	assert.Equal(t, []string{Worse, Worse, NotJudge}, []string{ms[0].Verdict, ms[1].Verdict, ms[2].Verdict})
	ms[1].P, ms[0].Verdict, ms[1].Verdict = 0.06, Same, Same
	judgeAll(ms, 10, 0.05)
	assert.Equal(t, []string{Same, Same}, []string{ms[0].Verdict, ms[1].Verdict}, "0.031 > 0.025 and 0.06 > 0.05: neither")
}

// judgeAll is judgeFamily over ms as one family (no variant_focus).
func judgeAll(ms []Metric, tol, alpha float64) {
	for i := range ms {
		ms[i].Focus = true
	}
	judgeFamily(ms, true, "metrics", tol, alpha)
}

// A focus stated before the run is its own family: p 0.02 of the one
// figure in focus passes 0.05/1, which among three figures (0.05/3) it
// would not; the figures outside the focus are judged among themselves
// (Compare never fails the run on them: TestCompareGatesTheFocusOnly).
func TestFocusIsItsOwnFamily(t *testing.T) {
	mk := func() []Metric {
		return []Metric{
			{Name: "Sleep/model=B/level=1", Unit: "sec/wake", Better: -1, DeltaPct: 11, P: 0.02, Verdict: Same},
			{Name: "Serve/model=A/stage=baseline/conc=1", Unit: "sec/ttft", Better: -1, DeltaPct: 30, P: 0.3, Verdict: Same},
			{Name: "Serve/model=A/stage=baseline/conc=1", Unit: "tok/s", Better: +1, DeltaPct: -1, P: 0.9, Verdict: Same},
		}
	}
	ms := mk()
	judgeAll(ms, 5, 0.05)
	assert.Equal(t, []string{Same, Same, Same}, []string{ms[0].Verdict, ms[1].Verdict, ms[2].Verdict}, "0.02 > 0.05/3, 0.3 > 2·0.05/3, 0.9 > 0.05: none in one family of three")
	ms = mk()
	inFocus := func(name, unit string) bool { return strings.HasPrefix(name, "Sleep/") && unit == "sec/wake" }
	for i := range ms {
		ms[i].Focus = inFocus(ms[i].Name, ms[i].Unit)
	}
	judgeFamily(ms, true, "metrics in protocol.variant_focus", 5, 0.05)
	judgeFamily(ms, false, "metrics outside protocol.variant_focus (shown, not gated)", 5, 0.05)
	assert.Equal(t, Worse, ms[0].Verdict, "0.02 ≤ 0.05/1 in a family of one")
	assert.Equal(t, Same, ms[1].Verdict, "0.3 > 0.05/2 and 0.9 > 0.05: the other family flags nothing")
	assert.Contains(t, ms[0].Why, "over the variant's 1 judged metrics in protocol.variant_focus")
	assert.Contains(t, ms[2].Why, "2 judged metrics outside protocol.variant_focus (shown, not gated)")
}

func TestWhatCannotBeJudgedSaysWhy(t *testing.T) {
	k := gate.BenchKey{Name: "X", Unit: "sec/wake"}
	m := compareMetric("v", k, -1, []pair{{1, 1.1}}, 10, 0.05)
	assert.Equal(t, NotJudge, m.Verdict)
	assert.Contains(t, m.Why, "in 1 block(s) of both")
	assert.True(t, math.IsNaN(m.DeltaPct))
	m = compareMetric("v", k, -1, []pair{{0, 0}, {1, 1}}, 10, 0.05)
	assert.Contains(t, m.Why, "0 or negative")
	m = compareMetric("v", gate.BenchKey{Name: "Host", Unit: "pct"}, 0, []pair{{1, 1}, {2, 2}}, 10, 0.05)
	assert.Contains(t, m.Why, "no better= direction")
	b, err := m.MarshalJSON()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"delta_pct":null`, "a figure not computed is null, not 0")

	// Every block moved alike: no spread, the change is certain, and
	// anything beyond the tolerance is flagged.
	m = compareMetric("v", k, -1, []pair{{1, 1.5}, {2, 3}}, 10, 0.05)
	assert.Equal(t, 0.0, m.P)
	assert.InDelta(t, 50, m.DeltaPct, 1e-9)
	assert.InDelta(t, 10, m.DetectPct, 1e-9)
}

// The smallest change caught is in the worse direction: up by the
// tolerance for a lower-is-better unit, down by it for a higher-is-better
// one, never less than the tolerance.
func TestDetectIsInTheWorseDirection(t *testing.T) {
	assert.InDelta(t, 10, detectPct(-1, 10, 4.3, 0.9, 0), 1e-9, "lower is better: ×1.10")
	assert.InDelta(t, 10, detectPct(+1, 10, 4.3, 0.9, 0), 1e-9, "higher is better: ×0.90 (log 1/0.9 on the log scale)")
	se := 0.05 // q·se = 0.215 beyond log 1.1: significance binds
	assert.InDelta(t, 100*(math.Exp(4.3*se+0.9*se)-1), detectPct(-1, 10, 4.3, 0.9, se), 1e-9)
	assert.InDelta(t, 100*(1-math.Exp(-(4.3*se+0.9*se))), detectPct(+1, 10, 4.3, 0.9, se), 1e-9)
}

// A figure one side alone has (a phase one release cannot run) is listed,
// not judged, naming the side.
func TestOneSidedFiguresAreListed(t *testing.T) {
	bench := func(keys ...string) gate.Bench {
		b := gate.Bench{Values: map[gate.BenchKey][]float64{}}
		for _, k := range keys {
			b.Values[gate.BenchKey{Name: k, Unit: "sec/wake"}] = []float64{1}
		}
		return b
	}
	blocks := []map[string]gate.Bench{
		{"ref": bench("Sleep", "KV"), "new": bench("Sleep", "Level0")},
		{"ref": bench("Sleep", "KV"), "new": bench("Sleep", "Level0")},
	}
	ms := compare("ref", []string{"new"}, blocks, "median", 10, 0.05, nil)
	why := map[string]string{}
	for _, m := range ms {
		why[m.Name] = m.Verdict + " " + m.Why
	}
	assert.Equal(t, "not judged only in ref", why["KV"])
	assert.Equal(t, "not judged only in new", why["Level0"])
	assert.Contains(t, why["Sleep"], "its unit has no better= direction", "no unit metadata here")
}

// comparison.json reads back as written: a figure not computed (null) is
// NaN again, never a 0 that would read as p 0 or no change; a metric of
// a comparison written before protocol.variant_focus (no "focus") was
// gated.
func TestMetricJSONRoundTrip(t *testing.T) {
	var old Metric
	require.NoError(t, json.Unmarshal([]byte(`{"name":"x","unit":"sec/wake","verdict":"worse"}`), &old))
	assert.True(t, old.Focus)
	var focused Metric
	b, err := json.Marshal(Metric{Name: "x", Focus: true})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &focused))
	assert.True(t, focused.Focus)

	k := gate.BenchKey{Name: "Sleep/model=A/level=1", Unit: "sec/wake"}
	for _, m := range []Metric{
		compareMetric("v", k, -1, []pair{{1, 1.1}, {2, 2.4}, {0.5, 0.575}}, 10, 0.05),
		compareMetric("v", k, -1, []pair{{1, 1.1}}, 10, 0.05),       // not judged: NaN figures
		compareMetric("v", k, -1, []pair{{0, 1}, {1, 1}}, 10, 0.05), // a ratio of +Inf, written null
	} {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		var back Metric
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, m.Verdict, back.Verdict)
		assert.False(t, back.Focus, "focus false reads back false")
		for _, f := range [][2]float64{{m.P, back.P}, {m.DeltaPct, back.DeltaPct}, {m.DetectPct, back.DetectPct}, {m.Ref, back.Ref}} {
			if math.IsNaN(f[0]) {
				assert.True(t, math.IsNaN(f[1]), "%s: NaN reads back as NaN, not 0", b)
			} else {
				assert.InDelta(t, f[0], f[1], 1e-12)
			}
		}
		require.Len(t, back.Ratios, len(m.Ratios))
		for i, r := range m.Ratios {
			if math.IsNaN(r) || math.IsInf(r, 0) {
				assert.True(t, math.IsNaN(back.Ratios[i]), "a ratio not finite reads back as NaN")
			}
		}
	}
}

// TestBlocksForByHand: blocks' log ratios ±0.1 in turn (sample SD
// √(0.04/3) = 0.1155), a lower-is-better unit, a 5 % tolerance, α 0.05:
// a 10 % worse change (log 1.1 = 0.0953) needs the threshold
// max(log 1.05, t(0.975, n−1)·SD/√n) plus t(0.8, n−1)·SD/√n within it.
// By Student's t table: 13 blocks give 2.179·0.03203 + 0.873·0.03203 =
// 0.0978, short; 14 give 2.160·0.03086 + 0.870·0.03086 = 0.0935. With
// no spread two blocks do; a change within the tolerance never is; one
// block, or no direction, says nothing.
func TestBlocksForByHand(t *testing.T) {
	r := []float64{math.Exp(0.1), math.Exp(-0.1), math.Exp(0.1), math.Exp(-0.1)}
	m := Metric{Better: -1, Ratios: r}
	assert.Equal(t, 14, BlocksFor(m, 10, 5, 0.05, 100))
	assert.Equal(t, 11, BlocksFor(m, 10, 5, 0.05, 10), "beyond the limit: limit+1")
	assert.Equal(t, 101, BlocksFor(m, 4, 5, 0.05, 100), "within the tolerance: never")
	assert.Equal(t, 2, BlocksFor(Metric{Better: -1, Ratios: []float64{1.02, 1.02, 1.02}}, 10, 5, 0.05, 100), "no spread")
	assert.Zero(t, BlocksFor(Metric{Better: -1, Ratios: r[:1]}, 10, 5, 0.05, 100))
	assert.Zero(t, BlocksFor(Metric{Ratios: r}, 10, 5, 0.05, 100))
}

// protocol.variant_block_figure "best": a block's figure is its fastest
// wake (sec/wake, lower better) and its highest rate (tok/s, higher
// better), where "median" takes the middle sample. Two blocks of three
// samples, a stall in one sample of each side, by hand:
//
//	block 1: ref wakes 1.0 1.2 3.0, new 1.1 2.5 2.6: best 1.0, 1.1 (ratio 1.1); medians 1.2, 2.5
//	block 2: ref wakes 2.0 2.1 2.2, new 2.4 2.5 9.0: best 2.0, 2.4 (ratio 1.2); medians 2.1, 2.5
//	rates:   ref 100 90 10, new 80 85 20; ref 50 60 55, new 66 30 40: best 100, 85 and 60, 66
func TestBestBlockFigureByHand(t *testing.T) {
	meta := benchfmt.UnitMetadataMap{}
	meta[benchfmt.UnitMetadataKey{Unit: "sec/wake", Key: "better"}] = &benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: "sec/wake", Key: "better"}, Value: "lower"}
	meta[benchfmt.UnitMetadataKey{Unit: "tok/s", Key: "better"}] = &benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: "tok/s", Key: "better"}, Value: "higher"}
	wake, rate := gate.BenchKey{Name: "Sleep/model=A/level=1", Unit: "sec/wake"}, gate.BenchKey{Name: "Serve/model=A", Unit: "tok/s"}
	bench := func(wakes, rates []float64) gate.Bench {
		return gate.Bench{Values: map[gate.BenchKey][]float64{wake: wakes, rate: rates}, Meta: meta}
	}
	blocks := []map[string]gate.Bench{
		{"ref": bench([]float64{1.0, 1.2, 3.0}, []float64{100, 90, 10}), "new": bench([]float64{1.1, 2.5, 2.6}, []float64{80, 85, 20})},
		{"ref": bench([]float64{2.0, 2.1, 2.2}, []float64{50, 60, 55}), "new": bench([]float64{2.4, 2.5, 9.0}, []float64{66, 30, 40})},
	}
	byName := func(figure string) map[gate.BenchKey]Metric {
		out := map[gate.BenchKey]Metric{}
		for _, m := range compare("ref", []string{"new"}, blocks, figure, 5, 0.05, nil) {
			out[gate.BenchKey{Name: m.Name, Unit: m.Unit}] = m
		}
		return out
	}
	best, med := byName("best"), byName("median")
	assert.InDeltaSlice(t, []float64{1.1 / 1.0, 2.4 / 2.0}, best[wake].Ratios, 1e-12)
	assert.InDelta(t, math.Sqrt(1.0*2.0), best[wake].Ref, 1e-12)
	assert.InDelta(t, math.Sqrt(1.1*2.4), best[wake].Var, 1e-12)
	assert.InDeltaSlice(t, []float64{2.5 / 1.2, 2.5 / 2.1}, med[wake].Ratios, 1e-12)
	assert.InDeltaSlice(t, []float64{85.0 / 100, 66.0 / 60}, best[rate].Ratios, 1e-12)
	assert.InDeltaSlice(t, []float64{80.0 / 90, 40.0 / 55}, med[rate].Ratios, 1e-12)

	// A memory figure keeps the median under "best" (a residual left in
	// two cycles of three is a change, not a stall): ref 0.2 0.2 0.2, new
	// 0.2 0.5 0.5 → 2.5, not 1, also where the reference lost a sample
	// (block 2: ref 0.2 0.2; cut to two, new's would read 0.35, 1.75). A
	// time or a rate whose side lost a sample is judged on as
	// many as the other's, the first: new's wakes 1.3 1.1 against ref's
	// 1.2 1.0 → best 1.1 against 1.0 (new's third sample, 0.9, dropped).
	resid := gate.BenchKey{Name: "Sleep/model=A/level=1", Unit: "GiB/residual"}
	meta[benchfmt.UnitMetadataKey{Unit: "GiB/residual", Key: "better"}] = &benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: "GiB/residual", Key: "better"}, Value: "lower"}
	blocks = []map[string]gate.Bench{
		{"ref": {Values: map[gate.BenchKey][]float64{resid: {0.2, 0.2, 0.2}, wake: {1.2, 1.0}}, Meta: meta},
			"new": {Values: map[gate.BenchKey][]float64{resid: {0.2, 0.5, 0.5}, wake: {1.3, 1.1, 0.9}}, Meta: meta}},
		{"ref": {Values: map[gate.BenchKey][]float64{resid: {0.2, 0.2}, wake: {1, 1}}, Meta: meta},
			"new": {Values: map[gate.BenchKey][]float64{resid: {0.2, 0.5, 0.5}, wake: {1, 1}}, Meta: meta}},
	}
	best = byName("best")
	assert.InDeltaSlice(t, []float64{2.5, 2.5}, best[resid].Ratios, 1e-12)
	assert.InDeltaSlice(t, []float64{1.1 / 1.0, 1}, best[wake].Ratios, 1e-12)
}
