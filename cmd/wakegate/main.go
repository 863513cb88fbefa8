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
	"flag"
	"fmt"
	"os"

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
	n, err := run(flag.Arg(0), flag.Arg(1), *pct, *alpha, *quiet)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wakegate:", err)
		os.Exit(2)
	}
	if n > 0 {
		os.Exit(1)
	}
}

func run(baseline, path string, pct, alpha float64, quiet bool) (int, error) {
	base, err := gate.LoadBaseline(baseline)
	if err != nil {
		return 0, err
	}
	cur, err := gate.ReadRun(path)
	if err != nil {
		return 0, err
	}
	vs, err := gate.Judge(base, cur, pct, alpha)
	if err != nil {
		return 0, err
	}
	if !quiet {
		gate.WriteRuns(os.Stdout, base)
		if err := gate.WriteVerdicts(os.Stdout, vs); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, v := range vs {
		if v.Regression {
			n++
			fmt.Printf("REGRESSION %s %s %+.1f %% (%s rule, %d runs; flagged beyond %.3g %%)\n", v.Name, v.Unit, v.ChangePct, v.Rule, v.Runs, v.MinPct)
		}
	}
	return n, nil
}
