package cireport

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// The JUnit document, in the shape of the Jenkins xunit plugin's
// junit-10.xsd (testdata/junit-10.xsd). That schema allows <properties>
// only in a <testsuite> and no skipped count on <testsuites>, so the run's
// setup is each suite's properties and a check's figures are its
// testcase's <system-out>.
type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Time     string       `xml:"time,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name       string          `xml:"name,attr"`
		Tests      int             `xml:"tests,attr"`
		Failures   int             `xml:"failures,attr"`
		Errors     int             `xml:"errors,attr"`
		Skipped    int             `xml:"skipped,attr"`
		Time       string          `xml:"time,attr"`
		Timestamp  string          `xml:"timestamp,attr,omitempty"`
		Properties []junitProperty `xml:"properties>property"`
		Cases      []junitCase     `xml:"testcase"`
	}
	junitProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	junitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *junitOutcome `xml:"failure"`
		Error     *junitOutcome `xml:"error"`
		Skipped   *junitOutcome `xml:"skipped"`
		SystemOut string        `xml:"system-out,omitempty"`

		// seconds is the testcase's duration, written as Time (a failure
		// of the run, and a check, which is judged, not timed, take 0);
		// its suite's time is the sum of its testcases'.
		seconds float64
	}
	// junitOutcome is a <failure>, <error> or <skipped>.
	junitOutcome struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr,omitempty"`
		Text    string `xml:",chardata"`
	}
)

// WriteJUnit writes rep as checks.junit.xml: one testsuite per model for
// its checks ("wakebench.<model>"), one ("wakebench") for the run-level
// checks and one ("wakebench.failures") with an <error> testcase per
// failure of the run. A FAIL check, and a required check that could not be
// evaluated, is a <failure>; any other check not evaluated is <skipped>.
// Suites without testcases are left out. <testsuites>' time is the run's
// duration, each suite's the sum of its testcases' (0: a check is judged,
// not timed).
func WriteJUnit(w io.Writer, rep report.Report) error {
	doc := junitDocument(rep)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("cireport: junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("cireport: junit: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("cireport: junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("cireport: junit: %w", err)
	}
	return nil
}

// junitDocument builds the document WriteJUnit writes. The run's duration
// (Finished − Started) is the time of <testsuites> only: each suite's time
// is the sum of its testcases', so a CI view that adds up the suites does
// not count the run once per suite.
func junitDocument(rep report.Report) junitSuites {
	stamp := ""
	if finite(rep.Started) && rep.Started > 0 {
		stamp = record.FromUnix(rep.Started).Format(time.RFC3339)
	}
	props := []junitProperty{{"gpu", rep.GPU}, {"runtime", rep.Runtime}, {"status", rep.Status}}
	if rep.Simulated != nil {
		props = append(props, junitProperty{"simulated", rep.Simulated.Label()})
	}
	suite := func(name string) junitSuite {
		return junitSuite{Name: name, Timestamp: stamp, Properties: props}
	}

	// The run-level suite first, then the models' in label order.
	var models []string
	for _, c := range rep.Checks {
		if c.Model != "" && !slices.Contains(models, c.Model) {
			models = append(models, c.Model)
		}
	}
	slices.Sort(models)
	suites := []junitSuite{suite(suiteName(""))}
	index := map[string]int{"": 0}
	for _, m := range models {
		index[m] = len(suites)
		suites = append(suites, suite(suiteName(m)))
	}
	for _, c := range rep.Checks {
		s := &suites[index[c.Model]]
		tc := junitCheck(c, rep.Simulated)
		s.Cases = append(s.Cases, tc)
		s.Tests++
		switch {
		case tc.Failure != nil:
			s.Failures++
		case tc.Skipped != nil:
			s.Skipped++
		}
	}

	failures := suite(failureSuite)
	for _, f := range rep.Failures {
		where := failureWhere(f)
		failures.Cases = append(failures.Cases, junitCase{
			Name:      where,
			Classname: failureSuite,
			Error:     &junitOutcome{Message: f.Error, Type: "run failure", Text: where + ": " + f.Error},
		})
		failures.Tests++
		failures.Errors++
	}
	suites = append(suites, failures)

	doc := junitSuites{Name: toolName, Time: junitTime(rep.Finished - rep.Started)}
	for _, s := range suites {
		if s.Tests == 0 {
			continue
		}
		for i := range s.Cases {
			s.Cases[i].Time = junitTime(s.Cases[i].seconds)
		}
		s.Time = junitTime(casesSeconds(s.Cases))
		doc.Suites = append(doc.Suites, s)
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
	}
	return doc
}

// junitCheck is check c's testcase.
func junitCheck(c record.Check, sim *record.Simulated) junitCase {
	classname := suiteName(c.Model)
	if c.Model == "" {
		classname = suiteName("run")
	}
	// A check is judged, not timed: its testcase's seconds stay 0.
	tc := junitCase{Name: c.Name, Classname: classname, SystemOut: checkFigures(c, sim)}
	switch {
	case c.Verdict == verdictFail:
		tc.Failure = &junitOutcome{
			Message: fmt.Sprintf("%s %s %s: %s", formatFloat(c.Value), c.Op, formatFloat(c.Limit), c.Verdict),
			Type:    "threshold",
			Text:    c.String(),
		}
	case c.Fails(): // a required threshold that could not be evaluated
		tc.Failure = &junitOutcome{
			Message: "required threshold " + c.Op + " " + formatFloat(c.Limit) + " not evaluated: " + c.Reason,
			Type:    "not evaluated",
			Text:    c.String(),
		}
	case c.Verdict != verdictPass:
		msg := c.Reason
		if msg == "" {
			msg = c.Verdict
		}
		tc.Skipped = &junitOutcome{Message: msg}
	}
	return tc
}

// checkFigures is a check's <system-out>: its figures on one line
// ("value=0.93 op=>= limit=0.8 verdict=PASS"), then why it was not
// evaluated and what simulated the run, where they apply.
func checkFigures(c record.Check, sim *record.Simulated) string {
	var b strings.Builder
	fmt.Fprintf(&b, "value=%s op=%s limit=%s verdict=%s", formatFloat(c.Value), c.Op, formatFloat(c.Limit), c.Verdict)
	if c.Required {
		b.WriteString(" required=true")
	}
	if c.Reason != "" {
		b.WriteString("\nreason: " + c.Reason)
	}
	if sim != nil {
		b.WriteString("\nsimulated: " + sim.Label())
	}
	return b.String()
}

// junitTime formats seconds for the schema's SUREFIRE_TIME (digits and a
// dot): never negative, NaN or infinite (those are 0).
func junitTime(s float64) string {
	if !finite(s) || s < 0 {
		s = 0
	}
	return strconv.FormatFloat(s, 'f', 3, 64)
}

// casesSeconds is the sum of cases' durations (those not finite or
// negative taken as 0, as junitTime writes them): a suite's time.
func casesSeconds(cases []junitCase) float64 {
	total := 0.0
	for _, c := range cases {
		if finite(c.seconds) && c.seconds > 0 {
			total += c.seconds
		}
	}
	return total
}
