package wakebench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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
	// out_dir's variants/ first: a folder there that is not a variant
	// run's refuses the run before an earlier run's outputs are removed.
	err := variants.CheckDir(cfg.OutDir)
	var release func()
	if err == nil {
		release, err = harness.ClaimOutDir(cfg)
	}
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
	// go test's -timeout alarm is m.Run's, which this process never
	// calls: its own deadline stops the run in flight (SIGTERM) before
	// go test kills this process.
	budget := guardAfter(cfg, goTestTimeout())
	if budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
	}
	child := variants.Child{Exe: os.Args[0], Args: childFlags(), Env: os.Environ()}
	logf := func(format string, args ...any) { fmt.Printf("wakebench: "+format+"\n", args...) }
	est, how := cfg.Estimate()
	logf("variant run: %d blocks of %d variants (%s), %d runs one after another; at least %v (%s)",
		cfg.Protocol.VariantBlocks, len(cfg.Variants), strings.Join(cfg.VariantNames(), ", "), cfg.Protocol.VariantBlocks*len(cfg.Variants), est.Round(time.Second), how)
	runs := variants.Run(ctx, cfg, child, budget, logf)
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

// variantParent reports whether this process is a variant run's parent:
// the config names variants and is no fleet's coordinator, which runs
// TestFleet instead, each node then the variants (docs/fleet.md).
func variantParent(cfg config.Config) bool { return len(cfg.Variants) > 0 && !cfg.Fleet.On() }

// childFlags are the go test flags a variant run's children take from
// it: what selects and shows the tests (each child's -timeout is its share
// of what is left, package variants).
//
// Without a -run, a child runs the protocol's tests (protocolTests), not
// the harness's own robustness tests, which a child run has no use for;
// go test -json's -test.v=test2json becomes -test.v=true, since the
// child's output goes to its go-test.log, not to go test.
func childFlags() []string {
	out := []string{"-test.run=" + protocolTests}
	for _, name := range []string{"test.run", "test.skip", "test.bench", "test.benchtime", "test.count", "test.v", "test.short", "test.failfast"} {
		f := flag.Lookup(name)
		if f == nil || f.Value.String() == f.DefValue {
			continue
		}
		v := f.Value.String()
		if name == "test.v" && v == "test2json" {
			v = "true"
		}
		if name == "test.run" {
			out = out[1:] // the parent's own -run, in place of the protocol's
		}
		out = append(out, "-"+name+"="+v)
	}
	return out
}
