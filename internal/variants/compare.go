package variants

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/stats"
)

// PowerLevel is how often a change of the stated size is to be caught:
// a metric's Detect is the smallest change its blocks catch this often.
const PowerLevel = 0.8

// Verdicts of a metric.
const (
	Worse    = "worse"      // significantly worse, by more than the tolerance
	Better   = "better"     // significantly better, by more than the tolerance
	Same     = "same"       // no change beyond the tolerance seen (Detect says how small a change could have been)
	NotJudge = "not judged" // Why says why
)

// Metric is one figure of one variant against the reference's, block by
// block: in each block both ran, the ratio of the variant's block figure
// to the reference's (the median of the block's samples, or its best:
// protocol.variant_block_figure); their geometric mean is Delta, with its confidence
// interval from the blocks' spread (a paired t interval on the log ratios,
// n−1 degrees of freedom).
type Metric struct {
	Variant string `json:"variant"`
	Name    string `json:"name"` // the benchmark, as bench.txt names it (no "Benchmark")
	Unit    string `json:"unit"`
	Better  int    `json:"better"` // +1 higher is better, −1 lower, 0 no direction (not judged)
	// Ref and Var are the geometric means over the paired blocks of each
	// block's figure (their ratio is 1 + DeltaPct/100); the medians of
	// those where a block's figure is not positive.
	Ref float64 `json:"ref"`
	Var float64 `json:"var"`
	// Blocks is how many blocks had the metric in both (the pairs);
	// Ratios each pair's variant figure over the reference's, in block
	// order (as computed: ±Inf or NaN where the reference's is 0).
	Blocks int       `json:"blocks"`
	Ratios []float64 `json:"ratios"`
	// DeltaPct is the variant's change against the reference in percent
	// (100·(exp(mean log ratio) − 1)); LoPct and HiPct its interval at
	// 1 − alpha.
	DeltaPct float64 `json:"delta_pct"`
	LoPct    float64 `json:"lo_pct"`
	HiPct    float64 `json:"hi_pct"`
	// P is the paired t test's two-sided p of no change.
	P float64 `json:"p"`
	// DetectPct is the smallest worse change (percent, in the metric's
	// worse direction) these blocks flag PowerLevel of the time by the
	// verdict's own rule: the observed change beyond the tolerance and
	// beyond q·se (significant at alpha), and t(PowerLevel)·se more, as
	// the observed change scatters about the true one (the noncentral t
	// approximated by a shifted central one; per metric, before
	// Benjamini-Hochberg asks more of it). It is never below the
	// tolerance: a change the rule cannot flag is no change it catches.
	DetectPct float64 `json:"detect_pct"`
	Verdict   string  `json:"verdict"`
	Why       string  `json:"why,omitempty"`
	// Focus: the figure is in protocol.variant_focus (every figure is
	// when the focus is empty): judged in the focus's family, and gated.
	Focus bool `json:"focus"`
}

// WorsePct is the change in the metric's worse direction (positive:
// worse), NaN without a direction.
func (m Metric) WorsePct() float64 {
	if m.Better == 0 {
		return math.NaN()
	}
	return m.DeltaPct * float64(-m.Better)
}

// pair is one block's figures of a metric (blockPair).
type pair struct{ ref, v float64 }

// compareMetric judges one metric of a variant from its pairs, before the
// family's correction (Compare applies Benjamini-Hochberg over each
// variant's judged metrics).
func compareMetric(variant string, k gate.BenchKey, better int, pairs []pair, tolPct, alpha float64) Metric {
	m := Metric{Variant: variant, Name: k.Name, Unit: k.Unit, Better: better, Blocks: len(pairs),
		DeltaPct: math.NaN(), LoPct: math.NaN(), HiPct: math.NaN(), P: math.NaN(), DetectPct: math.NaN()}
	var refs, vs, ds []float64
	for _, p := range pairs {
		refs, vs = append(refs, p.ref), append(vs, p.v)
		m.Ratios = append(m.Ratios, p.v/p.ref)
		if p.ref > 0 && p.v > 0 {
			ds = append(ds, math.Log(p.v/p.ref))
		}
	}
	m.Ref, m.Var = median(refs), median(vs)
	if len(ds) == len(pairs) && len(ds) > 0 { // their ratio is 1 + Δ exactly
		m.Ref, m.Var = stat.GeometricMean(refs, nil), stat.GeometricMean(vs, nil)
	}
	switch {
	case better == 0:
		m.Verdict, m.Why = NotJudge, "its unit has no better= direction"
		return m
	case len(pairs) < 2:
		m.Verdict, m.Why = NotJudge, fmt.Sprintf("in %d block(s) of both: a paired interval needs 2", len(pairs))
		return m
	case len(ds) < len(pairs):
		m.Verdict, m.Why = NotJudge, "a block's figure is 0 or negative: a relative change is undefined"
		return m
	}
	n := float64(len(ds))
	mean, sd := stat.MeanStdDev(ds, nil) // the sample standard deviation (n−1)
	se := sd / math.Sqrt(n)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}
	q := t.Quantile(1 - alpha/2)
	pct := func(x float64) float64 { return 100 * (math.Exp(x) - 1) }
	m.DeltaPct, m.LoPct, m.HiPct = pct(mean), pct(mean-q*se), pct(mean+q*se)
	switch {
	case se > 0:
		m.P = 2 * t.Survival(math.Abs(mean)/se)
	case mean == 0:
		m.P = 1
	default: // every block moved by the same ratio: no spread to doubt it
		m.P = 0
	}
	m.DetectPct = detectAt(better, tolPct, alpha, sd, len(ds))
	m.Verdict = Same
	return m
}

// detectPct is the smallest worse change, in percent, that a metric of
// standard error se (of the mean log ratio) is flagged for PowerLevel of
// the time: its threshold, max(the tolerance, q·se) on the log scale, and
// t80·se beyond it; with no spread, just beyond the tolerance. The worse
// direction is up for a lower-is-better unit (1 + tolerance) and down for
// a higher-is-better one (1 − tolerance).
func detectPct(better int, tolPct, q, t80, se float64) float64 {
	tol := math.Log1p(tolPct / 100)
	if better > 0 {
		tol = -math.Log1p(-math.Min(tolPct, 99.99) / 100)
	}
	x := math.Max(tol, q*se) + t80*se
	if better > 0 {
		return 100 * (1 - math.Exp(-x))
	}
	return 100 * (math.Exp(x) - 1)
}

// detectAt is detectPct with n blocks of log ratios of sample standard
// deviation sd: the standard error sd/√n and Student's t quantiles of n−1
// degrees of freedom (a comparison's own DetectPct, and BlocksFor's at
// other n).
func detectAt(better int, tolPct, alpha, sd float64, n int) float64 {
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}
	return detectPct(better, tolPct, t.Quantile(1-alpha/2), t.Quantile(PowerLevel), sd/math.Sqrt(float64(n)))
}

// BlocksFor is the fewest blocks, at most limit, with which m's worse
// change of changePct percent is flagged PowerLevel of the time when judged
// alone (before Benjamini-Hochberg), its blocks' log ratios spreading as
// m's did (their sample standard deviation): DetectPct at n blocks
// (detectAt). 0 where m has no spread to go
// by (fewer than two positive ratios, or no better= direction); limit+1
// where limit blocks do not reach it (a change within the tolerance never
// does).
func BlocksFor(m Metric, changePct, tolPct, alpha float64, limit int) int {
	var ds []float64
	for _, r := range m.Ratios {
		if r > 0 {
			ds = append(ds, math.Log(r))
		}
	}
	if m.Better == 0 || len(ds) < 2 || len(ds) < len(m.Ratios) {
		return 0
	}
	_, sd := stat.MeanStdDev(ds, nil)
	for n := 2; n <= limit; n++ {
		if detectAt(m.Better, tolPct, alpha, sd, n) <= changePct {
			return n
		}
	}
	return limit + 1
}

// judgeFamily applies Benjamini-Hochberg (1995) over one variant's judged
// metrics whose Focus is focus, at alpha: a metric's change is significant
// where its p is at most k·alpha/m for the largest such rank k; a
// significant change beyond the tolerance is Worse or Better, anything
// else Same. what names the family in each metric's Why.
func judgeFamily(ms []Metric, focus bool, what string, tolPct, alpha float64) {
	var fam []int
	for i, m := range ms {
		if m.Verdict == Same && m.Focus == focus {
			fam = append(fam, i)
		}
	}
	slices.SortStableFunc(fam, func(a, b int) int { return cmp.Compare(ms[a].P, ms[b].P) }) // a judged metric has a p
	k := 0
	for rank, i := range fam {
		if ms[i].P <= float64(rank+1)*alpha/float64(len(fam)) {
			k = rank + 1
		}
	}
	for rank, i := range fam {
		m := &ms[i]
		w := m.WorsePct()
		switch {
		case rank < k && w > tolPct:
			m.Verdict = Worse
		case rank < k && w < -tolPct:
			m.Verdict = Better
		}
		m.Why = fmt.Sprintf("Benjamini-Hochberg over the variant's %d judged %s (α %g), tolerance ±%g %%", len(fam), what, alpha, tolPct)
	}
}

// compare judges every metric of each variant against the reference's,
// from each block's bench results by variant (a variant missing from a
// block, its run failed, gives that block no pair): those focus says are
// in the question's focus (config.Protocol.InVariantFocus) in one family,
// the others in another; with focus nil, every metric in one.
func compare(ref string, others []string, blocks []map[string]gate.Bench, figure string, tolPct, alpha float64, focus func(name, unit string) bool) []Metric {
	var out []Metric
	for _, v := range others {
		pairs := map[gate.BenchKey][]pair{}
		better := map[gate.BenchKey]int{}
		only := map[gate.BenchKey]string{} // a figure of one side alone, in a block of both
		for _, b := range blocks {
			rb, okr := b[ref]
			vb, okv := b[v]
			if !okr || !okv {
				continue
			}
			for k, xs := range vb.Values {
				ys, ok := rb.Values[k]
				if !ok || len(xs) == 0 || len(ys) == 0 {
					only[k] = v
					continue
				}
				better[k] = vb.Meta.GetBetter(k.Unit)
				pairs[k] = append(pairs[k], blockPair(figure, better[k], k.Unit, ys, xs))
			}
			for k, ys := range rb.Values {
				if xs, ok := vb.Values[k]; !ok || len(xs) == 0 || len(ys) == 0 {
					only[k] = ref
				}
			}
		}
		var ms []Metric
		for _, k := range slices.SortedFunc(maps.Keys(pairs), cmpKey) {
			ms = append(ms, compareMetric(v, k, better[k], pairs[k], tolPct, alpha))
		}
		// Every figure of either side is listed: one the other never had
		// beside it (a capability one release lacks) as not judged.
		for _, k := range slices.SortedFunc(maps.Keys(only), cmpKey) {
			if _, paired := pairs[k]; !paired {
				ms = append(ms, Metric{Variant: v, Name: k.Name, Unit: k.Unit, Ref: math.NaN(), Var: math.NaN(), DeltaPct: math.NaN(), LoPct: math.NaN(),
					HiPct: math.NaN(), P: math.NaN(), DetectPct: math.NaN(), Verdict: NotJudge, Why: "only in " + only[k]})
			}
		}
		for i := range ms {
			ms[i].Focus = focus == nil || focus(ms[i].Name, ms[i].Unit)
		}
		if focus == nil {
			judgeFamily(ms, true, "metrics", tolPct, alpha)
		} else {
			judgeFamily(ms, true, "metrics in protocol.variant_focus", tolPct, alpha)
			judgeFamily(ms, false, "metrics outside protocol.variant_focus (shown, not gated)", tolPct, alpha)
		}
		out = append(out, ms...)
	}
	return out
}

func cmpKey(a, b gate.BenchKey) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Unit, b.Unit))
}

// bestUnit reports whether "best" applies to unit: a time (sec/…) or a
// rate (…/s), what other work on the machine only ever slows. A memory,
// power or energy figure has no such one-sided noise (a residual left
// behind in four cycles of five is a change, not a stall): its median.
func bestUnit(unit string) bool {
	return strings.HasPrefix(unit, "sec/") || strings.HasSuffix(unit, "/s")
}

// blockPair is one block's figures of a metric, the reference's from its
// samples ref and the variant's from v, by protocol.variant_block_figure
// (config.VariantBlockFigures): "best", for a time or a rate (bestUnit),
// the least of each where lower is better (better < 0) and the most
// where higher is, else each median. The best of fewer samples is slower
// on expectation: where best applies and one side wrote more (the other
// lost a cycle), it is judged on as many as the other, its first.
func blockPair(figure string, better int, unit string, ref, v []float64) pair {
	if figure != "best" || better == 0 || !bestUnit(unit) {
		return pair{median(ref), median(v)}
	}
	n := min(len(ref), len(v))
	best := slices.Max[[]float64]
	if better < 0 {
		best = slices.Min[[]float64]
	}
	return pair{best(ref[:n]), best(v[:n])}
}

func median(xs []float64) float64 {
	s, err := stats.Summarize(xs)
	if err != nil {
		return math.NaN()
	}
	return s.Median
}

// metricJSON is a Metric as comparison.json holds it: every figure that
// could not be computed null.
type metricJSON struct {
	Variant   string     `json:"variant"`
	Name      string     `json:"name"`
	Unit      string     `json:"unit"`
	Better    int        `json:"better"`
	Ref       *float64   `json:"ref"`
	Var       *float64   `json:"var"`
	Blocks    int        `json:"blocks"`
	Ratios    []*float64 `json:"ratios"`
	DeltaPct  *float64   `json:"delta_pct"`
	LoPct     *float64   `json:"lo_pct"`
	HiPct     *float64   `json:"hi_pct"`
	P         *float64   `json:"p"`
	DetectPct *float64   `json:"detect_pct"`
	Verdict   string     `json:"verdict"`
	Why       string     `json:"why,omitempty"`
	// Focus is absent in a comparison written before
	// protocol.variant_focus, when every figure was one gated family.
	Focus *bool `json:"focus"`
}

// UnmarshalJSON reads what MarshalJSON wrote: a null figure is NaN again,
// never a 0 that would read as a p of 0 or no change; a metric without
// "focus" (written before protocol.variant_focus) was gated.
func (m *Metric) UnmarshalJSON(b []byte) error {
	var j metricJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	val := func(x *float64) float64 {
		if x == nil {
			return math.NaN()
		}
		return *x
	}
	*m = Metric{Variant: j.Variant, Name: j.Name, Unit: j.Unit, Better: j.Better, Ref: val(j.Ref), Var: val(j.Var), Blocks: j.Blocks,
		DeltaPct: val(j.DeltaPct), LoPct: val(j.LoPct), HiPct: val(j.HiPct), P: val(j.P), DetectPct: val(j.DetectPct), Verdict: j.Verdict, Why: j.Why,
		Focus: j.Focus == nil || *j.Focus}
	for _, r := range j.Ratios {
		m.Ratios = append(m.Ratios, val(r))
	}
	return nil
}

// MarshalJSON writes a figure that could not be computed (NaN: a metric
// not judged) as null, not as a number it is not.
func (m Metric) MarshalJSON() ([]byte, error) {
	ratios := make([]*float64, len(m.Ratios))
	for i, r := range m.Ratios {
		ratios[i] = report.Opt(r)
	}
	return json.Marshal(metricJSON{m.Variant, m.Name, m.Unit, m.Better, report.Opt(m.Ref), report.Opt(m.Var), m.Blocks, ratios, report.Opt(m.DeltaPct), report.Opt(m.LoPct), report.Opt(m.HiPct),
		report.Opt(m.P), report.Opt(m.DetectPct), m.Verdict, m.Why, &m.Focus})
}
