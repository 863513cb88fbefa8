package gate

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// The rules that decide a metric.
const (
	// RuleRuns: two or more baseline runs. Each run is one sample (its
	// median), as benchstat's -count=N model has it: this run's median is
	// tested against the baseline runs' medians with the prediction
	// interval of a normal sample (Student's t with k−1 degrees of freedom:
	// t = (y − ȳ) / (s·√(1+1/k)); Hahn & Meeker, "Statistical Intervals",
	// 1991, §4), on the log of the medians so changes are ratios. The
	// run-to-run variance is moderated (Smyth 2004, below): with five runs a
	// metric's own variance has 4 degrees of freedom, so it borrows the
	// others' of its kind. When the baseline is a history (HistoryMinRuns
	// or more), the runs are those since the last change point E-Divisive
	// finds in it.
	RuleRuns = "runs"
	// RuleOneRun: a single baseline run, whose run-to-run spread is
	// unknown. The spread of one run's samples stands in for it (a busier
	// machine for one run shifts every sample of that run): the noise
	// floor of a metric is the larger of its own CV (sd / mean, n ≥ 3) and
	// the median CV of the baseline run's metrics of the same unit; a change
	// is flagged beyond z(1−α/m)·floor·√(2 + π/2·(1/n₀ + 1/n₁)) (two runs
	// each off by the floor, and their medians' own sampling; m the metrics
	// this rule gates, a Bonferroni family), and never inside the
	// tolerance. A metric with fewer than OneRunMinSamples samples in the
	// baseline run is not gated: one sample cannot tell a change from a
	// hiccup of the box (a single 18 ms level-2 sleep drifted 47 % between
	// two runs of the same code).
	RuleOneRun = "one run"
)

// OneRunMinSamples is the fewest samples of a metric in a single baseline
// run that RuleOneRun gates on.
const OneRunMinSamples = 3

// HistoryMinRuns is the fewest baseline runs in which change points are
// looked for (E-Divisive needs EDivisiveMinSize runs on each side).
const HistoryMinRuns = 2 * EDivisiveMinSize

// Verdict is one benchmark × unit judged against the baseline runs.
type Verdict struct {
	Name, Unit string
	Better     int    // +1 higher is better, −1 lower is better, 0 unknown (not gated)
	Rule       string // RuleRuns or RuleOneRun
	// How says how the rule decided, in words: the runs it used, the
	// noise floor and where it came from.
	How string
	// Runs is the number of baseline runs the rule used (the segment since
	// the last change point, for a history).
	Runs      int
	Base, Cur float64 // the baseline's centre (its run's median, or the geometric mean of its runs' medians) and this run's median
	ChangePct float64 // (Cur / Base − 1) × 100
	// BestChangePct is the same change of the runs' best samples (the
	// fastest, or the highest throughput): RuleRuns flags a regression
	// only where it too is worse (NaN otherwise).
	BestChangePct float64
	P             float64 // one-sided p of a worse change (RuleRuns); NaN otherwise
	// MinPct is the gate's power: the smallest change in the worse
	// direction that it flags, in percent; Min is the same in the
	// metric's unit (an absolute change).
	MinPct, Min float64
	Regression  bool
	Why         string // why not gated, or what the rule cannot see
	// ChangePoints are the significant changes of this metric in the
	// baseline's history (oldest first).
	ChangePoints []ChangePoint
}

// ChangePoint is where a metric's level changed in the baseline's history.
type ChangePoint struct {
	Run       string  // the first run of the new level
	Index     int     // its index among the baseline runs, oldest 0
	ChangePct float64 // median of the runs' medians after / before, − 1, in percent
	P         float64 // the permutation test's p
}

// Judge decides every benchmark × unit that this run shares with the
// baseline runs (given oldest first): with RuleRuns when two or more runs
// have it, else with RuleOneRun. A regression is a change in the worse
// direction of more than tolerancePct percent that the rule also finds
// significant at alpha. Units without a better= direction are reported,
// never gated.
//
// Of a history longer than HistoryMaxRuns only the newest HistoryMaxRuns
// runs are judged against (each verdict's How says so). A metric of this
// run that no baseline run has is a RuleNew verdict, not judged; one that
// only some baseline runs have is judged on those, and its Why names the
// runs that lack it. ctx stops the judgement (the change-point search
// checks it as it goes) with an error naming ctx's cause.
func Judge(ctx context.Context, base []Run, cur Run, tolerancePct, alpha float64) ([]Verdict, error) {
	if len(base) == 0 {
		return nil, fmt.Errorf("no baseline run")
	}
	if len(cur.Bench.Values) == 0 {
		return nil, fmt.Errorf("this run: no benchmark results")
	}
	bounded := ""
	if len(base) > HistoryMaxRuns {
		bounded = fmt.Sprintf("; of a history of %d runs, the newest %d (gate.HistoryMaxRuns)", len(base), HistoryMaxRuns)
		base = base[len(base)-HistoryMaxRuns:]
	}
	keys := slices.SortedFunc(maps.Keys(cur.Bench.Values), func(a, b BenchKey) int {
		return strings.Compare(a.Name+"\x00"+a.Unit, b.Name+"\x00"+b.Unit)
	})
	var out []Verdict
	var cases []runsCase // the runs rule's metrics, indexes into out
	var single []int     // the one-run rule's metrics, indexes into out
	floors := map[int]map[string]unitFloor{}
	var fresh []Verdict        // this run's metrics that no baseline run has
	absent := map[int]string{} // verdicts of metrics some baseline runs lack: which
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("judge: %w", context.Cause(ctx))
		}
		var runs []Run
		var meds []float64
		var lack []string
		for _, r := range base {
			if m, ok := r.Median(k); ok {
				runs, meds = append(runs, r), append(meds, m)
			} else {
				lack = append(lack, r.Path)
			}
		}
		y, _ := cur.Median(k)
		v := Verdict{Name: k.Name, Unit: k.Unit, Cur: y, Better: cur.Bench.Meta.GetBetter(k.Unit), P: math.NaN(), BestChangePct: math.NaN()}
		if len(runs) == 0 {
			v.Rule, v.Base, v.ChangePct, v.MinPct, v.Min = RuleNew, math.NaN(), math.NaN(), math.Inf(1), math.Inf(1)
			v.How = "no baseline run has it"
			v.Why = fmt.Sprintf("%s: in this run, in none of the %d baseline run(s) (a phase, model or metric the baseline lacks): not judged", record.NotEvaluated, len(base))
			fresh = append(fresh, v)
			continue
		}
		if len(lack) > 0 {
			absent[len(out)] = fmt.Sprintf("not in %d of the %d baseline runs (%s): judged on the %d that have it",
				len(lack), len(base), some(lack, 3), len(runs))
		}
		if len(runs) >= 2 {
			c, err := newRunsCase(ctx, len(out), &v, runs, meds, cur, k, alpha, Run.Median)
			if err != nil {
				return nil, err
			}
			cases = append(cases, c)
		} else {
			i := slices.IndexFunc(base, func(r Run) bool { return r.Path == runs[0].Path })
			if floors[i] == nil {
				floors[i] = noiseFloors(runs[0].Bench)
			}
			v.oneRunFloor(runs[0], k, floors[i])
			single = append(single, len(out))
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the baseline and this run share no benchmark: are they from the same protocol?")
	}
	// The run fails if any metric regresses: each rule's gated metrics are
	// one family, held to alpha together. The runs rule's with Benjamini-
	// Hochberg (familyWise); the power each states is at alpha/m, the
	// threshold one changed metric among unchanged ones must meet. The one
	// run rule's with Bonferroni's alpha/m, its floors being rough.
	family := 0
	for _, c := range cases {
		if out[c.i].Better != 0 && c.k >= 2 {
			family++
		}
	}
	famAlpha := alpha / float64(max(family, 1))
	priors := moderate(cases, out)
	// The same test on each run's best sample (its fastest, or its highest
	// throughput), for an intersection-union test (Berger 1982): a metric
	// regresses only where its median and its best sample both do, at
	// p = the larger of the two. A slower code moves its fastest sample
	// too; the box's noise is mostly added time (Chen & Revels, "Robust
	// benchmarking in noisy environments", 2016), so a hiccup during some
	// of a run's requests moves its median and not its best. Same-code
	// reruns here: a run whose after-wake TTFT median drifted +14 % kept
	// its fastest request within 4 %; two handoffs, one of them a hiccup
	// of +27 %, moved a median of two by +13 %.
	bests := make([]runsCase, len(cases))
	bestVs := make([]Verdict, len(cases))
	for j, c := range cases {
		v := out[c.i]
		k := BenchKey{Name: v.Name, Unit: v.Unit}
		var runs []Run
		var xs []float64
		for _, r := range base {
			if x, ok := r.Best(k, v.Better); ok {
				runs, xs = append(runs, r), append(xs, x)
			}
		}
		bestVs[j] = Verdict{Name: v.Name, Unit: v.Unit, Better: v.Better, P: math.NaN()}
		b, err := newRunsCase(ctx, c.i, &bestVs[j], runs, xs, cur, k, alpha, func(r Run, k BenchKey) (float64, bool) { return r.Best(k, v.Better) })
		if err != nil {
			return nil, err
		}
		bests[j] = b
	}
	bestPriors := moderate(bests, out)
	for j, c := range cases {
		v, b := &out[c.i], &bestVs[j]
		g := priorKey(v.Name, v.Unit)
		v.judgeRuns(c, priors[g], tolerancePct, famAlpha)
		if v.Better == 0 {
			continue
		}
		b.judgeRuns(bests[j], bestPriors[g], 0, famAlpha)
		b.Cur, _ = cur.Best(BenchKey{Name: v.Name, Unit: v.Unit}, v.Better)
		v.BestChangePct = math.NaN()
		if b.Base != 0 {
			v.BestChangePct = (b.Cur/b.Base - 1) * 100
		}
		if math.IsNaN(v.P) || math.IsNaN(b.P) {
			v.P = math.NaN()
		} else {
			v.P = math.Max(v.P, b.P)
		}
		// The power: the smallest whole-distribution shift whose larger p
		// is at most alpha/m, what one changed metric among unchanged ones
		// must meet (Benjamini-Hochberg flags more where several changed).
		v.MinPct = math.Max(v.MinPct, b.MinPct)
		v.Min = v.MinPct / 100 * math.Abs(v.Base)
		v.How += fmt.Sprintf("; and on each run's best sample (%s): %+.2f %%, p %.3g (intersection-union: both must be worse, p the larger)", bestName(v.Better), v.BestChangePct, b.P)
		if family > 1 {
			v.How += fmt.Sprintf("; Benjamini-Hochberg over the %d metrics the runs rule judges (α %.3g in all)", family, alpha)
		}
	}
	gated := 0
	for _, i := range single {
		if out[i].Better != 0 && !math.IsInf(out[i].MinPct, 1) {
			gated++
		}
	}
	for _, i := range single {
		v := &out[i]
		k := BenchKey{Name: v.Name, Unit: v.Unit}
		n0 := 0
		for _, r := range base {
			n0 = max(n0, len(r.Bench.Values[k]))
		}
		v.judgeOneRun(tolerancePct, alpha, gated, n0, len(cur.Bench.Values[k]))
	}
	for i := range out {
		v := &out[i]
		if v.Base != 0 {
			v.ChangePct = (v.Cur/v.Base - 1) * 100
		}
		worse := v.ChangePct * float64(-v.Better)
		if v.Better == 0 {
			v.Why = "its unit has no better= direction"
		}
		switch {
		case v.Better == 0:
		case !(v.Base > 0):
			// A relative change of a zero or negative centre is undefined
			// (a residual of 0 GiB) or flips its sign: not gated, said so.
			v.MinPct, v.Min = math.Inf(1), math.Inf(1)
			v.Why = fmt.Sprintf("the baseline's centre is %g: a change relative to it is undefined, not gated", v.Base)
		case v.Rule == RuleRuns:
			// Decided by Benjamini-Hochberg on P below (familyWise); the
			// median and the best sample must both be worse.
			v.Regression = worse > tolerancePct && v.BestChangePct*float64(-v.Better) > 0 && !math.IsNaN(v.P)
		default:
			v.Regression = worse > tolerancePct && worse >= v.MinPct-1e-9
		}
	}
	familyWise(out, alpha)
	for i, note := range absent {
		out[i].Why = strings.TrimPrefix(out[i].Why+"; "+note, "; ")
	}
	if bounded != "" {
		for i := range out {
			out[i].How += bounded
		}
	}
	out = append(out, fresh...)
	out = append(out, missing(base, cur)...)
	return out, nil
}

// some lists the first n of xs, and "…" for the rest.
func some(xs []string, n int) string {
	if len(xs) <= n {
		return strings.Join(xs, ", ")
	}
	return strings.Join(xs[:n], ", ") + ", …"
}

// RuleNew: a metric this run has and no baseline run has (a new phase,
// model or metric, or a baseline from before it existed): shown as NOT
// EVALUATED, never gated.
const RuleNew = "new"

// familyWise keeps a runs-rule regression only where the Benjamini-
// Hochberg step-up procedure (1995) finds its p significant among the
// family of the runs rule's gated metrics: the largest k whose k-th
// smallest p is at most k·alpha/m, and every metric up to it. When the
// code did not change (every metric's null true) the chance of any false
// regression in the run stays at most alpha; when several metrics did
// change (a slower wake moves sleep, switch and traffic figures alike),
// the k-th of them needs only p ≤ k·alpha/m, more power than Holm's.
func familyWise(vs []Verdict, alpha float64) {
	var fam []int
	for i, v := range vs {
		if v.Rule == RuleRuns && v.Better != 0 {
			fam = append(fam, i)
		}
	}
	slices.SortStableFunc(fam, func(a, b int) int { return cmpP(vs[a].P, vs[b].P) })
	k := 0
	for rank, i := range fam {
		if p := vs[i].P; !math.IsNaN(p) && p <= float64(rank+1)*alpha/float64(len(fam)) {
			k = rank + 1
		}
	}
	for _, i := range fam[k:] {
		vs[i].Regression = false
	}
}

// RuleMissing: a metric the baseline runs have and this run lacks.
const RuleMissing = "missing"

// missing is a verdict for each metric the baseline runs have and this
// run lacks (a phase or a model that did not run, or a renamed metric):
// shown, never gated, so a phase that stopped producing results is seen.
func missing(base []Run, cur Run) []Verdict {
	seen := map[BenchKey]int{}
	for _, r := range base {
		for k := range r.Bench.Values {
			if _, ok := cur.Bench.Values[k]; !ok {
				seen[k]++
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(seen), func(a, b BenchKey) int {
		return strings.Compare(a.Name+"\x00"+a.Unit, b.Name+"\x00"+b.Unit)
	})
	var out []Verdict
	for _, k := range keys {
		v := Verdict{Name: k.Name, Unit: k.Unit, Rule: RuleMissing, Runs: seen[k], P: math.NaN(), BestChangePct: math.NaN(),
			ChangePct: math.NaN(), Cur: math.NaN(), MinPct: math.Inf(1), Min: math.Inf(1),
			Why: fmt.Sprintf("in %d baseline run(s), not in this run: a phase or model that did not run, or a renamed metric; not judged", seen[k])}
		for _, r := range base {
			if m, ok := r.Median(k); ok {
				v.Base = m
			}
		}
		out = append(out, v)
	}
	return out
}

// bestName names a run's best sample of a unit whose better= is dir.
func bestName(dir int) string {
	if dir > 0 {
		return "max"
	}
	return "min"
}

// cmpP orders p-values ascending, NaN last.
func cmpP(a, b float64) int {
	switch {
	case math.IsNaN(a) && math.IsNaN(b):
		return 0
	case math.IsNaN(a):
		return 1
	case math.IsNaN(b):
		return -1
	}
	return cmp.Compare(a, b)
}

// scale maps medians to the scale the runs rule works on: log when every
// value is positive (changes are ratios), else the values themselves.
type scale bool

func (s scale) to(x float64) float64 {
	if s {
		return math.Log(x)
	}
	return x
}

func (s scale) from(x float64) float64 {
	if s {
		return math.Exp(x)
	}
	return x
}

// runsCase is one metric the runs rule judges: the baseline's medians on
// the rule's scale, from the last change point on.
type runsCase struct {
	i       int       // its verdict in Judge's output
	few     bool      // some run has fewer than OneRunMinSamples samples of it
	ys      []float64 // the segment's medians on lg's scale
	y       float64   // this run's median on lg's scale
	lg      scale
	k       int     // runs in the segment
	mean    float64 // of ys
	s2      float64 // sample variance of ys (k ≥ 2)
	where   string  // the runs, in words
	segFrom int
}

// newRunsCase finds the metric's segment of the baseline (the runs since
// the last change point, for a history) and records the change points on v.
func newRunsCase(ctx context.Context, i int, v *Verdict, runs []Run, meds []float64, cur Run, k BenchKey, alpha float64, of func(Run, BenchKey) (float64, bool)) (runsCase, error) {
	y, _ := of(cur, k)
	few := len(cur.Bench.Values[k]) < OneRunMinSamples
	for _, r := range runs {
		few = few || len(r.Bench.Values[k]) < OneRunMinSamples
	}
	lg := scale(!slices.ContainsFunc(append(slices.Clone(meds), y), func(x float64) bool { return !(x > 0) }))
	ys := make([]float64, len(meds))
	for j, m := range meds {
		ys[j] = lg.to(m)
	}
	segFrom := 0
	if len(meds) >= HistoryMinRuns {
		splits, err := EDivisive(ctx, ys, alpha, 1)
		if err != nil {
			return runsCase{}, fmt.Errorf("judge %s %s: %w", k.Name, k.Unit, err)
		}
		for _, s := range splits {
			before, _ := stats.Summarize(meds[:s.From])
			after, _ := stats.Summarize(meds[s.From:])
			cp := ChangePoint{Run: runs[s.From].Path, Index: s.From, P: s.P}
			if before.Median != 0 {
				cp.ChangePct = (after.Median/before.Median - 1) * 100
			}
			v.ChangePoints = append(v.ChangePoints, cp)
			segFrom = s.From
		}
	}
	c := runsCase{i: i, few: few, ys: ys[segFrom:], y: lg.to(y), lg: lg, k: len(meds) - segFrom, segFrom: segFrom}
	c.mean = stat.Mean(c.ys, nil)
	if c.k >= 2 {
		c.s2 = stat.Variance(c.ys, nil)
	}
	c.where = fmt.Sprintf("%d baseline runs", c.k)
	if segFrom > 0 {
		c.where = fmt.Sprintf("the %d baseline runs since the change point at %s", c.k, filepath.Base(filepath.Dir(runs[segFrom].Path))+"/"+filepath.Base(runs[segFrom].Path))
	}
	return c, nil
}

// prior is a group's prior on its metrics' run-to-run variance (Smyth
// 2004): variance s02 worth d0 degrees of freedom (0: none learnt).
type prior struct {
	s02, d0 float64
	n       int // metrics it was learnt from
}

// priorKey groups metrics whose relative run-to-run spread is alike: the
// same phase (the benchmark's first name element) and quantity (the
// unit's part before its "/"), e.g. every Sleep sec/sleep, sec/wake and
// sec/first-token: a busier box stretches them alike.
func priorKey(name, unit string) string {
	phase, _, _ := strings.Cut(name, "/")
	q, _, _ := strings.Cut(unit, "/")
	return phase + " " + q + "/*"
}

// PriorMinMetrics is the fewest metrics of a group a variance prior is
// learnt from.
const PriorMinMetrics = 3

// moderate learns each group's variance prior from its runs-rule metrics
// with a positive variance and OneRunMinSamples or more samples in every
// run. A metric of fewer samples a run neither lends nor borrows: its run
// median is one or two events, which a hiccup of the box moves whole (a
// single 18 ms level-2 sleep drifted 46 % between runs of the same code),
// so it keeps its own k−1 degrees of freedom, and their heavy tails.
func moderate(cases []runsCase, vs []Verdict) map[string]prior {
	s2s, ds := map[string][]float64{}, map[string][]float64{}
	for _, c := range cases {
		if c.k >= 2 && c.s2 > 0 && !c.few {
			g := priorKey(vs[c.i].Name, vs[c.i].Unit)
			s2s[g], ds[g] = append(s2s[g], c.s2), append(ds[g], float64(c.k-1))
		}
	}
	out := map[string]prior{}
	for g, s2 := range s2s {
		if len(s2) >= PriorMinMetrics {
			s02, d0 := fitPrior(s2, ds[g])
			out[g] = prior{s02, d0, len(s2)}
		}
	}
	return out
}

// fitPrior estimates the prior of the empirical Bayes moderated t-test
// (Smyth, "Linear models and empirical Bayes methods for assessing
// differential expression in microarray experiments", Stat. Appl. Genet.
// Mol. Biol. 3(1), 2004, §6; limma's fitFDist) by moments of the log
// variances: each s² of d degrees of freedom is s0²·χ²_d/d·(d0/χ²_d0)
// scaled, so log s² − ψ(d/2) + log(d/2) has mean log s0² − ψ(d0/2) +
// log(d0/2) and variance ψ'(d/2) + ψ'(d0/2). Where the spreads agree
// beyond what their sampling explains (Smyth's d0 = ∞), d0 is capped at
// the degrees of freedom the prior was learnt from, Σd: a pooled variance
// is worth no more than its data (a handful of metrics cannot make the
// test a normal one).
func fitPrior(s2, d []float64) (s02, d0 float64) {
	n := float64(len(s2))
	e := make([]float64, len(s2))
	extra := 0.0
	for i := range s2 {
		e[i] = math.Log(s2[i]) - mathext.Digamma(d[i]/2) + math.Log(d[i]/2)
		extra += trigamma(d[i] / 2)
	}
	eMean := stat.Mean(e, nil)
	ss := 0.0
	for _, x := range e {
		ss += (x - eMean) * (x - eMean)
	}
	rhs := ss/(n-1) - extra/n
	d0 = floats.Sum(d)
	if rhs > 0 {
		d0 = math.Min(2*trigammaInverse(rhs), d0)
	}
	return math.Exp(eMean + mathext.Digamma(d0/2) - math.Log(d0/2)), d0
}

// trigamma is ψ'(x), the Hurwitz zeta ζ(2, x), for x > 0.
func trigamma(x float64) float64 { return mathext.Zeta(2, x) }

// trigammaInverse is the x > 0 with ψ'(x) = y > 0, by bisection on the
// log scale (ψ' falls monotonically from +∞ to 0).
func trigammaInverse(y float64) float64 {
	lo, hi := -20.0, 20.0 // log x
	for range 200 {
		mid := (lo + hi) / 2
		if trigamma(math.Exp(mid)) > y {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Exp((lo + hi) / 2)
}

func (v *Verdict) judgeRuns(c runsCase, pr prior, tolPct, alpha float64) {
	v.Rule, v.Runs, v.Base = RuleRuns, c.k, c.lg.from(c.mean)
	d := float64(c.k - 1)
	s2, df := c.s2, d
	moderated := pr.d0 > 0 && c.k >= 2 && !c.few
	if moderated {
		s2, df = (pr.d0*pr.s02+d*c.s2)/(pr.d0+d), pr.d0+d
	}
	se := math.Sqrt(s2 * (1 + 1/float64(c.k)))
	// The worse direction: up for lower-is-better units, down otherwise.
	dir := -float64(v.Better)
	if dir == 0 {
		dir = 1
	}
	dy := dir * (c.y - c.mean)
	var tc float64
	switch {
	case c.k < 2:
		v.P, tc = math.NaN(), math.Inf(1)
	case se == 0:
		v.P, tc = 1, 0
		if dy > 0 {
			v.P = 0
		}
	default:
		t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
		v.P, tc = 1-t.CDF(dy/se), t.Quantile(1-alpha)
	}
	// The smallest worse change the test finds significant, then the tolerance.
	edge := c.lg.from(c.mean + dir*tc*se)
	statPct := math.Abs(edge/v.Base-1) * 100
	if math.IsInf(tc, 1) || math.IsNaN(statPct) {
		statPct = math.Inf(1)
	}
	v.MinPct = math.Max(tolPct, statPct)
	v.Min = v.MinPct / 100 * math.Abs(v.Base)
	space := "log medians"
	if !c.lg {
		space = "medians"
	}
	v.How = fmt.Sprintf("t-test of this run's median against the %s (prediction interval, %s, run-to-run sd %.3g %%", c.where, space, 100*math.Sqrt(c.s2))
	if moderated {
		v.How += fmt.Sprintf(", moderated to %.3g %% with %.3g degrees of freedom by the prior of %d %s metrics: sd %.3g %% worth %.3g degrees of freedom",
			100*math.Sqrt(s2), df, pr.n, priorKey(v.Name, v.Unit), 100*math.Sqrt(pr.s02), pr.d0)
	}
	v.How += ")"
	switch {
	case c.k < 2:
		v.Why = "one run since the last change point: its run-to-run spread is unknown, nothing is flagged"
	case se == 0:
		v.Why = "the baseline runs agree exactly: any change beyond the tolerance is flagged"
	}
}

// unitFloor is the within-run noise floor of one unit in one run.
type unitFloor struct {
	median float64 // CV over the unit's metrics, a fraction
	n      int     // metrics it is taken over
}

// cv is sd / mean for n ≥ 3 positive-mean samples; ok is false otherwise.
// Not a robust spread on purpose: serving metrics are often bimodal (a
// request that waited for a wake, four that did not), and a MAD would call
// that tight while the run's median moves with how many waited.
func cv(xs []float64) (float64, bool) {
	if len(xs) < OneRunMinSamples {
		return 0, false
	}
	m, sd := stat.MeanStdDev(xs, nil)
	if !(m > 0) {
		return 0, false
	}
	return sd / m, true
}

// noiseFloors is each unit's median CV over the run's metrics of that unit
// that have OneRunMinSamples or more samples.
func noiseFloors(b Bench) map[string]unitFloor {
	cvs := map[string][]float64{}
	for k, xs := range b.Values {
		if c, ok := cv(xs); ok {
			cvs[k.Unit] = append(cvs[k.Unit], c)
		}
	}
	out := map[string]unitFloor{}
	for u, c := range cvs {
		s, _ := stats.Summarize(c)
		out[u] = unitFloor{s.Median, len(c)}
	}
	return out
}

// oneRunFloor sets v's baseline from the single run r and, in
// v.MinPct, the metric's noise floor as a fraction (judgeOneRun turns it
// into the power); +Inf where the run has too few samples to gate on.
func (v *Verdict) oneRunFloor(r Run, k BenchKey, floors map[string]unitFloor) {
	v.Rule, v.Runs = RuleOneRun, 1
	v.Base, _ = r.Median(k)
	n := len(r.Bench.Values[k])
	own, hasOwn := cv(r.Bench.Values[k])
	if !hasOwn {
		v.MinPct = math.Inf(1)
		v.How = fmt.Sprintf("%d sample(s) in the baseline run: its spread is unknown", n)
		return
	}
	floor, src := own, fmt.Sprintf("this metric's CV over its %d samples", n)
	if f, ok := floors[k.Unit]; ok && f.median > own {
		floor, src = f.median, fmt.Sprintf("%s's median CV over %d metrics of the baseline run", k.Unit, f.n)
	}
	v.MinPct = floor
	v.How = fmt.Sprintf("noise floor %.3g %% (%s; labelled: within-run spread standing in for run-to-run)", 100*floor, src)
}

// judgeOneRun turns the floor oneRunFloor left into the smallest change
// flagged: z(1−alpha/m)·floor·√(2 + π/2·(1/n₀ + 1/n₁)), m the metrics the
// rule gates: each run off by a drift of the floor, and each median off
// by its own sampling (a median's variance is π/2·σ²/n for normal
// samples), n₀ and n₁ the baseline's and this run's samples.
func (v *Verdict) judgeOneRun(tolPct, alpha float64, m, n0, n1 int) {
	if math.IsInf(v.MinPct, 1) {
		v.Why = fmt.Sprintf("one baseline run with fewer than %d samples of this metric: nothing is flagged (more cycles, or a baseline of several runs, gate it)", OneRunMinSamples)
		v.Min = math.Inf(1)
		return
	}
	floor := v.MinPct
	z := distuv.UnitNormal.Quantile(1 - alpha/float64(max(m, 1)))
	spread := math.Sqrt(2 + math.Pi/2*(1/float64(n0)+1/float64(max(n1, 1))))
	v.MinPct = math.Max(tolPct, 100*z*spread*floor)
	v.Min = v.MinPct / 100 * math.Abs(v.Base)
	v.How += fmt.Sprintf(" × z(1 − %.3g/%d) = %.3g × %.3g (two runs' drift and their medians' sampling, √(2 + π/2·(1/%d + 1/%d)); Bonferroni over the %d metrics this rule gates)",
		alpha, max(m, 1), z, spread, n0, n1, max(m, 1))
	v.Why = fmt.Sprintf("one baseline run: cannot see a change under %.3g %%, nor tell a change from this box's run-to-run drift beyond the within-run spread", v.MinPct)
}

// WriteVerdicts prints the judgement as a table: per metric the baseline's
// centre, this run, the change, the rule and its runs, the smallest worse
// change the gate flags (its power) in the unit and in percent, and the
// verdict; then how each rule decided and the change points of the
// history.
func WriteVerdicts(w io.Writer, vs []Verdict) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "benchmark\tunit\tbaseline\tthis run\tchange\trule (runs)\tp\tsmallest flagged\tverdict")
	for _, v := range vs {
		p := "–"
		if !math.IsNaN(v.P) {
			p = fmt.Sprintf("%.3g", v.P)
		}
		verdict := ""
		switch {
		case v.Regression:
			verdict = "REGRESSION"
		case v.Better == 0:
			verdict = "(not gated: no better= direction)"
		case math.IsInf(v.MinPct, 1):
			verdict = "(not gated: see below)"
		}
		sign := "+"
		if v.Better > 0 {
			sign = "−"
		}
		power := fmt.Sprintf("%s%.3g (%s%.3g %%)", sign, v.Min, sign, v.MinPct)
		if math.IsInf(v.MinPct, 1) {
			power = "none"
		}
		base, cur, change := fmt.Sprintf("%.4g", v.Base), fmt.Sprintf("%.4g", v.Cur), fmt.Sprintf("%+.2f%%", v.ChangePct)
		switch v.Rule {
		case RuleMissing:
			cur, change, verdict = "–", "–", "(missing in this run)"
		case RuleNew:
			base, change, verdict = "–", "–", "(NOT EVALUATED: not in the baseline)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s (%d)\t%s\t%s\t%s\n", v.Name, v.Unit, base, cur, change,
			v.Rule, v.Runs, p, power, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nhow each metric was decided:")
	for _, v := range vs {
		fmt.Fprintf(w, "  %s %s: %s: %s", v.Name, v.Unit, v.Rule, v.How)
		if v.Why != "" {
			fmt.Fprintf(w, "; %s", v.Why)
		}
		fmt.Fprintln(w)
	}
	var cps []string
	for _, v := range vs {
		for _, c := range v.ChangePoints {
			cps = append(cps, fmt.Sprintf("  %s %s: changed %+.1f %% at run %d (%s), p %.3g", v.Name, v.Unit, c.ChangePct, c.Index+1, c.Run, c.P))
		}
	}
	if len(cps) > 0 {
		fmt.Fprintln(w, "\nchange points in the baseline's history (E-Divisive means, permutation test):")
		for _, c := range cps {
			fmt.Fprintln(w, c)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// WriteRuns lists the baseline runs oldest first, with the time that
// ordered them and where it came from.
func WriteRuns(w io.Writer, base []Run) error {
	fmt.Fprintf(w, "baseline: %d run(s), oldest first:\n", len(base))
	for i, r := range base {
		fmt.Fprintf(w, "  %d. %s (%s %s)\n", i+1, r.Path, r.Order, r.Started.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return nil
}
