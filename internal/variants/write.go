package variants

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/cireport"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/htmlreport"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// Comparison is a variant run's result: its plan, each run's outcome and
// every variant's metrics against the reference's (comparison.json).
type Comparison struct {
	Status    string   `json:"status"` // PASS or FAIL
	Reference string   `json:"reference"`
	Variants  []string `json:"variants"` // every variant, the reference first
	// Definitions are the variants as the config gives them: what each
	// changes of the run's own config.
	Definitions  []config.Variant `json:"definitions"`
	Order        string           `json:"order"`
	Seed         int              `json:"seed"`
	Blocks       []Block          `json:"blocks"`
	TolerancePct float64          `json:"tolerance_pct"`
	Alpha        float64          `json:"alpha"`
	// Gated: a variant worse than the reference fails the comparison
	// (protocol.variant_gate); else its worse figures are shown, not failed.
	Gated bool `json:"gated"`
	// Focus is protocol.variant_focus: the figures the question is about,
	// the family judged and gated ([]: every figure).
	Focus []string `json:"focus"`
	// BlockFigure is protocol.variant_block_figure: a block's figure of a
	// metric is its samples' median or its best sample.
	BlockFigure string `json:"block_figure"`
	// Simulated labels the runs of vllmsim: every figure simulated, or
	// which variants' runs are.
	Simulated string   `json:"simulated,omitempty"`
	Runs      []Result `json:"runs"`
	Metrics   []Metric `json:"metrics"`
	// Failures say why the status is FAIL: a run that failed, a variant
	// worse than the reference, a variant with too few metrics judged.
	Failures []string `json:"failures"` // none: []

	bench []*benchfmt.Result       // every run's results, with its variant: key (bench.txt)
	units []*benchfmt.UnitMetadata // their units' metadata, once each
}

// Compare reads each run's bench.txt and judges every variant against the
// reference (the first variant): per metric the blocks' paired ratios,
// Benjamini-Hochberg over each variant's metrics, at the regression gate's
// tolerance and alpha. Every run that wrote its bench.txt is paired, one
// that failed a threshold too; one that wrote none (killed, cut short)
// gives its block no pair for that variant. The comparison FAILs on a run
// that failed, a variant with fewer metrics judged than
// thresholds.regression_min_judged, and a variant worse than the reference
// beyond the tolerance.
func Compare(cfg config.Config, runs []Result) Comparison {
	names := cfg.VariantNames()
	c := Comparison{Status: "PASS", Reference: names[0], Variants: names, Definitions: masked(cfg.Variants), Order: cfg.Protocol.VariantOrder,
		Seed: cfg.Protocol.VariantSeed, Blocks: Plan(cfg), TolerancePct: cfg.Thresholds.RegressionPercent,
		Alpha: cfg.Thresholds.RegressionAlpha, Gated: cfg.Protocol.VariantGate, Focus: append([]string{}, cfg.Protocol.VariantFocus...), BlockFigure: cfg.Protocol.VariantBlockFigure, Runs: runs, Failures: []string{}}
	blocks := make([]map[string]gate.Bench, len(c.Blocks))
	for i := range blocks {
		blocks[i] = map[string]gate.Bench{}
	}
	seen := map[benchfmt.UnitMetadataKey]bool{}
	simulated, real := map[string]string{}, []string(nil)
	for _, r := range runs {
		switch {
		case r.Status == "NOT RUN":
		case r.Simulated != nil:
			simulated[r.Variant] = r.Simulated.Label()
		default:
			real = append(real, r.Variant)
		}
		if r.Status != "PASS" {
			c.Failures = append(c.Failures, fmt.Sprintf("block %d, variant %s: %s: %s", r.Block, r.Variant, r.Status, cmp.Or(r.Error, "see "+filepath.Join(r.Dir, "go-test.log"))))
		}
		if r.Status == "NOT RUN" {
			continue
		}
		// Every run that wrote its bench.txt is paired, a run that failed a
		// threshold too (the change may be what failed it); a run killed
		// or cut short before its end wrote none.
		b, units, results, err := readBench(filepath.Join(r.Dir, "bench.txt"), r.Variant)
		if err != nil {
			c.Failures = append(c.Failures, fmt.Sprintf("block %d, variant %s: %v: its block has no pair for it", r.Block, r.Variant, err))
			continue
		}
		blocks[r.Block-1][r.Variant] = b
		for _, u := range units {
			if !seen[u.UnitMetadataKey] {
				seen[u.UnitMetadataKey] = true
				c.units = append(c.units, u)
			}
		}
		c.bench = append(c.bench, results...)
	}
	c.Simulated = simulatedLabel(simulated, real)
	var focus func(name, unit string) bool // nil: every figure one family
	if len(cfg.Protocol.VariantFocus) > 0 {
		focus = cfg.Protocol.InVariantFocus
	}
	c.Metrics = compare(c.Reference, names[1:], blocks, c.BlockFigure, c.TolerancePct, c.Alpha, focus)
	for _, v := range names[1:] {
		judged, focused := 0, 0
		for _, m := range c.Metrics {
			if m.Variant != v {
				continue
			}
			if m.Verdict != NotJudge {
				judged++
				if m.Focus {
					focused++
				}
			}
			if m.Verdict == Worse && c.Gated && m.Focus {
				c.Failures = append(c.Failures, fmt.Sprintf("variant %s: %s %s is %+.1f %% against %s (interval %+.1f to %+.1f %%), beyond ±%g %%",
					v, m.Name, m.Unit, m.DeltaPct, c.Reference, m.LoPct, m.HiPct, c.TolerancePct))
			}
		}
		if judged < cfg.Thresholds.RegressionMinJudged {
			c.Failures = append(c.Failures, fmt.Sprintf("variant %s: %d metric(s) judged against %s, fewer than thresholds.regression_min_judged (%d): no verdict",
				v, judged, c.Reference, cfg.Thresholds.RegressionMinJudged))
		}
		if len(c.Focus) > 0 && focused == 0 {
			c.Failures = append(c.Failures, fmt.Sprintf("variant %s: no figure of protocol.variant_focus (%s) was judged against %s: the question was not answered (a pattern that names no bench.txt figure, or a phase that did not run)",
				v, strings.Join(c.Focus, ", "), c.Reference))
		} else {
			for _, f := range unmatched(c.Focus, c.Metrics, v) {
				c.Failures = append(c.Failures, fmt.Sprintf("variant %s: protocol.variant_focus entry %q names no figure judged against %s (a typo, or a phase that did not run): part of the question was not answered", v, f, c.Reference))
			}
		}
	}
	if len(c.Failures) > 0 {
		c.Status = "FAIL"
	}
	return c
}

// readBench reads a run's bench.txt: what the comparison judges, its
// units' metadata and its results as the merged bench.txt writes them,
// under a `variant:` config key. A config key whose value is not the
// same in every run would split benchstat's tables (its -table is every
// config key by default), so only the run's own keys that every run shares
// are kept: Write drops the rest (the runtime of another vLLM, say), which
// comparison.json keeps per run.
func readBench(path, variant string) (gate.Bench, []*benchfmt.UnitMetadata, []*benchfmt.Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return gate.Bench{}, nil, nil, fmt.Errorf("its bench.txt: %w", err)
	}
	var units []*benchfmt.UnitMetadata
	var results []*benchfmt.Result
	var lines []report.BenchLine // results with their names' fields, for the comparison
	var errs []error
	rd := benchfmt.NewReader(bytes.NewReader(data), path)
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			errs = append(errs, rec)
		case *benchfmt.UnitMetadata:
			u := *rec
			units = append(units, &u)
		case *benchfmt.Result:
			// A new Result, not an edited one: a Result indexes its config.
			res := rec.Clone()
			cfg := append([]benchfmt.Config{{Key: "variant", Value: []byte(variant), File: true}}, res.Config...)
			r := &benchfmt.Result{Config: cfg, Name: res.Name, Iters: res.Iters, Values: res.Values}
			results = append(results, r)
			// The file's names, split once where it is read, as the gate reads a baseline's.
			lines = append(lines, report.BenchLine{Name: gate.FileName(res.Name), Result: r})
		}
	}
	// What the comparison judges is built from the same records, read once.
	return gate.BenchOf(units, lines), units, results, errors.Join(append(errs, rd.Err())...)
}

// WriteBench writes the merged bench.txt: the units' metadata once, then
// every run's results under `variant:`, the reference's first, with only the config keys every
// run has alike (see readBench), so `benchstat -col variant` compares them.
func (c Comparison) WriteBench(w io.Writer) error {
	shared := map[string]string{}
	drop := map[string]bool{}
	for _, r := range c.bench {
		for _, cf := range r.Config {
			if cf.Key == "variant" || drop[cf.Key] {
				continue
			}
			if v, ok := shared[cf.Key]; ok && v != string(cf.Value) {
				drop[cf.Key] = true
				continue
			}
			shared[cf.Key] = string(cf.Value)
		}
	}
	bw := benchfmt.NewWriter(w)
	for _, u := range c.units {
		if err := bw.Write(u); err != nil {
			return err
		}
	}
	// The reference's results first, so benchstat makes it the base
	// column: a column's place is where its value first appears.
	rank := func(r *benchfmt.Result) int { return slices.Index(c.Variants, r.GetConfig("variant")) }
	ordered := slices.Clone(c.bench)
	slices.SortStableFunc(ordered, func(a, b *benchfmt.Result) int { return rank(a) - rank(b) })
	for _, r := range ordered {
		cfg := slices.DeleteFunc(slices.Clone(r.Config), func(cf benchfmt.Config) bool { return drop[cf.Key] })
		if err := bw.Write(&benchfmt.Result{Config: cfg, Name: r.Name, Iters: r.Iters, Values: r.Values}); err != nil {
			return err
		}
	}
	return nil
}

// Summary is the comparison as one table model (summary.md): the
// verdict and its reasons, the runs, and per variant its metrics against
// the reference's, the worse and better first.
func (c Comparison) Summary() report.Doc {
	var d report.Doc
	d.Heading(1, "", "Variant run: "+c.Status)
	intro := fmt.Sprintf("%d blocks of %d variants on one GPU, %s order (seed %d); reference %s; a change is judged beyond ±%g %% and significant at α %g (paired t over the blocks, Benjamini-Hochberg over each variant's metrics).",
		len(c.Blocks), len(c.Variants), c.Order, c.Seed, report.Code(c.Reference), c.TolerancePct, c.Alpha)
	if len(c.Focus) > 0 {
		gated := "and gated"
		if !c.Gated {
			gated = "(not gated either: below)"
		}
		intro += fmt.Sprintf(" The question's figures, stated before the run (`protocol.variant_focus`: %s), are one family %s; the others are judged in a family of their own and shown, not failed.", report.Code(strings.Join(c.Focus, ", ")), gated)
	}
	if c.BlockFigure == "best" {
		intro += " A block's figure of a time or a rate is its best sample (`protocol.variant_block_figure`: the fastest time, the highest rate), not its median; of any other unit, its median."
	}
	if !c.Gated {
		intro += " Not gated (`protocol.variant_gate` false): a variant's worse figures are shown, not failed; only a run that failed fails it."
	}
	if c.Simulated != "" {
		intro += " " + report.Strong(c.Simulated) + "."
	}
	d.Para(intro)
	if len(c.Failures) > 0 {
		items := make([]report.ListItem, len(c.Failures))
		for i, f := range c.Failures {
			items[i] = report.ListItem{Text: f}
		}
		d.List(items...)
	}
	d.Heading(2, "variants", "Variants")
	var defs [][]string
	for _, v := range c.Definitions {
		defs = append(defs, []string{v.Name, Describe(v)})
	}
	d.Table([]string{"variant", "runs the config with"}, defs)
	d.Heading(2, "runs", "Runs")
	var rows [][]string
	gated := slices.ContainsFunc(c.Runs, func(r Result) bool { return r.Gate != "" })
	for _, r := range c.Runs {
		row := []string{fmt.Sprint(r.Block), r.Variant, r.Status, fmt.Sprintf("%.1f", r.Seconds), r.Runtime, report.Code(r.Dir)}
		if gated {
			row = append(row, r.Gate)
		}
		rows = append(rows, row)
	}
	head := []string{"block", "variant", "status", "s", "runtime", "outputs"}
	if gated { // with a baseline history as well: each run's own verdict against it
		head = append(head, "against the baseline")
	}
	d.Table(head, rows)
	for _, v := range c.Variants[1:] {
		d.Heading(2, "variant", fmt.Sprintf("%s against %s", v, c.Reference))
		var ms []Metric
		for _, m := range c.Metrics {
			if m.Variant == v {
				ms = append(ms, m)
			}
		}
		rank := func(m Metric) int { // the gated worse and better first, then the shown ones
			r := map[string]int{Worse: 0, Better: 1, Same: 4, NotJudge: 5}[m.Verdict]
			if !m.Focus && r < 2 {
				r += 2
			}
			return r
		}
		slices.SortStableFunc(ms, func(a, b Metric) int { return rank(a) - rank(b) })
		var rows [][]string
		for _, m := range ms {
			verdict := m.Verdict
			if !m.Focus && m.Verdict != NotJudge {
				verdict += " (not gated)"
			}
			rows = append(rows, []string{m.Name, m.Unit, num(m.Ref), num(m.Var), pct(m.DeltaPct), interval(m), fmt.Sprint(m.Blocks), verdict, detect(m)})
		}
		d.Table([]string{"metric", "unit", c.Reference, v, "Δ %", "interval", "blocks", "verdict", "caught 8 times in 10"}, rows)
	}
	return d
}

// Describe is what v changes of the run's config, in the config's own
// keys: "command /opt/vllm-0.33/bin/vllm; extra_args --enforce-eager;
// set protocol.switch_level=2", or that it changes nothing; a secret's
// value is not shown (secretName).
func Describe(v config.Variant) string {
	var parts []string
	if v.Command != "" {
		parts = append(parts, "command "+report.Code(v.Command))
	}
	if v.SimEra != "" {
		parts = append(parts, "sim_era "+report.Code(v.SimEra))
	}
	if len(v.ExtraArgs) > 0 {
		parts = append(parts, "extra_args "+report.Code(strings.Join(v.ExtraArgs, " ")))
	}
	for _, k := range slices.Sorted(maps.Keys(v.Env)) {
		val := v.Env[k]
		if secretName(k) {
			val = "(not shown)"
		}
		parts = append(parts, "env "+report.Code(k+"="+val))
	}
	for _, k := range slices.Sorted(maps.Keys(v.Set)) {
		parts = append(parts, "set "+report.Code(k+"="+string(v.Set[k])))
	}
	if len(parts) == 0 {
		return "the run's own settings"
	}
	return strings.Join(parts, "; ")
}

// masked are the variants as the comparison writes them: each env value
// whose name looks like a secret's replaced (secretName).
func masked(vs []config.Variant) []config.Variant {
	out := slices.Clone(vs)
	for i, v := range out {
		if len(v.Env) == 0 {
			continue
		}
		env := maps.Clone(v.Env)
		for k := range env {
			if secretName(k) {
				env[k] = "(not shown)"
			}
		}
		out[i].Env = env
	}
	return out
}

// secretName says whether an environment variable's name looks like a
// secret's (HF_TOKEN, AWS_SECRET_ACCESS_KEY, VLLM_API_KEY, …): its value
// is not written into the comparison.
func secretName(k string) bool {
	u := strings.ToUpper(k)
	for _, s := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL"} {
		if strings.Contains(u, s) {
			return true
		}
	}
	return false
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.4g", x)
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%+.1f", x)
}

func interval(m Metric) string {
	if math.IsNaN(m.LoPct) {
		return "—"
	}
	return fmt.Sprintf("%+.1f to %+.1f", m.LoPct, m.HiPct)
}

// detect says what the metric's blocks can see: the smallest worse
// change they flag PowerLevel of the time (Metric.DetectPct).
func detect(m Metric) string {
	if m.Verdict == NotJudge {
		return m.Why
	}
	return fmt.Sprintf("%.1f %% worse, with %d blocks", m.DetectPct, m.Blocks)
}

// checks are the comparison's verdicts as checks, for JUnit and CTRF: one
// per variant and judged metric (its change beyond the tolerance fails),
// the variant as the model.
func (c Comparison) checks() []record.Check {
	var out []record.Check
	for _, m := range c.Metrics {
		why := m.Why
		if m.Verdict == Same && math.Abs(m.WorsePct()) > c.TolerancePct {
			why = fmt.Sprintf("beyond ±%g %% but not significant (p %.3g; %s)", c.TolerancePct, m.P, m.Why)
		}
		ch := record.Check{Name: "variant." + m.Name + "." + m.Unit, Model: m.Variant, Value: m.WorsePct(), Op: "<=", Limit: c.TolerancePct, Verdict: "PASS",
			Reason: fmt.Sprintf("%s %s against %s: %s %% (interval %s), %s", m.Variant, m.Verdict, c.Reference, pct(m.DeltaPct), interval(m), why)}
		switch m.Verdict {
		case Worse:
			ch.Verdict = "FAIL"
			switch {
			case !c.Gated:
				ch.Verdict, ch.Reason = "PASS", ch.Reason+" (not gated: protocol.variant_gate is false)"
			case !m.Focus:
				ch.Verdict, ch.Reason = "PASS", ch.Reason+" (not gated: outside protocol.variant_focus)"
			}
		case NotJudge:
			ch.Verdict, ch.Value = record.NotEvaluated, math.NaN()
		}
		out = append(out, ch)
	}
	return out
}

// Write writes the comparison into dir: comparison.json, summary.md,
// bench.txt (merged, WriteBench), report.html, checks.junit.xml and
// ctrf.json. Every
// file is written that can be; the error names those that could not.
func (c Comparison) Write(dir string) error {
	rep := report.Report{Status: c.Status, Checks: c.checks(), GPU: "see each run's report.json", Runtime: runtimes(c.Runs)}
	if strings.HasPrefix(c.Simulated, "simulated: every figure") { // JUnit and CTRF label it as a run's
		for _, r := range c.Runs {
			if r.Simulated != nil {
				rep.Simulated = r.Simulated
				break
			}
		}
	}
	for _, f := range c.Failures {
		rep.Failures = append(rep.Failures, record.Failure{Phase: "variants", Error: f})
	}
	var errs []error
	for _, o := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"summary.md", func(w io.Writer) error { _, err := io.WriteString(w, c.Summary().Markdown()); return err }},
		{ComparisonFile, func(w io.Writer) error {
			e := json.NewEncoder(w)
			e.SetIndent("", "  ")
			return e.Encode(c)
		}},
		{"bench.txt", c.WriteBench},
		{"report.html", func(w io.Writer) error { return htmlreport.WriteComparison(w, c.htmlView()) }},
		{"checks.junit.xml", func(w io.Writer) error { return cireport.WriteJUnit(w, rep) }},
		{"ctrf.json", func(w io.Writer) error { return cireport.WriteCTRF(w, rep) }},
	} {
		errs = append(errs, report.WriteFile(filepath.Join(dir, o.name), o.write))
	}
	return errors.Join(errs...)
}

func runtimes(rs []Result) string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		if r.Runtime != "" && !seen[r.Variant+r.Runtime] {
			seen[r.Variant+r.Runtime] = true
			out = append(out, r.Variant+": "+r.Runtime)
		}
	}
	return strings.Join(out, "; ")
}

// pagedFigures is how many figures of a variant report.html draws: the
// flagged ones and those that moved most.
const pagedFigures = 12

// htmlView is what report.html shows of c: its summary, and for each
// variant the figures flagged or moved most, a point per block.
func (c Comparison) htmlView() htmlreport.Comparison {
	v := htmlreport.Comparison{Status: c.Status, Attention: c.Failures, Summary: c.Summary(), BlockFigure: "median",
		Setup: fmt.Sprintf("%d blocks of %d variants on one GPU, %s order (seed %d) · reference %s", len(c.Blocks), len(c.Variants), c.Order, c.Seed, c.Reference)}
	if c.BlockFigure == "best" {
		v.BlockFigure = "fastest time or highest rate (its median for other units)"
	}
	if c.Simulated != "" {
		v.Simulated = "S" + strings.TrimPrefix(c.Simulated, "s") + ", not a GPU's."
	}
	for _, name := range c.Variants[1:] {
		var ms []Metric
		for _, m := range c.Metrics {
			if m.Variant == name && m.Verdict != NotJudge {
				ms = append(ms, m)
			}
		}
		flagged := func(m Metric) bool { return m.Focus && (m.Verdict == Worse || m.Verdict == Better) }
		slices.SortStableFunc(ms, func(a, b Metric) int {
			if fa, fb := flagged(a), flagged(b); fa != fb {
				if fa {
					return -1
				}
				return 1
			}
			return cmp.Compare(math.Abs(b.DeltaPct), math.Abs(a.DeltaPct))
		})
		cv := htmlreport.ComparisonVariant{Title: name + " against " + c.Reference}
		for _, m := range ms[:min(len(ms), pagedFigures)] {
			r := htmlreport.ComparisonRow{Name: m.Name + " " + m.Unit, Flagged: flagged(m)}
			for _, x := range m.Ratios {
				r.BlockPct = append(r.BlockPct, 100*(x-1))
			}
			cv.Rows = append(cv.Rows, r)
		}
		v.Variants = append(v.Variants, cv)
	}
	return v
}

// simulatedLabel says which runs were vllmsim's: "" when none; every
// figure when all were (with vllmsim's label when they share one); else
// which variants' runs were (a vllmsim reference against a real vLLM
// compares a model with a GPU).
func simulatedLabel(simulated map[string]string, real []string) string {
	if len(simulated) == 0 {
		return ""
	}
	labels := slices.Sorted(maps.Values(simulated))
	if len(real) == 0 {
		if labels = slices.Compact(labels); len(labels) == 1 {
			return "simulated: every figure is vllmsim's (" + labels[0] + ")"
		}
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(simulated)) {
		parts = append(parts, v+" ("+simulated[v]+")")
	}
	if len(real) == 0 {
		return "simulated: every figure is vllmsim's: " + strings.Join(parts, "; ")
	}
	slices.Sort(real)
	return "simulated: the runs of " + strings.Join(parts, "; ") + " are vllmsim's, those of " + strings.Join(slices.Compact(real), ", ") + " are not"
}

// unmatched are the focus entries that match no judged figure of variant v.
func unmatched(focus []string, ms []Metric, v string) []string {
	var out []string
	for _, f := range focus {
		p := config.Protocol{VariantFocus: []string{f}}
		if !slices.ContainsFunc(ms, func(m Metric) bool {
			return m.Variant == v && m.Verdict != NotJudge && p.InVariantFocus(m.Name, m.Unit)
		}) {
			out = append(out, f)
		}
	}
	return out
}

// ComparisonFile is the comparison's name in a variant run's out_dir.
const ComparisonFile = "comparison.json"

// ReferenceRun is the folder of the reference variant's first run (in
// block order) that passed, else its first that wrote a report.json, from
// a variant run's comparison.json (comparison) in outDir: the run a fleet
// node reports its figures and samples from. An error says why there is
// none.
func ReferenceRun(outDir string, comparison []byte) (string, error) {
	var c struct {
		Reference string   `json:"reference"`
		Runs      []Result `json:"runs"`
	}
	if err := json.Unmarshal(comparison, &c); err != nil {
		return "", fmt.Errorf("%s: %w", ComparisonFile, err)
	}
	runs := slices.Clone(c.Runs)
	slices.SortStableFunc(runs, func(a, b Result) int { return a.Block - b.Block })
	first := ""
	for _, r := range runs {
		if r.Variant != c.Reference {
			continue
		}
		dir := RunDir(outDir, r.Variant, r.Block)
		if _, err := os.Stat(filepath.Join(dir, "report.json")); err != nil {
			continue
		}
		if r.Status == "PASS" {
			return dir, nil
		}
		if first == "" {
			first = dir
		}
	}
	if first != "" {
		return first, nil
	}
	return "", fmt.Errorf("%s: no run of the reference variant %q wrote a report.json", ComparisonFile, c.Reference)
}
