package gate

import (
	"slices"
	"strconv"
	"strings"

	"github.com/wakebench/wakebench/internal/stats"
)

// StatFirstWave judges a serving metric's first wave: the median of the
// requests a stage sent first, at once, to an engine that had just started
// or woken (serveWaves).
const StatFirstWave = "first-wave"

// serveWaves splits a serving metric's per-request samples (sec/ttft,
// sec/tpot, req-tok/s of a Serve/…/conc=N benchmark, beside its tok/s
// line a round) into its first wave and the rest; ok is false for any
// other metric, and its samples are judged as one set.
//
// Why the wave: at concurrency c a round's requests go out c at a time
// (load.Run, an errgroup of limit c) and, of one length, finish together,
// so the c requests of a wave share the engine's steps and any stall of
// the host. Measured on 30 quiet runs of testdata/gate-power.json
// (vllmsim, 2 cores): a wave's four TTFTs lie within a few percent of each
// other, while waves of one stage lie up to 10× apart. And the first wave
// a stage sends, to an engine that just started or woke, is a population
// of its own: its TTFT was 1.3–2× the later waves' in every run. A run's
// median over both mixes them by count: with two rounds of eight at
// concurrency 4 (four waves, one of them first), one later wave stalled
// by the host makes half the requests slow and moves the median 30 %
// (make gate-power flagged B's after-wake-l2 TTFT so in 2 of 20 same-code
// runs against five). So the gate judges the two apart: the first wave's
// median (StatFirstWave) as one event a run, and the median and tail of
// the later waves. bench.txt keeps every request in send order, round
// after round (report.WriteBench), which is what the split reads.
func serveWaves(r Run, k BenchKey) (first, rest []float64, ok bool) {
	xs := r.Bench.Values[k]
	c, ok := firstWave(r, k)
	if !ok {
		return nil, nil, false
	}
	return xs[:c], xs[c:], true
}

// firstWave is how many of r's samples of k its first wave holds (the
// rest are its later waves): the stage's concurrency, or a round's
// requests where a round sends fewer; ok as serveWaves'. A failed request
// leaves no sample, so with failures the first wave's share is the
// concurrency, its requests sent first either way.
func firstWave(r Run, k BenchKey) (int, bool) {
	if !perRequest(k) {
		return 0, false
	}
	w := concOf(k.Name)
	n := len(r.Bench.Values[k])
	rounds := len(r.Bench.Values[BenchKey{Name: k.Name, Unit: unitRoundTPS}])
	if w < 1 || rounds < 1 {
		return 0, false
	}
	if n%rounds == 0 {
		w = min(w, n/rounds)
	}
	if n <= w { // nothing after the first wave
		return 0, false
	}
	return w, true
}

// Span is where in r's samples of k (in bench.txt's order) statistic st
// reads them: [lo, hi). A serving metric's first wave for StatFirstWave,
// its later waves for any other statistic (serveWaves); every sample of
// any other metric, and none (lo = hi) for its StatFirstWave. For whoever
// changes the samples a statistic reads (make gate-power's injections).
func (r Run) Span(k BenchKey, st string) (lo, hi int) {
	n := len(r.Bench.Values[k])
	c, ok := firstWave(r, k)
	switch {
	case !ok && st == StatFirstWave:
		return 0, 0
	case !ok:
		return 0, n
	case st == StatFirstWave:
		return 0, c
	}
	return c, n
}

// perRequest reports whether k is one of a serving phase's per-request
// metrics (not its per-round tok/s).
func perRequest(k BenchKey) bool {
	return strings.HasPrefix(k.Name, "Serve/") && k.Unit != unitRoundTPS
}

// concOf is the N of a benchmark name's conc=N key, or 0.
func concOf(name string) int {
	for _, kv := range strings.Split(name, "/") {
		if v, ok := strings.CutPrefix(kv, "conc="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// samplesOf are the samples of k in r that statistic st reads (Span).
func samplesOf(r Run, k BenchKey, st string) []float64 {
	lo, hi := r.Span(k, st)
	return r.Bench.Values[k][lo:hi]
}

// waved reports whether k is judged on its waves in this run and in each
// of runs: then its first wave is a statistic of its own.
func waved(runs []Run, cur Run, k BenchKey) bool {
	if _, _, ok := serveWaves(cur, k); !ok {
		return false
	}
	return !slices.ContainsFunc(runs, func(r Run) bool {
		_, _, ok := serveWaves(r, k)
		return !ok
	})
}

// nearestRank is xs's p-th percentile by nearest rank (stats.NearestRank
// of the sorted samples).
func nearestRank(xs []float64, p float64) float64 {
	return stats.NearestRank(slices.Sorted(slices.Values(xs)), p)
}
