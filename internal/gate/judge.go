package gate

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/wakebench/wakebench/internal/stats"
)

// The rules that decide a metric.
const (
	// RuleRuns: two or more baseline runs. Each run is one sample (its
	// median), as benchstat's -count=N model has it: this run's median is
	// tested against the baseline runs' medians with the prediction
	// interval of a normal sample (Student's t with k−1 degrees of freedom:
	// t = (y − ȳ) / (s·√(1+1/k)); Hahn & Meeker, "Statistical Intervals",
	// 1991, §4), on the log of the medians so changes are ratios. When the
	// baseline is a history (HistoryMinRuns or more), the runs are those
	// since the last change point E-Divisive finds in it.
	RuleRuns = "runs"
	// RuleOneRun: a single baseline run, whose run-to-run spread is
	// unknown. The spread of one run's samples stands in for it (a busier
	// machine for one run shifts every sample of that run): the noise
	// floor of a metric is the larger of its own CV (sd / mean, n ≥ 3) and
	// the median CV of the baseline run's metrics of the same unit, or,
	// with fewer than 3 samples of its own, the unit's largest CV; a change
	// is flagged beyond z(1−α)·√2·floor (the difference of two runs, each
	// off by the floor), and never inside the tolerance. Without any spread
	// measured for the unit: ±2× tolerance.
	RuleOneRun = "one run"
)

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
	P         float64 // one-sided p of a worse change (RuleRuns); NaN otherwise
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
func Judge(base []Run, cur Run, tolerancePct, alpha float64) ([]Verdict, error) {
	if len(base) == 0 {
		return nil, fmt.Errorf("no baseline run")
	}
	if len(cur.Bench.Values) == 0 {
		return nil, fmt.Errorf("this run: no benchmark results")
	}
	floors := map[int]map[string]unitFloor{}
	keys := slices.SortedFunc(maps.Keys(cur.Bench.Values), func(a, b BenchKey) int {
		return strings.Compare(a.Name+"\x00"+a.Unit, b.Name+"\x00"+b.Unit)
	})
	// The run fails if any metric regresses: the runs rule's tests are one
	// family, held to alpha together (Benjamini-Hochberg, familyWise); the
	// power each states is at alpha/m, the threshold one changed metric
	// among unchanged ones must meet.
	family := 0
	for _, k := range keys {
		n := 0
		for _, r := range base {
			if _, ok := r.Median(k); ok {
				n++
			}
		}
		if n >= 2 && cur.Bench.Meta.GetBetter(k.Unit) != 0 {
			family++
		}
	}
	famAlpha := alpha / float64(max(family, 1))
	var out []Verdict
	for _, k := range keys {
		var runs []Run
		var meds []float64
		for _, r := range base {
			if m, ok := r.Median(k); ok {
				runs, meds = append(runs, r), append(meds, m)
			}
		}
		if len(runs) == 0 {
			continue
		}
		y, _ := cur.Median(k)
		v := Verdict{Name: k.Name, Unit: k.Unit, Cur: y, Better: cur.Bench.Meta.GetBetter(k.Unit), P: math.NaN()}
		if len(runs) >= 2 {
			v.judgeRuns(runs, meds, y, tolerancePct, famAlpha)
			if v.Better != 0 && family > 1 {
				v.How += fmt.Sprintf("; Benjamini-Hochberg over the %d metrics the runs rule judges (α %.3g in all)", family, alpha)
			}
		} else {
			i := slices.IndexFunc(base, func(r Run) bool { return r.Path == runs[0].Path })
			if floors[i] == nil {
				floors[i] = noiseFloors(runs[0].Bench)
			}
			v.judgeOneRun(runs[0], k, floors[i], y, tolerancePct, alpha)
		}
		if v.Base != 0 {
			v.ChangePct = (v.Cur/v.Base - 1) * 100
		}
		worse := v.ChangePct * float64(-v.Better)
		if v.Better == 0 {
			v.Why = "unit has no better= direction: not gated"
		}
		v.Regression = v.Better != 0 && worse > tolerancePct && worse >= v.MinPct-1e-9
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the baseline and this run share no benchmark: are they from the same protocol?")
	}
	familyWise(out, alpha)
	return out, nil
}

// familyWise keeps a runs-rule regression only where the Benjamini-
// Hochberg step-up procedure (1995) finds its p significant among the
// family of the runs rule's gated metrics: the largest k whose k-th
// smallest p is at most k·alpha/m, and every metric up to it. When the
// code did not change (every metric's null true) the chance of any false
// regression in the run stays at most alpha; when some metrics did
// change, it keeps more power than a family-wise bound such as Holm's.
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

func (v *Verdict) judgeRuns(runs []Run, meds []float64, y, tolPct, alpha float64) {
	seg, segFrom := meds, 0
	lg := scale(!slices.ContainsFunc(append(slices.Clone(meds), y), func(x float64) bool { return !(x > 0) }))
	ys := make([]float64, len(meds))
	for i, m := range meds {
		ys[i] = lg.to(m)
	}
	if len(meds) >= HistoryMinRuns {
		for _, s := range EDivisive(ys, alpha, 1) {
			before, _ := stats.Summarize(meds[:s.From])
			after, _ := stats.Summarize(meds[s.From:])
			cp := ChangePoint{Run: runs[s.From].Path, Index: s.From, P: s.P}
			if before.Median != 0 {
				cp.ChangePct = (after.Median/before.Median - 1) * 100
			}
			v.ChangePoints = append(v.ChangePoints, cp)
			segFrom = s.From
		}
		seg, ys = meds[segFrom:], ys[segFrom:]
	}
	k := float64(len(seg))
	mean, sd := stat.MeanStdDev(ys, nil)
	v.Rule, v.Runs, v.Base = RuleRuns, len(seg), lg.from(mean)
	if len(seg) < 2 { // a change point left one run after it
		sd = 0
	}
	se := sd * math.Sqrt(1+1/k)
	// The worse direction: up for lower-is-better units, down otherwise.
	dir := -float64(v.Better)
	if dir == 0 {
		dir = 1
	}
	d := dir * (lg.to(y) - mean)
	var tc float64
	switch {
	case len(seg) < 2:
		v.P, tc = math.NaN(), math.Inf(1)
	case se == 0:
		v.P, tc = 1, 0
		if d > 0 {
			v.P = 0
		}
	default:
		t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: k - 1}
		v.P, tc = 1-t.CDF(d/se), t.Quantile(1-alpha)
	}
	// The smallest worse change the test finds significant, then the tolerance.
	edge := lg.from(mean + dir*tc*se)
	statPct := math.Abs(edge/v.Base-1) * 100
	if math.IsInf(tc, 1) || math.IsNaN(statPct) {
		statPct = math.Inf(1)
	}
	v.MinPct = math.Max(tolPct, statPct)
	v.Min = v.MinPct / 100 * math.Abs(v.Base)
	where := fmt.Sprintf("%d baseline runs", len(seg))
	if segFrom > 0 {
		where = fmt.Sprintf("the %d baseline runs since the change point at %s", len(seg), filepath.Base(filepath.Dir(runs[segFrom].Path))+"/"+filepath.Base(runs[segFrom].Path))
	}
	space := "log medians"
	if !lg {
		space = "medians"
	}
	v.How = fmt.Sprintf("t-test of this run's median against the %s (prediction interval, %s, run-to-run sd %.3g %%)", where, space, 100*sd)
	switch {
	case len(seg) < 2:
		v.Why = "one run since the last change point: its run-to-run spread is unknown, nothing is flagged"
	case se == 0:
		v.Why = "the baseline runs agree exactly: any change beyond the tolerance is flagged"
	}
}

// unitFloor is the within-run noise floor of one unit in one run.
type unitFloor struct {
	median, max float64 // CV over the unit's metrics, fractions
	n           int     // metrics they are taken over
}

// cv is sd / mean for n ≥ 3 positive-mean samples; ok is false otherwise.
// Not a robust spread on purpose: serving metrics are often bimodal (a
// request that waited for a wake, four that did not), and a MAD would call
// that tight while the run's median moves with how many waited.
func cv(xs []float64) (float64, bool) {
	if len(xs) < 3 {
		return 0, false
	}
	m, sd := stat.MeanStdDev(xs, nil)
	if !(m > 0) {
		return 0, false
	}
	return sd / m, true
}

// noiseFloors is each unit's median and largest CV over the run's metrics
// of that unit that have three or more samples.
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
		out[u] = unitFloor{s.Median, s.Max, len(c)}
	}
	return out
}

func (v *Verdict) judgeOneRun(r Run, k BenchKey, floors map[string]unitFloor, y, tolPct, alpha float64) {
	v.Rule, v.Runs = RuleOneRun, 1
	v.Base, _ = r.Median(k)
	own, hasOwn := cv(r.Bench.Values[k])
	f, hasUnit := floors[k.Unit]
	if !hasOwn && !hasUnit {
		v.MinPct = 2 * tolPct
		v.How = fmt.Sprintf("no within-run spread measurable for %s in the baseline run (no metric of the unit has 3 samples): medians judged on ±2× tolerance", k.Unit)
	} else {
		var floor float64
		var src string
		switch {
		case hasOwn && own >= f.median:
			floor, src = own, fmt.Sprintf("this metric's CV over its %d samples", len(r.Bench.Values[k]))
		case hasOwn:
			floor, src = f.median, fmt.Sprintf("%s's median CV over %d metrics of the baseline run", k.Unit, f.n)
		default: // too few samples of its own: the unit's noisiest metric
			floor, src = f.max, fmt.Sprintf("%s's largest CV over %d metrics of the baseline run: this metric has %d sample(s)", k.Unit, f.n, len(r.Bench.Values[k]))
		}
		z := distuv.UnitNormal.Quantile(1 - alpha)
		v.MinPct = math.Max(tolPct, 100*z*math.Sqrt2*floor)
		v.How = fmt.Sprintf("noise floor %.3g %% (%s; labelled: within-run spread standing in for run-to-run) × z(%.3g) = %.3g × √2", 100*floor, src, 1-alpha, z)
	}
	v.Min = v.MinPct / 100 * math.Abs(v.Base)
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
		}
		sign := "+"
		if v.Better > 0 {
			sign = "−"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.4g\t%+.2f%%\t%s (%d)\t%s\t%s%.3g (%s%.3g %%)\t%s\n", v.Name, v.Unit, v.Base, v.Cur, v.ChangePct,
			v.Rule, v.Runs, p, sign, v.Min, sign, v.MinPct, verdict)
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
