package wakebench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/harness"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/variants"
)

// runVariants is a variant run (config variants, docs/variants.md): this
// process starts no server. Each block's run of each variant is a child
// run of this test binary (package variants) with the variant's settings
// (WAKEBENCH_VARIANT) and an out_dir of its own under out_dir/variants,
// given the -run, -bench and -v this run was; then the comparison is
// written into out_dir and printed. It exits 1 when the comparison FAILs
// (a run failed, a variant worse than the reference), 2 when out_dir
// cannot be had.
func runVariants(cfg config.Config) int {
	// Ctrl-C, SIGTERM and SIGHUP stop the run in flight (it stops its
	// servers and writes its report) and start no more; the comparison of
	// what ran is written.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	release, err := harness.ClaimOutDir(cfg)
	if err == nil {
		if err = variants.Claim(cfg.OutDir); err != nil {
			release()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "wakebench: %v\n", err)
		return 2
	}
	defer release()
	child := variants.Child{Exe: os.Args[0], Args: childFlags(), Env: os.Environ()}
	logf := func(format string, args ...any) { fmt.Printf("wakebench: "+format+"\n", args...) }
	runs := variants.Run(ctx, cfg, child, guardAfter(cfg, goTestTimeout()), logf)
	c := variants.Compare(cfg, runs)
	werr := c.Write(cfg.OutDir)
	_, _ = io.WriteString(os.Stdout, report.FitSummary(c.Summary().Markdown(), report.SummaryLimit))
	if werr != nil {
		fmt.Fprintf(os.Stderr, "wakebench: %v\n", werr)
		return 1
	}
	fmt.Printf("wakebench: variant run %s: %s (comparison.json, summary.md, bench.txt; each run's outputs under %s)\n",
		c.Status, cfg.OutDir, filepath.Join(cfg.OutDir, variants.Dir))
	if c.Status != "PASS" {
		return 1
	}
	return 0
}

// childFlags are the go test flags a variant run's children take from
// it: what selects and shows the tests (each child's -timeout is its share
// of what is left, package variants).
func childFlags() []string {
	var out []string
	for _, name := range []string{"test.run", "test.skip", "test.bench", "test.benchtime", "test.count", "test.v", "test.failfast"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != f.DefValue {
			out = append(out, "-"+name+"="+f.Value.String())
		}
	}
	return out
}
