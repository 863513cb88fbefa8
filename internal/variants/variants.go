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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
)

// Dir is out_dir's folder of the variants' runs: Dir/<variant>/block-<n>.
const Dir = "variants"

// Block is one block of a variant run: every variant once, in Order.
type Block struct {
	Index int      `json:"block"` // from 1
	Order []string `json:"order"`
}

// Plan is the run's blocks: protocol.variant_blocks of them, each every
// variant once. "alternate": the config's order in every block. "random"
// (randomised): the rows of a cyclic Latin square, the variants in an
// order drawn from protocol.variant_seed and rotated, the rotations of each
// run of as many blocks as there are variants drawn in turn; so every
// variant runs in every place of a block equally often over each such run
// of blocks (A B, B A, …), and a drift within a block (the first run's
// cold caches) falls on each alike (the last group short where the blocks
// are no multiple of the variants; with three or more, which variant
// follows which is not balanced: the rows are rotations). The same seed,
// the same orders.
func Plan(cfg config.Config) []Block {
	names := cfg.VariantNames()
	n := len(names)
	if n == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Protocol.VariantSeed), 0x77616b65)) // "wake"
	random := cfg.Protocol.VariantOrder == "random"
	if random {
		rng.Shuffle(n, func(a, b int) { names[a], names[b] = names[b], names[a] })
	}
	var rot []int
	out := make([]Block, cfg.Protocol.VariantBlocks)
	for i := range out {
		shift := 0
		if random {
			if len(rot) == 0 {
				rot = rng.Perm(n)
			}
			shift, rot = rot[0], rot[1:]
		}
		out[i] = Block{Index: i + 1, Order: append(slices.Clone(names[shift:]), names[:shift]...)}
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

// MinShare is the least of go test's -timeout a block's run is started
// with: one given less would only be cut short.
const MinShare = 30 * time.Second

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
	// Gate is the run's regression gate against the baseline history
	// (thresholds and WAKEBENCH_BASELINE apply to every block's run): its
	// verdict and what it judged; "" without a baseline.
	Gate string `json:"gate,omitempty"`
}

// childReport is what Run reads of a block's report.json.
type childReport struct {
	Status    string            `json:"status"`
	Runtime   string            `json:"runtime"`
	Simulated *record.Simulated `json:"simulated"`
	Failures  []record.Failure  `json:"failures"`
	Checks    []record.Check    `json:"checks"`
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
	short := "" // why the rest are NOT RUN once the timeout's share runs short
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
				if short == "" && share < MinShare {
					// Once short, every later run is NOT RUN too: a skipped run
					// leaving its share to the next would run a block's
					// variants with its reference skipped.
					short = fmt.Sprintf("%v of go test's -timeout left for this run, less than %v: give the variant run a longer -timeout (or 0)", share.Round(time.Second), MinShare)
				}
				if short != "" {
					r.Status, r.Error = "NOT RUN", short
					out = append(out, r)
					continue
				}
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
	// A parent that dies (SIGKILL, go test's own -timeout kill) takes
	// the child with it: it gets SIGTERM, stops its servers and writes its
	// report. Linux sends it when the thread that started the child exits,
	// so that thread is held until the child has ended: unlocked, a
	// goroutine that locks it and exits would end it under a living child
	// (golang/go#27505).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	start := time.Now()
	runtime.LockOSThread()
	runErr := cmd.Start()
	if runErr == nil {
		runErr = cmd.Wait()
	}
	runtime.UnlockOSThread()
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
	for _, c := range rep.Checks {
		if c.Name == gate.CheckRegressions {
			r.Gate = c.Verdict + ": " + c.Reason
		}
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

// CheckDir says whether out_dir/variants may be Claimed, touching
// nothing: absent, or an earlier variant run's (it holds the marker).
func CheckDir(outDir string) error {
	dir := filepath.Join(outDir, Dir)
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, marker)); err != nil {
		return fmt.Errorf("out_dir %s: its %s/ is not a variant run's (no %s in it): move it, or give the run another out_dir", outDir, Dir, marker)
	}
	return nil
}

// Claim readies out_dir/variants for this run (its caller holds out_dir):
// the folder an earlier variant run left is removed, so a block it ran
// and this run does not is never read beside this run's; a folder there
// without the marker is not wakebench's, and is refused, not removed.
func Claim(outDir string) error {
	dir := filepath.Join(outDir, Dir)
	if err := CheckDir(outDir); err != nil {
		return err
	}
	if _, err := os.Stat(dir); err == nil {
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
