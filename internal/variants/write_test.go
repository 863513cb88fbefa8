package variants

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

func variantConfig(t *testing.T, order string) config.Config {
	cfg := config.Default()
	cfg.OutDir = t.TempDir()
	cfg.Variants = []config.Variant{{Name: "ref"}, {Name: "new"}, {Name: "opt"}}
	cfg.Protocol.VariantBlocks, cfg.Protocol.VariantOrder = 4, order
	return cfg
}

func TestPlanOrders(t *testing.T) {
	alt := Plan(variantConfig(t, "alternate"))
	require.Len(t, alt, 4)
	for _, b := range alt {
		assert.Equal(t, []string{"ref", "new", "opt"}, b.Order)
	}
	cfg := variantConfig(t, "random")
	cfg.Protocol.VariantBlocks = 6
	r := Plan(cfg)
	assert.Equal(t, r, Plan(cfg), "the same seed, the same orders")
	// Balanced: over each run of three blocks every variant runs once in
	// every place of a block (a Latin square's rows).
	for start := 0; start < 6; start += 3 {
		for place := range 3 {
			var at []string
			for _, b := range r[start : start+3] {
				assert.ElementsMatch(t, []string{"ref", "new", "opt"}, b.Order, "each block runs every variant once")
				at = append(at, b.Order[place])
			}
			assert.ElementsMatch(t, []string{"ref", "new", "opt"}, at, "blocks %d-%d, place %d", start+1, start+3, place+1)
		}
	}
	other := cfg
	other.Protocol.VariantSeed = 2
	assert.NotEqual(t, r, Plan(other), "another seed, other orders")
	cfg.Variants = cfg.Variants[:2]
	cfg.Protocol.VariantBlocks = 4
	two := Plan(cfg)
	assert.NotEqual(t, two[0].Order, two[1].Order, "two variants: A B then B A (or B A then A B)")
	assert.NotEqual(t, two[2].Order, two[3].Order)
}

// writeRun writes a run's bench.txt and report.json as a child leaves them.
func writeRun(t *testing.T, cfg config.Config, v string, block int, status, runtime string, wake float64) Result {
	dir := RunDir(cfg.OutDir, v, block)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	bench := fmt.Sprintf("Unit sec/wake better=lower\nruntime: %s\nmodel-a: tiny-a\n\nBenchmarkSleep/model=A/level=1 1 %g sec/wake\nBenchmarkSleep/model=A/level=1 1 %g sec/wake\n", runtime, wake, wake)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bench.txt"), []byte(bench), 0o644))
	rep := fmt.Sprintf(`{"status": %q, "runtime": %q, "simulated": {"profile": "tiny", "time_scale": 1}, "failures": []}`, status, runtime)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "report.json"), []byte(rep), 0o644))
	return Result{Block: block, Variant: v, Dir: dir, Status: status, Runtime: runtime, Simulated: &record.Simulated{Profile: "tiny", TimeScale: 1}}
}

// A variant 30 % slower in every block fails the comparison; a run that
// failed a threshold still counts, one that wrote nothing loses its
// block's pair, and both fail the run; bench.txt
// keeps the reference first and drops the runtime key that differs.
func TestCompareAndWrite(t *testing.T) {
	cfg := variantConfig(t, "alternate")
	cfg.Protocol.VariantBlocks = 3
	cfg.Variants[1] = config.Variant{Name: "new", SimEra: "c", ExtraArgs: []string{"--enforce-eager"}, Env: map[string]string{"X": "1", "HF_TOKEN": "hf_secret"},
		Set: map[string]json.RawMessage{"protocol.switch_level": json.RawMessage("2")}}
	var runs []Result
	for b := 1; b <= 3; b++ {
		base := 0.1 * float64(b) // drift over the run, on every variant alike
		runs = append(runs, writeRun(t, cfg, "new", b, "PASS", "vLLM 0.33", base*1.3*(1+0.01*float64(b))))
		runs = append(runs, writeRun(t, cfg, "ref", b, "PASS", "vLLM 0.31", base))
		status := "PASS"
		if b <= 2 { // block 1: a threshold failed, its figures stand; block 2: killed
			status = "FAIL"
		}
		runs = append(runs, writeRun(t, cfg, "opt", b, status, "vLLM 0.31", base))
	}
	// Block 2's opt run was killed: a provisional report, no bench.txt.
	require.NoError(t, os.Remove(filepath.Join(runs[5].Dir, "bench.txt")))
	c := Compare(cfg, runs)
	assert.Equal(t, "FAIL", c.Status)
	byVariant := map[string]Metric{}
	for _, m := range c.Metrics {
		byVariant[m.Variant] = m
	}
	assert.Equal(t, Worse, byVariant["new"].Verdict, "30 %% slower in every block, drift or not: %+v", byVariant["new"])
	assert.InDelta(t, 32, byVariant["new"].DeltaPct, 1, "1.3 × (1.01, 1.02, 1.03): +32 %")
	assert.Equal(t, "opt", runs[5].Variant)
	assert.Equal(t, 2, byVariant["opt"].Blocks, "blocks 1 and 3: the run that failed a threshold is paired, the one that wrote no bench.txt is not")
	assert.Equal(t, Same, byVariant["opt"].Verdict)
	assert.Contains(t, strings.Join(c.Failures, "\n"), "block 2, variant opt: FAIL")
	assert.Contains(t, strings.Join(c.Failures, "\n"), "variant new: Sleep/model=A/level=1 sec/wake is +32.")
	assert.Equal(t, "simulated: every figure is vllmsim's (vllmsim profile tiny, time scale 1)", c.Simulated)

	var buf bytes.Buffer
	require.NoError(t, c.WriteBench(&buf))
	out := buf.String()
	assert.NotContains(t, out, "runtime:", "a key that differs between runs would split benchstat's tables")
	assert.Contains(t, out, "model-a: tiny-a")
	assert.Less(t, strings.Index(out, "variant: ref"), strings.Index(out, "variant: new"), "the reference is benchstat's base column")
	assert.Equal(t, 8*2, strings.Count(out, "BenchmarkSleep/model=A/level=1"), "every sample of every run that wrote them")

	require.NoError(t, c.Write(cfg.OutDir))
	for _, f := range []string{"summary.md", "comparison.json", "bench.txt", "report.html", "checks.junit.xml", "ctrf.json"} {
		assert.FileExists(t, filepath.Join(cfg.OutDir, f))
	}
	var back Comparison
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, "comparison.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, "FAIL", back.Status)
	md, err := os.ReadFile(filepath.Join(cfg.OutDir, "summary.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "## new against ref")
	assert.Contains(t, string(md), "| ref | the run's own settings |")
	assert.Contains(t, string(md), "| new | sim_era `c`; extra_args `--enforce-eager`; env `HF_TOKEN=(not shown)`; env `X=1`; set `protocol.switch_level=2` |", "what each variant changes")
	assert.NotContains(t, string(md), "hf_secret", "a secret's value is not written")
	assert.Equal(t, "(not shown)", back.Definitions[1].Env["HF_TOKEN"], "comparison.json writes no secret")
	back.Definitions[1].Env["HF_TOKEN"] = "hf_secret"
	assert.Equal(t, cfg.Variants, back.Definitions, "comparison.json reads back what each variant is")
	assert.Contains(t, string(md), "every figure is vllmsim's")
	page, err := os.ReadFile(filepath.Join(cfg.OutDir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), "new against ref", "a strip of each block's change per variant")
	assert.Contains(t, string(page), "Simulated: every figure is vllmsim&#39;s")
	assert.Equal(t, []float64{1.3 * 1.01, 1.3 * 1.02, 1.3 * 1.03}, roundAll(byVariant["new"].Ratios), "each block's ratio, in block order")
	junit, err := os.ReadFile(filepath.Join(cfg.OutDir, "checks.junit.xml"))
	require.NoError(t, err)
	assert.Contains(t, string(junit), "variant.Sleep/model=A/level=1.sec/wake")
}

func TestClaimRemovesOnlyItsOwn(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Claim(dir))
	stale := filepath.Join(dir, Dir, "old", "block-9")
	require.NoError(t, os.MkdirAll(stale, 0o755))
	require.NoError(t, Claim(dir))
	assert.NoDirExists(t, stale, "an earlier variant run's block is gone")
	other := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(other, Dir, "mine"), 0o755))
	err := Claim(other)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a variant run's")
	assert.DirExists(t, filepath.Join(other, Dir, "mine"))
}

func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Round(x*1e9) / 1e9
	}
	return out
}

// childScript stands in for a block's child run: it writes what a run
// writes into its out_dir, as its variant says (ref and new pass, bad
// writes nothing and exits 1), and the flags it was given.
const childScript = `mkdir -p "$WAKEBENCH_OUT_DIR"
case "$WAKEBENCH_VARIANT" in
bad) exit 1 ;;
ref) w=0.1 ;;
*) w=0.13 ;;
esac
printf 'Unit sec/wake better=lower\n\nBenchmarkSleep/model=A/level=1 1 %s sec/wake\n' "$w" >"$WAKEBENCH_OUT_DIR/bench.txt"
printf '{"status": "PASS", "runtime": "vLLM x", "failures": [], "checks": [{"name": "regressions against baseline", "verdict": "PASS", "reason": "judged 3 of 4 metrics"}]}' >"$WAKEBENCH_OUT_DIR/report.json"
echo "$0 $*" >"$WAKEBENCH_OUT_DIR/args"
`

// Run runs every block's variants in the plan's order, each in its own
// out_dir with its variant and its share of the timeout, reads what each
// wrote, and names a child that wrote no report.
func TestRunRunsEachBlockAsAChild(t *testing.T) {
	cfg := variantConfig(t, "random")
	cfg.Variants = []config.Variant{{Name: "ref"}, {Name: "new"}, {Name: "bad"}}
	cfg.Protocol.VariantBlocks = 2
	child := Child{Exe: "/bin/sh", Args: []string{"-c", childScript, "sh", "-test.run=^TestProtocol$"}, Env: os.Environ()}
	var lines []string
	runs := Run(t.Context(), cfg, child, time.Hour, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	require.Len(t, runs, 6)
	plan := Plan(cfg)
	for i, r := range runs {
		b := plan[i/3]
		assert.Equal(t, b.Index, r.Block)
		assert.Equal(t, b.Order[i%3], r.Variant, "the plan's order")
		assert.Equal(t, RunDir(cfg.OutDir, r.Variant, r.Block), r.Dir)
		if r.Variant == "bad" {
			assert.Equal(t, "FAIL", r.Status)
			assert.Contains(t, r.Error, "the run wrote no report")
			assert.Contains(t, r.Error, "exit status 1")
			continue
		}
		assert.Equal(t, "PASS", r.Status, r.Error)
		assert.Equal(t, "PASS: judged 3 of 4 metrics", r.Gate)
		args, err := os.ReadFile(filepath.Join(r.Dir, "args"))
		require.NoError(t, err)
		assert.Regexp(t, `^sh -test.run=\^TestProtocol\$ -test.timeout=(\d+h)?\d+m\d+s$`, strings.TrimSpace(string(args)), "the parent's flags and a share of the timeout")
	}
	assert.Len(t, lines, 12, "a line as each run starts and one as it ends")
	c := Compare(cfg, runs)
	assert.Equal(t, "FAIL", c.Status)
	md := c.Summary().Markdown()
	assert.Contains(t, md, "against the baseline", "each run's own gate verdict beside the paired one")

	// A stopped variant run starts no more children: the rest are NOT RUN.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	runs = Run(ctx, cfg, child, 0, func(string, ...any) {})
	for _, r := range runs {
		assert.Equal(t, "NOT RUN", r.Status)
		assert.NoDirExists(t, filepath.Join(r.Dir, "args"))
	}
}

// Plan of no variants is no blocks, not a panic; once a run's share of
// the timeout is short, every later run is NOT RUN, none run out of turn.
func TestPlanEmptyAndShortShares(t *testing.T) {
	cfg := variantConfig(t, "random")
	none := cfg
	none.Variants = nil
	assert.Empty(t, Plan(none))

	cfg.Protocol.VariantBlocks = 2
	var started int
	runs := Run(t.Context(), cfg, Child{Exe: "/bin/false"}, MinShare*5, func(f string, _ ...any) {
		if strings.HasPrefix(f, "block %d/%d: variant %s (") {
			started++
		}
	})
	require.Len(t, runs, 6)
	// 5 × MinShare over six runs: the first's share (25 s) is short; the
	// second's would be 30 s if the first's were handed on, and it would
	// run out of its block's turn.
	assert.Equal(t, 0, started, "nothing runs once a share is short")
	for _, r := range runs {
		assert.Equal(t, "NOT RUN", r.Status)
		assert.Contains(t, r.Error, "less than 30s")
	}
}

// TestUngatedComparison: with protocol.variant_gate false a variant worse
// than the reference is shown worse, in summary.md and its check, and the
// comparison still PASSes; a run that failed still fails it.
func TestUngatedComparison(t *testing.T) {
	cfg := variantConfig(t, "alternate")
	cfg.Variants = cfg.Variants[:2]
	cfg.Protocol.VariantBlocks = 3
	cfg.Protocol.VariantGate = false
	var runs []Result
	for b := 1; b <= 3; b++ {
		runs = append(runs, writeRun(t, cfg, "ref", b, "PASS", "vLLM 0.31", 0.1))
		runs = append(runs, writeRun(t, cfg, "new", b, "PASS", "vLLM 0.33", 0.13*(1+0.01*float64(b))))
	}
	c := Compare(cfg, runs)
	assert.Equal(t, "PASS", c.Status, "%v", c.Failures)
	require.NotEmpty(t, c.Metrics)
	assert.Equal(t, Worse, c.Metrics[0].Verdict)
	for _, ch := range c.checks() {
		assert.Equal(t, "PASS", ch.Verdict, ch.Reason)
		assert.Contains(t, ch.Reason, "not gated")
	}
	assert.Contains(t, c.Summary().Markdown(), "Not gated (`protocol.variant_gate` false)")

	runs[1].Status, runs[1].Error = "FAIL", "a threshold"
	assert.Equal(t, "FAIL", Compare(cfg, runs).Status, "a run that failed still fails it")
}

// TestCompareGatesTheFocusOnly: with protocol.variant_focus a figure
// outside it that is worse is shown worse (its check PASS, saying why)
// and does not fail the run; the same figure in the focus does.
func TestCompareGatesTheFocusOnly(t *testing.T) {
	cfg := variantConfig(t, "alternate")
	cfg.Variants = cfg.Variants[:2]
	cfg.Protocol.VariantBlocks = 3
	var runs []Result
	for b := 1; b <= 3; b++ {
		runs = append(runs, writeRun(t, cfg, "ref", b, "PASS", "vLLM 0.31", 0.1))
		runs = append(runs, writeRun(t, cfg, "new", b, "PASS", "vLLM 0.33", 0.13*(1+0.01*float64(b))))
	}
	cfg.Protocol.VariantFocus = []string{"Switch/* sec/wake"} // not the figure that moved, nor any figure of these runs
	c := Compare(cfg, runs)
	assert.Equal(t, []string{"variant new: no figure of protocol.variant_focus (Switch/* sec/wake) was judged against ref: the question was not answered (a pattern that names no bench.txt figure, or a phase that did not run)"},
		c.Failures, "the worse figure outside the focus fails nothing; a focus that judged nothing does")
	require.Len(t, c.Metrics, 1)
	m := c.Metrics[0]
	assert.False(t, m.Focus)
	assert.Equal(t, Worse, m.Verdict, "judged in its own family: shown")
	assert.Contains(t, m.Why, "outside protocol.variant_focus (shown, not gated)")
	ch := c.checks()
	require.Len(t, ch, 1)
	assert.Equal(t, "PASS", ch[0].Verdict)
	assert.Contains(t, ch[0].Reason, "not gated: outside protocol.variant_focus")
	md := c.Summary().Markdown()
	assert.Contains(t, md, "`protocol.variant_focus`: `Switch/* sec/wake`), are one family and gated")
	assert.Contains(t, md, "| worse (not gated) |", "shown, marked")
	assert.Equal(t, []string{"Switch/* sec/wake"}, c.Focus)
	assert.False(t, c.htmlView().Variants[0].Rows[0].Flagged, "the page does not flag what is not gated")

	// One entry of two names nothing (a typo): that part of the question is not answered.
	cfg.Protocol.VariantFocus = []string{"Sleep/*/level=1 sec/wake", "Sleep/*/* sec/wakes"}
	c = Compare(cfg, runs)
	assert.Contains(t, c.Failures, `variant new: protocol.variant_focus entry "Sleep/*/* sec/wakes" names no figure judged against ref (a typo, or a phase that did not run): part of the question was not answered`)

	cfg.Protocol.VariantFocus = []string{"Sleep/*/level=1 sec/wake"}
	c = Compare(cfg, runs)
	assert.Equal(t, "FAIL", c.Status)
	assert.True(t, c.Metrics[0].Focus)
	assert.Contains(t, c.Metrics[0].Why, "1 judged metrics in protocol.variant_focus")
}
