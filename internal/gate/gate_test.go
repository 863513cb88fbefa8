package gate

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

func verdicts(cs []record.Check) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		out[c.Name+"/"+c.Model] = c.Verdict
	}
	return out
}

// TestSleepChecks: a failed cycle fails successful_cycles; residual and
// release are judged on their medians, unknown residuals left out.
func TestSleepChecks(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Protocol.SleepL1Cycles = 3
	cfg.Thresholds.MaxResidualGiB = 1
	cfg.Thresholds.MaxL1WakeToFirstTokenS = 2
	cycles := []record.Cycle{
		{Level: 1, OK: true, ToFirstTokenS: 1, ResidualGiB: 0.5},
		{Level: 1, OK: true, ToFirstTokenS: 3, ResidualGiB: math.NaN()},
		{Level: 1, OK: false},
	}
	got := verdicts(Sleep(cfg, "A", 1, cycles, []float64{40, 45, 90}))
	assert.Equal(t, map[string]string{
		"sleep.level1.successful_cycles/A":    "FAIL",
		"sleep.level1.to_first_token_s.p95/A": "FAIL",
		"sleep.level1.residual_gib.median/A":  "PASS",
		"memory.l1_release_fraction.median/A": "FAIL",
	}, got)
	cycles[2].OK, cycles[1].ToFirstTokenS = true, 1.5
	got = verdicts(Sleep(cfg, "A", 1, cycles, []float64{92, 95, 97}))
	for k, v := range got {
		assert.Equal(t, "PASS", v, k)
	}
}

// TestResidualPerGPU: a model across two GPUs is held to max_residual_gib
// on each GPU it spans (2 × 1 GiB here) and to max_residual_gib_per_gpu on
// its worst GPU. By hand: cycles keeping 0.6 + 0.6 GiB total 1.2 ≤ 2 and
// worst 0.6 ≤ 0.8 pass; 0.3 + 1.5 = 1.8 ≤ 2 passes the total but its worst
// GPU's 1.5 > 0.8 fails; one GPU's figures give no per-GPU check; a model
// on one of the two GPUs keeps its limit of 1.
func TestResidualPerGPU(t *testing.T) {
	cfg := config.SimDefault()
	cfg.GPUs = 2
	cfg.Models[0].ExtraArgs = []string{"--tensor-parallel-size", "2"} // A spans both GPUs; B is on one
	cfg.Protocol.SleepL1Cycles = 2
	cfg.Thresholds.MaxResidualGiB, cfg.Thresholds.MaxResidualGiBPerGPU = 1, 0.8
	cycle := func(per ...float64) record.Cycle {
		c := record.Cycle{Level: 1, OK: true, ToFirstTokenS: 0.1, ResidualPerGPU: per}
		for _, g := range per {
			c.ResidualGiB += g
		}
		return c
	}
	judge := func(cs ...record.Cycle) map[string]string { return verdicts(Sleep(cfg, "A", 1, cs, nil)) }
	got := judge(cycle(0.6, 0.6), cycle(0.6, 0.6))
	assert.Equal(t, "PASS", got["sleep.level1.residual_gib.median/A"], "1.2 GiB over 2 GPUs ≤ 2 × 1")
	assert.Equal(t, "PASS", got["sleep.level1.residual_gib_per_gpu.max.median/A"])
	got = judge(cycle(0.3, 1.5), cycle(0.3, 1.5))
	assert.Equal(t, "PASS", got["sleep.level1.residual_gib.median/A"], "1.8 ≤ 2")
	assert.Equal(t, "FAIL", got["sleep.level1.residual_gib_per_gpu.max.median/A"], "its worst GPU keeps 1.5 > 0.8")
	got = judge(record.Cycle{Level: 1, OK: true, ToFirstTokenS: 0.1, ResidualGiB: 1.2}, record.Cycle{Level: 1, OK: true, ToFirstTokenS: 0.1, ResidualGiB: 1.2})
	assert.NotContains(t, got, "sleep.level1.residual_gib_per_gpu.max.median/A", "one GPU's figures: no per-GPU check")
	// B on one of the run's two GPUs: its per-GPU figures are 1.2 and 0,
	// and its limit is 1, not 2: 1.2 fails.
	b := verdicts(Sleep(cfg, "B", 1, []record.Cycle{cycle(1.2, 0), cycle(1.2, 0)}, nil))
	assert.Equal(t, "FAIL", b["sleep.level1.residual_gib.median/B"], "a model on one GPU: 1.2 > 1")
	assert.Equal(t, "FAIL", b["sleep.level1.residual_gib_per_gpu.max.median/B"], "its GPU keeps 1.2 > 0.8")
}

// TestAfterWakeAgainstBaseline: the ratio is after-wake median tok/s over
// the baseline's at the same concurrency; a concurrency without a
// baseline has no ratio check.
func TestAfterWakeAgainstBaseline(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Thresholds.MinAfterWakeTPSRatio = 0.9
	base := record.PerfRun{Stage: record.PhaseBaseline, Concurrency: 1, Rounds: 2, Planned: 4, Success: 4, RoundsPassed: 2, RoundTPS: []float64{100, 100}}
	aw := record.PerfRun{Stage: record.PhaseAfterWake, Concurrency: 1, Rounds: 2, Planned: 4, Success: 4, RoundsPassed: 2, RoundTPS: []float64{80, 90}}
	aw4 := aw
	aw4.Concurrency = 4
	cs := AfterWake(cfg, "A", record.PhaseAfterWake, []record.PerfRun{aw, aw4}, []record.PerfRun{base, aw, aw4})
	var ratios []record.Check
	for _, c := range cs {
		if strings.HasSuffix(c.Name, "tps_ratio") {
			ratios = append(ratios, c)
		}
	}
	require.Len(t, ratios, 1)
	assert.Equal(t, "after-wake.conc1.tps_ratio", ratios[0].Name)
	assert.InDelta(t, 0.85, ratios[0].Value, 1e-9)
	assert.Equal(t, "FAIL", ratios[0].Verdict)
}

// TestSwitchChecks: the initial activation is not a handoff; p95 per
// direction, sorted.
func TestSwitchChecks(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Protocol.Handoffs = 2
	cfg.Thresholds.MaxSwitchToFirstTokenS = 1
	cs := Switch(cfg, []record.Handoff{
		{From: "B", To: "A", Initial: true, OK: true, ToFirstTokenS: 9},
		{From: "A", To: "B", OK: true, ToFirstTokenS: 0.5},
		{From: "B", To: "A", OK: true, ToFirstTokenS: 1.5},
	})
	require.Len(t, cs, 3)
	assert.Equal(t, []string{"switch.successful_handoffs", "switch.A→B.to_first_token_s.p95", "switch.B→A.to_first_token_s.p95"},
		[]string{cs[0].Name, cs[1].Name, cs[2].Name})
	assert.Equal(t, []string{"PASS", "PASS", "FAIL"}, []string{cs[0].Verdict, cs[1].Verdict, cs[2].Verdict})
}

func TestEvaluate(t *testing.T) {
	assert.Equal(t, "PASS", Evaluate("x", "", 5, "within", 10).Verdict)
	assert.Equal(t, "FAIL", Evaluate("x", "", -11, "within", 10).Verdict)
	assert.Equal(t, "FAIL", Evaluate("x", "A", 3, "==", 5).Verdict)
	assert.Panics(t, func() { Evaluate("x", "", 1, "<", 2) })
}

// TestReadBench: go test output and bench.txt read alike (the -N suffix
// dropped, units as written); a malformed line is an error naming file and
// line, and the rest is still read.
func TestReadBench(t *testing.T) {
	in := "cpu: Some CPU\nBenchmarkSleep/model=A/level=1-8 1 0.5 sec/wake\nBenchmarkX 1 200 ns/op\nBenchmarkBad 1 x tok/s\nBenchmarkSleep/model=A/level=1 1 0.7 sec/wake\n"
	b, err := ReadBench(strings.NewReader(in), "old.txt")
	require.Error(t, err)
	assert.ErrorContains(t, err, "old.txt:4")
	assert.Equal(t, "Some CPU", b.CPU)
	assert.Equal(t, []float64{0.5, 0.7}, b.Values[BenchKey{"Sleep/model=A/level=1", "sec/wake"}])
	assert.Equal(t, []float64{200}, b.Values[BenchKey{"X", "ns/op"}], "units as written, not tidied")

	_, err = ReadBench(strings.NewReader(`{"status": "PASS"}`), "report.json")
	assert.ErrorContains(t, err, "report.json looks like a report.json (JSON")
}

// TestServeChecksFollowMaxFailedRequests: with failures allowed, a round
// spoilt by an allowed failure does not fail the run.
func TestServeChecksFollowMaxFailedRequests(t *testing.T) {
	cfg := config.SimDefault()
	run := record.PerfRun{Stage: record.PhaseBaseline, Concurrency: 4, Rounds: 2, Planned: 16, Success: 15, RoundsPassed: 1}
	assert.Equal(t, map[string]string{"baseline.conc4.failed_requests/A": "FAIL", "baseline.conc4.rounds_passed/A": "FAIL"},
		verdicts(Serve(cfg, "A", []record.PerfRun{run})))
	cfg.Thresholds.MaxFailedRequests = 1
	assert.Equal(t, map[string]string{"baseline.conc4.failed_requests/A": "PASS", "baseline.conc4.rounds_passed/A": "PASS"},
		verdicts(Serve(cfg, "A", []record.PerfRun{run})))
}

// TestDefaultsCatch32714: vLLM#32714 keeps about 16 GiB per GPU asleep.
// The default residual limit (4 GiB) catches it on a model of any size;
// the default release (80 %) on models up to 80 GiB awake, and a small
// model's healthy release (its CUDA context is a larger share) passes.
func TestDefaultsCatch32714(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Protocol.SleepL1Cycles = 1
	check := func(awake, residual float64) map[string]string {
		return verdicts(Sleep(cfg, "A", 1, []record.Cycle{{Level: 1, OK: true, ResidualGiB: residual}}, []float64{(awake - residual) / awake * 100}))
	}
	got := check(70, 16)
	assert.Equal(t, "FAIL", got["memory.l1_release_fraction.median/A"], "77 % released")
	assert.Equal(t, "FAIL", got["sleep.level1.residual_gib.median/A"])
	got = check(200, 16)
	assert.Equal(t, "PASS", got["memory.l1_release_fraction.median/A"], "92 % released")
	assert.Equal(t, "FAIL", got["sleep.level1.residual_gib.median/A"], "the residual catches it all the same")
	got = check(5.8, 0.75) // a 0.6B model: 87 % released, as vllmsim's demo profile gives
	assert.Equal(t, "PASS", got["memory.l1_release_fraction.median/A"])
	assert.Equal(t, "PASS", got["sleep.level1.residual_gib.median/A"])
}

// TestAbsentFiguresAreNotEvaluated: with cycles but no memory figures, the
// residual and release thresholds are NOT EVALUATED, failing the run only
// when the user set them.
func TestAbsentFiguresAreNotEvaluated(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Protocol.SleepL1Cycles = 1
	cfg.Thresholds.MaxResidualGiB = 2
	cycles := []record.Cycle{{Level: 1, OK: true, ToFirstTokenS: 1, ResidualGiB: math.NaN()}}
	cs := Sleep(cfg, "A", 1, cycles, nil)
	require.Len(t, cs, 3)
	for _, c := range cs[1:] {
		assert.Equal(t, record.NotEvaluated, c.Verdict, c.Name)
		assert.NotEmpty(t, c.Reason)
		assert.False(t, c.Fails(), "%s: a default threshold not evaluated does not fail the run", c.Name)
	}
	cfg.UserThresholds = []string{"max_residual_gib"}
	cs = Sleep(cfg, "A", 1, cycles, nil)
	assert.True(t, cs[1].Fails(), "the user's threshold not evaluated fails the run: %s", cs[1])
	assert.False(t, cs[2].Fails(), "the default one does not")
	assert.Contains(t, cs[1].String(), "NOT EVALUATED (no figure")
}

// TestMemoryThresholdsWithoutAMemorySource: a config that says "memory":
// "none" (a runner without NVML) and sets memory thresholds, as
// testdata/gpu-example.json does, is not failed on them: each is NOT
// EVALUATED, not required, and says what to change; the same thresholds on
// a run with a memory source that left no figure still fail it.
func TestMemoryThresholdsWithoutAMemorySource(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Protocol.SleepL1Cycles = 1
	cfg.Thresholds.MaxResidualGiB, cfg.Thresholds.MinL1ReleasePercent = 2, 80
	cfg.UserThresholds = []string{"max_residual_gib", "min_l1_release_percent", "max_sleeping_power_w"}
	cycles := []record.Cycle{{Level: 1, OK: true, ToFirstTokenS: 1, ResidualGiB: math.NaN()}}
	checks := func() []record.Check {
		cs := Sleep(cfg, "A", 1, cycles, nil)
		cs = append(cs, Release(cfg, "A", nil, true)...)
		return cs
	}
	for _, c := range checks()[1:] {
		assert.True(t, c.Fails(), "memory sampled but no figure: the user's threshold fails the run: %s", c)
	}
	cfg.Command, cfg.Memory = "vllm", "none"
	cs := checks()
	require.Len(t, cs, 4)
	for _, c := range cs[1:] {
		assert.Equal(t, record.NotEvaluated, c.Verdict, c.Name)
		assert.False(t, c.Fails(), "memory none: %s does not fail the run", c.Name)
		assert.Contains(t, c.Reason, `the config says "memory": "none"`, c.Name)
		assert.Contains(t, c.Reason, `set "memory": "nvml"`, c.Name)
	}
}
