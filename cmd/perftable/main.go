// Command perftable prints the harness overhead table of `make perf`:
// every figure of internal/perf's goals with its goal, what the benchmark
// files given measured, and the ratio (≥ 1 meets the goal, by that margin).
// It exits 1 when a goal is missed or a figure was not measured; with
// -report-misses a missed goal is reported in the table and only a figure
// that no benchmark measured (a broken benchmark) exits 1: how CI runs
// make perf, on a machine too shared for its goals.
//
//	perftable [-machine TEXT] [-report-misses] FILE...
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/wakebench/wakebench/internal/perf"
)

func main() {
	machine := flag.String("machine", "", "how the benchmarks ran (CPUs, pinning), added to the machine line")
	reportMisses := flag.Bool("report-misses", false, "a missed goal is reported, not failed; a figure not measured still fails")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: perftable [-machine TEXT] [-report-misses] FILE...  (benchmark output, benchfmt)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	vals := map[string][]float64{}
	cpu := ""
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "perftable:", err)
			os.Exit(2)
		}
		v, c, err := perf.Read(f, name)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "perftable: %s: %v\n", name, err)
			os.Exit(2)
		}
		for k, xs := range v {
			vals[k] = append(vals[k], xs...)
		}
		if c != "" {
			cpu = c
		}
	}
	m := fmt.Sprintf("%s, %d CPUs, %s/%s, %s", cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if *machine != "" {
		m += "; " + *machine
	}
	rows := perf.Table(perf.Goals, vals)
	missed, err := perf.Write(os.Stdout, rows, m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perftable:", err)
		os.Exit(2)
	}
	if n := perf.Unmeasured(rows); *reportMisses && n > 0 {
		fmt.Printf("%d figure(s) not measured: a benchmark is broken (see its output above)\n", n)
		os.Exit(1)
	} else if *reportMisses {
		fmt.Printf("%d goal(s) missed (reported, not failed: -report-misses)\n", missed)
		return
	}
	if missed > 0 {
		fmt.Printf("%d goal(s) missed or not measured\n", missed)
		os.Exit(1)
	}
}
