package cireport

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// The CTRF document (testdata/ctrf-schema-0.0.json). The schema forbids
// properties of its own in results, tool, summary, each test and
// environment, so wakebench's own keys go in their "extra" objects; a
// test's suite is an array (the hierarchy), here of one name.
type (
	ctrfDocument struct {
		ReportFormat string      `json:"reportFormat"`
		SpecVersion  string      `json:"specVersion"`
		Results      ctrfResults `json:"results"`
	}
	ctrfResults struct {
		Tool        ctrfTool        `json:"tool"`
		Summary     ctrfSummary     `json:"summary"`
		Tests       []ctrfTest      `json:"tests"`
		Environment ctrfEnvironment `json:"environment"`
	}
	ctrfTool struct {
		Name string `json:"name"`
	}
	ctrfSummary struct {
		Tests    int   `json:"tests"`
		Passed   int   `json:"passed"`
		Failed   int   `json:"failed"`
		Skipped  int   `json:"skipped"`
		Pending  int   `json:"pending"`
		Other    int   `json:"other"`
		Suites   int   `json:"suites"`
		Start    int64 `json:"start"`    // ms since the Unix epoch
		Stop     int64 `json:"stop"`     // ms since the Unix epoch
		Duration int64 `json:"duration"` // ms
	}
	ctrfTest struct {
		Name     string         `json:"name"`
		Status   string         `json:"status"`
		Duration int64          `json:"duration"`
		Message  string         `json:"message,omitempty"`
		Suite    []string       `json:"suite"`
		Tags     []string       `json:"tags,omitempty"`
		Extra    map[string]any `json:"extra"`
	}
	ctrfEnvironment struct {
		ReportName string         `json:"reportName"`
		Extra      map[string]any `json:"extra"`
	}
)

// CTRF test statuses.
const (
	ctrfPassed  = "passed"
	ctrfFailed  = "failed"
	ctrfSkipped = "skipped"
	ctrfOther   = "other"
)

// WriteCTRF writes rep as ctrf.json: one test per check ("<model>: <name>",
// or the name of a run-level check) and one failed test per failure of the
// run ("failure: <phase>/<model>/<step>"). A required check that could not
// be evaluated is failed, any other not evaluated skipped. Each check's
// value, op, limit, verdict, reason and required are its test's extra (a
// value or limit that is NaN or infinite is null there); the run's gpu,
// runtime, status and, on a simulated run, simulated are the environment's
// extra, and every test of a simulated run is tagged "simulated".
func WriteCTRF(w io.Writer, rep report.Report) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ctrfReport(rep)); err != nil {
		return fmt.Errorf("cireport: ctrf: %w", err)
	}
	return nil
}

// ctrfReport builds the document WriteCTRF writes.
func ctrfReport(rep report.Report) ctrfDocument {
	var tags []string
	env := map[string]any{"gpu": rep.GPU, "runtime": rep.Runtime, "status": rep.Status}
	if rep.Simulated != nil {
		tags = []string{"simulated"}
		env["simulated"] = rep.Simulated.Label()
	}
	res := ctrfResults{
		Tool:        ctrfTool{Name: toolName},
		Tests:       []ctrfTest{},
		Environment: ctrfEnvironment{ReportName: toolName, Extra: env},
	}
	suites := map[string]bool{}
	for _, c := range rep.Checks {
		t := ctrfCheck(c)
		t.Tags = tags
		res.Tests = append(res.Tests, t)
		suites[t.Suite[0]] = true
	}
	for _, f := range rep.Failures {
		res.Tests = append(res.Tests, ctrfTest{
			Name:    "failure: " + failureWhere(f),
			Status:  ctrfFailed,
			Message: f.Error,
			Suite:   []string{failureSuite},
			Tags:    tags,
			Extra:   map[string]any{"phase": f.Phase, "model": f.Model, "step": f.Step},
		})
		suites[failureSuite] = true
	}

	s := &res.Summary
	for _, t := range res.Tests {
		switch t.Status {
		case ctrfPassed:
			s.Passed++
		case ctrfFailed:
			s.Failed++
		case ctrfSkipped:
			s.Skipped++
		default:
			s.Other++
		}
	}
	s.Tests, s.Suites = len(res.Tests), len(suites)
	s.Start, s.Stop = unixMillis(rep.Started), unixMillis(rep.Finished)
	s.Duration = max(0, s.Stop-s.Start)
	return ctrfDocument{ReportFormat: "CTRF", SpecVersion: "0.0.0", Results: res}
}

// ctrfCheck is check c's test.
func ctrfCheck(c record.Check) ctrfTest {
	t := ctrfTest{
		Name:  c.Name,
		Suite: []string{suiteName(c.Model)},
		Extra: map[string]any{
			"value":    jsonNumber(c.Value),
			"op":       c.Op,
			"limit":    jsonNumber(c.Limit),
			"verdict":  c.Verdict,
			"reason":   c.Reason,
			"required": c.Required,
		},
	}
	if c.Model != "" {
		t.Name = c.Model + ": " + c.Name
		t.Extra["model"] = c.Model
	}
	switch {
	case c.Fails():
		t.Status, t.Message = ctrfFailed, c.String()
	case c.Verdict == verdictPass:
		t.Status = ctrfPassed
	case c.Verdict == record.NotEvaluated:
		t.Status, t.Message = ctrfSkipped, c.Reason
	default:
		t.Status, t.Message = ctrfOther, c.String()
	}
	return t
}

// jsonNumber is v, or nil (JSON null) where v is NaN or infinite, which
// JSON cannot hold.
func jsonNumber(v float64) *float64 {
	if !finite(v) {
		return nil
	}
	return &v
}

// unixMillis converts Unix seconds to whole milliseconds (0 where unknown).
func unixMillis(s float64) int64 {
	ms := math.Round(s * 1000)
	if !finite(ms) || ms < 0 || ms > math.MaxInt64/2 {
		return 0
	}
	return int64(ms)
}
