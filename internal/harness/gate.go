package harness

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/report"
)

// Gate compares this run so far with the baseline run's bench.txt with
// benchstat's statistics (package gate), writes the table to compare.txt
// (labelled simulated when either side is) and records a check per
// regression and one for the whole comparison. It returns the deltas and
// the table.
func (r *Run) Gate(baseline string) ([]gate.Delta, string, error) {
	cfg := r.cfg
	old, err := os.ReadFile(baseline)
	if err != nil {
		return nil, "", fmt.Errorf("baseline: %w", err)
	}
	raw := r.rec.Raw()
	var cur bytes.Buffer
	if err := report.WriteBench(&cur, raw); err != nil {
		return nil, "", err
	}
	ds, err := gate.CompareBench(bytes.NewReader(old), &cur, cfg.Thresholds.RegressionPercent, cfg.Thresholds.RegressionAlpha)
	if err != nil {
		return nil, "", fmt.Errorf("compare with %s: %w", baseline, err)
	}
	var table bytes.Buffer
	fmt.Fprintf(&table, "baseline %s vs this run (regression: worse by > %g %% and p ≤ %g)\n", baseline, cfg.Thresholds.RegressionPercent, cfg.Thresholds.RegressionAlpha)
	if s := raw.Simulated; s != nil {
		fmt.Fprintf(&table, "this run is simulated: vllmsim profile %s, time scale %g\n", s.Profile, s.TimeScale)
	}
	if bytes.Contains(old, []byte("\nsimulated: yes")) || bytes.HasPrefix(old, []byte("simulated: yes")) {
		fmt.Fprintf(&table, "the baseline is simulated (its bench.txt says so)\n")
	}
	if err := gate.WriteDeltas(&table, ds); err != nil {
		return nil, "", err
	}
	n := 0
	for _, d := range ds {
		if d.Regression {
			n++
			name := "regression " + d.Name + " " + d.Unit
			if d.ToleranceOnly {
				name += " (tolerance only: too few or too tied samples for significance)"
			}
			r.rec.AddChecks(gate.Evaluate(name, "", d.ChangePct, "within", d.Limit))
		}
	}
	r.rec.AddChecks(gate.Evaluate("regressions against baseline", "", float64(n), "==", 0))
	err = report.WriteFile(filepath.Join(cfg.OutDir, "compare.txt"), func(w io.Writer) error {
		_, err := w.Write(table.Bytes())
		return err
	})
	return ds, table.String(), err
}
