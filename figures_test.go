package wakebench

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/wakebench/wakebench/internal/figures"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/harness"
	"github.com/wakebench/wakebench/internal/simtest"
)

// figuresConfig is the whole-run figure test's protocol: every phase of
// TestProtocol on vllmsim's tiny models, each as short as still gives its
// figures (two samples where a figure has a first and a steady state),
// tokens few because every decode step is slowed in one run (the in-flight
// sleep in mode abort only: wait and keep decode 150 tokens to the end).
// %s is each model's sim_faults.
const figuresConfig = `{"command": "vllmsim", "memory": "sim", "sim": {"profile": "tiny", "time_scale": 0.5, "host_scale": 0.02},
	"models": [{"label": "A", "name": "tiny-a", "gpu_memory_utilization": 0.45, "sim_faults": %[1]q, "lora_modules": {"sql": "/adapters/sql"}},
		{"label": "B", "name": "tiny-b", "gpu_memory_utilization": 0.45, "sim_faults": %[1]q}],
	"protocol": {"restart_warm": 2, "sleep_l1_cycles": 2, "sleep_l2_cycles": 2, "sleep_l0_cycles": 2, "kv_release_cycles": 2,
		"handoffs": 4, "concurrency": [1, 2], "rounds": 1, "requests_per_round": 2, "max_tokens": 3, "correctness_max_tokens": 2,
		"context_tokens": 300, "settle_s": 0.02, "cost_dwell_s": 0.2, "health_requests": 2, "health_max_tokens": 2, "lost_prefix_tokens": 128},
	"traffic": {"duration_s": 2, "workload": {"kind": "fixed", "prompt_tokens": 16, "output_tokens": 4}, "in_flight_modes": ["abort"]},
	"thresholds": {"min_after_wake_tps_ratio": 0, "min_traffic_goodput_ratio": 0, "min_decode_rate_ratio": 0}}`

// envFigures turns TestEveryFigureMeansItsName on (make figures): 1 for
// every operation, or a comma-separated list of them (reads,wake) to run
// those beside the unslowed run alone.
const envFigures = "WAKEBENCH_FIGURES"

// slowedOp is one run of the whole-run figure test: an operation of
// docs/metrics.md's "inside" column slowed by delay seconds.
type slowedOp struct {
	op     string
	delay  float64
	faults string   // the servers' sim_faults
	env    []string // the run's environment (the harness's own hooks)
}

func slowedOps() []slowedOp {
	const d = 0.5
	ops := []slowedOp{{op: "reads", delay: d, faults: simtest.ReadsLate(d), env: []string{fmt.Sprintf("%s=%g", harness.EnvReadDelay, d)}}}
	for _, op := range figures.Ops[1:] {
		s := slowedOp{op: op, delay: d}
		switch op {
		case "start":
			s.delay = 1 // starts vary most
		}
		s.faults = fmt.Sprintf("slow=%s:%g", op, s.delay)
		ops = append(ops, s)
	}
	return ops
}

// TestEveryFigureMeansItsName is the whole-run figure test: the protocol
// on vllmsim once as it is, then once with each operation of
// docs/metrics.md's "inside" column slowed (the harness's own reads, then
// each server operation in turn). Every figure the runs write has exactly
// one row in that table; in each slowed run, exactly the interval and
// energy figures whose row names the operation move: a time's smallest
// sample is at least 0.9 × the delay (a slowed operation inside it takes
// that long, however busy the machine) and moved by at least a quarter of
// it (an energy: a quarter of the delay at the device's lowest power);
// every other figure's smallest sample moves, either way (a figure that
// takes out too much moves down), by less than half the delay (an energy:
// half the delay at the highest power a state drew). A figure of the unslowed run that a slowed run lacks fails. Operations a row names as partly inside (~op) are not
// judged, nor are the figures that do not name an operation moved where
// the row says the run's schedule places the samples (~any).
func TestEveryFigureMeansItsName(t *testing.T) {
	if os.Getenv("WAKEBENCH_CHILD") != "" {
		t.Skip("this is a child run")
	}
	if os.Getenv(envFigures) == "" {
		t.Skipf("ten runs of the protocol, about 5 minutes: make figures (%s=1) runs it, as CI does", envFigures)
	}
	md, err := os.ReadFile("docs/metrics.md")
	require.NoError(t, err)
	table, err := figures.Parse(md)
	require.NoError(t, err, "docs/metrics.md's figure table")

	ops := slowedOps()
	if only := os.Getenv(envFigures); only != "1" { // a comma-separated list of operations: those runs alone
		want := strings.Split(only, ",")
		ops = slices.DeleteFunc(ops, func(s slowedOp) bool { return !slices.Contains(want, s.op) })
		require.NotEmpty(t, ops, "%s=%q: 1, or operations of %v", envFigures, only, figures.Ops)
	}
	var mu sync.Mutex // guards done
	done := map[string]map[string]figures.Figure{}
	var g errgroup.Group
	// Five at a time, the unslowed run and the longest first (the reads
	// run's hundreds of late reads, then every decode step, then every
	// prefill), so the unslowed run meets the contention the others do:
	// ten runs at once start their servers together, and the early
	// phases' figures then carry the machine's contention more than the
	// operation's delay.
	g.SetLimit(5)
	runs := append([]slowedOp{{op: "none"}}, ops...)
	slices.SortStableFunc(runs, func(a, b slowedOp) int { return cmp.Compare(length(b.op), length(a.op)) })
	for _, s := range runs {
		g.Go(func() error {
			began := time.Now()
			figs, err := figureRun(t, s)
			t.Logf("the run with %s slowed took %.0f s", s.op, time.Since(began).Seconds())
			if err != nil {
				return fmt.Errorf("the run with %s slowed: %w", s.op, err)
			}
			mu.Lock()
			defer mu.Unlock()
			done[s.op] = figs
			return nil
		})
	}
	require.NoError(t, g.Wait())

	base := done["none"]
	for name, figs := range done {
		for p := range figs {
			if _, err := table.Row(p); err != nil {
				t.Errorf("the run with %s slowed: %v", name, err)
			}
		}
	}
	pLow, pHigh := statePower(base)
	require.Greater(t, pLow, 0.0, "the base run measured the device's power")
	for _, s := range ops {
		t.Run(s.op, func(t *testing.T) {
			slow := done[s.op]
			judged := 0
			// The margins, logged: the smallest move (as a fraction of the
			// operation's delay) of a figure holding it, the largest of one
			// that does not; the test's bounds are ¼ and ½.
			minIn, maxOut, minAt, maxAt := math.Inf(1), 0.0, "", ""
			for p, b := range base {
				row, err := table.Row(p)
				if err != nil || !row.Interval || slices.Contains(row.Partly, s.op) || b.N == 0 || math.IsNaN(b.Min) {
					continue
				}
				f, ok := slow[p]
				if (!ok || f.N == 0 || math.IsNaN(f.Min)) && row.Schedule {
					continue // where the samples fall is the run's schedule's: none may fall here
				}
				if !ok || f.N == 0 || math.IsNaN(f.Min) {
					// A slowed run that lost a figure (a phase failed on
					// the delay) proves nothing of it.
					assert.Fail(t, "a figure the unslowed run measured is missing", "%s: n %d in the run with %s slowed", p, f.N, s.op)
					continue
				}
				judged++
				energy := strings.HasSuffix(p, "_j") || strings.HasSuffix(p, ".j") || strings.Contains(p, " J")
				// What the operation adds, at least: its delay, or for an
				// energy the delay at the device's lowest power. A figure not
				// holding the operation is held to half the delay at the most
				// power a state drew: a busy machine that keeps an interval
				// open longer adds that time at the interval's own power,
				// not the lowest (in a .ci/run, A's level-1 sleep J moved
				// 1.551 → 6.112 J with prefill slowed, over half the delay at
				// the lowest power, while its time, the same interval, moved
				// within its bound); an operation's own work leaking in
				// draws for its whole delay.
				unit, outUnit := s.delay, s.delay
				if energy {
					unit, outUnit = unit*pLow, outUnit*pHigh
				}
				moved := f.Min - b.Min
				if frac := moved / unit; slices.Contains(row.Inside, s.op) && frac < minIn {
					minIn, minAt = frac, p
				} else if !slices.Contains(row.Inside, s.op) && !row.Schedule && math.Abs(moved/outUnit) > maxOut {
					maxOut, maxAt = math.Abs(moved/outUnit), p
				}
				if slices.Contains(row.Inside, s.op) {
					// A quarter: the unslowed run's one sample may itself
					// have been slow (a busy machine), which hides part of
					// the move; the floor below is the exact check.
					assert.GreaterOrEqual(t, moved, unit/4, "%s (docs/metrics.md:%d names %s inside): its smallest sample moved %.3f → %.3f", p, row.Line, s.op, b.Min, f.Min)
					if !energy { // 0.9: a token gap may be short by what the previous token was late (the engine keeps an absolute schedule)
						assert.GreaterOrEqual(t, f.Min, 0.9*s.delay, "%s: every sample holds %s, slowed by %g s", p, s.op, s.delay)
					}
				} else if !row.Schedule {
					assert.Less(t, math.Abs(moved), outUnit/2, "%s (docs/metrics.md:%d does not name %s): its smallest sample moved %.3f → %.3f", p, row.Line, s.op, b.Min, f.Min)
				}
			}
			assert.Greater(t, judged, 100, "interval and energy figures judged")
			t.Logf("%d figures judged; holding %s: least moved %.2f × its delay (%s); not holding it: most moved %.2f × (%s)", judged, s.op, minIn, minAt, maxOut, maxAt)
		})
	}
}

// length ranks a run by how long it takes: the reads run longest.
func length(op string) int {
	return map[string]int{"none": 5, "reads": 4, "decode": 3, "prefill": 2, "wake": 1, "sleep": 1}[op]
}

// figureRun runs the protocol as a child run with s's operation slowed and
// returns its figures: report.json's and bench.txt's.
func figureRun(t *testing.T, s slowedOp) (map[string]figures.Figure, error) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "figures.json")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, figuresConfig, s.faults), 0o644); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "out")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestProtocol$", "-test.v")
	cmd.Env = append(append(os.Environ(), "WAKEBENCH_CHILD=1", "WAKEBENCH_OUT_DIR="+out, "WAKEBENCH_CONFIG="+cfg), s.env...)
	b, err := cmd.CombinedOutput()
	rep, rerr := os.ReadFile(filepath.Join(out, "report.json"))
	if rerr != nil {
		return nil, fmt.Errorf("no report (%v): %w\n%s", err, rerr, b)
	}
	if s.op == "none" && err != nil {
		return nil, fmt.Errorf("the unslowed run fails: %w\n%s", err, b)
	}
	figs, err := figures.Flatten(rep)
	if err != nil {
		return nil, err
	}
	// bench.txt's benchmarks and units, as figures of their samples.
	f, err := os.Open(filepath.Join(out, "bench.txt"))
	if err != nil {
		return nil, fmt.Errorf("no bench.txt: %w", err)
	}
	defer f.Close()
	bench, err := gate.ReadBench(f, "bench.txt")
	if err != nil {
		return nil, err
	}
	for k, xs := range bench.Values {
		figs[figures.BenchPath(k.Name, k.Unit)] = figures.Values(xs)
	}
	return figs, nil
}

// statePower is the lowest and the highest device power the run measured
// (state-cost dwells, every model and state: the lowest sample, the highest
// median), 0 if none: an energy figure holding an operation slowed by d
// grows by at least low × d; one not holding it is held to half of high × d.
func statePower(figs map[string]figures.Figure) (low, high float64) {
	for p, f := range figs {
		if figures.Match("models.*.cost.states.*.power_w", p) && f.N > 0 {
			if low == 0 || f.Min < low {
				low = f.Min
			}
			high = max(high, f.Median)
		}
	}
	return low, high
}
