// Command wakegate judges one run's bench.txt against baseline runs, as
// the protocol's TestRegressionGate does (package gate's rules). It prints
// the table and exits 1 on a regression, 2 on an error:
//
//	wakegate [-percent 10] [-alpha 0.05] BASELINE RUN/bench.txt
//
// BASELINE is bench.txt files or directories of runs, comma- or
// colon-separated. make gate-power runs it over reruns of the same code.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gate"
)

func main() {
	def := config.Default().Thresholds
	pct := flag.Float64("percent", def.RegressionPercent, "tolerance: a regression is worse by more than this many percent")
	alpha := flag.Float64("alpha", def.RegressionAlpha, "significance level of each metric's rule")
	quiet := flag.Bool("q", false, "print only the regressions")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: wakegate [-percent P] [-alpha A] [-q] BASELINE RUN/bench.txt")
		os.Exit(2)
	}
	// Ctrl-C stops the judgement (a long history's change-point search).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	n, err := run(ctx, os.Stdout, flag.Arg(0), flag.Arg(1), *pct, *alpha, *quiet)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wakegate:", err)
		os.Exit(2)
	}
	if n > 0 {
		os.Exit(1)
	}
}

// run judges the run at path against baseline as the protocol's gate
// does: the same loading and checks (gate.LoadBaseline: regular files of
// bounded size, wakebench's benchmarks, a history's newest runs), the
// run's own file read alike. It prints the notes (what was not used), the
// table unless quiet, and each regression; it returns how many.
func run(ctx context.Context, w io.Writer, baseline, path string, pct, alpha float64, quiet bool) (int, error) {
	base, err := gate.LoadBaseline(ctx, baseline)
	if err != nil {
		return 0, err
	}
	cur, err := gate.ReadRun(path)
	if err == nil {
		err = gate.CheckRun(cur)
	}
	if err != nil {
		return 0, fmt.Errorf("this run: %w", err)
	}
	vs, err := gate.Judge(ctx, base.Runs, cur, pct, alpha)
	if err != nil {
		return 0, err
	}
	notes := base.Notes()
	for _, n := range cur.Warnings {
		notes = append(notes, fmt.Sprintf("this run %s: %s", cur.Path, n))
	}
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if !quiet {
		gate.WriteRuns(w, base.Runs)
		if err := gate.WriteVerdicts(w, vs); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, v := range vs {
		if v.Regression {
			n++
			fmt.Fprintf(w, "REGRESSION %s %s %+.1f %% (%s rule, %d runs; flagged beyond %.3g %%)\n", v.Name, v.Unit+gate.StatSuffix(v.Stat), v.ChangePct, v.Rule, v.Runs, v.ThresholdPct)
		}
	}
	return n, nil
}
