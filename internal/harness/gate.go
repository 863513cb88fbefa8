package harness

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// Gate judges this run so far against the baseline runs that baseline
// names (bench.txt files and directories of runs, comma- or
// colon-separated; package gate says how each metric is decided), writes
// the table to compare.txt (labelled simulated when either side is),
// records a check per regression and one for the whole comparison, and
// hands summary.md every metric's rule, runs and power. It returns the
// verdicts and the table.
func (r *Run) Gate(baseline string) ([]gate.Verdict, string, error) {
	cfg := r.cfg
	base, err := gate.LoadBaseline(baseline)
	if err != nil {
		return nil, "", err
	}
	raw := r.rec.Raw()
	var buf bytes.Buffer
	if err := report.WriteBench(&buf, raw); err != nil {
		return nil, "", err
	}
	cur, err := gate.ParseRun(buf.Bytes(), "this run", raw.Started)
	if err != nil {
		return nil, "", err
	}
	tol, alpha := cfg.Thresholds.RegressionPercent, cfg.Thresholds.RegressionAlpha
	vs, err := gate.Judge(base, cur, tol, alpha)
	if err != nil {
		return nil, "", fmt.Errorf("compare with %s: %w", baseline, err)
	}
	var table bytes.Buffer
	fmt.Fprintf(&table, "baseline %s vs this run (regression: worse by > %g %% and significant at %g by the metric's rule)\n", baseline, tol, alpha)
	if s := raw.Simulated; s != nil {
		fmt.Fprintf(&table, "this run is simulated: vllmsim profile %s, time scale %g\n", s.Profile, s.TimeScale)
	}
	for _, b := range base {
		if strings.HasPrefix(b.Bench.Simulated, "yes") {
			fmt.Fprintf(&table, "the baseline is simulated (%s says so)\n", b.Path)
			break
		}
	}
	gate.WriteRuns(&table, base)
	table.WriteString("\n")
	if err := gate.WriteVerdicts(&table, vs); err != nil {
		return nil, "", err
	}
	g := record.Gate{Baseline: baseline, TolerancePct: tol, Alpha: alpha}
	for _, b := range base {
		g.Runs = append(g.Runs, b.Path)
	}
	n := 0
	for _, v := range vs {
		row := record.GateRow{Metric: v.Name, Unit: v.Unit, Rule: v.Rule, Runs: v.Runs, Baseline: v.Base, ThisRun: v.Cur,
			ChangePct: v.ChangePct, MinChange: v.Min, MinChangePct: v.MinPct, Regression: v.Regression, Gated: v.Better != 0, Why: v.Why}
		if math.IsInf(v.MinPct, 1) { // nothing flagged: no power to state (and JSON has no +Inf)
			row.MinChange, row.MinChangePct, row.Gated = 0, 0, false
		}
		if v.Rule == gate.RuleMissing { // no figure in this run (and JSON has no NaN)
			row.ThisRun, row.ChangePct = 0, 0
		}
		for _, c := range v.ChangePoints {
			row.ChangePoints = append(row.ChangePoints, fmt.Sprintf("%+.1f %% at %s", c.ChangePct, c.Run))
		}
		g.Rows = append(g.Rows, row)
		if v.Regression {
			n++
			r.rec.AddChecks(gate.Evaluate("regression "+v.Name+" "+v.Unit+" ("+v.Rule+" rule)", "", v.ChangePct*float64(-v.Better), "within", v.MinPct))
		}
	}
	r.rec.SetGate(g)
	r.rec.AddChecks(gate.Evaluate("regressions against baseline", "", float64(n), "==", 0))
	err = report.WriteFile(filepath.Join(cfg.OutDir, "compare.txt"), func(w io.Writer) error {
		_, err := w.Write(table.Bytes())
		return err
	})
	return vs, table.String(), err
}
