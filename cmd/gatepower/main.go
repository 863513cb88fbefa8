// Command gatepower prints make gate-power's table: the regression gate's
// false alarms and power, measured on the runs scripts/gate-power.sh made
// (docs/compare.md). It judges every rerun with wakegate's rules at the
// defaults against each baseline (five runs, and each run of it alone),
// injects into the same-code reruns the changes users fear (every request
// but the fastest twice as slow, a doubled p95 under an unchanged median,
// a first wave twice as slow) and every metric's stated power and half of
// it, and prints one table with the
// machine and its load, each row beside its goal (issue 35). It exits 1
// when a goal is missed, 2 when a run wrote no bench.txt or could not be
// judged.
//
//	gatepower [-load 0|1] [-percent 10] [-alpha 0.05] [-v] OUT
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
)

func main() {
	def := config.Default().Thresholds
	load := flag.Int("load", 0, "1: the reruns of same and slow1.5 ran under a CPU hog (LOAD=1)")
	pct := flag.Float64("percent", def.RegressionPercent, "the gate's tolerance")
	alpha := flag.Float64("alpha", def.RegressionAlpha, "the gate's significance level")
	verbose := flag.Bool("v", false, "also print each metric's injection counts")
	rejudge := flag.Bool("rejudge", false, "judge the saved variant runs again from their bench.txt by testdata/variants-gate-power*.json as they are now, with those configs' tolerance and alpha, not -percent/-alpha (run from the module's root)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gatepower [-load 0|1] [-percent P] [-alpha A] [-rejudge] OUT")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, os.Stdout, flag.Arg(0), *load == 1, *pct, *alpha, *verbose, *rejudge)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatepower:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// run measures and prints the table; ok is false when a goal is missed.
func run(ctx context.Context, w io.Writer, out string, load bool, pct, alpha float64, verbose, rejudge bool) (bool, error) {
	m, err := measure(ctx, out, load, pct, alpha, rejudge)
	if err != nil {
		return false, err
	}
	ok := m.write(w, verbose)
	if m.broken {
		return false, fmt.Errorf("%s: a run wrote no bench.txt: the suite failed, not the gate (see the notes)", out)
	}
	return ok, nil
}
