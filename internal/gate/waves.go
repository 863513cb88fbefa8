package gate

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/wakebench/wakebench/internal/stats"
)

// StatFirstWave judges a serving metric's first wave apart: the median of
// the first `conc` requests a stage sent at a concurrency (firstWave).
const StatFirstWave = "first-wave"

// Why the wave. At concurrency c a serving stage sends a round's requests
// through an errgroup of limit c (load.Run): c go out at once, and as each
// answers the next is sent; requests of one length answer together, so
// they go out in waves of c that share the engine's steps and any stall of
// the host. Measured on 30 quiet runs of testdata/gate-power.json
// (vllmsim, 2 cores, two rounds of eight at concurrency 4): a wave's four
// TTFTs lay within a few percent of each other while waves of one stage
// lay up to 10× apart. And the first wave at a stage's first concurrency
// is a population of its own: every request of the protocol sends one
// prompt, so that wave computes its prefix and the later waves find it in
// vLLM's prefix cache, which a start, a sleep of level 1 or 2 and a KV
// release leave empty (vllmsim models it: internal/vllmsim/prefix.go); its
// TTFT was 1.3–2× the later waves' in every run. (At a later concurrency
// the cache holds the prompt already, and the first wave is like the
// others: judged apart all the same.) A median over both mixes them by
// count: one later wave stalled by the host made half the requests slow and
// moved B's after-wake-l2 TTFT median +28 % and +34 % (flagged in 2 of 20
// same-code runs against five). So the gate judges the two apart: the
// median and tail of the later waves, and the first wave's median as one
// event a run. bench.txt keeps every request in send order, round after
// round (report.WriteBench; load.Run's order, pinned by
// TestRunRespectsConcurrencyAndCounts), which is what the split reads.

// firstWave is how many of r's samples of k its first wave holds, the
// stage's concurrency; ok is false unless k is a serving metric's
// per-request samples and they fill its rounds (one tok/s line each)
// evenly, with at least a wave a round and more than the first wave in
// all. An uneven count means failed requests (they leave no sample), after
// which the waves can no longer be told apart from the order (waved asks
// every run for the same count too); one sample a round is go test
// -bench's output (a round's median a line).
func firstWave(r Run, k BenchKey) (int, bool) {
	if !perRequest(k) {
		return 0, false
	}
	c := concOf(k.Name)
	n := len(r.Bench.Values[k])
	rounds := len(r.Bench.Values[BenchKey{Name: k.Name, Unit: unitRoundTPS}])
	if c < 1 || rounds < 1 || n%rounds != 0 || n/rounds < max(2, c) || n <= c {
		return 0, false
	}
	return c, true
}

// perRequest reports whether k is one of a serving phase's per-request
// metrics (not its per-round tok/s).
func perRequest(k BenchKey) bool {
	return strings.HasPrefix(k.Name, "Serve/") && k.Unit != unitRoundTPS
}

// concOf is the N of a benchmark name's conc=N key, or 0.
func concOf(name string) int {
	_, keys := nameKeys(name)
	if n, err := strconv.Atoi(keys["conc"]); err == nil && n > 0 {
		return n
	}
	return 0
}

// Span is where in r's samples of k (in bench.txt's order) statistic st
// reads them when r is judged alone: [lo, hi). A serving metric's first
// wave for StatFirstWave, its later waves for any other statistic
// (firstWave); every sample of any other metric, and none (lo = hi) for
// its StatFirstWave. For whoever changes the samples a statistic reads
// (make gate-power's injections). Judge splits a metric only where every
// run it judges can be split (waved), and reads all samples of each
// otherwise.
func (r Run) Span(k BenchKey, st string) (lo, hi int) {
	return span(r, k, st, true)
}

// span is Span, or every sample (none for StatFirstWave) where split is
// false.
func span(r Run, k BenchKey, st string, split bool) (lo, hi int) {
	n := len(r.Bench.Values[k])
	c, ok := firstWave(r, k)
	ok = ok && split
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

// samplesOf are the samples of k in r that statistic st reads (span).
func samplesOf(r Run, k BenchKey, st string, split bool) []float64 {
	lo, hi := span(r, k, st, split)
	return r.Bench.Values[k][lo:hi]
}

// waved reports whether k is judged on its waves: split in this run and in
// each of runs alike, each with as many samples (a run with a failed
// request in every round fills its rounds evenly and still has fewer), or
// in none.
func waved(runs []Run, cur Run, k BenchKey) bool {
	if _, ok := firstWave(cur, k); !ok {
		return false
	}
	n := len(cur.Bench.Values[k])
	return !slices.ContainsFunc(runs, func(r Run) bool {
		_, ok := firstWave(r, k)
		return !ok || len(r.Bench.Values[k]) != n
	})
}

// statOf is r's statistic st of k's samples (samplesOf); ok is false when
// it has none. A serving metric's tail, judged on its waves at a
// concurrency of 2 or more, is waveTail's.
func statOf(r Run, k BenchKey, st string, split bool) (float64, bool) {
	xs := samplesOf(r, k, st, split)
	s, err := stats.Summarize(xs)
	if err != nil {
		return 0, false
	}
	switch st {
	case StatP95, StatP5:
		if t, ok := waveTail(r, k, st, split, s.Median); ok {
			return t, true
		}
		if st == StatP95 {
			return s.P95, true
		}
		return stats.NearestRank(slices.Sorted(slices.Values(xs)), 5), true
	}
	return s.Median, true
}

// waveTail is a serving metric's tail with its waves' shared stalls taken
// out: each later request's value over its wave's median, their p95 (p5
// of a throughput: the request that got least beside the others) by
// nearest rank, times med, the later waves' median.
// The model: a request's time is the run's level × its wave's (a stall of
// the host, an engine step that all c requests share) × its own. Whole
// waves stall together, each a moment of the machine (under a CPU hog one
// wave in a few took 2–3× the others in same-code runs, and a plain p95
// over the later requests is then the slowest wave's: one event, which
// hid a doubled slowest request in most runs); a request slower than the
// ones served beside it is the tail a change of the code makes; a change
// that slows whole waves is the later median's to see (where it slows most
// of them). It cannot see a slower request whose wave it is alone in. ok
// is false where the waves cannot be told (split false, firstWave's ok)
// or hold one request each (concurrency 1: every request its own wave), or
// where fewer than two later waves hold two requests or more; a wave whose
// median is not positive is left out.
func waveTail(r Run, k BenchKey, st string, split bool, med float64) (float64, bool) {
	at, ok := WaveRatios(r, k, split)
	if !ok {
		return 0, false
	}
	ratios := slices.DeleteFunc(at, math.IsNaN) // the first wave's and the left-out waves'
	p := 95.0
	if st == StatP5 {
		p = 5
	}
	return med * stats.NearestRank(slices.Sorted(slices.Values(ratios)), p), true
}

// WaveRatios is, at each index of r's samples of k, that request's value
// over its wave's median (NaN in the first wave and in a wave left out),
// as the gate's tail of a serving metric reads them (waveTail); ok is
// false where that tail is the plain one. split as Judge decides it (true
// for r judged alone). For whoever changes the samples the tail reads
// (make gate-power's injections of a stated power).
func WaveRatios(r Run, k BenchKey, split bool) (at []float64, ok bool) {
	c, ok := firstWave(r, k)
	if !ok || !split || c < 2 {
		return nil, false
	}
	xs := r.Bench.Values[k]
	per := len(xs) / len(r.Bench.Values[BenchKey{Name: k.Name, Unit: unitRoundTPS}])
	at = make([]float64, len(xs))
	waves := 0
	for i := range at {
		at[i] = math.NaN()
	}
	for lo := 0; lo < len(xs); lo += per {
		for w := lo; w < lo+per; w += c {
			if w == 0 {
				continue // the first wave: a statistic of its own
			}
			hi := min(w+c, lo+per)
			if hi-w < 2 {
				continue
			}
			m, err := stats.Summarize(xs[w:hi])
			if err != nil || !(m.Median > 0) {
				continue
			}
			for i := w; i < hi; i++ {
				at[i] = xs[i] / m.Median
			}
			waves++
		}
	}
	return at, waves >= 2
}

// laterRounds is how many rounds of concurrent requests r's samples of k
// that the median reads span: a round a tok/s line, less the first where
// the first wave is all of it.
func laterRounds(r Run, k BenchKey, split bool) int {
	rounds := len(r.Bench.Values[BenchKey{Name: k.Name, Unit: unitRoundTPS}])
	if c, ok := firstWave(r, k); ok && split && len(r.Bench.Values[k])/rounds == c {
		return rounds - 1
	}
	return rounds
}
