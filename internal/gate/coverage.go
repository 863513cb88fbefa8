package gate

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/wakebench/wakebench/internal/record"
)

// Unjudged is why the gate judged nothing of a metric (Verdict.Unjudged):
// its rule could flag no change in it. Coverage counts such metrics by
// reason, each with what would judge them, so that a gate never passes
// what it did not judge.
type Unjudged int

// The reasons, in the order Coverage lists them.
const (
	Judged Unjudged = iota
	UnjudgedNoDirection
	UnjudgedFewSamples
	UnjudgedFewRounds
	UnjudgedOneSpan
	UnjudgedTail
	UnjudgedFirstWave
	UnjudgedOneProcess
	UnjudgedSinceChange
	UnjudgedWideFloor
	UnjudgedZeroBase
	UnjudgedDisturbed
	UnjudgedNew
	UnjudgedMissing
	UnjudgedOther
)

// String is the reason in words, as a group of Coverage names it
// ("96 with fewer than 5 samples in a run …").
func (u Unjudged) String() string {
	switch u {
	case Judged:
		return "judged"
	case UnjudgedNoDirection:
		return "without a better= direction (the machine's load over a phase, read to tell a busy machine)"
	case UnjudgedFewSamples:
		return fmt.Sprintf("with fewer than %d samples in a run (one or two events a run, which a hiccup of the machine moves whole)", OneRunMinSamples)
	case UnjudgedFewRounds:
		return fmt.Sprintf("of requests in fewer than %d rounds of concurrent requests in the one baseline run (a round is one moment of the machine)", OneRunMinSamples)
	case UnjudgedOneSpan:
		return "of requests of one open-loop traffic run in the one baseline run (one span of the machine)"
	case UnjudgedTail:
		return "a run's tail (its slowest request or two: one event a run)"
	case UnjudgedFirstWave:
		return "a serving stage's first wave of requests (one event a run)"
	case UnjudgedOneProcess:
		return "level-1 sleeps of one server process a run (the process sets their level: a run is one draw of it)"
	case UnjudgedSinceChange:
		return "with one baseline run since their last change point"
	case UnjudgedWideFloor:
		return "a throughput whose one-run noise floor would flag only a fall of 100 % or more"
	case UnjudgedZeroBase:
		return "with a baseline of 0 or less"
	case UnjudgedDisturbed:
		return fmt.Sprintf("%s: the machine was busy during their phase in this run (others took the CPU and this run waited longer than in every baseline run)", record.NotEvaluated)
	case UnjudgedNew:
		return "in this run and in no baseline run"
	case UnjudgedMissing:
		return "in the baseline and not in this run"
	}
	return "that their rule cannot flag"
}

// remedy is what would judge a metric not judged for u that needs
// more baseline runs (0: more runs would not).
func (u Unjudged) remedy(more int) string {
	runs := fmt.Sprintf("%d more baseline run", more)
	if more != 1 {
		runs += "s"
	}
	switch u {
	case UnjudgedNoDirection:
		return "shown, never gated"
	case UnjudgedFewSamples:
		return fmt.Sprintf("%s needed (the runs rule gates them from %d), or %d or more samples a run (more cycles)", runs, FewMinRuns, OneRunMinSamples)
	case UnjudgedFewRounds:
		return fmt.Sprintf("%s needed (the runs rule judges the runs' medians), or protocol.rounds of %d or more (%d where a round is one wave: the first is judged apart)", runs, OneRunMinSamples, OneRunMinSamples+1)
	case UnjudgedOneSpan:
		return runs + " needed (the runs rule judges the runs' medians)"
	case UnjudgedTail:
		return fmt.Sprintf("%s needed (a tail is gated from %d runs)", runs, FewMinRuns)
	case UnjudgedFirstWave:
		return fmt.Sprintf("%s needed (a first wave is gated from %d runs)", runs, FewMinRuns)
	case UnjudgedOneProcess:
		return fmt.Sprintf("%s needed (gated from %d runs: the spread from process to process)", runs, FewMinRuns)
	case UnjudgedSinceChange:
		return runs + " after the change point needed"
	case UnjudgedWideFloor:
		return runs + " needed (the runs rule measures the run-to-run spread)"
	case UnjudgedZeroBase:
		return "never gated: a change relative to it is undefined"
	case UnjudgedDisturbed:
		return "rerun on a quieter machine, or take the baseline under the same load"
	case UnjudgedNew:
		return "a baseline run that has them"
	case UnjudgedMissing:
		return "this run lacks them: a phase or model that did not run, or a renamed metric"
	}
	return "compare.txt says how each was decided"
}

// CoverageOf is what vs judged: how many of its metrics the rules could
// flag a change in, and the others grouped by reason and by the baseline
// runs they need, each group with the worst change among its metrics
// (so a change no rule judged is still named, never passed in silence).
func CoverageOf(vs []Verdict) record.GateCoverage {
	type group struct {
		u     Unjudged
		more  int
		n     int
		worst float64
		name  string
	}
	var groups []*group
	c := record.GateCoverage{Metrics: len(vs)}
	for _, v := range vs {
		if v.Judged() {
			c.Judged++
			continue
		}
		u := v.Unjudged
		if u == Judged {
			u = UnjudgedOther
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return g.u == u && g.more == v.NeedRuns })
		if i < 0 {
			groups = append(groups, &group{u: u, more: v.NeedRuns})
			i = len(groups) - 1
		}
		g := groups[i]
		g.n++
		// Worse by 0.05 % or more: named as "+0.1 %" at the least.
		if worse := v.ChangePct * float64(-v.Better); v.Better != 0 && !math.IsNaN(worse) && !math.IsInf(worse, 0) && worse >= 0.05 && worse > g.worst {
			g.worst = worse
			g.name = fmt.Sprintf("%s %s %+.1f %%", v.Name, v.StatLabel(), v.ChangePct)
		}
	}
	slices.SortStableFunc(groups, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.u, b.u), cmp.Compare(a.more, b.more))
	})
	for _, g := range groups {
		c.Unjudged = append(c.Unjudged, record.GateUnjudged{Reason: g.u.String(), Remedy: g.u.remedy(g.more), Metrics: g.n, Worst: g.name})
	}
	return c
}

// MinJudgedKey is the setting of the fewest metrics a comparison must
// judge (config.Thresholds.RegressionMinJudged).
const MinJudgedKey = "thresholds.regression_min_judged"

// CheckRegressions is the name of the regression gate's check of a whole
// run against its baseline (Comparison's, as the harness records it).
const CheckRegressions = "regressions against baseline"

// Comparison is the check of a whole comparison, named name: FAIL on a
// regression; else NOT EVALUATED and required (the run FAILs) where the
// gate judged fewer than minJudged metrics (a baseline that gates nothing
// says nothing about this run); else PASS. Its reason always says what
// the gate judged and why not the rest (CoverageOf), so a PASS is never
// about what was not judged.
func Comparison(name string, vs []Verdict, minJudged int) record.Check {
	n := 0
	for _, v := range vs {
		if v.Regression {
			n++
		}
	}
	cov := CoverageOf(vs)
	c := record.Evaluate(name, "", float64(n), "==", 0)
	c.Reason = cov.String()
	if n == 0 && cov.Judged < minJudged {
		c.Verdict, c.Required = record.NotEvaluated, true
		c.Reason = shortOf(cov, minJudged) + cov.NotJudged()
	}
	return c
}

// shortOf says that cov judged fewer metrics than minJudged.
func shortOf(cov record.GateCoverage, minJudged int) string {
	return fmt.Sprintf("judged %d of %d metrics, fewer than %s (%d) asks: nothing here says this run is as good as its baseline (%s 0 accepts a gate that judged nothing)",
		cov.Judged, cov.Metrics, MinJudgedKey, minJudged, MinJudgedKey)
}

// WriteCoverage prints what the gate judged of vs, compare.txt's head:
// NOT EVALUATED first where it found no regression and judged fewer than
// minJudged metrics (as Comparison decides), then the metrics not
// judged, a group a line, each with what would judge them and the worst
// change among them.
func WriteCoverage(w io.Writer, vs []Verdict, minJudged int) error {
	c := Comparison("", vs, minJudged)
	cov := CoverageOf(vs)
	var err error
	if c.Verdict == record.NotEvaluated {
		_, err = fmt.Fprintf(w, "%s: %s\n", record.NotEvaluated, shortOf(cov, minJudged))
	} else {
		_, err = fmt.Fprintf(w, "judged %d of %d metrics (%s: %d)\n", cov.Judged, cov.Metrics, MinJudgedKey, minJudged)
	}
	if err == nil && len(cov.Unjudged) > 0 {
		_, err = fmt.Fprintln(w, "not judged:")
	}
	for _, u := range cov.Unjudged {
		if err != nil {
			break
		}
		_, err = fmt.Fprintf(w, "  %s\n", u)
	}
	return err
}
