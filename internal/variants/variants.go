// Package variants is the variant run (docs/variants.md): the same models
// run two or more ways (another vLLM, a serve flag, an environment
// variable), interleaved on one GPU in blocks, each block every variant
// once in an order drawn for it, and every figure of every variant judged
// against the first's block by block: a paired comparison that needs no
// baseline history, where drift over the run falls on every variant alike.
//
// Each variant's run in a block is a whole run of the suite of its own (a
// child go test with WAKEBENCH_VARIANT and an out_dir of its own), so it
// keeps every output, check and invariant of a run; this package orders
// the children, reads their bench.txt and report.json, and writes the
// comparison.
package variants

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// Dir is out_dir's folder of the variants' runs: Dir/<variant>/block-<n>.
const Dir = "variants"

// Block is one block of a variant run: every variant once, in Order.
type Block struct {
	Index int      `json:"block"` // from 1
	Order []string `json:"order"`
}

// Plan is the run's blocks: protocol.variant_blocks of them, each the
// variants in the config's order ("alternate") or in an order drawn from
// protocol.variant_seed ("random": every order alike, the same seed the
// same orders).
func Plan(cfg config.Config) []Block {
	rng := rand.New(rand.NewPCG(cfg.Protocol.VariantSeed, 0x77616b65)) // "wake"
	out := make([]Block, cfg.Protocol.VariantBlocks)
	for i := range out {
		order := cfg.VariantNames()
		if cfg.Protocol.VariantOrder == "random" {
			rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		out[i] = Block{Index: i + 1, Order: order}
	}
	return out
}

// RunDir is where variant v's run of block b writes its outputs.
func RunDir(outDir, v string, b int) string {
	return filepath.Join(outDir, Dir, v, "block-"+strconv.Itoa(b))
}

// Child is how a block's run is started: the test binary, the flags it
// takes (the -run of the parent's, -v, …; Run adds -test.timeout) and
// the environment (the parent's; Run adds WAKEBENCH_VARIANT and
// WAKEBENCH_OUT_DIR).
type Child struct {
	Exe  string
	Args []string
	Env  []string
}

// Result is one variant's run in one block, as its report.json says.
type Result struct {
	Block   int    `json:"block"`
	Variant string `json:"variant"`
	Dir     string `json:"dir"`
	// Status is the run's report.json status (PASS, FAIL, NOT RUN), or
	// "NOT RUN" where the run never started (the variant run stopped).
	Status string `json:"status"`
	// Error says what failed: the run's first failure, its exit, or why
	// it did not run.
	Error string `json:"error,omitempty"`
	// Runtime is the servers' version as the run's report names it.
	Runtime   string            `json:"runtime,omitempty"`
	Simulated *record.Simulated `json:"simulated,omitempty"`
	Seconds   float64           `json:"seconds"` // the child's wall time
}

// childReport is what Run reads of a block's report.json.
type childReport struct {
	Status    string            `json:"status"`
	Runtime   string            `json:"runtime"`
	Simulated *record.Simulated `json:"simulated"`
	Failures  []record.Failure  `json:"failures"`
}

// Run runs every block of cfg's plan, one variant's run after another on
// the same GPU, each a child of its own (c) writing into RunDir with its
// go test output in go-test.log there. timeout is what is left of go
// test's -timeout (0: none): each run gets an equal share of what is left
// when it starts. A run that fails is recorded and the next one runs; ctx's
// end sends SIGTERM to the run in flight (it stops its servers and writes
// its report) and starts no more. logf is told of each run's start and end.
func Run(ctx context.Context, cfg config.Config, c Child, timeout time.Duration, logf func(string, ...any)) []Result {
	plan := Plan(cfg)
	deadline := time.Time{}
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	total := len(plan) * len(cfg.Variants)
	var out []Result
	for _, b := range plan {
		for _, v := range b.Order {
			r := Result{Block: b.Index, Variant: v, Dir: RunDir(cfg.OutDir, v, b.Index)}
			if err := context.Cause(ctx); ctx.Err() != nil {
				r.Status, r.Error = "NOT RUN", fmt.Sprintf("the variant run stopped before it: %v", err)
				out = append(out, r)
				continue
			}
			var share time.Duration
			if !deadline.IsZero() {
				share = time.Until(deadline) / time.Duration(total-len(out))
			}
			logf("block %d/%d: variant %s (%s)", b.Index, len(plan), v, r.Dir)
			runChild(ctx, cfg, c, share, &r)
			logf("block %d/%d: variant %s: %s in %.1f s%s", b.Index, len(plan), v, r.Status, r.Seconds, suffix(r.Error))
			out = append(out, r)
		}
	}
	return out
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// runChild runs one block's run of r.Variant and fills r from its exit
// and its report.json.
func runChild(ctx context.Context, cfg config.Config, c Child, timeout time.Duration, r *Result) {
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		r.Status, r.Error = "FAIL", err.Error()
		return
	}
	logPath := filepath.Join(r.Dir, "go-test.log")
	log, err := os.Create(logPath)
	if err != nil {
		r.Status, r.Error = "FAIL", err.Error()
		return
	}
	defer log.Close()
	args := slices.Clone(c.Args)
	if timeout > 0 {
		args = append(args, "-test.timeout="+timeout.Round(time.Second).String())
	}
	cmd := exec.CommandContext(ctx, c.Exe, args...)
	cmd.Env = append(slices.Clip(c.Env), config.EnvVariant+"="+r.Variant, config.EnvName("out_dir")+"="+r.Dir)
	cmd.Stdout, cmd.Stderr = log, log
	// Stopped, the child stops its servers and writes its report; it is
	// killed only if that takes longer than its servers' stop allows.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Duration(cfg.Timeouts.StopS*float64(len(cfg.Models)+1)*float64(time.Second)) + 30*time.Second
	start := time.Now()
	runErr := cmd.Run()
	r.Seconds = time.Since(start).Seconds()
	rep, rerr := readReport(filepath.Join(r.Dir, "report.json"))
	switch {
	case rerr != nil:
		r.Status, r.Error = "FAIL", fmt.Sprintf("%v (go test: %v; see %s)", rerr, runErr, logPath)
		return
	default:
		r.Status, r.Runtime, r.Simulated = rep.Status, rep.Runtime, rep.Simulated
	}
	if len(rep.Failures) > 0 {
		r.Error = failureText(rep.Failures[0])
	}
	if runErr != nil {
		if r.Status == "PASS" { // a test that failed outside the phases: the child's exit says it
			r.Status = "FAIL"
		}
		if r.Error == "" {
			r.Error = fmt.Sprintf("go test: %v (see %s)", runErr, logPath)
		}
	}
}

func readReport(path string) (childReport, error) {
	var rep childReport
	b, err := os.ReadFile(path)
	if err != nil {
		return rep, fmt.Errorf("the run wrote no report: %w", err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, fmt.Errorf("%s: %w", path, err)
	}
	if rep.Status == "" {
		return rep, errors.New(path + ": no status")
	}
	return rep, nil
}

// marker is the file a variant run writes into out_dir/variants: a folder
// holding it is wakebench's, removed by the next variant run's Claim.
const marker = ".wakebench"

// Claim readies out_dir/variants for this run (its caller holds out_dir):
// the folder an earlier variant run left is removed, so a block it ran
// and this run does not is never read beside this run's; a folder there
// without the marker is not wakebench's, and is refused, not removed.
func Claim(outDir string) error {
	dir := filepath.Join(outDir, Dir)
	if _, err := os.Stat(dir); err == nil {
		if _, err := os.Stat(filepath.Join(dir, marker)); err != nil {
			return fmt.Errorf("out_dir %s: its %s/ is not a variant run's (no %s in it): move it, or give the run another out_dir", outDir, Dir, marker)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("out_dir %s: remove the earlier variant run's %s/: %w", outDir, Dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, marker), []byte("written by a wakebench variant run: the next one removes this folder\n"), 0o644)
}

// failureText is a failure in one line: "phase model: step: error", each
// part the failure has.
func failureText(f record.Failure) string {
	where := strings.TrimSpace(f.Phase + " " + f.Model)
	if f.Step != "" {
		where += ": " + f.Step
	}
	return where + ": " + f.Error
}
