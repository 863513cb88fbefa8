package htmlreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// testRun is a real run's outputs (make bench on vllmsim's demo profile,
// testdata/): its report.json, timeline.svg and bench.txt.
func testRun(t testing.TB) Run {
	t.Helper()
	var r Run
	b, err := os.ReadFile("testdata/report.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &r.Report))
	r.Timeline, err = os.ReadFile("testdata/timeline.svg")
	require.NoError(t, err)
	f, err := os.Open("testdata/bench.txt")
	require.NoError(t, err)
	defer f.Close()
	rd := benchfmt.NewReader(f, "bench.txt")
	for rd.Scan() {
		if res, ok := rd.Result().(*benchfmt.Result); ok {
			r.Samples = append(r.Samples, lines([]*benchfmt.Result{res.Clone()})...)
		}
	}
	require.NoError(t, rd.Err())
	return r
}

// failedRun is testRun turned into a FAIL with a regression gate: a
// failure, a failed check, a gate row flagged and one not.
func failedRun(t testing.TB) Run {
	r := testRun(t)
	r.Report.Status = "FAIL"
	r.Report.Failures = append(r.Report.Failures, record.Failure{Phase: "sleep-level1", Model: "B", Step: "wake", Error: "POST /wake_up: context deadline exceeded after 120 s"})
	r.Report.Checks = append(r.Report.Checks, record.Check{Name: "sleep.level1.wake_to_first_token_s", Model: "B", Value: 130.5, Op: "<=", Limit: 30, Verdict: "FAIL"})
	r.Report.Gate = &record.Gate{Baseline: "out/baseline", Runs: []string{"runs/1/bench.txt", "runs/2/bench.txt"}, TolerancePct: 10, Alpha: 0.05,
		Rows: []record.GateRow{
			{Metric: "Sleep/model=A/level=1", Unit: "sec/wake", Rule: "u-test", Runs: 2, Baseline: 0.0969, ThisRun: 0.1453, ChangePct: 49.9, MinChange: 0.012, MinChangePct: 12.4, Regression: true, Gated: true},
			{Metric: "Serve/model=B/stage=baseline/conc=1", Unit: "tok/s", Rule: "noise floor", Runs: 2, Baseline: 812, ThisRun: 808, ChangePct: -0.5, MinChange: 40, MinChangePct: 4.9, Gated: true},
		}}
	return r
}

// render is r's page, with its report's summary as the run builds it.
func render(t testing.TB, r Run) string {
	t.Helper()
	r.Summary = report.Summary(r.Report)
	var b bytes.Buffer
	require.NoError(t, Write(&b, r))
	return b.String()
}

// TestPageIsSelfContained: one file with no script and nothing fetched
// (no URL in a src, an href outside the page, a CSS url()), every sample
// of bench.txt a point, the simulated label, and the summary's tables.
func TestPageIsSelfContained(t *testing.T) {
	r := testRun(t)
	page := render(t, r)
	assert.NotContains(t, strings.ToLower(page), "<script")
	assert.NotRegexp(t, `(?i)\bsrc\s*=`, page, "nothing is loaded from anywhere")
	assert.NotRegexp(t, `(?i)url\(`, page)
	for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		assert.True(t, strings.HasPrefix(m[1], "#"), "link %q leaves the page", m[1])
	}
	assert.Contains(t, page, `id="simulated"`)
	assert.Contains(t, page, "vllmsim profile demo, time scale 0.1")

	// Every value of bench.txt is one circle in its group's strip plot.
	values := 0
	for _, s := range r.Samples {
		values += len(s.Result.Values)
	}
	assert.Equal(t, values, points(page), "a point per sample")

	// summary.md's tables are the page's: as many as it has, each in its box.
	md := report.Summary(r.Report).Markdown()
	mdTables := strings.Count(md, "\n|---") + strings.Count(md, "\n| ---") + strings.Count(md, "\n|:--")
	require.Positive(t, mdTables)
	summary := page[strings.Index(page, `<section id="summary">`):strings.Index(page, `<section id="timeline">`)]
	assert.Equal(t, mdTables, strings.Count(summary, `<div class="scroll"><table>`))
}

// points is how many sample points the page's distributions draw (each a
// path filled with the points' colour).
func points(page string) int {
	i := strings.Index(page, `<section id="distributions">`)
	if i < 0 {
		return 0
	}
	d := page[i:]
	if j := strings.Index(d, "</section>"); j >= 0 {
		d = d[:j]
	}
	return strings.Count(d, "fill:#1E76B3;") // pointColor as vgsvg writes it (un-premultiplied from 8 bits)
}

// TestWhatFailedFirst: the page's header names the first failure and the
// first failed check, before any table; a passing run has no such box.
func TestWhatFailedFirst(t *testing.T) {
	page := render(t, failedRun(t))
	first := page[strings.Index(page, `id="first-failed"`):]
	first = first[:strings.Index(first, "</div>")]
	assert.Contains(t, first, "Failure (sleep-level1 / B / wake): POST /wake_up: context deadline exceeded after 120 s")
	assert.Contains(t, first, "sleep.level1.wake_to_first_token_s (model B) = 130.5, limit &lt;= 30: FAIL")
	assert.Less(t, strings.Index(page, `id="first-failed"`), strings.Index(page, "<table"))
	assert.Contains(t, page, `<span class="verdict FAIL" id="status">FAIL</span>`)

	assert.NotContains(t, render(t, testRun(t)), `id="first-failed"`)
}

// TestWhatFailedFirstIsTheCause: the box takes summary.md's order: the
// cause first, once, with how often it was met, its fix and the checks
// of its phases that failed with it; not a check it caused.
func TestWhatFailedFirstIsTheCause(t *testing.T) {
	r := testRun(t)
	r.Report.Status = "FAIL"
	noDev := "sleep A level 1: POST /sleep: HTTP 404: 404 page not found: the server has no sleep endpoints: start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (a vLLM older than 0.7.3 may have none)"
	r.Report.Checks = append(r.Report.Checks, record.Check{Name: "sleep.level1.successful_cycles", Model: "A", Value: 0, Op: "==", Limit: 5, Verdict: "FAIL", Phase: "sleep-level1"})
	r.Report.Failures = append(r.Report.Failures,
		record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 sleep", Error: noDev},
		record.Failure{Phase: "switch", Model: "B", Step: "start", Error: "make room for B: " + noDev})
	page := render(t, r)
	first := page[strings.Index(page, `id="first-failed"`):]
	first = first[:strings.Index(first, "</div>")]
	paras := regexp.MustCompile(`<p>(.*?)</p>`).FindAllStringSubmatch(first, -1)
	require.Len(t, paras, 3, first)
	assert.True(t, strings.HasPrefix(paras[0][1], "Failure (sleep-level1 / A / cycle 1 sleep): sleep A level 1: POST /sleep: HTTP 404"), paras[0][1])
	assert.Contains(t, paras[0][1], "the same cause 2 times, in 2 phases (sleep-level1, switch), models A, B")
	assert.True(t, strings.HasPrefix(paras[1][1], "Fix: start vLLM with VLLM_SERVER_DEV_MODE=1"), paras[1][1])
	assert.Equal(t, "And 1 check of those phases: sleep.level1.successful_cycles (model A) = 0, limit == 5: FAIL", paras[2][1])
}

// TestGateComparison: with a baseline, a row per metric, the regression
// first, each with baseline, this run, change and the smallest change
// the rule could see.
func TestGateComparison(t *testing.T) {
	page := render(t, failedRun(t))
	gate := page[strings.Index(page, `<section id="gate">`):]
	assert.Contains(t, gate, "against 2 baseline run(s) from out/baseline")
	reg := strings.Index(gate, "Sleep/model=A/level=1")
	ok := strings.Index(gate, "Serve/model=B/stage=baseline/conc=1")
	require.Positive(t, reg)
	assert.Less(t, reg, ok, "the regression first")
	assert.Contains(t, gate, `<tr class="fail"><td>Sleep/model=A/level=1</td><td>sec/wake</td><td>u-test</td><td>2</td><td>0.0969</td><td>0.1453</td><td>+49.9 %</td><td>12.4 % (0.012)</td><td>REGRESSION</td></tr>`)
	assert.Contains(t, gate, `<td>812</td><td>808</td><td>-0.5 %</td><td>4.9 % (40)</td><td>no regression</td>`)
	assert.NotContains(t, render(t, testRun(t)), `<section id="gate">`)
}

// TestNumbersAreTheReports: the distribution table's medians are package
// stats' over bench.txt's values, by hand for one row.
func TestNumbersAreTheReports(t *testing.T) {
	r := Run{Report: report.Report{Status: "PASS"}, Samples: lines([]*benchfmt.Result{
		{Name: benchfmt.Name("Sleep/model=A/level=1"), Iters: 1, Values: []benchfmt.Value{{Value: 1, Unit: "sec/wake"}}},
		{Name: benchfmt.Name("Sleep/model=A/level=1"), Iters: 1, Values: []benchfmt.Value{{Value: 3, Unit: "sec/wake"}}},
		{Name: benchfmt.Name("Sleep/model=A/level=1"), Iters: 1, Values: []benchfmt.Value{{Value: 10, Unit: "sec/wake"}}},
		{Name: benchfmt.Name("Sleep/model=A/level=1"), Iters: 1, Values: []benchfmt.Value{{Value: 4, Unit: "sec/wake"}}},
	})}
	page := render(t, r)
	// n 4, median (3+4)/2, p95 rank ceil(3.8) = 4th = 10, min 1, max 10.
	assert.Contains(t, page, "<tr><td>model=A/level=1</td><td>sec/wake</td><td>4</td><td>3.5</td><td>10</td><td>1</td><td>10</td></tr>")
	assert.Equal(t, 4, points(page))
}

// TestSummaryTextIsText: an error's text in the summary that looks like a
// tag ("<nil>", an HTML error body) is shown as text, not dropped or
// passed through as markup; the table extension still makes tables.
func TestSummaryTextIsText(t *testing.T) {
	rep := testRun(t).Report
	rep.Status = "FAIL"
	rep.Failures = append(rep.Failures, record.Failure{Phase: "sleep-level1", Model: "A", Step: "wake", Error: "wake_up: got <nil> answer, body <html><script>x()</script></html> **not bold** `not code`"})
	page := render(t, Run{Report: rep})
	summary := page[strings.Index(page, `<section id="summary">`):]
	summary = summary[:strings.Index(summary, "</section>")]
	assert.Contains(t, summary, "sleep-level1 / A / wake: wake_up: got &lt;nil&gt; answer, body &lt;html&gt;&lt;script&gt;x()&lt;/script&gt;&lt;/html&gt;")
	assert.Contains(t, summary, "**not bold** `not code`", "an error's text is never read as Markdown")
	assert.NotContains(t, page, "<script>")
	assert.NotContains(t, page, "raw HTML omitted")
	assert.Contains(t, summary, `<div class="scroll"><table>`)
}

// TestDistributionsAreTheReportsFigures: on a real run, a distribution
// table's median is report.json's figure of the same samples (its row in
// docs/metrics.md names the bench line): A's level-1 wake API and the
// A→B handoff's first token.
func TestDistributionsAreTheReportsFigures(t *testing.T) {
	r := testRun(t)
	page := render(t, r)
	wake := r.Report.Models["A"].Sleep["1"].WakeAPIS
	require.Positive(t, wake.N)
	assert.Contains(t, page, fmt.Sprintf("<tr><td>model=A/level=1</td><td>sec/wake</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
		wake.N, Num(wake.Median), Num(wake.P95), Num(wake.Min), Num(wake.Max)))
	sw := r.Report.Switch.Directions["A→B"].ToFirstTokenS
	require.Positive(t, sw.N)
	assert.Contains(t, page, fmt.Sprintf("<tr><td>dir=A→B</td><td>sec/first-token</td><td>%d</td><td>%s</td>", sw.N, Num(sw.Median)))
}

// TestIDsAreUnique: every id on the page once (an anchor the contents
// link to is one place), and each benchmark's plots under one heading.
func TestIDsAreUnique(t *testing.T) {
	page := render(t, failedRun(t))
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(` id="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		seen[m[1]]++
	}
	require.NotEmpty(t, seen)
	for id, n := range seen {
		assert.Equal(t, 1, n, "id %q", id)
	}
	assert.Contains(t, seen, "dist-Memory")
}

// TestNoNumberToDraw: a benchmark × unit whose samples are all NaN is
// said, not drawn, and the rest of the page is written.
func TestNoNumberToDraw(t *testing.T) {
	nan := math.NaN()
	page := render(t, Run{Report: report.Report{Status: "PASS"}, Samples: lines([]*benchfmt.Result{
		{Name: benchfmt.Name("Energy/model=A"), Iters: 1, Values: []benchfmt.Value{{Value: nan, Unit: "J/wake"}}},
		{Name: benchfmt.Name("Sleep/model=A/level=1"), Iters: 1, Values: []benchfmt.Value{{Value: 2, Unit: "sec/wake"}}},
	})})
	assert.Contains(t, page, "Energy · J/wake: no sample is a number (1 samples), nothing to draw.")
	assert.Equal(t, 1, points(page))
}

// TestGateMissingAndSimulated: a metric this run lacks shows no figure
// for it (the record holds 0, JSON having no NaN), and a simulated run
// against hardware baselines says so.
func TestGateMissingAndSimulated(t *testing.T) {
	r := failedRun(t)
	r.Report.Gate.Rows = append(r.Report.Gate.Rows, record.GateRow{Metric: "Switch/dir=B→A", Unit: "sec/first-token", Rule: gate.RuleMissing, Runs: 2, Baseline: 0.5})
	page := render(t, r)
	assert.Contains(t, page, "<td>Switch/dir=B→A</td><td>sec/first-token</td><td>missing</td><td>2</td><td>0.5</td><td>—</td><td>—</td><td>—</td><td>missing in this run</td>")
	assert.Contains(t, page, "The baseline runs are not simulated: this simulated run is compared with runs on hardware.")
	r.Report.Gate.SimulatedRuns = r.Report.Gate.Runs
	assert.Contains(t, render(t, r), "The baseline runs are simulated (vllmsim).")

	// summary.md's gate section is left out of the page's summary (the
	// page's own has the same rows and more); the section after it stays.
	require.Contains(t, report.Summary(r.Report).Markdown(), "## Regression gate (1 regressions", "summary.md has a gate section")
	summary := page[strings.Index(page, `<section id="summary">`):]
	summary = summary[:strings.Index(summary, "</section>")]
	assert.NotContains(t, summary, "Regression gate")
	assert.Contains(t, summary, "<p>GPU memory: peak", "what summary.md writes after the gate stays")
}

// lines are results read from a file as the page's lines: each name
// split where it is read.
func lines(rs []*benchfmt.Result) []report.BenchLine {
	out := make([]report.BenchLine, len(rs))
	for i, r := range rs {
		out[i] = report.BenchLine{Name: record.ParseBenchName(string(r.Name)), Result: r}
	}
	return out
}
