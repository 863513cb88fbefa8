// Package cireport writes a run's verdicts and headline figures in the
// formats CI systems read: JUnit XML (checks.junit.xml: GitLab, Jenkins and
// most CI UIs), CTRF JSON (ctrf.json, the Common Test Report Format) and
// OpenMetrics text (metrics.txt, GitLab's metrics report).
//
// Every writer takes the run's report (package report) and judges nothing
// itself: a check fails where record.Check.Fails says so (a FAIL, or a
// required threshold that could not be evaluated), and every record.Failure
// is reported as an error of the run. A simulated run is labelled simulated
// in every output.
package cireport
