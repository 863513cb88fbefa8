package protocol

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

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
	got := verdicts(sleepChecks(cfg, "A", 1, cycles, []float64{40, 45, 90}))
	assert.Equal(t, map[string]string{
		"sleep.level1.successful_cycles/A":    "FAIL",
		"sleep.level1.to_first_token_s.p95/A": "FAIL",
		"sleep.level1.residual_gib.median/A":  "PASS",
		"memory.l1_release_fraction.median/A": "FAIL",
	}, got)
	cycles[2].OK, cycles[1].ToFirstTokenS = true, 1.5
	got = verdicts(sleepChecks(cfg, "A", 1, cycles, []float64{92, 95, 97}))
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
	judge := func(cs ...record.Cycle) map[string]string { return verdicts(sleepChecks(cfg, "A", 1, cs, nil)) }
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
	b := verdicts(sleepChecks(cfg, "B", 1, []record.Cycle{cycle(1.2, 0), cycle(1.2, 0)}, nil))
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
	cs := afterWakeChecks(cfg, "A", record.PhaseAfterWake, []record.PerfRun{aw, aw4}, []record.PerfRun{base, aw, aw4})
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
	cs := switchChecks(cfg, []record.Handoff{
		{From: "B", To: "A", Initial: true, OK: true, ToFirstTokenS: 9},
		{From: "A", To: "B", OK: true, ToFirstTokenS: 0.5},
		{From: "B", To: "A", OK: true, ToFirstTokenS: 1.5},
	})
	require.Len(t, cs, 3)
	assert.Equal(t, []string{"switch.successful_handoffs", "switch.A→B.to_first_token_s.p95", "switch.B→A.to_first_token_s.p95"},
		[]string{cs[0].Name, cs[1].Name, cs[2].Name})
	assert.Equal(t, []string{"PASS", "PASS", "FAIL"}, []string{cs[0].Verdict, cs[1].Verdict, cs[2].Verdict})
}

// TestServeChecksFollowMaxFailedRequests: with failures allowed, a round
// spoilt by an allowed failure does not fail the run.
func TestServeChecksFollowMaxFailedRequests(t *testing.T) {
	cfg := config.SimDefault()
	run := record.PerfRun{Stage: record.PhaseBaseline, Concurrency: 4, Rounds: 2, Planned: 16, Success: 15, RoundsPassed: 1}
	assert.Equal(t, map[string]string{"baseline.conc4.failed_requests/A": "FAIL", "baseline.conc4.rounds_passed/A": "FAIL"},
		verdicts(serveChecks(cfg, "A", []record.PerfRun{run})))
	cfg.Thresholds.MaxFailedRequests = 1
	assert.Equal(t, map[string]string{"baseline.conc4.failed_requests/A": "PASS", "baseline.conc4.rounds_passed/A": "PASS"},
		verdicts(serveChecks(cfg, "A", []record.PerfRun{run})))
}

// TestDefaultsCatch32714: vLLM#32714 keeps about 16 GiB per GPU asleep.
// The default residual limit (4 GiB) catches it on a model of any size;
// the default release (80 %) on models up to 80 GiB awake, and a small
// model's healthy release (its CUDA context is a larger share) passes.
func TestDefaultsCatch32714(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Protocol.SleepL1Cycles = 1
	check := func(awake, residual float64) map[string]string {
		return verdicts(sleepChecks(cfg, "A", 1, []record.Cycle{{Level: 1, OK: true, ResidualGiB: residual}}, []float64{(awake - residual) / awake * 100}))
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
	cs := sleepChecks(cfg, "A", 1, cycles, nil)
	require.Len(t, cs, 3)
	for _, c := range cs[1:] {
		assert.Equal(t, record.NotEvaluated, c.Verdict, c.Name)
		assert.NotEmpty(t, c.Reason)
		assert.False(t, c.Fails(), "%s: a default threshold not evaluated does not fail the run", c.Name)
	}
	cfg.UserThresholds = []string{"max_residual_gib"}
	cs = sleepChecks(cfg, "A", 1, cycles, nil)
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
		cs := sleepChecks(cfg, "A", 1, cycles, nil)
		cs = append(cs, l1ReleaseChecks(cfg, "A", nil, true)...)
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

func TestDisagreements(t *testing.T) {
	nan := math.NaN()
	agree := record.Engine{SleepS: 0.9, WakeS: 1.9, FreedGiB: 7.5, MetricSleepS: 0.95, MetricWakeS: 1.95}
	assert.Empty(t, disagreements(&agree, 1, 2, 7.6, 10), "engine times inside the HTTP calls, freed within 0.1 GiB")

	for name, tc := range map[string]struct {
		e                     record.Engine
		sleep, wake, released float64
		want                  string
	}{
		"the log's sleep outlasts the call": {record.Engine{SleepS: 1.5, WakeS: nan, FreedGiB: nan, MetricSleepS: nan, MetricWakeS: nan}, 1, 2, nan,
			"engine log: sleep 1.500s is longer than the /sleep call 1.000s"},
		"the metric's wake outlasts the calls": {record.Engine{SleepS: nan, WakeS: nan, FreedGiB: nan, MetricSleepS: nan, MetricWakeS: 2.5}, 1, 2, nan,
			"metric: wake 2.500s is longer than the wake calls 2.000s"},
		"the log's inner time outlasts the metric's": {record.Engine{SleepS: 0.9, WakeS: nan, FreedGiB: nan, MetricSleepS: 0.5, MetricWakeS: nan}, 1, 2, nan,
			"engine log: sleep 0.900s is longer than the metric's 0.500s"},
		"the metric's release outlasts the call": {record.Engine{SleepS: nan, WakeS: nan, FreedGiB: nan, MetricSleepS: nan, MetricWakeS: nan, MetricReleaseS: 1.2}, 1, 2, nan,
			"metric: release 1.200s is longer than the /release_kv_cache_memory call 1.000s"},
		"freed is not what was released": {record.Engine{SleepS: nan, WakeS: nan, FreedGiB: 2, MetricSleepS: nan, MetricWakeS: nan}, 1, 2, 7.5,
			"engine log: freed 2.00 GiB, the harness measured 7.50 GiB released"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, []string{tc.want}, disagreements(&tc.e, tc.sleep, tc.wake, tc.released, 10))
		})
	}
	// 10 % of 20 GiB is 2 GiB: 19 freed of 20 released agrees.
	assert.Empty(t, disagreements(&record.Engine{SleepS: nan, WakeS: nan, FreedGiB: 19, MetricSleepS: nan, MetricWakeS: nan}, 1, 1, 20, 10))
	// 5 ms of clock granularity is not a disagreement.
	assert.Empty(t, disagreements(&record.Engine{SleepS: 1.005, WakeS: nan, FreedGiB: nan, MetricSleepS: nan, MetricWakeS: nan}, 1, 1, nan, 0))

	cs := engineAgreement("sleep.level1", "A", []*record.Engine{nil, {Disagreements: []string{"x"}}, {}})
	assert.Equal(t, []record.Check{{Name: "sleep.level1.engine_disagreements", Model: "A", Value: 1, Op: "==", Limit: 0, Verdict: "FAIL"}}, cs)
	assert.Nil(t, engineAgreement("sleep.level1", "A", []*record.Engine{nil, nil}), "no engine figures: no check")
}

func TestCorrectnessCheck(t *testing.T) {
	match := record.ProbeResult{Probe: "short", Match: true}
	miss := record.ProbeResult{Probe: "long", Position: 3, Kind: "token"}
	replays := []record.Replay{
		{Stage: record.PhaseSleepL1, Results: []record.ProbeResult{match, match}},
		{Stage: record.PhaseSleepL1, Results: []record.ProbeResult{match, miss}},
		{Stage: record.PhaseSwitch, Results: []record.ProbeResult{match, match}},
		{Stage: record.PhaseSwitch, Err: "server gone"},
	}
	assert.Equal(t, map[string]string{"correctness.sleep-level1.mismatches/A": "FAIL"}, verdicts(replayChecks("A", record.PhaseSleepL1, replays)))
	assert.Equal(t, 1.0, replayChecks("A", record.PhaseSleepL1, replays)[0].Value)
	assert.Equal(t, map[string]string{"correctness.switch.mismatches/A": "PASS"}, verdicts(replayChecks("A", record.PhaseSwitch, replays)))
	assert.Nil(t, replayChecks("A", record.PhaseSleepL2, replays), "nothing replayed: no check")
}

func TestSoakChecks(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Protocol.SoakCycles = 9
	cfg.Thresholds.MaxResidualGrowthMiBPerCycle = 1
	var cycles []record.SoakCycle
	labels := []string{"A", "B", "C"}
	for i := range 9 {
		resid := 0.5
		if labels[i%3] == "B" {
			resid += float64(i/3) * 4.0 / 1024 // 4 MiB more each of B's sleeps
		}
		cycles = append(cycles, record.SoakCycle{Cycle: i + 1, From: labels[i%3], To: labels[(i+1)%3], OK: true, ResidualGiB: resid})
	}
	v := verdicts(soakChecks(cfg, cycles))
	assert.Equal(t, map[string]string{"soak.successful_cycles/": "PASS",
		"soak.residual_growth_mib_per_cycle/A": "PASS", "soak.residual_growth_mib_per_cycle/B": "FAIL", "soak.residual_growth_mib_per_cycle/C": "PASS"}, v)

	cycles[8].OK = false
	cycles[2].ResidualGiB = math.NaN() // C keeps one residual: no trend
	cs := soakChecks(cfg, cycles)
	v = verdicts(cs)
	assert.Equal(t, "FAIL", v["soak.successful_cycles/"])
	assert.Equal(t, record.NotEvaluated, v["soak.residual_growth_mib_per_cycle/C"])
	cfg.Thresholds.MaxResidualGrowthMiBPerCycle = 0
	assert.NotContains(t, verdicts(soakChecks(cfg, cycles)), "soak.residual_growth_mib_per_cycle/B", "0 turns the limit off")
}

// TestNoteCrowded: a failed tok/s ratio of windows other processes
// crowded says so, with each window's share; a quiet machine, a passed
// ratio and another check are left as they were.
func TestNoteCrowded(t *testing.T) {
	checks := func() []record.Check {
		return []record.Check{
			{Name: "after-wake.conc1.tps_ratio", Model: "A", Value: 0.6, Op: ">=", Limit: 0.7, Verdict: "FAIL"},
			{Name: "after-wake.conc4.tps_ratio", Model: "A", Value: 0.9, Op: ">=", Limit: 0.7, Verdict: "PASS"},
			{Name: "after-wake.conc1.ttft_p95", Model: "A", Value: 9, Op: "<=", Limit: 1, Verdict: "FAIL"},
		}
	}
	busy := map[string]record.Window{
		"A-after-wake": {Host: &record.HostLoad{OthersCPUPct: 47}},
		"A-baseline":   {Host: &record.HostLoad{OthersCPUPct: 12}},
	}
	got := NoteCrowded(checks(), ".tps_ratio", busy, "A-after-wake", "A-baseline")
	assert.Equal(t, "other processes took 47 % during A-after-wake and 12 % during A-baseline of the machine's CPU: the ratio may be the machine's, not the server's; rerun on a quieter runner", got[0].Reason)
	assert.Equal(t, "FAIL", got[0].Verdict, "the verdict stands")
	assert.Empty(t, got[1].Reason, "a ratio that passed")
	assert.Empty(t, got[2].Reason, "not a ratio")

	quiet := map[string]record.Window{"A-after-wake": {Host: &record.HostLoad{OthersCPUPct: 24}}, "A-baseline": {}}
	assert.Equal(t, checks(), NoteCrowded(checks(), ".tps_ratio", quiet, "A-after-wake", "A-baseline"), "below BusyOthersPct, or no load read: nothing said")
}

// verdicts are cs's verdicts by name/model.
func verdicts(cs []record.Check) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		out[c.Name+"/"+c.Model] = c.Verdict
	}
	return out
}

// TestPauseOffKeepsTheUsersLimit: a server without the level-0 endpoints
// leaves the cycle count NOT EVALUATED (not failed), and a wake limit the
// user set required and NOT EVALUATED, not dropped.
func TestPauseOffKeepsTheUsersLimit(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Thresholds.MaxL0WakeToFirstTokenS = 2
	cs := pauseCycleChecks(cfg, "A", 0, nil, "the server has no /pause", false)
	assert.Len(t, cs, 1, "a default limit: the count alone")
	assert.False(t, cs[0].Fails())
	cfg.UserThresholds = []string{"max_l0_wake_to_first_token_s"}
	cs = pauseCycleChecks(cfg, "A", 0, nil, "the server has no /pause", false)
	if assert.Len(t, cs, 2) {
		assert.Equal(t, "sleep.level0.to_first_token_s.p95", cs[1].Name)
		assert.True(t, cs[1].Fails())
		assert.Equal(t, "the server has no /pause", cs[1].Reason)
	}
}
