package stats

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSummarizeHandChecked(t *testing.T) {
	seq := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(n - i) // descending: Summarize must sort
		}
		return xs
	}
	tests := []struct {
		name string
		in   []float64
		want Summary
	}{
		{"one", []float64{219.19701036345214}, Summary{1, 219.19701036345214, 219.19701036345214, 219.19701036345214, 219.19701036345214}},
		// n=5: median is the 3rd value, p95 rank ceil(4.75)=5.
		{"five", []float64{1.3361948309466243, 18.466762921772897, 1.3325311271473765, 1.34, 1.35}, Summary{5, 1.34, 1.3325311271473765, 18.466762921772897, 18.466762921772897}},
		// n=16: median = mean of 8th and 9th, p95 rank ceil(15.2)=16.
		{"sixteen", seq(16), Summary{16, 8.5, 1, 16, 16}},
		// n=20: rank 0.95*20 = 19 exactly (not 20 through float error).
		{"twenty", seq(20), Summary{20, 10.5, 1, 20, 19}},
		// n=1574 (the reference's sample count): p95 rank ceil(1495.3)=1496.
		{"1574", seq(1574), Summary{1574, 787.5, 1, 1574, 1496}},
		// n=3: p95 rank ceil(2.85)=3.
		{"three", []float64{0.5860766898840666, 0.6025053225457668, 0.5871797641739249}, Summary{3, 0.5871797641739249, 0.5860766898840666, 0.6025053225457668, 0.6025053225457668}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Summarize(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSummarizeDoesNotReorderInput(t *testing.T) {
	in := []float64{3, 1, 2}
	_, err := Summarize(in)
	require.NoError(t, err)
	assert.Equal(t, []float64{3, 1, 2}, in)
}

func TestSummarizeRejectsEmptyAndNaN(t *testing.T) {
	_, err := Summarize(nil)
	assert.ErrorIs(t, err, ErrEmpty)
	_, err = Summarize([]float64{1, nan()})
	assert.Error(t, err)
}

func nan() float64 { var z float64; return z / z }

// TestReferenceSummariesRecomputed recomputes every n=1 and n=2 summary of the
// L20 reference report from its recoverable inputs (for n ≤ 2 the samples are
// exactly min and max) and checks the rule gives back the reported summary.
func TestReferenceSummariesRecomputed(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "l20-reference-report.json"))
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(raw, &doc))

	checked := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if n, ok := v["n"].(float64); ok && (n == 1 || n == 2) {
				var in []float64
				if n == 1 {
					in = []float64{v["min"].(float64)}
				} else {
					in = []float64{v["max"].(float64), v["min"].(float64)}
				}
				got, err := Summarize(in)
				require.NoError(t, err, path)
				assert.InDelta(t, v["median"].(float64), got.Median, 1e-9, "median of %s", path)
				assert.InDelta(t, v["p95"].(float64), got.P95, 1e-12, "p95 of %s", path)
				checked++
			}
			for k, c := range v {
				walk(path+"."+k, c)
			}
		case []any:
			for i, c := range v {
				walk(path+"["+string(rune('0'+i))+"]", c)
			}
		}
	}
	walk("$", doc)
	// 2 models × (restart_initial + restart_warm + 4 output_tps summaries).
	assert.Equal(t, 12, checked, "summaries with n ≤ 2 in the reference report")
}

// TestReferenceSummariesFollowTheRule checks the n ≥ 3 summaries of the L20
// reference report against the rule: for n ≤ 19 the nearest-rank p95 is
// the maximum (rank ceil(0.95·n) = n; an interpolated p95 is below it), and
// always min ≤ median ≤ p95 ≤ max. The report holds no samples, so a
// summary cannot be recomputed from them (Summarize's own n = 3 case is
// hand-checked in TestSummarizeHandChecked); instead each wake's summary is
// checked against an independent one: every cycle's first token comes
// after its wake calls, so where each figure is an order statistic of its
// samples (as the rule makes them) to_first_token_s is ≥ wake_api_s (wake_s
// for a switch direction) figure by figure.
func TestReferenceSummariesFollowTheRule(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "l20-reference-report.json"))
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(raw, &doc))
	dominated, small, bounded := 0, 0, 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if n, ok := v["n"].(float64); ok && n >= 3 && v["median"] != nil { // (a direction holds n beside its summaries)
				lo, med, p95, hi := v["min"].(float64), v["median"].(float64), v["p95"].(float64), v["max"].(float64)
				assert.True(t, lo <= med && med <= p95 && p95 <= hi, "%s: min ≤ median ≤ p95 ≤ max: %v", path, v)
				if n <= 19 {
					assert.Equal(t, hi, p95, "%s: nearest-rank p95 of %v samples is the maximum", path, n)
				}
				bounded++
			}
			ftt, _ := v["to_first_token_s"].(map[string]any)
			for _, k := range []string{"wake_api_s", "wake_s"} {
				wake, ok := v[k].(map[string]any)
				if ftt == nil || !ok {
					continue
				}
				require.Equal(t, ftt["n"], wake["n"], "%s: one first token per wake", path)
				for _, f := range []string{"min", "median", "p95", "max"} {
					assert.GreaterOrEqual(t, ftt[f].(float64), wake[f].(float64), "%s: to_first_token_s.%s ≥ %s.%s", path, f, k, f)
				}
				dominated++
				if ftt["n"].(float64) == 3 {
					small++
				}
			}
			for k, c := range v {
				walk(path+"."+k, c)
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		}
	}
	walk("$", doc)
	t.Logf("%d summaries with n ≥ 3 checked; %d first-token summaries against their wakes', %d of them n = 3", bounded, dominated, small)
	assert.Equal(t, 6, dominated, "2 models × 2 levels and 2 switch directions")
	assert.Equal(t, 2, small, "each model's 3 level-2 cycles")
	assert.Greater(t, bounded, 20)
}

func TestFitTrend(t *testing.T) {
	// An exact line: slope 2, no spread, interval of width 0.
	tr, err := FitTrend([]float64{1, 3, 5, 7, 9})
	require.NoError(t, err)
	assert.InDelta(t, 2, tr.Slope, 1e-12)
	assert.InDelta(t, 2, tr.CILow, 1e-9)
	assert.InDelta(t, 2, tr.CIHigh, 1e-9)
	assert.InDelta(t, 9, tr.Last, 1e-9)

	// y = 0, 1, 0, 1, 0, 1 on x = 0..5, by hand: slope 1.5 / 17.5, residual
	// sum of squares 1.3714286, stderr √(1.3714286 / 4 / 17.5) = 0.1399708;
	// t(0.975, 4) = 2.7764451 (tables).
	tr, err = FitTrend([]float64{0, 1, 0, 1, 0, 1})
	require.NoError(t, err)
	assert.InDelta(t, 0.0857142857, tr.Slope, 1e-9)
	half := 2.7764451052 * 0.1399708424
	assert.InDelta(t, 0.0857142857-half, tr.CILow, 1e-6)
	assert.InDelta(t, 0.0857142857+half, tr.CIHigh, 1e-6)

	_, err = FitTrend([]float64{1, 2})
	assert.ErrorIs(t, err, ErrTooShort)
}

func TestDistribute(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100 … 1
	}
	d := Distribute(xs)
	assert.Equal(t, 100, d.N)
	assert.Equal(t, 50.0, d.P50, "rank ceil(0.5·100) = 50")
	assert.Equal(t, 90.0, d.P90)
	assert.Equal(t, 99.0, d.P99)
	assert.Equal(t, 95.0, d.P95)
	assert.Equal(t, 50.5, d.Median)
	assert.Equal(t, 50.5, d.Mean)
	b, err := json.Marshal(Distribute([]float64{1, 2, 3}))
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":3,"median":2,"min":1,"max":3,"p95":3,"p50":2,"p90":3,"p99":3,"mean":2}`, string(b))
	assert.Zero(t, Distribute(nil).N)
}

// TestRankIsNearestRanksPlace: the rank by hand, ceil(p/100·n) within
// [1, n].
func TestRankIsNearestRanksPlace(t *testing.T) {
	for _, c := range []struct {
		n    int
		p    float64
		want int
	}{{16, 95, 16}, {20, 95, 19}, {21, 95, 20}, {16, 5, 1}, {20, 5, 1}, {21, 5, 2}, {1, 95, 1}, {4, 50, 2}} {
		assert.Equal(t, c.want, Rank(c.n, c.p), "n %d p %g", c.n, c.p)
	}
}

// TestUnmeasuredIsNull (issue 50): a Summary or Distribution of no
// samples is written with null figures, not 0 (650cbfc wrote
// {"n":0,"median":0,…}: a reader could not tell "0 s" from "none"); one
// of samples is written as before, field for field; null reads back as
// the zero value.
func TestUnmeasuredIsNull(t *testing.T) {
	b, err := json.Marshal(Summary{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":0,"median":null,"min":null,"max":null,"p95":null}`, string(b))
	b, err = json.Marshal(Distribute(nil))
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":0,"median":null,"min":null,"max":null,"p95":null,"p50":null,"p90":null,"p99":null,"mean":null}`, string(b))

	s, err := Summarize([]float64{0, 2, 1})
	require.NoError(t, err)
	b, err = json.Marshal(s)
	require.NoError(t, err)
	assert.Equal(t, `{"n":3,"median":1,"min":0,"max":2,"p95":2}`, string(b), "a measured 0 stays 0")
	b, err = json.Marshal(Distribute([]float64{1, 3}))
	require.NoError(t, err)
	assert.Equal(t, `{"n":2,"median":2,"min":1,"max":3,"p95":3,"p50":1,"p90":3,"p99":3,"mean":2}`, string(b))

	var back struct {
		S Summary      `json:"s"`
		D Distribution `json:"d"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"s":{"n":0,"median":null,"min":null,"max":null,"p95":null},"d":{"n":0,"p50":null,"mean":null}}`), &back))
	assert.Zero(t, back.S)
	assert.Zero(t, back.D)
}
