package gate

import (
	"math"
	"slices"
	"strconv"

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
	if !r.perRequest(k) {
		return 0, false
	}
	c := r.concOf(k)
	n := len(r.Bench.Values[k])
	rounds := len(r.Bench.Values[BenchKey{Name: k.Name, Unit: unitRoundTPS}])
	if c < 1 || rounds < 1 || n%rounds != 0 || n/rounds < max(2, c) || n <= c {
		return 0, false
	}
	return c, true
}

// perRequest reports whether k is one of a serving phase's per-request
// metrics (not its per-round tok/s).
func (r Run) perRequest(k BenchKey) bool {
	return r.Bench.Name(k.Name).Base == "Serve" && k.Unit != unitRoundTPS
}

// concOf is the N of k's conc=N key, or 0.
func (r Run) concOf(k BenchKey) int {
	if n, err := strconv.Atoi(r.Bench.Name(k.Name).Get("conc")); err == nil && n > 0 {
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
// concurrency of 2 or more, is waveTail's: a ratio, not the unit.
func statOf(r Run, k BenchKey, st string, split bool) (float64, bool) {
	xs := samplesOf(r, k, st, split)
	s, err := stats.Summarize(xs)
	if err != nil {
		return 0, false
	}
	switch st {
	case StatP95, StatP5:
		if t, ok := waveTail(r, k, st, split); ok {
			return t, true
		}
		if st == StatP95 {
			return s.P95, true
		}
		return stats.NearestRank(slices.Sorted(slices.Values(xs)), 5), true
	}
	return s.Median, true
}

// waveTail is a serving metric's tail with its waves' shared stalls and
// the run's own level taken out: each later request's value over the
// median of the other requests of its wave, their p95 (p5 of a
// throughput: the request that got least beside the others) by nearest
// rank. A ratio, near 1 where a wave's requests are served alike.
// The model: a request's time is the run's level × its wave's (a stall of
// the host, an engine step that all c requests share) × its own. Whole
// waves stall together, each a moment of the machine (under a CPU hog one
// wave in a few took 2–3× the others in same-code runs, and a plain p95
// over the later requests is then the slowest wave's: one event, which
// hid a doubled slowest request in most runs); whole runs are slower too
// (under the hog one baseline run of ten served 1.4–2× slower than the
// other nine, and a tail in seconds, ratio × the later median, was then
// flagged only beyond +234 %). A request slower than the ones served
// beside it is the tail a change of the code makes, and the ratio is its
// size; a change that slows whole waves or runs is the later median's to
// see. Over the others' median, not the wave's own: a wave of four's
// median is the mean of its middle two, so doubling its two slowest
// requests moved it 1.5× and their ratio to it only 1.33×; and not over
// the wave's fastest, which under the hog was once a 1.5 ms TTFT beside
// 7–12 ms ones (the p95 ratio 7.4). Measured on make gate-power's runs
// (vllmsim tiny, 2 cores, 28 later requests at concurrency 4): the p95
// ratio lay within 1.05–1.18 in 30 quiet runs and 1.03–1.63 in 30 under
// the hog, while the later median ranged 7.8–16.2 ms; doubling the two
// slowest requests moved it +78 to +139 %. It cannot see a slower request
// whose wave it is alone in, nor a wave slowed whole; and at concurrency
// 2 or 3 the wave-mates' median is one request or the mean of two, which
// one odd request moves (at 4 it is the middle of three, which it does
// not). ok is false where the waves cannot be told (split false,
// firstWave's ok) or hold one request each (concurrency 1: every request
// its own wave), or where fewer than two later waves hold two requests or
// more.
func waveTail(r Run, k BenchKey, st string, split bool) (float64, bool) {
	at, ok := WaveRatios(r, k, split)
	if !ok {
		return 0, false
	}
	ratios := slices.DeleteFunc(at, math.IsNaN) // the first wave's and the left-out requests'
	p := 95.0
	if st == StatP5 {
		p = 5
	}
	return stats.NearestRank(slices.Sorted(slices.Values(ratios)), p), true
}

// WaveRatios is, at each index of r's samples of k, that request's value
// over the median of the other requests of its wave (NaN in the first
// wave, in a wave of one, and where that median is not positive), as the
// gate's tail of a serving metric reads them (waveTail); ok is false
// where that tail is the plain one. split as Judge decides it (true for r
// judged alone). For whoever changes the samples the tail reads (make
// gate-power's injections of a stated power).
func WaveRatios(r Run, k BenchKey, split bool) (at []float64, ok bool) {
	c, ok := firstWave(r, k)
	if !ok || !split || c < 2 {
		return nil, false
	}
	xs := r.Bench.Values[k]
	at = make([]float64, len(xs))
	for i := range at {
		at[i] = math.NaN()
	}
	waves := 0
	for _, w := range waveSpans(r, k) {
		if w[1]-w[0] < 2 {
			continue
		}
		told := false
		for i := w[0]; i < w[1]; i++ {
			others := append(slices.Clone(xs[w[0]:i]), xs[i+1:w[1]]...)
			if m := median(others); m > 0 {
				at[i] = xs[i] / m
				told = true
			}
		}
		if told {
			waves++
		}
	}
	return at, waves >= 2
}

// waveSpans are the [lo, hi) of each wave of r's samples of k after the
// first (firstWave's ok, which the caller has checked): each round's
// requests in waves of the concurrency, the last of a round maybe
// shorter.
func waveSpans(r Run, k BenchKey) [][2]int {
	c, _ := firstWave(r, k)
	n := len(r.Bench.Values[k])
	per := n / len(r.Bench.Values[BenchKey{Name: k.Name, Unit: unitRoundTPS}])
	var out [][2]int
	for lo := 0; lo < n; lo += per {
		for w := lo; w < lo+per; w += c {
			if w > 0 { // the first wave: a statistic of its own
				out = append(out, [2]int{w, min(w+c, lo+per)})
			}
		}
	}
	return out
}

// median is xs's median (the mean of the middle two of an even count),
// NaN for none; xs is left as it was.
func median(xs []float64) float64 {
	s, err := stats.Summarize(xs)
	if err != nil {
		return math.NaN()
	}
	return s.Median
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
