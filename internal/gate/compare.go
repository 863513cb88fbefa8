package gate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aclements/go-moremath/stats"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// Delta is one benchmark × unit compared between a baseline run and this
// one with benchstat's statistics (golang.org/x/perf/benchmath).
type Delta struct {
	Name, Unit string
	Old, New   benchmath.Summary
	Cmp        benchmath.Comparison
	ChangePct  float64 // (new center / old center − 1) × 100
	Better     int     // +1 higher is better, −1 lower is better, 0 unknown
	// Significant is benchstat's rule: the p-value is not above alpha.
	Significant bool
	// Why is set when the samples are too few for any difference to be
	// significant (e.g. two rounds per side), or the unit has no direction.
	Why        string
	Regression bool // worse by more than the tolerance, and significant
	// ToleranceOnly: the samples are too few, or too tied, for any
	// difference to be significant at alpha (Mann-Whitney's smallest p for
	// these sizes and ties is above it), so the medians are judged against
	// twice the tolerance.
	ToleranceOnly bool
	Limit         float64 // the tolerance the change was judged against, in percent
}

// BenchKey is a benchmark name (without "Benchmark" and without go test's
// -GOMAXPROCS suffix, so go test -bench output compares with bench.txt)
// and a unit as written.
type BenchKey struct{ Name, Unit string }

// Bench is what a benchfmt stream holds, per benchmark and unit.
type Bench struct {
	Values map[BenchKey][]float64
	Meta   benchfmt.UnitMetadataMap
	CPU    string // go test's "cpu:" line, "" when absent
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// ReadBench collects every value of a benchfmt stream (bench.txt, go test
// -bench output, scripts/peers.sh lines) per benchmark and unit as
// written: benchfmt tidies ns/op into sec/op, but units and goals are
// compared as the file names them. A malformed result line is an error
// naming the file and line; the rest is still read, so a caller can choose
// to go on.
func ReadBench(r io.Reader, file string) (Bench, error) {
	br := bufio.NewReader(r)
	if b, err := br.Peek(1); err == nil && b[0] == '{' {
		return Bench{}, fmt.Errorf("%s is JSON (a report.json?): it holds summaries, not samples, so no difference can be tested; use that run's bench.txt", file)
	}
	out := Bench{Values: map[BenchKey][]float64{}, Meta: benchfmt.UnitMetadataMap{}}
	var errs []error
	rd := benchfmt.NewReader(br, file)
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			errs = append(errs, rec)
		case *benchfmt.UnitMetadata:
			m := *rec
			out.Meta[rec.UnitMetadataKey] = &m
		case *benchfmt.Result:
			if c := rec.GetConfig("cpu"); c != "" {
				out.CPU = c
			}
			name := procsSuffix.ReplaceAllString(rec.Name.String(), "")
			for _, v := range rec.Values {
				unit, val := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, val = v.OrigUnit, v.OrigValue
				}
				k := BenchKey{name, unit}
				out.Values[k] = append(out.Values[k], val)
			}
		}
	}
	if err := rd.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", file, err))
	}
	return out, errors.Join(errs...)
}

// CompareBench compares every benchmark × unit present in both streams. A
// regression is a change in the worse direction of more than tolerancePct
// percent that is also significant at alpha. Units without a better=
// direction are reported, never gated.
func CompareBench(old, cur io.Reader, tolerancePct, alpha float64) ([]Delta, error) {
	ob, err := ReadBench(old, "baseline")
	if err != nil {
		return nil, err
	}
	nb, err := ReadBench(cur, "this run")
	if err != nil {
		return nil, err
	}
	for file, b := range map[string]Bench{"baseline": ob, "this run": nb} {
		if len(b.Values) == 0 {
			return nil, fmt.Errorf("%s: no benchmark results", file)
		}
	}
	ov, nv, meta := ob.Values, nb.Values, nb.Meta
	thr := benchmath.Thresholds{CompareAlpha: alpha}
	var out []Delta
	for _, k := range slices.SortedFunc(maps.Keys(nv), func(a, b BenchKey) int {
		return strings.Compare(a.Name+"\x00"+a.Unit, b.Name+"\x00"+b.Unit)
	}) {
		o, ok := ov[k]
		if !ok {
			continue
		}
		a := meta.GetAssumption(k.Unit)
		s1, s2 := benchmath.NewSample(o, &thr), benchmath.NewSample(nv[k], &thr)
		d := Delta{Name: k.Name, Unit: k.Unit, Old: a.Summary(s1, 0.95), New: a.Summary(s2, 0.95), Cmp: a.Compare(s1, s2), Better: meta.GetBetter(k.Unit)}
		if d.Old.Center != 0 {
			d.ChangePct = (d.New.Center/d.Old.Center - 1) * 100
		}
		d.Significant = !(d.Cmp.P > d.Cmp.Alpha)
		for _, w := range d.Cmp.Warnings {
			d.Why = w.Error()
		}
		if d.Better == 0 {
			d.Why = "unit has no better= direction: not gated"
		}
		d.Limit = tolerancePct
		if n1, n2, floor := len(o), len(nv[k]), minP(o, nv[k]); floor > alpha {
			// No test can be significant: a regression of any size would
			// pass. Judge the medians alone, with a wider band. Ties count:
			// residuals often repeat one value (min = max), and then even
			// five samples a side may not suffice.
			d.ToleranceOnly, d.Limit = true, 2*tolerancePct
			if d.Better != 0 {
				n := fmt.Sprintf("n = %d vs %d", n1, n2)
				if minP(distinct(n1, n2)) <= alpha {
					n += fmt.Sprintf(" with ties (smallest p %.3g)", floor)
				}
				d.Why = fmt.Sprintf("%s cannot be significant at %g: medians judged on ±%g %%", n, alpha, d.Limit)
			}
		}
		worse := (d.Better < 0 && d.ChangePct > d.Limit) || (d.Better > 0 && d.ChangePct < -d.Limit)
		d.Regression = worse && (d.Significant || d.ToleranceOnly) && d.Better != 0
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the baseline and this run share no benchmark: are they from the same protocol?")
	}
	return out, nil
}

// WriteDeltas prints the comparison as a benchstat-like table, regressions
// marked, with the reason when a change cannot be significant.
func WriteDeltas(w io.Writer, ds []Delta) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "benchmark\tunit\tbaseline\tthis run\tdelta\tp, n\tverdict")
	for _, d := range ds {
		delta := d.Cmp.FormatDelta(d.Old.Center, d.New.Center)
		if d.ToleranceOnly && d.Old.Center != 0 {
			delta = fmt.Sprintf("%+.2f%% (medians)", d.ChangePct)
		}
		verdict := ""
		switch {
		case d.Regression && d.ToleranceOnly:
			verdict = "REGRESSION (tolerance only: " + d.Why + ")"
		case d.Regression:
			verdict = "REGRESSION"
		case d.Why != "":
			verdict = "(" + d.Why + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4g ± %s\t%.4g ± %s\t%s\t%s\t%s\n", d.Name, d.Unit,
			d.Old.Center, d.Old.PctRangeString(), d.New.Center, d.New.PctRangeString(), delta, d.Cmp.String(), verdict)
	}
	return tw.Flush()
}

// minP is the smallest two-sided p-value benchstat's Mann-Whitney U test
// (go-moremath's, which benchmath calls: exact, ties included, for small
// samples) can give any split of x1 and x2's pooled values into samples of
// their sizes; the split with the len(x1) smallest values on one side, or
// the largest, is the most extreme. Without ties it is 2 / C(n1+n2, n1);
// ties raise it ([0.58 ×5] vs [0.58, 0.58, 16, 16, 16]: 0.167, whatever
// the split), and where every value is equal no split differs: 1.
func minP(x1, x2 []float64) float64 {
	n1, n2 := len(x1), len(x2)
	if n1 == 0 || n2 == 0 {
		return 1
	}
	pooled := slices.Sorted(slices.Values(slices.Concat(x1, x2)))
	p := 1.0
	for _, split := range [][2][]float64{{pooled[:n1], pooled[n1:]}, {pooled[n2:], pooled[:n2]}} {
		res, err := stats.MannWhitneyUTest(split[0], split[1], stats.LocationDiffers)
		if err != nil { // every value equal (stats.ErrSamplesEqual): no test can tell them apart
			continue
		}
		p = min(p, res.P)
	}
	return p
}

// distinct is n1 and n2 distinct values: samples of those sizes without ties.
func distinct(n1, n2 int) ([]float64, []float64) {
	xs := make([]float64, n1+n2)
	for i := range xs {
		xs[i] = float64(i)
	}
	return xs[:n1], xs[n1:]
}
