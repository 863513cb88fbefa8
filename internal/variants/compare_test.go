package variants

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	assert.InDelta(t, 1, m.Ref, 1e-12, "the median of the reference's block medians 1, 2, 0.5")
	assert.InDelta(t, 1.1, m.Var, 1e-12, "and of the variant's 1.1, 2.4, 0.575")
	tol := math.Log(1.10)
	assert.InDelta(t, 1-tCDF2(q-tol/se), m.PowerAtTol, 1e-9, "a 10 % change caught about 3 times in 10 by 3 blocks")
	assert.InDelta(t, 100*(math.Exp((q+tQuantile2(PowerLevel))*se)-1), m.DetectPct, 1e-6)

	// Judged alone: significant and beyond ±10 %: worse (lower is better);
	// beyond no ±20 %: same; the same figures with higher better: better.
	for _, tc := range []struct {
		better int
		tol    float64
		want   string
	}{{-1, 10, Worse}, {-1, 20, Same}, {+1, 10, Better}} {
		ms := []Metric{compareMetric("v2", k, tc.better, pairs, tc.tol, 0.05)}
		judgeFamily(ms, tc.tol, 0.05)
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
	judgeFamily(ms, 10, 0.05)
	assert.Equal(t, []string{Worse, Worse, NotJudge}, []string{ms[0].Verdict, ms[1].Verdict, ms[2].Verdict})
	ms[1].P, ms[0].Verdict, ms[1].Verdict = 0.06, Same, Same
	judgeFamily(ms, 10, 0.05)
	assert.Equal(t, []string{Same, Same}, []string{ms[0].Verdict, ms[1].Verdict}, "0.031 > 0.025 and 0.06 > 0.05: neither")
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

	// Every block moved alike: no spread, the change is certain.
	m = compareMetric("v", k, -1, []pair{{1, 1.5}, {2, 3}}, 10, 0.05)
	assert.Equal(t, 0.0, m.P)
	assert.InDelta(t, 50, m.DeltaPct, 1e-9)
	assert.Equal(t, 2, m.NeedBlocks)
}

// needBlocks is the first block count whose power reaches PowerLevel.
func TestNeedBlocks(t *testing.T) {
	sd, tol := 0.05, math.Log(1.05)
	n := needBlocks(tol, sd, 0.05)
	require.Greater(t, n, 2)
	assert.GreaterOrEqual(t, powerAt(tol, sd/math.Sqrt(float64(n)), n, 0.05), PowerLevel)
	assert.Less(t, powerAt(tol, sd/math.Sqrt(float64(n-1)), n-1, 0.05), PowerLevel)
	assert.Equal(t, MaxBlocks+1, needBlocks(1e-6, 1, 0.05), "noise that asks for more than MaxBlocks")
}
