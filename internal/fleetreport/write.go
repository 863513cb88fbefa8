package fleetreport

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/htmlreport"
	"github.com/wakebench/wakebench/internal/report"
)

// Output file names under Write's directory.
const (
	FileJSON  = "fleet.json"
	FileMD    = "fleet.md"
	FileBench = "bench.txt"
	FileHTML  = "fleet.html"
)

// Write writes f's fleet.json, fleet.md, fleet.html and merged bench.txt into dir (created if
// needed).
func Write(dir string, f Fleet) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fleetreport: %w", err)
	}
	j, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("fleetreport: fleet.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileJSON), append(j, '\n'), 0o644); err != nil {
		return fmt.Errorf("fleetreport: %w", err)
	}
	summary := Summary(f) // fleet.md's and fleet.html's, built once
	if err := os.WriteFile(filepath.Join(dir, FileMD), []byte(summary.Markdown()), 0o644); err != nil {
		return fmt.Errorf("fleetreport: %w", err)
	}
	// The page last: one that cannot be drawn loses nothing else.
	return errors.Join(writeFile(filepath.Join(dir, FileBench), func(w io.Writer) error { return WriteBench(w, f) }),
		writeFile(filepath.Join(dir, FileHTML), func(w io.Writer) error { return htmlreport.WriteFleet(w, htmlView(f, summary)) }))
}

// WriteNodes writes each node's own outputs as they came back into
// dir/nodes/<node>/ (report.json, bench.txt, samples.csv, whichever it
// has): a node's FAIL says "see its report", and this is where it is.
func WriteNodes(dir string, results []NodeResult) error {
	var errs []error
	for _, r := range results {
		if r.Node == "" || strings.ContainsAny(r.Node, `/\`) || r.Node == "." || r.Node == ".." {
			errs = append(errs, fmt.Errorf("fleetreport: node name %q cannot name a directory", r.Node))
			continue
		}
		nd := filepath.Join(dir, "nodes", r.Node)
		for name, b := range map[string][]byte{"report.json": r.Report, "bench.txt": r.Bench, "samples.csv": r.Samples} {
			if b == nil {
				continue
			}
			if err := os.MkdirAll(nd, 0o755); err != nil {
				errs = append(errs, fmt.Errorf("fleetreport: %w", err))
				break
			}
			if err := os.WriteFile(filepath.Join(nd, name), b, 0o644); err != nil {
				errs = append(errs, fmt.Errorf("fleetreport: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

func writeFile(path string, fn func(io.Writer) error) (err error) {
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("fleetreport: %w", err)
	}
	defer func() {
		if cerr := file.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("fleetreport: %w", cerr)
		}
	}()
	w := bufio.NewWriter(file)
	if err := fn(w); err != nil {
		return fmt.Errorf("fleetreport: %s: %w", filepath.Base(path), err)
	}
	return w.Flush()
}

// WriteBench writes the merged bench.txt: the nodes' unit metadata once, then every node's
// results, each under config lines `node:` (the node's name) and `gpu:` (its GPU kind, in
// place of the node's own `gpu:` line, which stays as `node-gpu:`), so that
// `benchstat -col node` splits by node and `-filter 'gpu:"NVIDIA H100 80GB HBM3"'` keeps one
// kind. Lines of a node's file that do not parse are left out (Build notes them).
func WriteBench(w io.Writer, f Fleet) error {
	bw := benchfmt.NewWriter(w)
	units := map[benchfmt.UnitMetadataKey]bool{}
	for _, n := range f.Nodes {
		var werr error
		err := scanBench(n.Node, n.bench, func(rec benchfmt.Record) {
			if u, ok := rec.(*benchfmt.UnitMetadata); ok && werr == nil && !units[u.UnitMetadataKey] {
				units[u.UnitMetadataKey] = true
				werr = bw.Write(u)
			}
		})
		if err := errors.Join(err, werr); err != nil {
			return err
		}
	}
	var cfg []benchfmt.Config
	for _, n := range f.Nodes {
		var werr error
		err := scanBench(n.Node, n.bench, func(rec benchfmt.Record) {
			res, ok := rec.(*benchfmt.Result)
			if !ok || werr != nil {
				return
			}
			cfg = append(cfg[:0], benchfmt.Config{Key: "node", Value: []byte(n.Node), File: true}, benchfmt.Config{Key: "gpu", Value: []byte(n.GPU), File: true})
			for _, c := range res.Config {
				switch c.Key {
				case "node", "gpu":
					c.Key = "node-" + c.Key
				}
				cfg = append(cfg, c)
			}
			werr = bw.Write(&benchfmt.Result{Config: cfg, Name: res.Name, Iters: res.Iters, Values: res.Values})
		})
		if err := errors.Join(err, werr); err != nil {
			return err
		}
	}
	return nil
}

// Summary is the fleet's report as one table model (report.Doc), for
// fleet.md and fleet.html: the verdict, the nodes to look at with their
// reasons, and a section per GPU kind (its nodes' key figures, the
// summaries of its pooled samples).
func Summary(f Fleet) report.Doc {
	var d report.Doc
	d.Heading(1, "verdict", "Fleet report: "+f.Status)
	setup := fmt.Sprintf("%d nodes, %d GPU kinds.", len(f.Nodes), len(f.Kinds))
	if f.Simulated > 0 {
		setup += fmt.Sprintf(" %s: %d of the %d nodes ran on vllmsim, not on GPU hardware (marked %s below).", report.Strong("Simulated"), f.Simulated, len(f.Nodes), report.Em("simulated"))
	}
	d.Para(setup)
	d.Heading(2, "attention", "Nodes to look at")
	byNode := map[string][]Outlier{}
	for _, o := range f.Outliers {
		byNode[o.Node] = append(byNode[o.Node], o)
	}
	var items []report.ListItem
	for _, n := range f.Nodes {
		if n.Status == StatusPass && !n.Outlier && len(n.Notes) == 0 {
			continue
		}
		it := report.ListItem{Text: fmt.Sprintf("%s (%s%s): %s", report.Strong(n.Node), n.GPU, simLabel(n), n.Status)}
		if n.Reason != "" {
			it.Text += ": " + n.Reason
		}
		for _, o := range byNode[n.Node] {
			if o.Model == LinkModel {
				it.Sub = append(it.Sub, fmt.Sprintf("outlier: host link %s = %.4g (measured host→device over NVML's nominal), kind median %.4g: %s", o.Metric, o.Value, o.KindMedian, o.Rule))
				continue
			}
			it.Sub = append(it.Sub, fmt.Sprintf("outlier: model %s %s = %.4g, kind median %.4g: %s", o.Model, o.Metric, o.Value, o.KindMedian, o.Rule))
		}
		for _, note := range n.Notes {
			it.Sub = append(it.Sub, "note: "+note)
		}
		items = append(items, it)
	}
	d.List(items...)
	if len(items) == 0 {
		d.Para("None: every node passed and none is an outlier of its kind.")
	}
	if vs := variantItems(f); len(vs) > 0 {
		d.Heading(2, "variants", "Variant runs")
		d.Para("Each node ran the variants interleaved on its own GPU and judged each against the reference in that run alone (its comparison.json). A node's key figures below, and its part of its kind's summaries and outliers, are the reference variant's.")
		d.List(vs...)
	}
	d.Para(fmt.Sprintf("Outlier rule: against the median of the kind's other nodes, at least %.0f%% worse (residual also ≥ %.2g GiB), and ≥ %.1f scaled MADs when the kind has ≥ %d other nodes; physical-limit fractions below %.2f (wake/PCIe) or %.2f (tok/s/HBM) for a node with at most %d other node of its kind; a host link measured below %.2f of its nominal rate on every node.",
		100*f.Options.RelativeDeviation, f.Options.MinResidualExcessGiB, f.Options.MADs, f.Options.MADMinOthers, f.Options.MinWakeFractionOfPCIe, f.Options.MinTPSFractionOfHBM, FloorMaxOthers, f.Options.MinLinkFractionOfNominal))

	for _, k := range f.Kinds {
		d.Heading(2, "kind-"+k.GPU, k.GPU)
		d.Para(fmt.Sprintf("%d nodes, samples pooled from %d.", k.Nodes, k.Pooled))
		var rows [][]string
		for _, n := range f.Nodes {
			if n.GPU != k.GPU {
				continue
			}
			status := n.Status
			if n.Outlier {
				status += ", outlier"
			}
			if n.Simulated != "" {
				status += ", simulated"
			}
			link := "–"
			if n.Link != nil {
				link = fmt.Sprintf("%.3g of %.4g GB/s = %.2f", n.Link.H2DGBps, n.Link.NominalGBps, n.Link.FractionOfNominal)
			}
			labels := sortedKeys(n.Models)
			if len(labels) == 0 {
				rows = append(rows, []string{n.Node, status, link, "", "", "", "", ""})
			}
			for _, l := range labels {
				m := n.Models[l]
				basis := ""
				if m.PCIeBasis != "" {
					basis = " (" + m.PCIeBasis + ")"
				}
				rows = append(rows, []string{n.Node, status, link, l, fmt.Sprintf("%.3f%s", m.L1WakeFractionOfFloor, basis), fmt.Sprintf("%.1f (%d)", m.OutputTPS, m.OutputTPSConc),
					fmt.Sprintf("%.3f", m.OutputTPSFractionOfHBM), fmt.Sprintf("%.3f", m.ResidualGiB)})
			}
		}
		d.Table([]string{"node", "status", "link measured / nominal", "model", "wake / link floor (basis)", "tok/s (conc)", "tok/s / HBM limit", "residual GiB"}, rows)
		if len(k.Summaries) > 0 {
			d.Para("Pooled raw samples (every node's result lines; p95 by nearest rank over all of them):")
			rows = nil
			for _, s := range k.Summaries {
				rows = append(rows, []string{s.Name, s.Unit, strconv.Itoa(s.Nodes), strconv.Itoa(s.N), fmt.Sprintf("%.4g", s.Median), fmt.Sprintf("%.4g", s.P95), fmt.Sprintf("%.4g", s.Min), fmt.Sprintf("%.4g", s.Max)})
			}
			d.Table([]string{"benchmark", "unit", "nodes", "n", "median", "p95", "min", "max"}, rows)
		}
	}
	return d
}

func simLabel(n Node) string {
	if n.Simulated == "" {
		return ""
	}
	return ", simulated: " + n.Simulated
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, strings.Compare)
	return ks
}

// htmlView is fleet.html's content: the nodes to look at (as fleet.md
// lists them), and each figure the outlier rule judges over the nodes, a
// row per GPU kind and model, the outliers marked.
func htmlView(f Fleet, summary report.Doc) htmlreport.Fleet {
	v := htmlreport.Fleet{Status: f.Status, Setup: fmt.Sprintf("%d nodes, %d GPU kinds", len(f.Nodes), len(f.Kinds)), Summary: summary}
	if f.Simulated > 0 {
		v.Simulated = fmt.Sprintf("Simulated: %d of the %d nodes ran on vllmsim, not on GPU hardware; their figures are simulated.", f.Simulated, len(f.Nodes))
	}
	flagged := map[[3]string]bool{}
	why := map[string][]string{}
	for _, o := range f.Outliers {
		flagged[[3]string{o.Node, o.Model, o.Metric}] = true
		why[o.Node] = append(why[o.Node], fmt.Sprintf("%s %s = %.4g, kind median %.4g: %s", o.Model, o.Metric, o.Value, o.KindMedian, o.Rule))
	}
	for _, n := range f.Nodes { // the nodes fleet.md lists to look at
		if n.Status == StatusPass && !n.Outlier && len(n.Notes) == 0 {
			continue
		}
		s := fmt.Sprintf("%s (%s): %s", n.Node, n.GPU, n.Status)
		if n.Reason != "" {
			s += ": " + n.Reason
		}
		if w := why[n.Node]; len(w) > 0 {
			s += "; outlier: " + strings.Join(w, "; ")
		}
		if len(n.Notes) > 0 {
			s += "; note: " + strings.Join(n.Notes, "; ")
		}
		v.Attention = append(v.Attention, s)
	}
	metric := func(title, unit, model, name string, value func(Node) (float64, bool)) {
		m := htmlreport.FleetMetric{Title: title, Unit: unit}
		for _, k := range f.Kinds {
			row := htmlreport.FleetRow{Name: k.GPU}
			if model != LinkModel {
				row.Name += " · model " + model
			}
			for _, n := range f.Nodes {
				if x, ok := value(n); ok && n.GPU == k.GPU {
					row.Points = append(row.Points, htmlreport.FleetPoint{Node: n.Node, Value: x, Outlier: flagged[[3]string{n.Node, model, name}], Simulated: n.Simulated != ""})
				}
			}
			if len(row.Points) > 0 {
				m.Rows = append(m.Rows, row)
			}
		}
		if len(m.Rows) > 0 {
			v.Metrics = append(v.Metrics, m)
		}
	}
	metric("host link: measured host→device over nominal ("+MetricLinkFraction+")", "fraction of the nominal rate", LinkModel, MetricLinkFraction, func(n Node) (float64, bool) {
		if n.Link == nil {
			return 0, false
		}
		return n.Link.FractionOfNominal, true
	})
	labels := map[string]bool{}
	for _, n := range f.Nodes {
		for l := range n.Models {
			labels[l] = true
		}
	}
	titles := []struct{ metric, title, unit string }{
		{MetricWakeFraction, "level-1 wake against its host link floor", "fraction of the floor (floor / measured)"},
		{MetricTPSFraction, "serving rate against the memory bandwidth's limit", "fraction of the limit (measured / limit)"},
		{MetricTPS, "serving rate (no bandwidth figure to normalise by)", "output tok/s"},
		{MetricResidual, "level-1 residual GPU memory (median of the cycles)", "GiB"},
	}
	for _, l := range sortedKeys(labels) {
		for _, m := range titles {
			metric("model "+l+": "+m.title+" ("+m.metric+")", m.unit, l, m.metric, func(n Node) (float64, bool) {
				x, ok := n.Models[l].metrics[m.metric]
				return x, ok
			})
		}
	}
	return v
}

// variantItems is one line per node that ran variants: its verdict and what it judged.
func variantItems(f Fleet) []report.ListItem {
	var items []report.ListItem
	for _, n := range f.Nodes {
		v := n.Variants
		if v == nil {
			continue
		}
		it := report.ListItem{Text: fmt.Sprintf("%s (%s%s): %s: %s against %s; %d figures judged, %d worse, %d better",
			report.Strong(n.Node), n.GPU, simLabel(n), v.Status, strings.Join(v.Variants[min(1, len(v.Variants)):], ", "), v.Reference, v.Judged, v.Worse, v.Better)}
		it.Sub = append(it.Sub, v.Failures...)
		items = append(items, it)
	}
	return items
}
