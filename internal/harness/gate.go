package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// PhaseGate is the regression gate's phase in the report's failures.
const PhaseGate = "regression-gate"

// Gate judges this run so far against the baseline runs that baseline
// names (bench.txt files and directories of runs, comma- or
// colon-separated; package gate says how each metric is decided, and
// bounds a history to its newest gate.HistoryMaxRuns runs), writes the
// table to compare.txt (labelled simulated when either side is, headed
// by what it judged: gate.WriteCoverage), records a check per regression
// and one for the whole comparison (gate.Comparison: NOT EVALUATED, and
// the run FAILs, where it judged fewer metrics than
// thresholds.regression_min_judged), and hands summary.md every metric's
// rule, runs and power and the gate's coverage. It returns the verdicts
// and the table.
//
// ctx stops it (a signal, go test's -timeout guard). When it cannot judge
// (stopped, or a baseline it cannot read) it records why: a failure of
// PhaseGate, the comparison's check NOT EVALUATED and required, and the
// report's gate section naming the error, so the report that Close
// writes FAILs and says why instead of being lost.
func (r *Run) Gate(ctx context.Context, baseline string) ([]gate.Verdict, string, error) {
	vs, table, err := r.judge(ctx, baseline)
	if err != nil {
		err = fmt.Errorf("regression gate: %w", err)
		cfg := r.cfg
		r.rec.Writers().Gate.Set(record.Gate{Baseline: baseline, TolerancePct: cfg.Thresholds.RegressionPercent, Alpha: cfg.Thresholds.RegressionAlpha, Error: err.Error(),
			MinJudged: cfg.Thresholds.RegressionMinJudged})
		r.rec.AddChecks(record.Check{Name: gate.CheckRegressions, Phase: PhaseGate, Op: "==", Verdict: record.NotEvaluated, Reason: err.Error(), Required: true})
		r.rec.Fail(record.Failure{Phase: PhaseGate, Error: err.Error()})
	}
	return vs, table, err
}

func (r *Run) judge(ctx context.Context, baseline string) ([]gate.Verdict, string, error) {
	cfg := r.cfg
	loaded, err := gate.LoadBaseline(ctx, baseline)
	if err != nil {
		return nil, "", err
	}
	base := loaded.Runs
	// This run's samples as bench.txt holds them, judged without writing
	// and parsing the file back (read in place: no copy of the record).
	var results []report.BenchLine
	var started time.Time
	var sim *record.Simulated
	r.rec.Read(func(raw *record.Raw) {
		results, started = report.BenchResults(*raw), raw.Started
		if raw.Simulated != nil {
			s := *raw.Simulated
			sim = &s
		}
	})
	cur, err := gate.RunOf(gate.BenchOf(report.BenchUnits(), results), "this run", started)
	if err != nil {
		return nil, "", err
	}
	tol, alpha := cfg.Thresholds.RegressionPercent, cfg.Thresholds.RegressionAlpha
	vs, err := gate.Judge(ctx, base, cur, tol, alpha)
	if err != nil {
		return nil, "", fmt.Errorf("compare with %s: %w", baseline, err)
	}
	var table bytes.Buffer
	fmt.Fprintf(&table, "baseline %s vs this run (regression: worse by > %g %% and significant at %g by the metric's rule)\n", baseline, tol, alpha)
	if s := sim; s != nil {
		fmt.Fprintf(&table, "this run is simulated: vllmsim profile %s, time scale %g\n", s.Profile, s.TimeScale)
	}
	for _, b := range base {
		if strings.HasPrefix(b.Bench.Simulated, "yes") {
			fmt.Fprintf(&table, "the baseline is simulated (%s says so)\n", b.Path)
			break
		}
	}
	gate.WriteRuns(&table, base)
	notes := loaded.Notes()
	for _, n := range notes {
		fmt.Fprintf(&table, "note: %s\n", n)
	}
	minJudged := cfg.Thresholds.RegressionMinJudged
	if err := gate.WriteCoverage(&table, vs, minJudged); err != nil {
		return nil, "", err
	}
	table.WriteString("\n")
	if err := gate.WriteVerdicts(&table, vs); err != nil {
		return nil, "", err
	}
	g := record.Gate{Baseline: baseline, TolerancePct: tol, Alpha: alpha, Notes: notes, Coverage: gate.CoverageOf(vs), MinJudged: minJudged}
	for _, b := range base {
		g.Runs = append(g.Runs, b.Path)
		if strings.HasPrefix(b.Bench.Simulated, "yes") {
			g.SimulatedRuns = append(g.SimulatedRuns, b.Path)
		}
	}
	for _, v := range vs {
		// JSON has neither NaN (no figure: a metric missing in this run or
		// in the baseline) nor +Inf (nothing flagged: no power to state).
		row := record.GateRow{Metric: v.Name, Unit: v.StatLabel(), Rule: v.Rule, Runs: v.Runs, Baseline: finite(v.Base), ThisRun: finite(v.Cur),
			ChangePct: finite(v.ChangePct), MinChange: v.Min, MinChangePct: v.MinPct, Regression: v.Regression, Gated: v.Judged(), Why: v.Why}
		if !row.Gated {
			row.MinChange, row.MinChangePct = 0, 0
		}
		for _, c := range v.ChangePoints {
			row.ChangePoints = append(row.ChangePoints, fmt.Sprintf("%+.1f %% at %s", c.ChangePct, c.Run))
		}
		g.Rows = append(g.Rows, row)
		if v.Regression {
			// Flagged: worse by more than the tolerance (and significant by
			// its rule), so the check holds it to the tolerance and FAILs.
			r.rec.AddChecks(record.Evaluate("regression "+v.Name+" "+v.StatLabel()+" ("+v.Rule+" rule)", "", v.ChangePct*float64(-v.Better), "within", tol))
		}
	}
	r.rec.Writers().Gate.Set(g)
	// FAIL on a regression; NOT EVALUATED and required where the gate
	// judged fewer than thresholds.regression_min_judged metrics; its
	// reason says what it judged either way.
	r.rec.AddChecks(gate.Comparison(gate.CheckRegressions, vs, minJudged))
	err = report.WriteFile(filepath.Join(cfg.OutDir, "compare.txt"), func(w io.Writer) error {
		_, err := w.Write(table.Bytes())
		return err
	})
	return vs, table.String(), err
}

// finite is x, or 0 where x is NaN or infinite (JSON holds neither).
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
