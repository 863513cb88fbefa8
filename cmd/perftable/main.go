// Command perftable prints the harness overhead table of `make perf`:
// every figure of internal/perf's goals with its goal, what the benchmark
// files given measured, and the ratio (≥ 1 meets the goal, by that margin).
// It exits 1 when a goal is missed or a figure was not measured.
//
//	perftable [-machine TEXT] FILE...
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
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: perftable [-machine TEXT] FILE...  (benchmark output, benchfmt)")
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
	missed, err := perf.Write(os.Stdout, perf.Table(perf.Goals, vals), m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perftable:", err)
		os.Exit(2)
	}
	if missed > 0 {
		fmt.Printf("%d goal(s) missed or not measured\n", missed)
		os.Exit(1)
	}
}
