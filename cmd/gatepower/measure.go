package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// The scenarios scripts/gate-power.sh runs, each a directory of runs
// (<OUT>/<scenario>/<i>/bench.txt).
const (
	scBase     = "base"         // the baseline, on the quiet machine
	scSame     = "same"         // the same code, quiet
	scSlow     = "slow1.5"      // 1.5× slower, quiet (LOAD=0)
	scSlowWake = "slowwake1.1"  // every wake 10 % slower, quiet
	scBaseLoad = "base-load"    // the baseline under the hog (LOAD=1)
	scSameLoad = "same-load"    // the same code under the hog
	scSlowLoad = "slow1.5-load" // 1.5× slower under the hog
)

// fiveRuns is the baseline size of the goals for false alarms and
// for the 10 % slower wake: the first five runs of a baseline.
const fiveRuns = 5

// tailKey is the metric the injected changes users fear are made in: a
// serving TTFT (testdata/gate-power.json: four rounds of 8 at concurrency
// 4, 32 requests a run).
var tailKey = gate.BenchKey{Name: "Serve/model=A/stage=baseline/conc=4", Unit: "sec/ttft"}

// row is one line of the table: what was judged against what, how many
// runs the gate flagged, and the goal.
type row struct {
	what, against string
	flagged, of   int
	notEvaluated  int // runs with a metric NOT EVALUATED (the machine busy)
	goal          string
	met           bool
	// reported: a measurement shown beside its aim, not a goal the
	// table is held to.
	reported bool
	// judged and metrics: the median, over the runs judged, of the
	// metrics the gate judged and of those it had (a false-alarm rate is
	// read beside what was judged).
	judged, metrics int
}

// measurement is the whole table.
type measurement struct {
	machine, load string
	rows          []row
	notes         []string
	// detail is each metric's injection counts (printed with -v).
	detail []string
	// broken: a run wrote no bench.txt.
	broken bool
}

// judge is gate.Judge with the table's tolerance and alpha.
type judge func(ctx context.Context, base []gate.Run, cur gate.Run) ([]gate.Verdict, error)

func measure(ctx context.Context, out string, load bool, pct, alpha float64, rejudge bool) (measurement, error) {
	j := func(ctx context.Context, base []gate.Run, cur gate.Run) ([]gate.Verdict, error) {
		return gate.Judge(ctx, base, cur, pct, alpha)
	}
	sc := map[string][]gate.Run{}
	var m measurement
	for _, name := range scenarios {
		runs, missing, err := readScenario(filepath.Join(out, name))
		if err != nil {
			return m, err
		}
		sc[name] = runs
		if missing > 0 {
			m.notes = append(m.notes, fmt.Sprintf("%s: %d run(s) wrote no bench.txt (see their test.log)", name, missing))
			m.broken = true
		}
	}
	if len(sc[scBase]) == 0 || len(sc[scSame]) == 0 {
		// The variant runs alone (STAGES=variants): their rows only.
		if hasVariantRuns(out) {
			m.machine, m.load = machine(), "variant runs only: see each run's report.json for its load"
			return m, variantRows(out, &m, rejudge)
		}
		return m, fmt.Errorf("%s: no runs of %s or %s: run scripts/gate-power.sh first", out, scBase, scSame)
	}
	if load && (len(sc[scBaseLoad]) == 0 || len(sc[scSameLoad]) == 0) {
		if !hasVariantRuns(out) {
			return m, fmt.Errorf("%s: LOAD=1 but no runs of %s or %s", out, scBaseLoad, scSameLoad)
		}
		// STAGES=variants LOAD=1 beside earlier quiet runs: the hog ran the
		// variant runs alone.
		load = false
		m.notes = append(m.notes, fmt.Sprintf("LOAD=1 made no %s or %s runs: the gate's rows are the quiet runs', the variant runs' rows both", scBaseLoad, scSameLoad))
	}
	m.machine = machine()
	m.load = "others' share of the CPU over the runs' phase windows (median, range): " + loadSummary(sc)
	first := func(runs []gate.Run) []gate.Run { return runs[:min(fiveRuns, len(runs))] }
	named := func(l string, runs []gate.Run) string { return fmt.Sprintf("%d runs (%s)", len(runs), l) }
	type cond struct {
		name             string
		base, same, slow []gate.Run
	}
	conds := []cond{{"quiet", sc[scBase], sc[scSame], sc[scSlow]}}
	if load {
		conds = append(conds, cond{"under the hog", sc[scBaseLoad], sc[scSameLoad], sc[scSlowLoad]})
	}
	var rows []func() (row, error)
	for _, c := range conds {
		rows = append(rows,
			func() (row, error) {
				return flagRate(ctx, j, "same code ("+c.name+")", c.same, first(c.base), named(c.name, first(c.base)), 0)
			},
			func() (row, error) { return oneRunRate(ctx, j, "same code ("+c.name+")", c.same, c.base, c.name) })
		if c.name != "quiet" {
			rows = append(rows, func() (row, error) {
				return flagRate(ctx, j, "same code ("+c.name+")", c.same, first(sc[scBase]), named("quiet", first(sc[scBase])), 0)
			})
		}
		if len(c.slow) > 0 {
			rows = append(rows, func() (row, error) {
				return flagRate(ctx, j, "1.5× slower ("+c.name+")", c.slow, first(c.base), named(c.name, first(c.base)), len(c.slow))
			})
		}
	}
	if k := len(sc[scSlowWake]); k > 0 {
		rows = append(rows, func() (row, error) {
			return flagRate(ctx, j, "every wake 10 % slower (quiet)", sc[scSlowWake], first(sc[scBase]), named("quiet", first(sc[scBase])), (9*k+9)/10)
		})
	}
	for _, c := range conds {
		rows = append(rows,
			func() (row, error) {
				return injectRate(ctx, j, "injected ("+c.name+"): every request but the fastest twice as slow ("+tailKey.Name+" "+tailKey.Unit+")",
					c.same, c.base, named(c.name, c.base), mostSlower, gate.StatMedian)
			},
			func() (row, error) {
				r, err := injectRate(ctx, j, "injected ("+c.name+"): the p95 doubled (of the requests after the first wave, "+tailOf(c.same)+" by their times), their median unchanged",
					c.same, c.base, named(c.name, c.base), tailSlower, gate.StatP95)
				if c.name != "quiet" {
					// Under the hog a run whose phase others crowded beyond
					// every baseline run's is NOT EVALUATED (never passed):
					// issue 50's goal, nine in ten caught.
					want := (9*len(c.same) + 9) / 10
					r.goal, r.met = fmt.Sprintf("≥ %d flagged", want), r.flagged >= want
				}
				return r, err
			},
			func() (row, error) {
				r, err := injectRate(ctx, j, "injected ("+c.name+"): the first wave twice as slow (a stage's first requests, the prefix cache empty), the later waves unchanged",
					c.same, c.base, named(c.name, c.base), firstSlower, gate.StatFirstWave)
				if c.name != "quiet" {
					// A first wave is one moment of the machine, which a hog
					// stalls whole now and then: shown, not a goal.
					r.goal, r.reported = "reported: one event a run, which the hog stalls whole now and then", true
				}
				return r, err
			})
	}
	for _, f := range rows {
		r, err := f()
		if err != nil {
			return m, err
		}
		m.rows = append(m.rows, r)
	}
	for _, c := range conds {
		full, half, err := statedPower(ctx, j, c.name, c.same, c.base, fmt.Sprintf("%d of the %d runs (%s), drawn for each run; all %d for a metric gated only from more", (len(c.base)+1)/2, len(c.base), c.name, len(c.base)), &m.detail)
		if err != nil {
			return m, err
		}
		m.rows = append(m.rows, full, half)
	}
	return m, variantRows(out, &m, rejudge)
}

// scenarios are every scenario directory gatepower reads.
var scenarios = []string{scBase, scSame, scSlow, scSlowWake, scBaseLoad, scSameLoad, scSlowLoad}

// readScenario reads dir/<i>/bench.txt of every run directory of dir, in
// index order; missing counts the directories without one.
func readScenario(dir string) (runs []gate.Run, missing int, err error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var idx []int
	for _, e := range ents {
		if i, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	for _, i := range idx {
		p := filepath.Join(dir, strconv.Itoa(i), "bench.txt")
		r, err := gate.ReadRun(p)
		if os.IsNotExist(err) {
			missing++
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		runs = append(runs, r)
	}
	return runs, missing, nil
}

// flagRate judges every run of curs against base: how many the gate
// flagged (a regression in any metric) and how many had a metric NOT
// EVALUATED. want ≤ 0 is a false-alarm row (goal: none flagged), else
// the fewest runs to flag.
func flagRate(ctx context.Context, j judge, what string, curs, base []gate.Run, against string, want int) (row, error) {
	r := row{what: what, against: against, of: len(curs)}
	vss, err := judgeAll(ctx, j, base, curs)
	if err != nil {
		return r, err
	}
	var js, ms []float64
	for _, vs := range vss {
		if slices.ContainsFunc(vs, func(v gate.Verdict) bool { return v.Regression }) {
			r.flagged++
		}
		if slices.ContainsFunc(vs, func(v gate.Verdict) bool { return v.Disturbed != "" }) {
			r.notEvaluated++
		}
		c := gate.CoverageOf(vs)
		js, ms = append(js, float64(c.Judged)), append(ms, float64(c.Metrics))
	}
	r.judged, r.metrics = medianInt(js), medianInt(ms)
	if against != "" {
		r.against += judgedText(r.judged, r.metrics)
	}
	if want <= 0 {
		r.goal, r.met = "0 flagged", r.flagged == 0
	} else {
		r.goal, r.met = fmt.Sprintf("≥ %d flagged", want), r.flagged >= want
	}
	return r, nil
}

// medianInt is xs's median, rounded (0 for none).
func medianInt(xs []float64) int {
	s, err := stats.Summarize(xs)
	if err != nil {
		return 0
	}
	return int(math.Round(s.Median))
}

// judgedText is a row's "; judged 130 of 201 metrics a run".
func judgedText(judged, metrics int) string {
	return fmt.Sprintf("; judged %d of %d metrics a run", judged, metrics)
}

// oneRunRate judges every same-code run against each baseline run alone:
// the goal is at most one flagged in twenty against any one of them.
func oneRunRate(ctx context.Context, j judge, what string, curs, base []gate.Run, load string) (row, error) {
	r := row{what: what, against: fmt.Sprintf("1 run (%s), each of %d in turn", load, len(base))}
	worst := 0
	var js, ms []float64
	for _, b := range base {
		x, err := flagRate(ctx, j, "", curs, []gate.Run{b}, "", 0)
		if err != nil {
			return r, err
		}
		r.flagged, r.of, r.notEvaluated = r.flagged+x.flagged, r.of+x.of, r.notEvaluated+x.notEvaluated
		worst = max(worst, x.flagged)
		js, ms = append(js, float64(x.judged)), append(ms, float64(x.metrics))
	}
	r.judged, r.metrics = medianInt(js), medianInt(ms)
	r.against += judgedText(r.judged, r.metrics)
	limit := max(1, len(curs)/20)
	r.goal = fmt.Sprintf("≤ %d of %d against each (worst: %d)", limit, len(curs), worst)
	r.met = worst <= limit
	return r, nil
}

// judgeAll judges each of curs against base, on every core.
func judgeAll(ctx context.Context, j judge, base, curs []gate.Run) ([][]gate.Verdict, error) {
	out := make([][]gate.Verdict, len(curs))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, c := range curs {
		g.Go(func() error {
			vs, err := j(ctx, base, c)
			if err != nil {
				return fmt.Errorf("judge %s: %w", c.Path, err)
			}
			out[i] = vs
			return nil
		})
	}
	return out, g.Wait()
}

// scaled is r with key k's samples in [lo, hi) changed by f (each
// sample's rank among them, ascending from 0, and value → its new value),
// each left in its place: the gate reads a serving metric's waves from
// the samples' order (gate.Run.Span).
func scaled(r gate.Run, k gate.BenchKey, lo, hi int, f func(i int, x float64) float64) gate.Run {
	idx := make([]int, hi-lo)
	for i := range idx {
		idx[i] = lo + i
	}
	xs := r.Bench.Values[k]
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	return reordered(r, k, idx, f)
}

// reordered is r with key k's samples at order's indexes changed by f
// (each one's rank in order, and value → its new value), every sample left
// in its place and r as it was.
func reordered(r gate.Run, k gate.BenchKey, order []int, f func(i int, x float64) float64) gate.Run {
	c := r
	c.Bench.Values = maps.Clone(r.Bench.Values)
	xs := slices.Clone(r.Bench.Values[k])
	for rank, i := range order {
		xs[i] = f(rank, xs[i])
	}
	c.Bench.Values[k] = xs
	return c
}

// mostSlower: every request of tailKey but the fastest twice as slow.
func mostSlower(r gate.Run) gate.Run {
	return scaled(r, tailKey, 0, len(r.Bench.Values[tailKey]), func(i int, x float64) float64 {
		if i == 0 {
			return x
		}
		return 2 * x
	})
}

// tailSlower: the p95 of tailKey's requests after the first wave and every
// one above it twice as slow, by their times (at 28, the two slowest), the
// others as they were: the slower tail users fear. The gate's tail is
// each request's ratio to its wave-mates' median (gate.WaveRatios), which
// this moves by less where the slowest requests are slow whole waves (a
// stall of the machine, which the ratio leaves out): on make gate-power's
// runs +78 to +139 %.
func tailSlower(r gate.Run) gate.Run {
	lo, hi := r.Span(tailKey, gate.StatP95)
	p95 := stats.Rank(hi-lo, 95) - 1
	return scaled(r, tailKey, lo, hi, func(i int, x float64) float64 {
		if i < p95 {
			return x
		}
		return 2 * x
	})
}

// tailOf says, in words, which requests of tailKey tailSlower doubles
// in the first of runs (make gate-power's runs all have as many): "at 28
// requests, the 2 slowest".
func tailOf(runs []gate.Run) string {
	if len(runs) == 0 {
		return "none"
	}
	lo, hi := runs[0].Span(tailKey, gate.StatP95)
	n := hi - lo
	if n == 0 {
		return "none"
	}
	return fmt.Sprintf("at %d requests, the %d slowest", n, n-stats.Rank(n, 95)+1)
}

// firstSlower: tailKey's first wave twice as slow (the requests that
// found the prefix cache empty), the later waves as they were.
func firstSlower(r gate.Run) gate.Run { return inject(r, tailKey, gate.StatFirstWave, -1, 100) }

// inject is r with metric k's statistic stat made worse by pct percent
// (better: the unit's direction): every sample the statistic reads
// (gate.Run.Span) for a median or a first wave; for a tail, the samples
// from its nearest-rank position outwards (the p95 and those above it, or
// the p5 and those below), ranked as the gate ranks them: by each one's
// ratio to its wave-mates' median where the gate's tail is such a ratio
// (gate.WaveRatios), else by value. So the statistic moves by that (a
// tail of ratios by about that: a scaled request is a wave-mate of the
// others of its wave, whose ratios it moves a little) and the rest of
// the run does not.
func inject(r gate.Run, k gate.BenchKey, stat string, better int, pct float64) gate.Run {
	f := 1 + pct/100
	if better > 0 {
		f = 1 - pct/100
	}
	var order []int
	if at, ok := gate.WaveRatios(r, k, true); ok && (stat == gate.StatP95 || stat == gate.StatP5) {
		for i, x := range at {
			if !math.IsNaN(x) {
				order = append(order, i)
			}
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(at[a], at[b]) })
	} else {
		lo, hi := r.Span(k, stat)
		xs := r.Bench.Values[k]
		for i := lo; i < hi; i++ {
			order = append(order, i)
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	}
	n := len(order)
	p95, p5 := stats.Rank(n, 95)-1, stats.Rank(n, 5)-1 // their ranks in order, ascending
	return reordered(r, k, order, func(i int, x float64) float64 {
		if stat == gate.StatP95 && i < p95 || stat == gate.StatP5 && i > p5 {
			return x
		}
		return x * f
	})
}

// injectRate injects f into every same-code run and counts those whose
// tailKey verdict of statistic stat the gate flagged.
func injectRate(ctx context.Context, j judge, what string, curs, base []gate.Run, against string, f func(gate.Run) gate.Run, stat string) (row, error) {
	r := row{what: what, against: against, of: len(curs)}
	inj := make([]gate.Run, len(curs))
	for i, c := range curs {
		if n := len(c.Bench.Values[tailKey]); n < gate.TailMinSamples {
			return r, fmt.Errorf("%s: %s %s has %d samples, %d wanted (its tail is judged from that many)", c.Path, tailKey.Name, tailKey.Unit, n, gate.TailMinSamples)
		}
		inj[i] = f(c)
	}
	vss, err := judgeAll(ctx, j, base, inj)
	if err != nil {
		return r, err
	}
	for _, vs := range vss {
		v, _ := verdictOf(vs, metricKey{tailKey, stat})
		if v.Regression {
			r.flagged++
		}
		if v.Disturbed != "" { // the median's and the tail's alike: the phase's
			r.notEvaluated++
		}
	}
	r.goal, r.met = fmt.Sprintf("%d flagged", len(curs)), r.flagged == len(curs)
	return r, nil
}

// metricKey names one verdict: its benchmark, unit and statistic.
type metricKey struct {
	gate.BenchKey
	stat string
}

// keyOf is v's metricKey.
func keyOf(v gate.Verdict) metricKey {
	return metricKey{gate.BenchKey{Name: v.Name, Unit: v.Unit}, v.Stat}
}

// verdictOf is vs's verdict of k; ok is false where vs has none.
func verdictOf(vs []gate.Verdict, k metricKey) (gate.Verdict, bool) {
	i := slices.IndexFunc(vs, func(v gate.Verdict) bool { return keyOf(v) == k })
	if i < 0 {
		return gate.Verdict{}, false
	}
	return vs[i], true
}

// subset is n of runs drawn by seed, in their order.
func subset(runs []gate.Run, n int, seed uint64) []gate.Run {
	idx := rand.New(rand.NewPCG(seed, 35)).Perm(len(runs))[:n]
	slices.Sort(idx)
	out := make([]gate.Run, n)
	for i, k := range idx {
		out[i] = runs[k]
	}
	return out
}

// statedPower injects into every same-code run, one metric at a time,
// the change its verdict states as the gate's power (the smallest flagged
// in gate.PowerLevel of runs), and half of it, each run against its own
// half of the baseline runs (subset). Rows, reported beside their aims
// (at least 80 % at the stated size, at most 20 % at half of it): the
// injections flagged, pooled over the metrics; detail lists each
// metric's counts.
func statedPower(ctx context.Context, j judge, cond string, curs, base []gate.Run, against string, detail *[]string) (row, row, error) {
	full := row{what: "each metric's stated power (smallest flagged), injected into each same-code run (" + cond + "), one metric at a time", against: against}
	half := row{what: "half of it, injected alike (" + cond + ")", against: against}
	// Pooled over metrics: a metric's rate against one baseline leans on
	// where that baseline's runs happened to fall (a metric whose runs
	// were slow is flagged less), which the pool and the drawn baselines
	// average out, as the power is stated (over baselines). Trial i draws
	// half the baseline runs (in their order) by its own seed; a metric
	// gated only from more runs than that (a tail, one or two events a
	// run: gate.FewMinRuns) is injected against them all.
	type trial struct {
		v    gate.Verdict
		base []gate.Run
	}
	var trials [][]trial
	for i := range curs {
		sub := subset(base, (len(base)+1)/2, uint64(i))
		var ts []trial
		seen := map[metricKey]bool{}
		for _, b := range [][]gate.Run{sub, base} {
			vs, err := j(ctx, b, curs[i])
			if err != nil {
				return full, half, fmt.Errorf("judge %s: %w", curs[i].Path, err)
			}
			for _, v := range vs {
				k := keyOf(v)
				if seen[k] || v.Better == 0 || v.Disturbed != "" || math.IsInf(v.MinPct, 1) || v.Rule != gate.RuleRuns && v.Rule != gate.RuleOneRun {
					continue
				}
				seen[k] = true
				ts = append(ts, trial{v, b})
			}
		}
		trials = append(trials, ts)
	}
	// hits[k][0]: runs the stated change was flagged in; [1]: half of it; [2]: trials.
	var mu sync.Mutex // guards hits
	hits := map[metricKey]*[3]int{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, ts := range trials {
		for _, tr := range ts {
			v := tr.v
			k := keyOf(v)
			g.Go(func() error {
				var got [2]bool
				for h, size := range []float64{v.MinPct, v.MinPct / 2} {
					ws, err := j(gctx, tr.base, inject(curs[i], k.BenchKey, k.stat, v.Better, size))
					if err != nil {
						return fmt.Errorf("judge %s with %s %s%s injected: %w", curs[i].Path, k.Name, k.Unit, gate.StatSuffix(k.stat), err)
					}
					w, _ := verdictOf(ws, k)
					got[h] = w.Regression
				}
				mu.Lock()
				defer mu.Unlock()
				if hits[k] == nil {
					hits[k] = &[3]int{}
				}
				for h, ok := range got {
					if ok {
						hits[k][h]++
					}
				}
				hits[k][2]++
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return full, half, err
	}
	below, above := 0, 0
	for _, k := range slices.SortedFunc(maps.Keys(hits), func(a, b metricKey) int {
		return strings.Compare(a.Name+a.Unit+a.stat, b.Name+b.Unit+b.stat)
	}) {
		h := hits[k]
		full.flagged, half.flagged = full.flagged+h[0], half.flagged+h[1]
		full.of, half.of = full.of+h[2], half.of+h[2]
		if float64(h[0]) < gate.PowerLevel*float64(h[2]) {
			below++
		}
		if float64(h[1]) > 0.2*float64(h[2]) {
			above++
		}
		*detail = append(*detail, fmt.Sprintf("%s: %s %s%s: stated power flagged in %d of %d runs, half of it in %d", cond, k.Name, k.Unit, gate.StatSuffix(k.stat), h[0], h[2], h[1]))
	}
	// Reported, not held: every trial shares these few baseline runs,
	// whose own draw moves every metric's rate at once (runs drawn exactly
	// as the gate models them, ten baseline runs that happened to sit
	// high, flagged 30 of 60 injections at the stated power). The power
	// is stated over baselines, and held there: package gate's
	// TestStatedPowerHoldsByInjection draws 100.
	full.goal = fmt.Sprintf("reported: ≥ 80 %% is the aim over baselines; %d metrics, %d of them under 80 %% alone (-v lists each)", len(hits), below)
	half.goal = fmt.Sprintf("reported: ≤ 20 %% is the aim over baselines; %d metrics over 20 %% alone", above)
	full.reported, half.reported = true, true
	return full, half, nil
}

// loadSummary is the median and range of the others' CPU share over
// every phase window of each scenario's runs.
func loadSummary(sc map[string][]gate.Run) string {
	var parts []string
	for _, name := range scenarios {
		var xs []float64
		for _, r := range sc[name] {
			for k, v := range r.Bench.Values {
				if r.Bench.Name(k.Name).Base == record.HostBench && k.Unit == record.UnitOthersCPU && len(v) > 0 {
					xs = append(xs, v[0])
				}
			}
		}
		if s, err := stats.Summarize(xs); err == nil {
			parts = append(parts, fmt.Sprintf("%s %.0f %% (%.0f–%.0f)", name, s.Median, s.Min, s.Max))
		}
	}
	return strings.Join(parts, ", ")
}

// machine names the machine: cores, CPU model, kernel.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	la := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		la = ", load average now " + strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d cores (%s), %s%s%s", runtime.NumCPU(), runtime.GOARCH, model, kernel, la)
}

// write prints the table (and with verbose each metric's injections); it
// reports whether every goal was met.
func (m measurement) write(w io.Writer, verbose bool) bool {
	fmt.Fprintf(w, "machine: %s\nload: %s\n\n", m.machine, m.load)
	fmt.Fprintln(w, "| runs | judged against | flagged | NOT EVALUATED (busy) | goal | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	ok := true
	for _, r := range m.rows {
		met := "yes"
		switch {
		case r.reported:
			met = "—"
		case !r.met:
			met, ok = "**no**", false
		}
		fmt.Fprintf(w, "| %s | %s | %d of %d | %d | %s | %s |\n", r.what, r.against, r.flagged, r.of, r.notEvaluated, r.goal, met)
	}
	for _, n := range m.notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if verbose {
		fmt.Fprintln(w)
		for _, d := range m.detail {
			fmt.Fprintln(w, d)
		}
	}
	return ok
}
