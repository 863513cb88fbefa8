package variants

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	r := Plan(cfg)
	assert.Equal(t, r, Plan(cfg), "the same seed, the same orders")
	differs := false
	for _, b := range r {
		assert.ElementsMatch(t, []string{"ref", "new", "opt"}, b.Order, "each block runs every variant once")
		differs = differs || !slices.Equal(b.Order, r[0].Order)
	}
	assert.True(t, differs, "four blocks of three variants drawn at random are not all in one order (seed 1)")
	cfg.Protocol.VariantSeed = 2
	assert.NotEqual(t, r, Plan(cfg), "another seed, other orders")
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

// A variant 30 % slower in every block fails the comparison; one that
// failed a block loses that block's pair and fails the run; bench.txt
// keeps the reference first and drops the runtime key that differs.
func TestCompareAndWrite(t *testing.T) {
	cfg := variantConfig(t, "alternate")
	cfg.Protocol.VariantBlocks = 3
	var runs []Result
	for b := 1; b <= 3; b++ {
		base := 0.1 * float64(b) // drift over the run, on every variant alike
		runs = append(runs, writeRun(t, cfg, "new", b, "PASS", "vLLM 0.33", base*1.3*(1+0.01*float64(b))))
		runs = append(runs, writeRun(t, cfg, "ref", b, "PASS", "vLLM 0.31", base))
		status := "PASS"
		if b == 2 {
			status = "FAIL"
		}
		runs = append(runs, writeRun(t, cfg, "opt", b, status, "vLLM 0.31", base))
	}
	c := Compare(cfg, runs)
	assert.Equal(t, "FAIL", c.Status)
	byVariant := map[string]Metric{}
	for _, m := range c.Metrics {
		byVariant[m.Variant] = m
	}
	assert.Equal(t, Worse, byVariant["new"].Verdict, "30 %% slower in every block, drift or not: %+v", byVariant["new"])
	assert.InDelta(t, 32, byVariant["new"].DeltaPct, 1, "1.3 × (1.01, 1.02, 1.03): +32 %")
	assert.Equal(t, 2, byVariant["opt"].Blocks, "the failed block gives no pair")
	assert.Equal(t, Same, byVariant["opt"].Verdict)
	assert.Contains(t, strings.Join(c.Failures, "\n"), "block 2, variant opt: FAIL")
	assert.Contains(t, strings.Join(c.Failures, "\n"), "variant new: Sleep/model=A/level=1 sec/wake is +32.")
	assert.Equal(t, "simulated: vllmsim profile tiny, time scale 1", c.Simulated)

	var buf bytes.Buffer
	require.NoError(t, c.WriteBench(&buf))
	out := buf.String()
	assert.NotContains(t, out, "runtime:", "a key that differs between runs would split benchstat's tables")
	assert.Contains(t, out, "model-a: tiny-a")
	assert.Less(t, strings.Index(out, "variant: ref"), strings.Index(out, "variant: new"), "the reference is benchstat's base column")
	assert.Equal(t, 9*2, strings.Count(out, "BenchmarkSleep/model=A/level=1"), "every sample of every run")

	require.NoError(t, c.Write(cfg.OutDir))
	for _, f := range []string{"summary.md", "comparison.json", "bench.txt", "checks.junit.xml", "ctrf.json"} {
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
	assert.Contains(t, string(md), "every figure is simulated")
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
