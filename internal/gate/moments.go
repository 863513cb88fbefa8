package gate

import (
	"math"
	"slices"
)

// A moment of the machine: samples taken together share its state (a
// stall of the host, the engine's batch), so that a run's spread is the
// spread of its moments, not of its samples. A cycle and a handoff are
// each a moment; the requests of a serving stage go out in waves of its
// concurrency (waves.go), each wave one. The requests of an open-loop
// traffic run each arrive at a moment of their own, but within one span
// of a few seconds that they all share (openLoop): their spread is a
// moment's, their run's level one draw.

// moments is how many moments of the machine a run's samples of k are: a
// serving metric's per-request samples (sec/ttft, sec/tpot, req-tok/s)
// ran in rounds of concurrent requests, one tok/s line a round; any other
// metric's samples are each a moment of their own (cycles, handoffs,
// open-loop arrivals; which one run still does not gate, openLoop).
func moments(r Run, k BenchKey, split bool) int {
	if r.perRequest(k) {
		if n := laterRounds(r, k, split); n > 0 {
			return n
		}
	}
	return len(samplesOf(r, k, StatMedian, split))
}

// momentLevels are the levels of the moments r's median of k reads:
// each later wave's median for a serving metric judged on its waves
// (split), else each sample (a cycle, a handoff, an arrival), in the
// order the run took them; nil for a serving metric read whole, whose
// waves cannot be told apart. The result may be r's own samples: read
// it, never change it.
func momentLevels(r Run, k BenchKey, split bool) []float64 {
	if !r.perRequest(k) {
		return samplesOf(r, k, StatMedian, split)
	}
	if _, ok := firstWave(r, k); !ok || !split {
		return nil
	}
	xs := r.Bench.Values[k]
	var out []float64
	for _, w := range waveSpans(r, k) {
		out = append(out, median(xs[w[0]:w[1]]))
	}
	return out
}

// MomentsMinLevels is the fewest moments a run must have for momentsVar
// to read their spread.
const MomentsMinLevels = 3

// momentsVar is the variance of a run's median of k, on lg's scale, that
// the spread of its moments alone gives: about π/(2n)·σ², the variance
// of the median of n normal draws of sd σ, where σ is the spread of a
// moment about its run's level and its index's.
//
// The model: the log of a run's i-th moment is its run's level + the
// i-th moment's own (a process's first sleep, the round's first wave
// after the one the prefix cache missed, any cycle index the protocol
// repeats in every run) + noise of sd σ. Only the noise moves a run's
// median from run to run beyond the run's level, and a pattern by index
// repeated in every run does not: it leaves the runs' medians where they
// were. So the levels (runs with the same count n of MomentsMinLevels or
// more moments, the most common count, two runs or more) are median
// polished, each run's median and then each index's median of what is
// left taken out (Tukey 1977), and σ² is (1.4826 × the MAD of the
// residuals)² (robust: a stalled wave moves a median little and an SD
// much) scaled by k·n / ((k−1)(n−1)) for the k + n − 1 levels the polish
// fitted (a residual's variance under least squares, approximately so
// here); n is that common count (a tie goes to the larger). 0 where no
// such runs are.
//
// A run's median is a sample of its moments before it is anything else,
// so the runs rule's variance is never below this (judgeRuns): five runs'
// sd has 4 degrees of freedom and reads under half the true sd for about
// one metric in eleven (χ²₄ < 1: 9 %). Measured on 30 quiet runs of
// testdata/gate-power.json (vllmsim, 2 cores): A's after-wake-l2 TTFT
// medians over their seven later waves lay within 1.5 % (sd) in the first
// five baseline runs and from 7.4 to 9.3 ms in all ten, the waves of a
// run 7 to 10.4 ms; against the five a same-code run at +10.5 % was
// flagged.
func momentsVar(runs []Run, k BenchKey, split bool, lg scale) (w2, n float64) {
	var rows [][]float64
	counts := map[int]int{}
	for _, r := range runs {
		lv := momentLevels(r, k, split)
		ys := make([]float64, 0, len(lv))
		for _, x := range lv {
			if math.IsNaN(x) || bool(lg) && !(x > 0) {
				ys = nil // a level the scale cannot take: the run left out
				break
			}
			ys = append(ys, lg.to(x))
		}
		if len(ys) >= MomentsMinLevels {
			rows = append(rows, ys)
			counts[len(ys)]++
		}
	}
	common, most := 0, 0
	for c, m := range counts {
		if m > most || m == most && c > common {
			common, most = c, m
		}
	}
	rows = slices.DeleteFunc(rows, func(ys []float64) bool { return len(ys) != common })
	kr := len(rows)
	if kr < 2 {
		return 0, 0
	}
	for _, ys := range rows {
		m := median(ys)
		for i := range ys {
			ys[i] -= m
		}
	}
	col := make([]float64, kr)
	var res []float64
	for i := range common {
		for r, ys := range rows {
			col[r] = ys[i]
		}
		m := median(col)
		for _, ys := range rows {
			res = append(res, ys[i]-m)
		}
	}
	sigma := 1.4826 * medianAbsDev(res)
	scale := float64(kr*common) / float64((kr-1)*(common-1))
	w2 = math.Pi / (2 * float64(common)) * sigma * sigma * scale
	if !(w2 >= 0) || math.IsInf(w2, 1) { // an infinite level: no floor
		return 0, 0
	}
	return w2, float64(common)
}

// medianAbsDev is the median of xs's absolute deviations from their
// median.
func medianAbsDev(xs []float64) float64 {
	m := median(xs)
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - m)
	}
	return median(dev)
}
