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
	// floor of a metric is the larger of its own CV (sd / mean, n ≥ 5) and
	// the median CV of the baseline run's metrics of the same unit; a change
	// is flagged beyond z(1−α/m)·floor·√(2 + π/2·(1/n₀ + 1/n₁)) (two runs
	// each off by the floor, and their medians' own sampling; m the metrics
	// this rule gates, a Bonferroni family), and never inside the
	// tolerance. A metric with fewer than OneRunMinSamples samples in the
	// baseline run is not gated: one sample cannot tell a change from a
	// hiccup of the box (a single 18 ms level-2 sleep drifted 47 % between
	// two runs of the same code). A timed metric of a phase others crowded
	// in the baseline run is gated on a floor of at least BusyOneRunFloor.
	RuleOneRun = "one run"
)

// OneRunMinSamples is the fewest samples of a metric in a single baseline
// run that RuleOneRun gates on.
const OneRunMinSamples = 5

// FewMinRuns is the fewest baseline runs the runs rule gates a metric on
// that has fewer than OneRunMinSamples samples in some run (a start, a
// level-2 cycle, a state's power, a phase's two tok/s rounds): one or two
// events a run, which a hiccup of the machine moves whole. Under a CPU hog
// a start's energy that five runs put within 1 % of each other took
// +12.7 % in a sixth run of the same code; nine degrees of freedom see
// such tails where four cannot.
const FewMinRuns = 10

// HistoryMinRuns is the fewest baseline runs in which change points are
// looked for (E-Divisive needs EDivisiveMinSize runs on each side).
const HistoryMinRuns = 2 * EDivisiveMinSize

// Verdict is one benchmark × unit judged against the baseline runs.
type Verdict struct {
	Name, Unit string
	// Stat is what of each run's samples is judged: StatMedian, its
	// worse tail (StatP95, or StatP5 where higher is better: by nearest
	// rank, for metrics of TailMinSamples or more samples a run), or a
	// serving metric's StatFirstWave (Waves).
	Stat string
	// Waves: a serving metric judged on its waves (firstWave): its
	// median and tail read the requests after the first wave, StatFirstWave
	// the first wave; WaveTail: its tail is waveTail's, each request over
	// the median of its wave-mates, a ratio (Base and Cur too). StatLabel
	// says so.
	Waves, WaveTail bool
	Better          int    // +1 higher is better, −1 lower is better, 0 unknown (not gated)
	Rule            string // RuleRuns or RuleOneRun
	// How says how the rule decided, in words: the runs it used, the
	// noise floor and where it came from.
	How string
	// Runs is the number of baseline runs the rule used (the segment since
	// the last confirmed change point, for a history).
	Runs      int
	Base, Cur float64 // the baseline's centre (its run's statistic, or the geometric mean of its runs') and this run's statistic
	ChangePct float64 // (Cur / Base − 1) × 100
	P         float64 // one-sided p of a worse change (RuleRuns); NaN otherwise
	// MinPct is the gate's power: the smallest change in the worse
	// direction that it flags in at least PowerLevel of runs (80 %), in percent;
	// Min is the same in the metric's unit (an absolute change; in the
	// ratio for a tail of ratios to the wave-mates, WaveTail). A change
	// of half that size is flagged in at most about a fifth of runs
	// (TestStatedPowerHoldsByInjection).
	MinPct, Min float64
	// ThresholdPct is the observed worse change, in percent, beyond which
	// the rule flags (the tolerance, or significance at alpha/m).
	ThresholdPct float64
	Regression   bool
	// Disturbed is why the metric is NOT EVALUATED: during its phase
	// window others took the CPU and this run waited for it longer than
	// in every baseline run (the measured load, disturbed); "" where not.
	Disturbed string
	Why       string // why not gated, or what the rule cannot see
	// ChangePoints are the confirmed changes of this metric in the
	// baseline's history (oldest first): the history is judged from the
	// last one on.
	ChangePoints []ChangePoint
	// Unconfirmed are the changes E-Divisive found in this metric's
	// history that confirm did not (held to alpha over every metric, or
	// within the tolerance): listed, the history not cut at them.
	Unconfirmed []ChangePoint
	// Unjudged is why the gate judged nothing of this metric (Judged where
	// its rule could flag a change), and NeedRuns how many more baseline
	// runs would judge it (0 where more runs would not): what Coverage
	// counts and groups.
	Unjudged Unjudged
	NeedRuns int
}

// Judged reports whether the gate judged v: a metric of a rule that could
// flag a worse change in it (a direction, a power, its phase not
// disturbed). A metric not judged passes nothing: Coverage counts it
// apart.
func (v Verdict) Judged() bool {
	return (v.Rule == RuleRuns || v.Rule == RuleOneRun) && v.Better != 0 && v.Disturbed == "" && !math.IsInf(v.MinPct, 1)
}

// What of a run's samples a verdict judges: its median, or its worse
// tail by nearest rank (the slowest 5 % where lower is better, the lowest
// 5 % of a throughput).
const (
	StatMedian = ""
	StatP95    = "p95"
	StatP5     = "p5"
)

// tailStat is the worse tail of a unit whose better= is dir.
func tailStat(dir int) string {
	if dir > 0 {
		return StatP5
	}
	return StatP95
}

// TailMinSamples is the fewest samples of a metric in this run and in
// each baseline run for its tail (StatP95) to be judged too: at 16, a
// run's p95 by nearest rank is its slowest sample.
const TailMinSamples = 16

// PowerLevel is the share of runs in which the gate flags a change of
// the size it states as its power (Verdict.MinPct), over baselines like
// the one at hand (TestStatedPowerHoldsByInjection). The runs rule states
// the change it flags in RunsPowerLevel of runs, so that a measurement of
// its power (make gate-power's twenty runs) meets PowerLevel with room;
// the one-run rule states its PowerLevel point: its floors' own scatter
// leaves no room between PowerLevel at the stated change and a fifth at
// half of it.
const (
	PowerLevel     = 0.8
	RunsPowerLevel = 0.85
)

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
// never gated. A metric with TailMinSamples or more samples in this run
// and in each baseline run it is judged against is judged twice by
// RuleRuns: on its runs' medians and on their worse tails (Stat "p95",
// or "p5" of a throughput), so a slower tail under an unchanged median is
// seen. A serving metric's requests are judged on their waves where every
// run's can be told (waved): its median and tail on the requests after
// its first wave (the tail with the waves' shared stalls taken out,
// waveTail: a ratio), and its first wave's median a third time (StatFirstWave).
// A level-1 sleep's time is one process's level a run (oneProcess):
// gated from FewMinRuns runs.
//
// A timed metric of a phase the machine crowded (its window's host load,
// beyond every baseline run's: disturbed) is NOT EVALUATED with the
// measured load as the reason, never a regression for that alone.
//
// Of a history longer than HistoryMaxRuns only the newest HistoryMaxRuns
// runs are judged against (each verdict's How says so). A metric of this
// run that no baseline run has is a RuleNew verdict, not judged; one that
// only some baseline runs have is judged on those, and its Why names the
// runs that lack it. Each verdict says whether its rule could flag a
// change (Judged) and, where not, why and how many more baseline runs
// would (Unjudged, NeedRuns): CoverageOf counts them, and Comparison
// never passes a comparison that judged too little. ctx stops the
// judgement (the change-point search checks it as it goes) with an error
// naming ctx's cause.
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
	baseLoads := make([]map[string]hostLoad, len(base))
	for i, r := range base {
		baseLoads[i] = hostLoads(r)
	}
	curLoads := hostLoads(cur)
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
		var lack []string
		for _, r := range base {
			if _, ok := r.Bench.Values[k]; ok {
				runs = append(runs, r)
			} else {
				lack = append(lack, r.Path)
			}
		}
		split := len(runs) > 0 && waved(runs, cur, k)
		y, _ := statOf(cur, k, StatMedian, split)
		v := Verdict{Name: k.Name, Unit: k.Unit, Cur: y, Better: cur.Bench.Meta.GetBetter(k.Unit), P: math.NaN(), Waves: split}
		if len(runs) == 0 {
			v.Rule, v.Base, v.ChangePct, v.MinPct, v.Min = RuleNew, math.NaN(), math.NaN(), math.Inf(1), math.Inf(1)
			v.How = "no baseline run has it"
			v.Why = fmt.Sprintf("%s: in this run, in none of the %d baseline run(s) (a phase, model or metric the baseline lacks): not judged", record.NotEvaluated, len(base))
			v.Unjudged = UnjudgedNew
			fresh = append(fresh, v)
			continue
		}
		note := ""
		if len(lack) > 0 {
			note = fmt.Sprintf("not in %d of the %d baseline runs (%s): judged on the %d that have it",
				len(lack), len(base), some(lack, 3), len(runs))
		}
		if v.Better != 0 {
			v.Disturbed = disturbed(baseLoads, curLoads, cur.Bench.Name(k.Name), k.Unit)
		}
		if len(runs) >= 2 {
			tail, ratioTail := tailed(runs, cur, k, split)
			for _, st := range []string{StatMedian, tailStat(v.Better), StatFirstWave} {
				switch {
				case st == StatFirstWave && (v.Better == 0 || !split):
					continue
				case st != StatMedian && st != StatFirstWave && (v.Better == 0 || !tail):
					continue
				}
				v := v
				v.Stat = st
				v.Cur, _ = statOf(cur, k, st, split)
				v.WaveTail = st != StatMedian && st != StatFirstWave && ratioTail
				c, err := newRunsCase(ctx, len(out), runs, cur, k, alpha, st, split)
				if err != nil {
					return nil, err
				}
				if note != "" {
					absent[len(out)] = note
				}
				cases = append(cases, c)
				out = append(out, v)
			}
			continue
		}
		if note != "" {
			absent[len(out)] = note
		}
		i := slices.IndexFunc(base, func(r Run) bool { return r.Path == runs[0].Path })
		if floors[i] == nil {
			floors[i] = noiseFloors(runs[0])
		}
		v.oneRunFloor(runs[0], k, floors[i], split)
		if why := busyBaseline(baseLoads[i], cur.Bench.Name(k.Name), k.Unit); why != "" && !math.IsInf(v.MinPct, 1) {
			v.busyFloor(why)
		}
		single = append(single, len(out))
		out = append(out, v)
		if split && v.Better != 0 {
			// One run does not gate a first wave (one event a run), and
			// says so beside the later waves it does judge.
			f := v
			f.Stat = StatFirstWave
			f.Cur, _ = statOf(cur, k, StatFirstWave, true)
			f.Base, _ = statOf(runs[0], k, StatFirstWave, true)
			f.MinPct, f.Min, f.ThresholdPct = math.Inf(1), math.Inf(1), math.Inf(1)
			f.How = "a first wave in the one baseline run: one event, its spread unknown"
			f.Why = fmt.Sprintf("a run's first wave is one event: gated against %d or more baseline runs", FewMinRuns)
			f.Unjudged, f.NeedRuns = UnjudgedFirstWave, FewMinRuns-1
			if note != "" {
				absent[len(out)] = note
			}
			out = append(out, f) // not in single: judgeOneRun would give it a floor
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the baseline and this run share no benchmark: are they from the same protocol?")
	}
	// A history's change points cut it only where confirmed (confirm):
	// each metric's E-Divisive splits held to alpha over every metric
	// searched, and a level change beyond the tolerance.
	confirm(cases, out, tolerancePct, alpha)
	// The run fails if any metric regresses: each rule's gated metrics are
	// one family, held to alpha together. The runs rule's with Benjamini-
	// Hochberg (familyWise); the power each states is at alpha/m, the
	// threshold one changed metric among unchanged ones must meet. The one
	// run rule's with Bonferroni's alpha/m, its floors being rough. A
	// metric NOT EVALUATED (its phase disturbed) is in neither family.
	family := 0
	for _, c := range cases {
		if v := out[c.i]; v.Better != 0 && v.Disturbed == "" && c.gated() {
			family++
		}
	}
	famAlpha := alpha / float64(max(family, 1))
	priors := moderate(cases, out)
	for _, c := range cases {
		v := &out[c.i]
		v.judgeRuns(c, priors[c.group], tolerancePct, famAlpha)
		if family > 1 && v.Better != 0 {
			v.How += fmt.Sprintf("; Benjamini-Hochberg over the %d metrics the runs rule judges (α %.3g in all)", family, alpha)
		}
	}
	gated := 0
	for _, i := range single {
		if out[i].Better != 0 && out[i].Disturbed == "" && !math.IsInf(out[i].MinPct, 1) {
			gated++
		}
	}
	for _, i := range single {
		v := &out[i]
		k := BenchKey{Name: v.Name, Unit: v.Unit}
		n0 := 0
		for _, r := range base {
			n0 = max(n0, len(samplesOf(r, k, StatMedian, v.Waves)))
		}
		v.judgeOneRun(tolerancePct, alpha, gated, n0, len(samplesOf(cur, k, StatMedian, v.Waves)))
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
			v.Unjudged, v.NeedRuns = UnjudgedNoDirection, 0
		case !(v.Base > 0):
			// A relative change of a zero or negative centre is undefined
			// (a residual of 0 GiB) or flips its sign: not gated, said so.
			v.MinPct, v.Min = math.Inf(1), math.Inf(1)
			v.Why = fmt.Sprintf("the baseline's centre is %g: a change relative to it is undefined, not gated", v.Base)
			v.Unjudged, v.NeedRuns = UnjudgedZeroBase, 0
		case v.Disturbed != "":
			v.Why = v.Disturbed
			v.Unjudged, v.NeedRuns = UnjudgedDisturbed, 0
		case v.Rule == RuleRuns:
			// Decided by Benjamini-Hochberg on P below (familyWise).
			v.Regression = worse > tolerancePct && !math.IsNaN(v.P)
		default:
			v.Regression = worse > tolerancePct && worse >= v.ThresholdPct-1e-9
		}
	}
	familyWise(out, alpha)
	for i := range out {
		switch v := &out[i]; {
		case v.Judged():
			v.Unjudged, v.NeedRuns = Judged, 0
		case v.Unjudged == Judged:
			v.Unjudged = UnjudgedOther // a rule that flags nothing and did not say why: counted, never passed
		}
	}
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

// tailed says whether k is judged on its tail too: TailMinSamples or
// more samples in this run and in each of runs.
// A serving metric's tail is judged on its later waves (waveTail), where
// its samples in all are that many, and only where every run's tail is
// read alike: a ratio to the wave-mates in each (WaveRatios), or the
// plain tail in seconds in each (a run whose every wave-mates' median is
// 0 has no ratio), never the one against the other; ratio says which
// (Verdict.WaveTail).
func tailed(runs []Run, cur Run, k BenchKey, split bool) (ok, ratio bool) {
	if len(cur.Bench.Values[k]) < TailMinSamples {
		return false, false
	}
	_, ratio = WaveRatios(cur, k, split)
	for _, r := range runs {
		if len(r.Bench.Values[k]) < TailMinSamples {
			return false, false
		}
		if _, ok := WaveRatios(r, k, split); ok != ratio {
			return false, false
		}
	}
	return true, ratio
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
// the k-th of them needs only p ≤ k·alpha/m, more power than Holm's. A
// change inside the tolerance is a change too, and counts among them (a
// 10 % slower wake moved A's wake +9 %, B's +13 %: with only the changes
// beyond the tolerance ranked, the run was flagged in 8 of 20). So where a whole
// run is slower inside the tolerance, a noisy metric pushed past it by
// its noise is flagged: the tolerance bounds the observed change, not the
// true one (a busier machine is the host load's to name).
func familyWise(vs []Verdict, alpha float64) {
	var fam []int
	for i, v := range vs {
		if v.Rule == RuleRuns && v.Better != 0 && v.Disturbed == "" && !math.IsNaN(v.P) {
			fam = append(fam, i)
		}
	}
	slices.SortStableFunc(fam, func(a, b int) int { return cmpP(vs[a].P, vs[b].P) })
	k := 0
	for rank, i := range fam {
		if p := vs[i].P; p <= float64(rank+1)*alpha/float64(len(fam)) {
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
		v := Verdict{Name: k.Name, Unit: k.Unit, Rule: RuleMissing, Runs: seen[k], P: math.NaN(),
			ChangePct: math.NaN(), Cur: math.NaN(), MinPct: math.Inf(1), Min: math.Inf(1),
			Why:      fmt.Sprintf("in %d baseline run(s), not in this run: a phase or model that did not run, or a renamed metric; not judged", seen[k]),
			Unjudged: UnjudgedMissing}
		for _, r := range base {
			if m, ok := statOf(r, k, StatMedian, false); ok { // every request: its row is labelled as the metric
				v.Base = m
			}
		}
		out = append(out, v)
	}
	return out
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

// runsCase is one metric the runs rule judges: the baseline's statistic
// of each run on the rule's scale, from the last confirmed change point on.
type runsCase struct {
	i      int       // its verdict in Judge's output
	few    bool      // some run has fewer than OneRunMinSamples samples of it
	waves  bool      // a serving metric judged on its waves (firstWave)
	all    []float64 // every baseline run's statistic on lg's scale
	ys     []float64 // the segment's
	y      float64   // this run's on lg's scale
	lg     scale
	k      int     // runs in the segment
	mean   float64 // of ys
	s2     float64 // sample variance of ys (k ≥ 2)
	where  string  // the runs, in words
	runs   []Run
	meds   []float64 // every baseline run's statistic
	key    BenchKey
	median bool // the statistic is the runs' median
	// oneProcess: the metric's samples are one process's level a run (Run.oneProcess)
	oneProcess bool
	group      string  // its variance prior's group (priorKey)
	w2         float64 // the variance of a run's median from its moments alone, on lg's scale, over the segment (momentsVar; 0: none)
	nm         float64 // the moments a segment's run's median reads (momentsVar's common count)
	splits     []Split // E-Divisive's, before confirm
	seg        int     // the segment's first run
}

// newRunsCase takes the metric's statistic st of every run and, in a
// history (HistoryMinRuns or more runs), the change points E-Divisive
// finds in it; confirm decides which of them cut the history, segment
// then takes the runs since the last.
func newRunsCase(ctx context.Context, i int, runs []Run, cur Run, k BenchKey, alpha float64, st string, split bool) (runsCase, error) {
	y, _ := statOf(cur, k, st, split)
	// A run's tail is its slowest request or two (at 16 samples, its p95
	// is one): a stall of the machine during one batch of concurrent
	// requests moves a plain tail whole, as it moves a metric of one or
	// two samples (under a CPU hog a same-code rerun's four slowest TTFTs
	// took 31 ms, five baseline runs' 16 to 20 ms, the median unmoved); a
	// tail of ratios to the wave-mates leaves such a stall out, and is
	// still the request or two slowest beside their wave-mates, one event.
	// A serving metric's first wave is one event a run too, and a level-1
	// sleep's level one draw of its process (oneProcess): five runs that
	// drew one level cannot see the other.
	one := cur.oneProcess(k)
	few := len(samplesOf(cur, k, st, split)) < OneRunMinSamples || st != StatMedian || one
	meds := make([]float64, len(runs))
	for j, r := range runs {
		few = few || len(samplesOf(r, k, st, split)) < OneRunMinSamples
		meds[j], _ = statOf(r, k, st, split)
	}
	lg := scale(!slices.ContainsFunc(append(slices.Clone(meds), y), func(x float64) bool { return !(x > 0) }))
	ys := make([]float64, len(meds))
	for j, m := range meds {
		ys[j] = lg.to(m)
	}
	c := runsCase{i: i, few: few, waves: split, all: ys, y: lg.to(y), lg: lg, runs: runs, meds: meds, key: k, median: st == StatMedian, oneProcess: one,
		group: priorKey(cur.Bench.Name(k.Name).Base, k.Unit)}
	if len(meds) >= HistoryMinRuns {
		splits, err := EDivisive(ctx, ys, alpha, 1)
		if err != nil {
			return runsCase{}, fmt.Errorf("judge %s %s: %w", k.Name, k.Unit, err)
		}
		c.splits = splits
	}
	return c, nil
}

// changePoint describes split s of c's history.
func (c runsCase) changePoint(s Split) ChangePoint {
	before, _ := stats.Summarize(c.meds[:s.From])
	after, _ := stats.Summarize(c.meds[s.From:])
	cp := ChangePoint{Run: c.runs[s.From].Path, Index: s.From, P: s.P}
	if before.Median != 0 {
		cp.ChangePct = (after.Median/before.Median - 1) * 100
	}
	return cp
}

// confirm decides which change points cut each metric's history, and
// then each case's segment. E-Divisive tests each metric's history at
// alpha; with a hundred metrics, several same-code histories of seven
// runs showed 3 to 7 false change points each, after which those metrics
// were judged on two or three runs with stated powers of thousands of
// percent. So a split is confirmed only where (1) its level change is
// beyond the tolerance (a shift the gate would not call a regression is
// no new normal to cut at) and (2) its permutation p survives Benjamini-
// Hochberg at alpha over every metric searched (a real change of the code
// moves many metrics at once, and each of them adds to the others'
// evidence). The others are listed as unconfirmed, the history kept.
func confirm(cases []runsCase, out []Verdict, tolPct, alpha float64) {
	type cand struct {
		c, s int
		p    float64
	}
	var cands []cand
	searched := 0
	for ci, c := range cases {
		if out[c.i].Better == 0 { // shown, never gated (the host lines): listed, never a candidate
			continue
		}
		if len(c.meds) >= HistoryMinRuns {
			searched++
		}
		for si, s := range c.splits {
			if cp := c.changePoint(s); math.Abs(cp.ChangePct) > tolPct {
				cands = append(cands, cand{ci, si, s.P})
			}
		}
	}
	m := max(searched, len(cands), 1)
	slices.SortStableFunc(cands, func(a, b cand) int { return cmpP(a.p, b.p) })
	k := 0
	for rank, x := range cands {
		if x.p <= float64(rank+1)*alpha/float64(m) {
			k = rank + 1
		}
	}
	ok := map[[2]int]bool{}
	for _, x := range cands[:k] {
		ok[[2]int{x.c, x.s}] = true
	}
	for ci := range cases {
		c := &cases[ci]
		v := &out[c.i]
		for si, s := range c.splits {
			cp := c.changePoint(s)
			if ok[[2]int{ci, si}] {
				v.ChangePoints = append(v.ChangePoints, cp)
				c.seg = s.From
			} else {
				v.Unconfirmed = append(v.Unconfirmed, cp)
			}
		}
		c.segment(m, alpha, tolPct)
	}
}

// gated says whether the runs rule can flag the metric: two runs or more
// since the last change point, FewMinRuns or more where a run's value is
// one or two events. A metric it cannot flag is left out of the family.
func (c runsCase) gated() bool { return c.k >= 2 && !(c.few && c.k < FewMinRuns) }

// segment takes the runs since the last confirmed change point; m is
// the hypotheses confirm held to alpha.
func (c *runsCase) segment(m int, alpha, tolPct float64) {
	c.ys = c.all[c.seg:]
	c.k = len(c.ys)
	c.mean = stat.Mean(c.ys, nil)
	if c.k >= 2 {
		c.s2 = stat.Variance(c.ys, nil)
	}
	if c.median {
		c.w2, c.nm = momentsVar(c.runs[c.seg:], c.key, c.waves, c.lg)
	}
	c.where = fmt.Sprintf("%d baseline runs", c.k)
	if c.seg > 0 {
		c.where = fmt.Sprintf("the %d baseline runs since the change point at %s", c.k, filepath.Base(filepath.Dir(c.runs[c.seg].Path))+"/"+filepath.Base(c.runs[c.seg].Path))
	}
	if len(c.splits) > 0 && c.seg == 0 {
		c.where += fmt.Sprintf(" (a change point E-Divisive found is not confirmed: beyond ±%g %% and significant at %g over %d hypotheses, Benjamini-Hochberg, it is not)", tolPct, alpha, m)
	}
}

// prior is a group's prior on its metrics' run-to-run variance (Smyth
// 2004): variance s02 worth d0 degrees of freedom (0: none learnt).
type prior struct {
	s02, d0 float64
	n       int // metrics it was learnt from
}

// priorKey groups metrics whose relative run-to-run spread is alike: the
// same phase (the benchmark name's base) and quantity (the
// unit's part before its "/"), e.g. every Sleep sec/sleep, sec/wake and
// sec/first-token: a busier box stretches them alike. (A run's tail is
// one event a run, as a few-sample metric is: it neither lends nor
// borrows.)
func priorKey(base, unit string) string {
	q, _, _ := strings.Cut(unit, "/")
	return base + " " + q + "/*"
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
			g := c.group
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
		// Borrowed degrees of freedom, and a variance shrunk up to the
		// group's, never below the metric's own: a noisy metric among
		// tight ones of its phase (ten times their spread) shrunk down to
		// them was flagged, past the tolerance by its own noise, in 31 of
		// 200 same-code runs a little slower across the board.
		s2, df = math.Max((pr.d0*pr.s02+d*c.s2)/(pr.d0+d), c.s2), pr.d0+d
	}
	// Never below what the runs' own moments say a median of them
	// scatters by (momentsVar): five runs' sd of 4 degrees of freedom
	// reads under half the true sd for about one metric in eleven.
	raised := c.w2 > s2 && c.k >= 2
	if raised {
		s2 = c.w2
	}
	se := math.Sqrt(s2 * (1 + 1/float64(c.k)))
	// The worse direction: up for lower-is-better units, down otherwise.
	dir := -float64(v.Better)
	if dir == 0 {
		dir = 1
	}
	dy := dir * (c.y - c.mean)
	var tc, t80 float64
	switch {
	case !c.gated():
		v.P, tc = math.NaN(), math.Inf(1)
	case se == 0:
		v.P, tc = 1, 0
		if dy > 0 {
			v.P = 0
		}
	default:
		t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
		v.P, tc, t80 = 1-t.CDF(dy/se), t.Quantile(1-alpha), t.Quantile(RunsPowerLevel)
	}
	// What the rule flags: an observed worse change beyond the tolerance
	// and significant (tc·se) on the rule's scale; the change it flags in
	// RunsPowerLevel of runs lies t(RunsPowerLevel)·se beyond that (the observed
	// change scatters about the true one by se, the baseline's centre
	// being an estimate too). That holds over baselines like this one,
	// not for each: a baseline whose runs happened to sit a few percent
	// high, or to agree more closely than the metric's runs do, flags its
	// stated power less often (TestStatedPowerHoldsByInjection).
	tolY := tolPct / 100 * math.Abs(c.mean)
	if c.lg {
		tolY = math.Log1p(tolPct / 100)
		if dir < 0 {
			tolY = -math.Log1p(-math.Min(tolPct, 99.99) / 100)
		}
	}
	thr := math.Max(tolY, tc*se)
	v.ThresholdPct = math.Abs(c.lg.from(c.mean+dir*thr)/v.Base-1) * 100
	v.MinPct = math.Abs(c.lg.from(c.mean+dir*(thr+t80*se))/v.Base-1) * 100
	if se == 0 {
		v.MinPct = justBeyond(v.ThresholdPct)
	}
	if math.IsInf(tc, 1) || math.IsNaN(v.MinPct) {
		v.ThresholdPct, v.MinPct = math.Inf(1), math.Inf(1)
	}
	v.Min = v.MinPct / 100 * math.Abs(v.Base)
	space, what := "log ", "median"
	if !c.lg {
		space = ""
	}
	if v.Stat != StatMedian {
		what = v.Stat
	}
	of := ""
	switch {
	case c.waves && v.Stat == StatFirstWave:
		what, of = "median", " of the first wave"
	case v.WaveTail:
		of = " of the requests after the first wave, each over the median of its wave-mates (a ratio: the run's level and its waves' stalls taken out)"
	case c.waves:
		of = " of the requests after the first wave"
	}
	v.How = fmt.Sprintf("t-test of this run's %s%s against the %s (prediction interval, %s%ss, run-to-run sd %.3g %%", what, of, c.where, space, what, 100*math.Sqrt(c.s2))
	if moderated {
		v.How += fmt.Sprintf(", moderated to %.3g %% with %.3g degrees of freedom by the prior of %d %s metrics: sd %.3g %% worth %.3g degrees of freedom",
			100*math.Sqrt(s2), df, pr.n, c.group, 100*math.Sqrt(pr.s02), pr.d0)
	}
	if raised {
		v.How += fmt.Sprintf(", raised to %.3g %%: a median of %.3g moments of the machine (cycles, handoffs, arrivals or waves of concurrent requests) scatters that much by their spread within the runs beyond their run's and their index's levels, about π/(2n)·σ²", 100*math.Sqrt(s2), c.nm)
	}
	v.How += fmt.Sprintf("); flags a worse change beyond %.3g %%, and one of %.3g %% in %.0f %% of runs", v.ThresholdPct, v.MinPct, 100*RunsPowerLevel)
	switch {
	case c.k < 2:
		v.Why = "one run since the last change point: its run-to-run spread is unknown, nothing is flagged"
		v.Unjudged, v.NeedRuns = UnjudgedSinceChange, 2-c.k
	case c.few && c.k < FewMinRuns:
		what := fmt.Sprintf("fewer than %d samples in some run", OneRunMinSamples)
		moves := "a hiccup of the machine moves such a run's value whole"
		v.Unjudged, v.NeedRuns = UnjudgedFewSamples, FewMinRuns-c.k
		switch {
		case v.Stat == StatMedian && c.oneProcess:
			what, moves = "a run's level-1 sleeps are one process's", "the process sets their level, each run one draw of it"
			v.Unjudged = UnjudgedOneProcess
		case v.Stat == StatMedian:
		case v.Stat == StatFirstWave:
			what = "a run's first wave is one moment of the machine"
			v.Unjudged = UnjudgedFirstWave
		default:
			what = "a run's tail is its slowest request or two"
			v.Unjudged = UnjudgedTail
		}
		v.Why = fmt.Sprintf("%s: %s, and %d runs cannot tell that from a change; gated against %d or more baseline runs", what, moves, c.k, FewMinRuns)
	case se == 0:
		v.Why = "the baseline runs agree exactly: any change beyond the tolerance is flagged"
	}
}

// justBeyond is the power of a rule whose samples do not scatter: every
// change beyond its threshold is flagged, the threshold itself not (worse
// by more than the tolerance).
func justBeyond(thresholdPct float64) float64 { return thresholdPct * (1 + 1e-9) }

// unitFloor is the within-run noise floor of one unit in one run.
type unitFloor struct {
	median float64 // CV over the unit's metrics, a fraction
	n      int     // metrics it is taken over
}

// cv is sd / mean for n ≥ OneRunMinSamples positive-mean samples; ok is
// false otherwise.
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
func noiseFloors(r Run) map[string]unitFloor {
	cvs := map[string][]float64{}
	for k := range r.Bench.Values {
		if r.oneProcess(k) || r.openLoop(k) { // not gated on one run: its spread is no floor
			continue
		}
		if c, ok := cv(samplesOf(r, k, StatMedian, true)); ok {
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
func (v *Verdict) oneRunFloor(r Run, k BenchKey, floors map[string]unitFloor, split bool) {
	v.Rule, v.Runs = RuleOneRun, 1
	v.Base, _ = statOf(r, k, StatMedian, split)
	xs := samplesOf(r, k, StatMedian, split)
	n := len(xs)
	own, hasOwn := cv(xs)
	if hasOwn && r.oneProcess(k) {
		v.MinPct = math.Inf(1)
		v.How = fmt.Sprintf("%d level-1 sleeps of one server process in the baseline run: the process sets their level, so their spread says nothing of the next process's", n)
		v.Why = fmt.Sprintf("one baseline run holds one process's level-1 sleeps, one draw of its level: gated against %d or more baseline runs", FewMinRuns)
		v.Unjudged, v.NeedRuns = UnjudgedOneProcess, FewMinRuns-1
		return
	}
	if !hasOwn {
		v.MinPct = math.Inf(1)
		v.How = fmt.Sprintf("%d sample(s) in the baseline run: its spread is unknown", n)
		// The runs rule gates one or two events a run from FewMinRuns runs.
		v.Unjudged, v.NeedRuns = UnjudgedFewSamples, FewMinRuns-1
		return
	}
	if m := moments(r, k, split); m < OneRunMinSamples {
		// Under a CPU hog one run's 16 TTFTs agreed to a few percent while
		// same-code runs' medians stood 50 to 80 % apart: the requests
		// of a round share one moment of the machine.
		v.MinPct = math.Inf(1)
		v.How = fmt.Sprintf("%d samples in %d rounds of concurrent requests in the baseline run: %d moments of the machine, whose spread says nothing of run-to-run drift", n, m, m)
		// The runs rule judges runs' medians: two runs gate it.
		v.Unjudged, v.NeedRuns = UnjudgedFewRounds, 1
		return
	}
	if r.openLoop(k) {
		v.MinPct = math.Inf(1)
		v.How = fmt.Sprintf("%d requests of one open-loop traffic run in the baseline run: one span of the machine, whose spread says nothing of run-to-run drift", n)
		v.Why = "one baseline run holds one open-loop traffic run, one draw of its level: gated against 2 or more baseline runs (the runs rule judges the runs' medians)"
		v.Unjudged, v.NeedRuns = UnjudgedOneSpan, 1
		return
	}
	floor, src := own, fmt.Sprintf("this metric's CV over its %d samples", n)
	if f, ok := floors[k.Unit]; ok && f.median > own {
		floor, src = f.median, fmt.Sprintf("%s's median CV over %d metrics of the baseline run", k.Unit, f.n)
	}
	v.MinPct = floor
	v.How = fmt.Sprintf("noise floor %.3g %% (%s; labelled: within-run spread standing in for run-to-run)", 100*floor, src)
}

// openLoop reports whether k's samples are the requests of an open-loop
// traffic run (a Traffic benchmark): one run of a few seconds through the
// router, whose requests share that span of the machine, so that their
// spread says nothing of the next run's level. Measured on 30 quiet runs
// of testdata/gate-power.json (vllmsim, 2 cores): A's six requests that
// found it awake in the ideal run had medians from 14.7 to 19.2 ms from
// run to run, while one run's six lay within 2 % of each other; against
// that run alone, 9 of 20 same-code runs were flagged on them (a noise
// floor of 2.2 %, the threshold the 10 % tolerance). Under a CPU hog the
// same (docs/compare.md): a busy run's six agreed to 7 % while runs'
// medians stood 14 to 19 ms apart.
func (r Run) openLoop(k BenchKey) bool {
	return r.Bench.Name(k.Name).Base == "Traffic"
}

// oneProcess reports whether k's samples in a run share a level that
// the server process sets, so that one run is one draw of it however many
// samples it holds: a level-1 sleep's time, of the level-1 cycles or of a
// handoff (which sleeps the active model at level 1). Its copy fills host
// memory the process maps (vLLM's CPU backup of the weights,
// vllm/device_allocator/cumem.py; vllmsim's staging buffer,
// internal/vllmsim/hostmem.go), whose speed is set per process (where and
// how its pages were mapped). Measured on 30 quiet runs of
// testdata/gate-power.json (vllmsim, 2 cores): A's five level-1 sleeps of a
// run lay within about 5 % of each other, while runs' medians fell near
// 0.35 s or near 0.45 s; B's from 0.17 to 0.21 s. Against one run, whose
// five sleeps are one process's, the one-run rule flagged that in 17 of
// 200 same-code runs (one baseline run in turn). The wakes of the same
// runs lay within 3 % of each other from run to run. A process's first
// level-1 sleep (allocating the backup) is among the cycles' samples only
// where nothing put the model to sleep before them (one model; with more,
// pool.MakeRoom does first): the median reads past it.
func (r Run) oneProcess(k BenchKey) bool {
	if k.Unit != unitSleep {
		return false
	}
	n := r.Bench.Name(k.Name)
	return n.Base == "Switch" || n.Base == "Sleep" && n.Get("level") == "1"
}

// unitSleep is a sleep's sent → answered time (report.UnitSleep).
const unitSleep = "sec/sleep"

// unitRoundTPS is the serving phases' per-round throughput (report.UnitTPS).
const unitRoundTPS = "tok/s"

// judgeOneRun turns the floor oneRunFloor left into the smallest change
// flagged: z(1−alpha/m)·floor·√(2 + π/2·(1/n₀ + 1/n₁)), m the metrics the
// rule gates: each run off by a drift of the floor, and each median off
// by its own sampling (a median's variance is π/2·σ²/n for normal
// samples), n₀ and n₁ the baseline's and this run's samples.
func (v *Verdict) judgeOneRun(tolPct, alpha float64, m, n0, n1 int) {
	if math.IsInf(v.MinPct, 1) {
		v.ThresholdPct = math.Inf(1)
		if v.Why == "" {
			v.Why = fmt.Sprintf("one baseline run with fewer than %d samples (or rounds of concurrent requests) of this metric: nothing is flagged (more cycles or rounds, or a baseline of several runs, gate it)", OneRunMinSamples)
		}
		v.Min = math.Inf(1)
		return
	}
	floor := v.MinPct
	z := distuv.UnitNormal.Quantile(1 - alpha/float64(max(m, 1)))
	spread := math.Sqrt(2 + math.Pi/2*(1/float64(n0)+1/float64(max(n1, 1))))
	// Flagged beyond the threshold; a true change scatters by the
	// floor·spread the rule assumes, so PowerLevel of runs flag one
	// z(PowerLevel) of those beyond it.
	// The scatter scales with the level (a run's drift is a ratio), so
	// the step beyond the threshold is taken on the log scale.
	v.ThresholdPct = math.Max(tolPct, 100*z*spread*floor)
	step := math.Exp(distuv.UnitNormal.Quantile(PowerLevel) * spread * floor)
	switch {
	case v.Better > 0 && v.ThresholdPct >= 100:
		// A throughput would have to fall to nothing: no change is flagged.
		v.ThresholdPct, v.MinPct = math.Inf(1), math.Inf(1)
	case v.Better > 0: // worse is lower
		v.MinPct = 100 * (1 - (1-v.ThresholdPct/100)/step)
	default:
		v.MinPct = 100 * ((1+v.ThresholdPct/100)*step - 1)
	}
	if floor == 0 && !math.IsInf(v.MinPct, 1) {
		v.MinPct = justBeyond(v.ThresholdPct)
	}
	v.Min = v.MinPct / 100 * math.Abs(v.Base)
	v.How += fmt.Sprintf(" × z(1 − %.3g/%d) = %.3g × %.3g (two runs' drift and their medians' sampling, √(2 + π/2·(1/%d + 1/%d)); Bonferroni over the %d metrics this rule gates)",
		alpha, max(m, 1), z, spread, n0, n1, max(m, 1))
	v.How += fmt.Sprintf("; flags a worse change beyond %.3g %%, and one of %.3g %% in %.0f %% of runs", v.ThresholdPct, v.MinPct, 100*PowerLevel)
	v.Why = fmt.Sprintf("one baseline run: cannot see a change under %.3g %%, nor tell a change from this box's run-to-run drift beyond the within-run spread", v.MinPct)
	if math.IsInf(v.MinPct, 1) {
		v.Why = "one baseline run: the smallest fall it would flag is 100 % or more (its tolerance, or its noise floor × z), a throughput of nothing: not gated"
		v.Unjudged, v.NeedRuns = UnjudgedWideFloor, 1
		if n1 < OneRunMinSamples {
			v.NeedRuns = FewMinRuns - 1
		}
	}
	if min(n0, n1) >= TailMinSamples {
		v.Why += "; its tail is not judged against one run (a run's slowest request is one event: ten or more baseline runs judge it)"
	}
}

// WriteVerdicts prints the judgement as a table: per metric the baseline's
// centre, this run, the change, the rule and its runs, the smallest worse
// change the gate flags (its power) in the unit and in percent, and the
// verdict; then how each rule decided and the change points of the
// history.
func WriteVerdicts(w io.Writer, vs []Verdict) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "benchmark\tunit\tbaseline\tthis run\tchange\trule (runs)\tp\tsmallest flagged (in ≥ 80 % of runs)\tverdict")
	for _, v := range vs {
		p := "–"
		if !math.IsNaN(v.P) {
			p = fmt.Sprintf("%.3g", v.P)
		}
		verdict := ""
		switch {
		case v.Regression:
			verdict = "REGRESSION"
		case v.Disturbed != "":
			verdict = "(NOT EVALUATED: the machine was busy, see below)"
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s (%d)\t%s\t%s\t%s\n", v.Name, v.StatLabel(), base, cur, change,
			v.Rule, v.Runs, p, power, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nhow each metric was decided:")
	for _, v := range vs {
		fmt.Fprintf(w, "  %s %s: %s: %s", v.Name, v.StatLabel(), v.Rule, v.How)
		if v.Why != "" {
			fmt.Fprintf(w, "; %s", v.Why)
		}
		fmt.Fprintln(w)
	}
	writeChangePoints(w, vs, "change points in the baseline's history (E-Divisive means, permutation test; confirmed: the history is judged from the last)",
		func(v Verdict) []ChangePoint { return v.ChangePoints })
	writeChangePoints(w, vs, "changes found but not confirmed (within the tolerance, or not significant over every metric searched): the history is not cut at them",
		func(v Verdict) []ChangePoint { return v.Unconfirmed })
	_, err := fmt.Fprintln(w)
	return err
}

// writeChangePoints lists the change points of vs that of picks, under
// title; nothing where there are none.
func writeChangePoints(w io.Writer, vs []Verdict, title string, of func(Verdict) []ChangePoint) {
	var lines []string
	for _, v := range vs {
		for _, c := range of(v) {
			lines = append(lines, fmt.Sprintf("  %s %s: changed %+.1f %% at run %d (%s), p %.3g", v.Name, v.StatLabel(), c.ChangePct, c.Index+1, c.Run, c.P))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
}

// StatSuffix names a verdict's statistic after its unit: "" for the
// median, " p95" for the tail.
func StatSuffix(st string) string {
	if st == StatMedian {
		return ""
	}
	return " " + st
}

// StatLabel is v's unit and what of each run it judged, as its rows and
// checks name it: "sec/wake", "sec/ttft p95"; a serving metric judged on
// its waves says which ("sec/ttft later-waves", "sec/ttft p95 ratio to
// wave-mates", at concurrency 1 "sec/ttft p95 later-waves", "sec/ttft
// first-wave"), since none is the report's figure over every request,
// and the tail's is a ratio, not the unit.
func (v Verdict) StatLabel() string {
	switch {
	case v.WaveTail:
		return v.Unit + StatSuffix(v.Stat) + " " + waveRatio
	case v.Waves && v.Stat != StatFirstWave:
		return v.Unit + StatSuffix(v.Stat) + " " + laterWaves
	}
	return v.Unit + StatSuffix(v.Stat)
}

// Labels of a serving metric's statistics of its later waves (StatLabel):
// of the requests after the first wave, and the tail of each over its
// wave-mates' median (waveTail).
const (
	laterWaves = "later-waves"
	waveRatio  = "ratio to wave-mates"
)

// WriteRuns lists the baseline runs oldest first, with the time that
// ordered them and where it came from.
func WriteRuns(w io.Writer, base []Run) error {
	fmt.Fprintf(w, "baseline: %d run(s), oldest first:\n", len(base))
	for i, r := range base {
		fmt.Fprintf(w, "  %d. %s (%s %s)\n", i+1, r.Path, r.Order, r.Started.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return nil
}
