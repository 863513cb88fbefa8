// Package htmlreport writes report.html, a run's outputs as one page a
// person reads in a browser: self-contained (every picture inlined, no
// network), readable with JavaScript off (there is none): the verdict and
// what failed first, summary.md's tables, the memory timeline, every
// figure's distribution (each cycle, handoff and request a point), and,
// with a baseline, the regression gate's comparison per metric; and
// fleet.html, a fleet run's nodes with its outliers marked.
package htmlreport

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// Run is what report.html shows of one run.
type Run struct {
	Report report.Report
	// Timeline is timeline.svg as written; nil when there is none (no GPU
	// sample).
	Timeline []byte
	// Samples are bench.txt's result lines (report.BenchResults): every
	// sample, drawn as points, a row per name after its base.
	Samples []report.BenchLine
	// Summary is the report's summary (report.Summary), as the run built
	// it for summary.md: the page renders it, never builds another.
	Summary report.Doc
}

// Write writes r's report.html.
func Write(w io.Writer, r Run) error {
	v, err := runView(r)
	if err != nil {
		return fmt.Errorf("report.html: %w", err)
	}
	if err := pageTmpl.Execute(w, v); err != nil {
		return fmt.Errorf("report.html: %w", err)
	}
	return nil
}

// view is what the page template reads.
type view struct {
	Title     string
	Status    string
	Simulated string // "" on hardware
	Setup     string
	First     []string // what failed first: the first failure, the first failed check
	Counts    string
	Sections  []section
}

// section is one part of the page, with its anchor in the contents.
type section struct {
	ID, Title string
	Intro     string
	Body      template.HTML
}

func runView(r Run) (view, error) {
	rep := r.Report
	v := view{Title: "wakebench: " + rep.Status, Status: rep.Status}
	if rep.Simulated != nil {
		v.Simulated = "Simulated: this run's figures are vllmsim's (" + rep.Simulated.Label() + "), not a GPU's."
	}
	v.Setup = fmt.Sprintf("%s · %s · phases: %s", rep.GPU, rep.Runtime, strings.Join(rep.Phases, ", "))
	if rep.Started > 0 && rep.Finished >= rep.Started {
		v.Setup += fmt.Sprintf(" · %s, %s", record.FromUnix(rep.Started).Format("2006-01-02 15:04:05 MST"),
			(time.Duration((rep.Finished - rep.Started) * float64(time.Second))).Round(time.Second))
	}
	v.First, v.Counts = firstFailed(rep)

	// The report's summary whole (summary.md is cut to fit a CI step
	// summary), without the gate's section: the page's own below has its
	// rows, with the smallest change each could see.
	v.Sections = append(v.Sections, section{ID: "summary", Title: "Summary", Intro: "summary.md's tables (medians; the distributions below have every sample).", Body: summaryHTML(r.Summary)})
	if len(r.Timeline) > 0 {
		v.Sections = append(v.Sections, section{ID: "timeline", Title: "GPU memory over time", Intro: "timeline.svg: device memory and each model's, the phases shaded, every sleep and wake marked.",
			Body: figure(inlineSVG(r.Timeline))})
	}
	dist, err := distributions(r.Samples, v.Simulated != "")
	if err != nil {
		return v, err
	}
	if dist != "" {
		v.Sections = append(v.Sections, section{ID: "distributions", Title: "Distributions",
			Intro: "Every sample of bench.txt (each start, cycle, handoff, request, round) as a point; the black bar is the median. The tables give each row's n, median, p95, min and max (package stats: p95 by nearest rank).",
			Body:  dist})
	}
	if rep.Gate != nil {
		v.Sections = append(v.Sections, section{ID: "gate", Title: "Regression gate", Intro: gateIntro(rep.Gate, rep.Simulated != nil), Body: gateTable(rep.Gate)})
	}
	return v, nil
}

// firstFailed is what the page says first under the verdict: the first
// entry of summary.md's What failed (report.WhatFailed: the first cause,
// with its fix and the checks that failed because of it), and the first
// check that failed on its own when that entry is not one; and the counts.
func firstFailed(rep report.Report) ([]string, string) {
	var first []string
	n := map[string]int{}
	for _, c := range rep.Checks {
		n[c.Verdict]++
	}
	causes := report.WhatFailed(rep)
	if len(causes) > 0 {
		c := causes[0]
		if c.Check != nil {
			first = append(first, "Check: "+c.Check.String()+reasonOf(*c.Check))
		} else {
			where := c.First.Where(" / ")
			first = append(first, fmt.Sprintf("Failure (%s): %s", where, strings.TrimPrefix(c.String(), where+": ")))
		}
		if c.Fix != "" {
			first = append(first, "Fix: "+c.Fix)
		}
		if s := c.Consequences(); s != "" {
			first = append(first, strings.ToUpper(s[:1])+s[1:])
		}
		if c.Check == nil {
			for _, o := range causes[1:] {
				if o.Check != nil {
					first = append(first, "Check: "+o.Check.String()+reasonOf(*o.Check))
					break
				}
			}
		}
	}
	counts := fmt.Sprintf("%d checks: %d PASS, %d FAIL, %d NOT EVALUATED; %d failures", len(rep.Checks), n["PASS"], n["FAIL"], n[record.NotEvaluated], len(rep.Failures))
	return first, counts
}

func reasonOf(c record.Check) string {
	if c.Reason == "" {
		return ""
	}
	return " (" + c.Reason + ")"
}

// summaryHTML renders a summary (report.Doc, the model summary.md is
// written from) as HTML, without its verdict heading and the setup line
// under it, which the page's header says, and without the regression
// gate's section, which the page has its own of: its text is text (an
// error's "<nil>" is escaped, never markup), its headings under the
// page's own section heading, every table in a box that scrolls sideways.
func summaryHTML(d report.Doc) template.HTML {
	blocks := d.Blocks
	if len(blocks) >= 2 && blocks[0].Kind == report.Heading && blocks[0].Level == 1 && blocks[1].Kind == report.Paragraph {
		blocks = blocks[2:]
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Section == report.SectionGate {
			continue
		}
		switch bl.Kind {
		case report.Heading:
			b.WriteString("<h3>" + inline(bl.Text) + "</h3>\n")
		case report.Paragraph:
			b.WriteString("<p>" + inline(bl.Text) + "</p>\n")
		case report.List:
			b.WriteString("<ul>\n")
			for _, it := range bl.Items {
				b.WriteString("<li>" + inline(it.Text))
				if len(it.Sub) > 0 {
					b.WriteString("\n<ul>\n")
					for _, sub := range it.Sub {
						b.WriteString("<li>" + inline(sub) + "</li>\n")
					}
					b.WriteString("</ul>\n")
				}
				b.WriteString("</li>\n")
			}
			b.WriteString("</ul>\n")
		case report.Table:
			b.WriteString(`<div class="scroll"><table>` + "\n<thead>\n<tr>")
			for _, h := range bl.Header {
				b.WriteString("<th>" + inline(h) + "</th>")
			}
			b.WriteString("</tr>\n</thead>\n<tbody>\n")
			for _, r := range bl.Rows {
				b.WriteString("<tr>")
				for _, c := range r {
					b.WriteString("<td>" + inline(c) + "</td>")
				}
				b.WriteString("</tr>\n")
			}
			b.WriteString("</tbody>\n</table></div>\n")
		}
	}
	return template.HTML(b.String())
}

// inline is a summary's text in HTML: escaped, its spans (report.Strong,
// Code, Em) as their elements.
func inline(text string) string {
	return report.Inline(text, template.HTMLEscapeString,
		func(kind string) string { return "<" + kind + ">" }, func(kind string) string { return "</" + kind + ">" })
}

// figure is an inlined picture in a box of the page's width.
func figure(svg []byte) template.HTML {
	return template.HTML(`<div class="figure">` + string(svg) + `</div>`)
}

// group is one benchmark × unit of bench.txt: a strip plot.
type group struct {
	bench, unit string
	rows        []Row
	index       map[string]int
}

// distributions draws every benchmark × unit of samples as a strip plot,
// a row per sub-benchmark (model=A/level=1), with a table of each row's
// summary under it.
func distributions(samples []report.BenchLine, simulated bool) (template.HTML, error) {
	var groups []*group
	byKey := map[string]*group{}
	for _, r := range samples {
		base, sub := r.Name.Base, r.Name.Sub()
		if sub == "" {
			sub = base
		}
		for _, val := range r.Result.Values {
			k := base + "\x00" + val.Unit
			g := byKey[k]
			if g == nil {
				g = &group{bench: base, unit: val.Unit, index: map[string]int{}}
				byKey[k] = g
				groups = append(groups, g)
			}
			i, ok := g.index[sub]
			if !ok {
				i = len(g.rows)
				g.index[sub] = i
				g.rows = append(g.rows, Row{Name: sub})
			}
			g.rows[i].Values = append(g.rows[i].Values, val.Value)
		}
	}
	// By benchmark (in order of first appearance), then unit: one heading
	// per benchmark.
	order := map[string]int{}
	for _, g := range groups {
		if _, ok := order[g.bench]; !ok {
			order[g.bench] = len(order)
		}
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return order[a.bench] - order[b.bench] })
	var b strings.Builder
	sim := ""
	if simulated {
		sim = " (simulated)"
	}
	last := ""
	for _, g := range groups {
		if g.bench != last {
			fmt.Fprintf(&b, "<h3 id=%q>%s</h3>\n", "dist-"+g.bench, esc(g.bench))
			last = g.bench
		}
		if !anyFinite(g.rows) {
			fmt.Fprintf(&b, "<p>%s · %s: no sample is a number (%d samples), nothing to draw.</p>\n", esc(g.bench), esc(g.unit), countSamples(g.rows))
			continue
		}
		rows := summarize(g.rows)
		svg, err := stripSVG(g.bench+" · "+g.unit+sim, unitLabel(g.unit), rows)
		if err != nil {
			return "", err
		}
		b.WriteString(string(figure(svg)))
		b.WriteString(`<div class="scroll"><table class="num"><thead><tr><th>` + esc(g.bench) + `</th><th>unit</th><th>n</th><th>median</th><th>p95</th><th>min</th><th>max</th></tr></thead><tbody>`)
		for _, r := range rows {
			if !r.ok {
				continue
			}
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
				esc(r.Name), esc(g.unit), r.N, Num(r.Median), Num(r.P95), Num(r.Min), Num(r.Max))
		}
		b.WriteString("</tbody></table></div>\n")
	}
	return template.HTML(b.String()), nil
}

func anyFinite(rows []Row) bool {
	for _, r := range rows {
		if len(finite(r.Values)) > 0 {
			return true
		}
	}
	return false
}

func countSamples(rows []Row) int {
	n := 0
	for _, r := range rows {
		n += len(r.Values)
	}
	return n
}

// Num is a figure as the page writes it: four significant digits.
func Num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "—"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

func gateIntro(g *record.Gate, simulated bool) string {
	s := fmt.Sprintf("This run against %d baseline run(s) from %s: a regression is worse by more than %g %% and significant at %g by the metric's rule. "+
		"\"Smallest change\" is the least worse change the rule would flag at these runs' noise (its power).",
		len(g.Runs), g.Baseline, g.TolerancePct, g.Alpha)
	switch n := len(g.SimulatedRuns); {
	case n == len(g.Runs) && n > 0:
		s += " The baseline runs are simulated (vllmsim)."
	case n > 0:
		s += fmt.Sprintf(" %d of the baseline runs are simulated (vllmsim): %s.", n, strings.Join(g.SimulatedRuns, ", "))
	case simulated && len(g.Runs) > 0:
		s += " The baseline runs are not simulated: this simulated run is compared with runs on hardware."
	}
	if g.Error != "" {
		s += " The gate judged nothing: " + g.Error
	}
	return s
}

// gateTable is the gate's comparison, a row per metric, regressions first.
func gateTable(g *record.Gate) template.HTML {
	var b strings.Builder
	b.WriteString(`<div class="scroll"><table class="num"><thead><tr><th>metric</th><th>unit</th><th>rule</th><th>runs</th><th>baseline</th><th>this run</th><th>change</th><th>smallest change it could see</th><th>verdict</th></tr></thead><tbody>`)
	rows := append([]record.GateRow(nil), g.Rows...)
	for pass := range 2 {
		for _, r := range rows {
			if r.Regression != (pass == 0) {
				continue
			}
			verdict, class := "no regression", ""
			switch {
			case r.Regression:
				verdict, class = "REGRESSION", ` class="fail"`
			case !r.Gated:
				verdict = "not gated"
			}
			if r.Why != "" {
				verdict += ": " + r.Why
			}
			if len(r.ChangePoints) > 0 {
				verdict += "; change points in the baseline: " + strings.Join(r.ChangePoints, ", ")
			}
			minc := "—"
			if r.Gated {
				minc = fmt.Sprintf("%s %% (%s)", Num(r.MinChangePct), Num(r.MinChange))
			}
			cur, change := Num(r.ThisRun), fmt.Sprintf("%+.1f %%", r.ChangePct)
			if r.Rule == gate.RuleMissing { // no figure in this run (the record holds 0: JSON has no NaN)
				cur, change, verdict = "—", "—", "missing in this run"
			}
			fmt.Fprintf(&b, "<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
				class, esc(r.Metric), esc(r.Unit), esc(r.Rule), r.Runs, Num(r.Baseline), cur, change, esc(minc), esc(verdict))
		}
	}
	b.WriteString("</tbody></table></div>")
	return template.HTML(b.String())
}

func esc(s string) string { return template.HTMLEscapeString(s) }
