package fleetreport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/htmlreport"
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
	var md bytes.Buffer
	if err := WriteMarkdown(&md, f); err != nil {
		return fmt.Errorf("fleetreport: fleet.md: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileMD), md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("fleetreport: %w", err)
	}
	// The page last: one that cannot be drawn loses nothing else.
	return errors.Join(writeFile(filepath.Join(dir, FileBench), func(w io.Writer) error { return WriteBench(w, f) }),
		writeFile(filepath.Join(dir, FileHTML), func(w io.Writer) error { return htmlreport.WriteFleet(w, htmlView(f, md.Bytes())) }))
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

// WriteMarkdown writes fleet.md: the verdict, the nodes to look at with their reasons, and a
// section per GPU kind (its nodes' key figures, the summaries of its pooled samples).
func WriteMarkdown(w io.Writer, f Fleet) (err error) {
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	p("# Fleet report: %s\n\n", f.Status)
	p("%d nodes, %d GPU kinds.", len(f.Nodes), len(f.Kinds))
	if f.Simulated > 0 {
		p(" **Simulated**: %d of the %d nodes ran on vllmsim, not on GPU hardware (marked *simulated* below).", f.Simulated, len(f.Nodes))
	}
	p("\n\n## Nodes to look at\n\n")
	byNode := map[string][]Outlier{}
	for _, o := range f.Outliers {
		byNode[o.Node] = append(byNode[o.Node], o)
	}
	bad := 0
	for _, n := range f.Nodes {
		if n.Status == StatusPass && !n.Outlier && len(n.Notes) == 0 {
			continue
		}
		bad++
		p("- **%s** (%s%s): %s", n.Node, n.GPU, simLabel(n), n.Status)
		if n.Reason != "" {
			p(": %s", n.Reason)
		}
		p("\n")
		for _, o := range byNode[n.Node] {
			if o.Model == LinkModel {
				p("  - outlier: host link %s = %.4g (measured host→device over NVML's nominal), kind median %.4g: %s\n", o.Metric, o.Value, o.KindMedian, o.Rule)
				continue
			}
			p("  - outlier: model %s %s = %.4g, kind median %.4g: %s\n", o.Model, o.Metric, o.Value, o.KindMedian, o.Rule)
		}
		for _, note := range n.Notes {
			p("  - note: %s\n", note)
		}
	}
	if bad == 0 {
		p("None: every node passed and none is an outlier of its kind.\n")
	}
	p("\nOutlier rule: against the median of the kind's other nodes, at least %.0f%% worse (residual also ≥ %.2g GiB), and ≥ %.1f scaled MADs when the kind has ≥ %d other nodes; physical-limit fractions below %.2f (wake/PCIe) or %.2f (tok/s/HBM) for a node with at most %d other node of its kind; a host link measured below %.2f of its nominal rate on every node.\n",
		100*f.Options.RelativeDeviation, f.Options.MinResidualExcessGiB, f.Options.MADs, f.Options.MADMinOthers, f.Options.MinWakeFractionOfPCIe, f.Options.MinTPSFractionOfHBM, FloorMaxOthers, f.Options.MinLinkFractionOfNominal)

	for _, k := range f.Kinds {
		p("\n## %s\n\n%d nodes, samples pooled from %d.\n\n", k.GPU, k.Nodes, k.Pooled)
		p("| node | status | link measured / nominal | model | wake / link floor (basis) | tok/s (conc) | tok/s / HBM limit | residual GiB |\n|---|---|---|---|---|---|---|---|\n")
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
				p("| %s | %s | %s | | | | | |\n", n.Node, status, link)
			}
			for _, l := range labels {
				m := n.Models[l]
				basis := ""
				if m.PCIeBasis != "" {
					basis = " (" + m.PCIeBasis + ")"
				}
				p("| %s | %s | %s | %s | %.3f%s | %.1f (%d) | %.3f | %.3f |\n", n.Node, status, link, l, m.L1WakeFractionOfFloor, basis, m.OutputTPS, m.OutputTPSConc, m.OutputTPSFractionOfHBM, m.ResidualGiB)
			}
		}
		if len(k.Summaries) > 0 {
			p("\nPooled raw samples (every node's result lines; p95 by nearest rank over all of them):\n\n")
			p("| benchmark | unit | nodes | n | median | p95 | min | max |\n|---|---|---|---|---|---|---|---|\n")
			for _, s := range k.Summaries {
				p("| %s | %s | %d | %d | %.4g | %.4g | %.4g | %.4g |\n", s.Name, s.Unit, s.Nodes, s.N, s.Median, s.P95, s.Min, s.Max)
			}
		}
	}
	return err
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
func htmlView(f Fleet, md []byte) htmlreport.Fleet {
	v := htmlreport.Fleet{Status: f.Status, Setup: fmt.Sprintf("%d nodes, %d GPU kinds", len(f.Nodes), len(f.Kinds)), Summary: md}
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
