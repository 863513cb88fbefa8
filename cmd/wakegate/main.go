// Command wakegate judges one run's bench.txt against baseline runs, as
// the protocol's TestRegressionGate does (package gate's rules). It prints
// what it judged and the table, and exits 1 where the protocol's gate
// fails the run: on a regression, or where it judged fewer metrics than
// -min-judged (thresholds.regression_min_judged; the comparison NOT
// EVALUATED); 2 on an error:
//
//	wakegate [-percent 10] [-alpha 0.05] [-min-judged 1] BASELINE RUN/bench.txt
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
	quiet := flag.Bool("q", false, "print only what was judged and the regressions")
	minJudged := flag.Int("min-judged", def.RegressionMinJudged, "the fewest metrics the gate must judge; judging fewer, it is NOT EVALUATED and exits 1 (0 accepts a gate that judged nothing)")
	flag.Parse()
	if flag.NArg() != 2 || *minJudged < 0 {
		fmt.Fprintln(os.Stderr, "usage: wakegate [-percent P] [-alpha A] [-min-judged N ≥ 0] [-q] BASELINE RUN/bench.txt")
		os.Exit(2)
	}
	// Ctrl-C stops the judgement (a long history's change-point search).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	fails, err := run(ctx, os.Stdout, flag.Arg(0), flag.Arg(1), *pct, *alpha, *minJudged, *quiet)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wakegate:", err)
		os.Exit(2)
	}
	if fails {
		os.Exit(1)
	}
}

// checkName is the whole comparison's check, as the protocol names it.
const checkName = "regressions against baseline"

// run judges the run at path against baseline as the protocol's gate
// does: the same loading and checks (gate.LoadBaseline: regular files of
// bounded size, wakebench's benchmarks, a history's newest runs; samples
// the gate cannot judge refused by file and line), the run's own file
// read alike. It prints the notes (what was not used), what it judged
// (gate.WriteCoverage), the table unless quiet, each regression and the
// comparison's check (gate.Comparison); it returns whether that check
// fails, as it fails the protocol's run.
func run(ctx context.Context, w io.Writer, baseline, path string, pct, alpha float64, minJudged int, quiet bool) (bool, error) {
	base, err := gate.LoadBaseline(ctx, baseline)
	if err != nil {
		return false, err
	}
	cur, err := gate.ReadRun(path)
	if err == nil {
		err = gate.CheckRun(cur)
	}
	if err != nil {
		return false, fmt.Errorf("this run: %w", err)
	}
	vs, err := gate.Judge(ctx, base.Runs, cur, pct, alpha)
	if err != nil {
		return false, err
	}
	notes := base.Notes()
	for _, n := range cur.Warnings {
		notes = append(notes, fmt.Sprintf("this run %s: %s", cur.Path, n))
	}
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if err := gate.WriteCoverage(w, vs, minJudged); err != nil {
		return false, err
	}
	if !quiet {
		gate.WriteRuns(w, base.Runs)
		if err := gate.WriteVerdicts(w, vs); err != nil {
			return false, err
		}
	}
	for _, v := range vs {
		if v.Regression {
			fmt.Fprintf(w, "REGRESSION %s %s %+.1f %% (%s rule, %d runs; flagged beyond %.3g %%)\n", v.Name, v.StatLabel(), v.ChangePct, v.Rule, v.Runs, v.ThresholdPct)
		}
	}
	check := gate.Comparison(checkName, vs, minJudged)
	_, err = fmt.Fprintln(w, check)
	return check.Fails(), err
}
