package fleetreport

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/stats"
	"github.com/wakebench/wakebench/internal/variants"

	"golang.org/x/perf/benchfmt"
)

// Fleet is the fleet report: fleet.json as written, plus each node's bench.txt for the merged
// bench.txt (not in JSON).
type Fleet struct {
	// Status is PASS when every node passed and no node is an outlier of its kind.
	Status string `json:"status"`
	// Simulated counts the nodes whose report says they ran on vllmsim.
	Simulated int       `json:"simulated_nodes"`
	Nodes     []Node    `json:"nodes"` // by GPU kind, then node name
	Kinds     []Kind    `json:"kinds"` // by GPU kind
	Outliers  []Outlier `json:"outliers"`
	Options   Options   `json:"options"` // the outlier rule's thresholds, defaults filled in
	// PercentileMethod is how the kinds' summaries were computed (package stats).
	PercentileMethod string `json:"percentile_method"`
}

// Node is one node in the fleet report.
type Node struct {
	Node   string `json:"node"`
	GPU    string `json:"gpu"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Simulated is the node report's `simulated` (vllmsim profile and time scale), empty on hardware.
	Simulated string `json:"simulated,omitempty"`
	// Models holds each model's key figures (by the report's label: A, B, …).
	Models map[string]Figures `json:"models,omitempty"`
	// Link is the node's host link as its link probe measured it (absent without a probe).
	Link *Link `json:"link,omitempty"`
	// Outlier is true when the node is named in Fleet.Outliers.
	Outlier bool `json:"outlier,omitempty"`
	// Notes say what is missing from the node's results without failing it (no bench.txt,
	// samples.csv cut short, bench lines that did not parse).
	Notes []string `json:"notes,omitempty"`
	// Variants is the node's variant run (docs/variants.md), nil on a run of one build: its
	// Models, bench.txt and samples are one run's of the reference variant.
	Variants *VariantRun `json:"variants,omitempty"`

	bench []byte // the node's bench.txt, for the merged bench.txt
	// pooled: the node's figures and samples join its kind's (summaries, outliers): a PASS
	// node's; a variant node's when its reference run passed, even where a variant was worse.
	pooled bool
}

// VariantRun is what a node's variant run judged: each variant against the reference, in
// that node's run alone (its comparison.json).
type VariantRun struct {
	Status    string   `json:"status"`
	Reference string   `json:"reference"`
	Variants  []string `json:"variants"` // the reference first
	// Worse and Better count the gated figures (protocol.variant_focus's, or all without
	// one) a variant was judged worse or better in, over every variant; Judged the figures
	// judged at all.
	Worse    int      `json:"worse"`
	Better   int      `json:"better"`
	Judged   int      `json:"judged"`
	Failures []string `json:"failures"`
}

// Link is a node's host link: the slowest GPU's measured host→device rate against the rate of
// NVML's maximum link (report.json link_probe).
type Link struct {
	H2DGBps           float64 `json:"h2d_gbps"`
	NominalGBps       float64 `json:"nominal_gbps"`
	FractionOfNominal float64 `json:"h2d_fraction_of_nominal"`
	Simulated         bool    `json:"simulated,omitempty"` // the simulated GPU's profile rates
}

// Figures are one model's key figures on one node, from its report.json. Has* say which are
// known (a figure absent from the report is not zero).
type Figures struct {
	L1WakeS  float64 `json:"l1_wake_s"`
	PCIeGBps float64 `json:"pcie_gbps"`
	// PCIeBasis says which rate the wake's floor was taken at: "measured" (the node's link
	// probe) or "nominal" (NVML's maximum link); "" from a report before the probe.
	PCIeBasis             string  `json:"pcie_basis,omitempty"`
	L1WakeFractionOfFloor float64 `json:"l1_wake_fraction_of_floor"`
	TPOTFractionOfHBM     float64 `json:"tpot_c1_fraction_of_hbm_limit"`
	ResidualGiB           float64 `json:"residual_gib"` // level-1 residual, median of the cycles
	// OutputTPS is the baseline stage's output tok/s (median of its rounds) at its lowest
	// concurrency, OutputTPSConc; OutputTPSFractionOfHBM is it over the decode rate the node's
	// memory bandwidth allows at that concurrency, OutputTPSConc / the node's own TPOT floor
	// (weight bytes / HBM bandwidth; each step reads the weights once for every request in
	// the batch): a fraction, at most 1 but for the exceptions physical_limits names.
	OutputTPS              float64 `json:"output_tps"`
	OutputTPSConc          int     `json:"output_tps_concurrency"`
	OutputTPSFractionOfHBM float64 `json:"output_tps_fraction_of_hbm_limit"`

	metrics map[string]float64 // the outlier rule's inputs that are known, by metric name
}

// Kind is one GPU kind's pooled figures.
type Kind struct {
	GPU   string `json:"gpu"`
	Nodes int    `json:"nodes"`
	// Pooled is how many of its nodes' samples are in Summaries: PASS nodes with a bench.txt.
	Pooled    int            `json:"pooled_nodes"`
	Summaries []BenchSummary `json:"summaries"` // by benchmark name, then unit
}

// BenchSummary summarises one benchmark × unit over the raw samples of a kind's pooled nodes
// (every result line's value, not the nodes' medians or percentiles).
type BenchSummary struct {
	Name  string `json:"name"` // benchfmt name without "Benchmark": Sleep/model=A/level=1
	Unit  string `json:"unit"`
	Nodes int    `json:"nodes"` // nodes that contributed samples
	stats.Summary
}

// MarshalJSON writes the name, unit and nodes beside the summary's
// figures: without it the embedded stats.Summary's MarshalJSON (null
// figures for n 0, issue 50) would write the summary alone.
func (b BenchSummary) MarshalJSON() ([]byte, error) {
	type summary stats.Summary // its fields, without its MarshalJSON
	return json.Marshal(struct {
		Name  string `json:"name"`
		Unit  string `json:"unit"`
		Nodes int    `json:"nodes"`
		summary
	}{b.Name, b.Unit, b.Nodes, summary(b.Summary)})
}

// Outlier names a node whose figure is far from its kind's.
type Outlier struct {
	Node   string  `json:"node"`
	GPU    string  `json:"gpu"`
	Model  string  `json:"model"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	// KindMedian is the median of the same figure over the kind's other PASS nodes (0 with none).
	KindMedian float64 `json:"kind_median"`
	Others     int     `json:"others"` // how many other nodes KindMedian is over
	Rule       string  `json:"rule"`   // which rule flagged it, with its numbers
}

// Build merges the nodes' results into the fleet report. It fails only on input that is not a
// fleet (no nodes, a node without a name or GPU kind, a name twice); a node whose own results
// are bad is a FAIL node with the reason, and the others go on.
func Build(results []NodeResult, opts Options) (Fleet, error) {
	opts = opts.withDefaults()
	f := Fleet{Status: StatusPass, Options: opts, PercentileMethod: stats.PercentileMethod, Outliers: []Outlier{}}
	if len(results) == 0 {
		return f, errors.New("fleetreport: no node results")
	}
	seen := make(map[string]bool, len(results))
	for i, r := range results {
		if r.Node == "" || r.GPU == "" {
			return f, fmt.Errorf("fleetreport: result %d: node %q, gpu %q: both are needed", i, r.Node, r.GPU)
		}
		if seen[r.Node] {
			return f, fmt.Errorf("fleetreport: node %q: two results", r.Node)
		}
		seen[r.Node] = true
		f.Nodes = append(f.Nodes, readNode(r))
	}
	slices.SortFunc(f.Nodes, func(a, b Node) int { return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.Node, b.Node)) })

	for start := 0; start < len(f.Nodes); {
		end := start + 1
		for end < len(f.Nodes) && f.Nodes[end].GPU == f.Nodes[start].GPU {
			end++
		}
		nodes := f.Nodes[start:end]
		k, err := poolKind(nodes)
		if err != nil {
			return f, err
		}
		f.Kinds = append(f.Kinds, k)
		f.Outliers = append(f.Outliers, outliers(nodes, opts)...)
		start = end
	}
	flagged := make(map[string]bool, len(f.Outliers))
	for _, o := range f.Outliers {
		flagged[o.Node] = true
	}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		n.Outlier = flagged[n.Node]
		if n.Status != StatusPass || n.Outlier {
			f.Status = StatusFail
		}
		if n.Simulated != "" {
			f.Simulated++
		}
	}
	return f, nil
}

// Flagged returns the names of the nodes that are not PASS or are outliers of their kind, sorted.
func (f Fleet) Flagged() []string {
	var out []string
	for _, n := range f.Nodes {
		if n.Status != StatusPass || n.Outlier {
			out = append(out, n.Node)
		}
	}
	slices.Sort(out)
	return out
}

// readNode turns one node's result into its Node: the status the runner gave, made FAIL when
// the report is missing, unreadable or says FAIL, and the key figures from the report.
func readNode(r NodeResult) Node {
	n := Node{Node: r.Node, GPU: r.GPU, Status: r.Status, Reason: r.Reason, bench: r.Bench}
	switch n.Status {
	case StatusPass, StatusFail, StatusNotRun:
	default:
		n.Reason = strings.TrimPrefix(fmt.Sprintf("%s; runner gave status %q", n.Reason, r.Status), "; ")
		n.Status = StatusFail
	}
	fail := func(reason string) {
		if n.Status == StatusPass {
			n.Status, n.Reason = StatusFail, reason
		} else if n.Reason == "" {
			n.Reason = reason
		}
	}
	if r.Truncated {
		n.Notes = append(n.Notes, "samples.csv cut short: it came back truncated")
	}
	if len(r.Bench) == 0 {
		n.Notes = append(n.Notes, "no bench.txt came back: the node's samples are not in its kind's summaries")
	}
	if r.Comparison != nil { // an empty one too: it cannot be parsed
		var c variants.Comparison
		if err := json.Unmarshal(r.Comparison, &c); err != nil {
			fail(fmt.Sprintf("comparison.json cannot be parsed: %v", err))
			return n
		}
		n.Variants = variantRun(c)
		if c.Status != StatusPass {
			// The node's verdict is its comparison's, and so is the reason: the runner's
			// (the exit status the failed comparison gave) says less.
			n.Status, n.Reason = StatusFail, "variant run failed: "+firstOf(c.Failures)
		}
	}
	if len(r.Report) == 0 {
		fail("no report.json came back")
		return n
	}
	var rep report.Report
	if err := json.Unmarshal(r.Report, &rep); err != nil {
		fail(fmt.Sprintf("report.json cannot be parsed: %v", err))
		return n
	}
	if rep.Simulated != nil {
		n.Simulated = rep.Simulated.Label()
	}
	switch rep.Status {
	case StatusPass:
		n.pooled = n.Status == StatusPass || n.Variants != nil
	case StatusFail:
		fail("run failed: " + failureText(rep.Failures))
	default:
		fail(fmt.Sprintf("report.json: status %q (want PASS or FAIL)", rep.Status))
	}
	if l, ok := record.SlowestLink(rep.LinkProbe); ok && l.NominalGBps > 0 {
		n.Link = &Link{H2DGBps: l.H2DGBps, NominalGBps: l.NominalGBps, FractionOfNominal: l.H2DFractionOfNominal, Simulated: l.Simulated}
	}
	n.Models = make(map[string]Figures, len(rep.Models))
	for label, m := range rep.Models {
		if m != nil {
			n.Models[label] = figures(m)
		}
	}
	return n
}

// variantRun is what the fleet report keeps of a node's comparison.
func variantRun(c variants.Comparison) *VariantRun {
	v := &VariantRun{Status: c.Status, Reference: c.Reference, Variants: c.Variants, Failures: c.Failures}
	for _, m := range c.Metrics {
		switch {
		case !m.Focus: // outside protocol.variant_focus: shown, not a verdict
		case m.Verdict == variants.Worse:
			v.Worse++
		case m.Verdict == variants.Better:
			v.Better++
		}
		if m.Verdict != variants.NotJudge {
			v.Judged++
		}
	}
	return v
}

// firstOf is a list of reasons in one line: the first, and how many more.
func firstOf(reasons []string) string {
	if len(reasons) == 0 {
		return "the comparison names no failure"
	}
	return andMore(reasons[0], len(reasons))
}

// andMore is the first of n reasons, and how many more.
func andMore(first string, n int) string {
	if n > 1 {
		first += fmt.Sprintf(" (and %d more)", n-1)
	}
	return first
}

// failureText is a report's failures in one line: the first, and how many more.
func failureText(fs []record.Failure) string {
	if len(fs) == 0 {
		return "the report names no failure"
	}
	f := fs[0]
	where := strings.Join(slices.DeleteFunc([]string{f.Phase, f.Model, f.Step}, func(s string) bool { return s == "" }), "/")
	return andMore(where+": "+f.Error, len(fs))
}

// figures reads one model's key figures and the outlier rule's inputs.
func figures(m *report.Model) Figures {
	var f Figures
	f.metrics = make(map[string]float64, 3)
	if l := m.PhysicalLimits; l != nil {
		f.L1WakeS, f.PCIeGBps, f.L1WakeFractionOfFloor, f.TPOTFractionOfHBM = l.L1WakeS, l.PCIeGBps, l.L1WakeFractionOfFloor, l.TPOTFractionOfHBM
		f.PCIeBasis = l.PCIeBasis
		if l.L1WakeFractionOfFloor > 0 {
			f.metrics[MetricWakeFraction] = l.L1WakeFractionOfFloor
		}
	}
	if s := m.Sleep["1"]; s != nil && s.ResidualGiB.N > 0 {
		f.ResidualGiB = s.ResidualGiB.Median
		f.metrics[MetricResidual] = s.ResidualGiB.Median
	}
	for _, p := range m.Performance {
		if p.Stage != record.PhaseBaseline || p.OutputTPS.N == 0 || (f.OutputTPSConc != 0 && p.Concurrency >= f.OutputTPSConc) {
			continue
		}
		f.OutputTPS, f.OutputTPSConc = p.OutputTPS.Median, p.Concurrency
	}
	if f.OutputTPSConc != 0 {
		if l := m.PhysicalLimits; l != nil && l.TPOTFloorS > 0 {
			// At concurrency c a decode step reads the weights once for c
			// tokens: the bandwidth's limit is c / TPOT floor tok/s.
			f.OutputTPSFractionOfHBM = f.OutputTPS * l.TPOTFloorS / float64(f.OutputTPSConc)
			f.metrics[MetricTPSFraction] = f.OutputTPSFractionOfHBM
		} else {
			// No HBM figure to normalise by: the raw rate, compared only within the kind.
			f.metrics[MetricTPS] = f.OutputTPS
		}
	}
	return f
}

// poolKind is one kind's Kind: every raw sample of its PASS nodes' bench.txt, pooled per
// benchmark × unit, then summarised. Percentiles of the nodes are never merged: a kind's p95
// is the nearest-rank p95 of all its samples (inference-perf#797).
func poolKind(nodes []Node) (Kind, error) {
	k := Kind{GPU: nodes[0].GPU, Nodes: len(nodes)}
	type pool struct {
		name, unit string
		xs         []float64
		nodes      int
		last       int // index+1 of the last node that added to it
	}
	pools := map[string]*pool{}
	var key []byte
	for i := range nodes {
		n := &nodes[i]
		if !n.pooled || len(n.bench) == 0 {
			continue
		}
		bad, results := 0, 0
		err := scanBench(n.Node, n.bench, func(rec benchfmt.Record) {
			switch rec := rec.(type) {
			case *benchfmt.Result:
				results++
				for _, v := range rec.Values {
					key = append(append(append(key[:0], rec.Name...), 0), v.Unit...)
					p := pools[string(key)]
					if p == nil {
						p = &pool{name: string(rec.Name), unit: v.Unit}
						pools[string(key)] = p
					}
					p.xs = append(p.xs, v.Value)
					if p.last != i+1 {
						p.last = i + 1
						p.nodes++
					}
				}
			case *benchfmt.SyntaxError:
				bad++
			}
		})
		if err != nil {
			return k, err
		}
		if bad > 0 {
			n.Notes = append(n.Notes, fmt.Sprintf("bench.txt: %d lines do not parse (left out)", bad))
		}
		if results == 0 {
			n.Notes = append(n.Notes, "bench.txt holds no result: the node's samples are not in its kind's summaries")
			continue
		}
		k.Pooled++
	}
	for _, p := range pools {
		s, err := stats.Summarize(p.xs)
		if err != nil {
			return k, fmt.Errorf("fleetreport: kind %q: %s %s: %w", k.GPU, p.name, p.unit, err)
		}
		k.Summaries = append(k.Summaries, BenchSummary{Name: p.name, Unit: p.unit, Nodes: p.nodes, Summary: s})
	}
	slices.SortFunc(k.Summaries, func(a, b BenchSummary) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Unit, b.Unit)) })
	return k, nil
}

// scanBench calls fn with each record of one node's bench.txt.
func scanBench(node string, b []byte, fn func(benchfmt.Record)) error {
	r := benchfmt.NewReader(bytes.NewReader(b), node+"/bench.txt")
	for r.Scan() {
		fn(r.Result())
	}
	if err := r.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("fleetreport: node %q: bench.txt: %w", node, err)
	}
	return nil
}
