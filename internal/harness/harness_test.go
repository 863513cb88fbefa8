package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/stat"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/vllm"
)

// small is the default config shrunk to a few seconds of work.
func small(t *testing.T) config.Config {
	cfg := config.SimDefault()
	cfg.OutDir = t.TempDir()
	p := &cfg.Protocol
	p.RestartWarm, p.SleepL1Cycles, p.SleepL2Cycles, p.Handoffs = 1, 2, 1, 3
	p.Concurrency, p.Rounds, p.RequestsPerRound, p.MaxTokens = []int{2}, 1, 4, 8
	p.SettleS = 0.02
	cfg.Sim.HostScale = 0.05 // many runs at once: see simtest.Pool
	cfg.Timeouts.StartS = 20
	cfg.Timeouts.RequestS = 10
	require.NoError(t, cfg.Validate())
	return cfg
}

func readReport(t *testing.T, dir string) report.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	var rep report.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	return rep
}

// TestPhasesRecordEverything runs every phase on a small protocol and
// checks the record and the files Close writes.
func TestPhasesRecordEverything(t *testing.T) {
	cfg := small(t)
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	ctx := t.Context()
	for _, l := range h.Labels() {
		rsOut, err := protocol.Restart{Env: h.env}.Run(ctx, l, t.Logf)
		rs := rsOut.Value
		require.NoError(t, err)
		require.Len(t, rs, 2)
		assert.False(t, rs[0].Warm)
		assert.True(t, rs[1].Warm)
		// What the server logged, not two spawns' times (a busy machine
		// stretches either): the warm start loads the compiled graphs.
		assert.Equal(t, "compiled", rs[0].Compile, "the initial start compiles")
		assert.Equal(t, "loaded from cache", rs[1].Compile, "a warm start skips compilation")
	}
	assert.Equal(t, []string{"B"}, h.pool.Awake(), "the last started model is awake, the others asleep")
	_, err = protocol.Baseline{Env: h.env}.Run(ctx, "A", t.Logf)
	require.NoError(t, err)
	assert.Equal(t, []string{"A"}, h.pool.Awake())
	cyclesOut, err := protocol.Sleep{Env: h.env, Level: 2}.Run(ctx, "A", t.Logf)
	cycles := cyclesOut.Value
	require.NoError(t, err)
	require.Len(t, cycles, 1)
	// A level-2 wake reloads the weights between its /wake_up calls: its
	// span holds more than those calls' own time. (Not "the wake took
	// longer than the sleep": two durations a loaded machine can stretch
	// either way, as make stress's did, 0.20 s against 0.68.)
	require.NotNil(t, cycles[0].Engine)
	require.Greater(t, cycles[0].Engine.WakeCallsS, 0.0, "the wake's /wake_up calls timed apart")
	assert.Greater(t, cycles[0].WakeAPIS, cycles[0].Engine.WakeCallsS, "a level-2 wake reloads the weights")
	handoffsOut, err := protocol.Switch{Env: h.env}.Run(ctx, t.Logf)
	handoffs := handoffsOut.Value
	require.NoError(t, err)
	require.Len(t, handoffs, 4)
	assert.True(t, handoffs[0].Initial)
	assert.Equal(t, "A", handoffs[0].To)
	assert.Equal(t, []string{"A→B", "B→A", "A→B"}, []string{
		record.DirectionKey(handoffs[1].From, handoffs[1].To),
		record.DirectionKey(handoffs[2].From, handoffs[2].To),
		record.DirectionKey(handoffs[3].From, handoffs[3].To)})

	pids := []int{h.pool.Procs().PID("A"), h.pool.Procs().PID("B")}
	rep, err := h.Close(nil)
	require.NoError(t, err)
	for _, pid := range pids {
		assert.False(t, server.GroupAlive(pid), "Close leaves no server process")
	}
	assert.Equal(t, "PASS", rep.Status)
	assert.Equal(t, rep, readReport(t, cfg.OutDir), "report.json is what Close returned")
	assert.Equal(t, 4, rep.Requests.PlannedPerformance, "A's baseline: 1 round × 4 requests")
	// probes: 2 starts × 2 models + 1 level-2 cycle + 1 activation + 3
	// handoffs; correctness: the 2-probe set before each model's first
	// sleep, and after each wake (A: its cycle, the activation, B→A; B:
	// A→B twice); the engine-health bursts: A's baseline, and after the
	// first handoff to each model.
	assert.Equal(t, 4+4+1+4+2*2+2*(3+2)+3*cfg.Protocol.HealthRequests, rep.Requests.Executed)
	assert.Equal(t, rep.Requests.Executed, rep.Requests.Success)
	assert.Equal(t, 2, rep.Switch.Directions["A→B"].N)
	assert.InDelta(t, 0.25, rep.Models["A"].Sleep["2"].ResidualGiB.Median, 1e-9, "tiny-a's residual")
	// A was awake at the initial activation (nothing to sleep); then A→B
	// twice and B→A once. Sleeps that only make room are not measured.
	assert.Equal(t, 2, rep.Memory.L1ReleaseFraction["A"].N)
	assert.Equal(t, 1, rep.Memory.L1ReleaseFraction["B"].N)
	assert.InDelta(t, 100*(1-0.25/4.75), rep.Memory.L1ReleaseFraction["A"].Median, 0.01, "tiny-a: 0.25 of 0.25 + 0.5 + 4 (KV) GiB stays")
	assert.Greater(t, rep.Memory.PhysicalPeakGiB.N, 10)
	assert.Greater(t, rep.Memory.RSSPeakGiB["A"], 0.0)
	// Every phase window carries the machine's load over it, read by the
	// harness (Run.HostLoad, the Env's Observer), for the regression gate.
	for _, w := range []string{"A-restart", "A-baseline", "A-sleep-level2", "AB-switch"} {
		if assert.Contains(t, rep.Windows, w) {
			assert.NotNil(t, rep.Windows[w].Host, "window %s carries the host load", w)
		}
	}
	// Physical limits: tiny-a's 0.5 GiB over the simulated link as the link probe read it (the
	// tiny profile's 25 GB/s pinned host→device rate, against PCIe gen 4 x16's nominal 31.504)
	// and ≈ 1000 GB/s memory, from its own log line.
	lim := rep.Models["A"].PhysicalLimits
	require.NotNil(t, lim)
	assert.InDelta(t, 0.5, lim.WeightGiB, 1e-9)
	assert.Contains(t, lim.WeightSource, "Model loading took 0.5000 GiB")
	assert.Contains(t, lim.PCIeSource, "simulated GPU")
	require.NotNil(t, rep.GPUFacts)
	assert.True(t, rep.GPUFacts.Simulated)
	assert.InDelta(t, 31.504, rep.GPUFacts.PCIeGBps, 1e-9)
	require.Len(t, rep.LinkProbe, 1, "one GPU, probed once before the first server")
	assert.True(t, rep.LinkProbe[0].Simulated)
	assert.Equal(t, 25.0, rep.LinkProbe[0].H2DGBps)
	assert.Equal(t, "simulated", lim.PCIeBasis, "the simulated GPU's profile rates")
	assert.InDelta(t, 31.504, lim.PCIeNominalGBps, 1e-9)
	assert.InDelta(t, 25/31.504, lim.LinkFractionOfNominal, 1e-9)
	assert.InDelta(t, 0.5*record.GiB/25e9, lim.L1WakeFloorS, 1e-9)
	assert.InDelta(t, 0.5*record.GiB/(4096/8*977*2e6), lim.TPOTFloorS, 1e-9)
	assert.Zero(t, lim.TPOTFractionOfHBM, "this run has no baseline at concurrency 1")
	assert.Contains(t, lim.Note, "not measured: level-1 wake (no successful level-1 cycle); TPOT at concurrency 1")
	for _, f := range []string{"bench.txt", "samples.csv", "A.log", "B.log"} {
		st, err := os.Stat(filepath.Join(cfg.OutDir, f))
		require.NoError(t, err, f)
		assert.Positive(t, st.Size(), f)
	}
}

// TestFailuresAreNamedAndNothingIsLost: a model that cannot start and a
// server that dies mid-run are failures with phase, model and step; the
// report is still written, with every sample taken, and no process is left.
func TestFailuresAreNamedAndNothingIsLost(t *testing.T) {
	cfg := small(t)
	cfg.Models[1].Name = "no-such-model"
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	ctx := t.Context()

	_, err = protocol.Restart{Env: h.env}.Run(ctx, "A", t.Logf)
	require.NoError(t, err)
	_, err = protocol.Restart{Env: h.env}.Run(ctx, "B", t.Logf)
	require.Error(t, err)
	assert.ErrorContains(t, err, "restart B: start")
	assert.ErrorContains(t, err, `profile "tiny" has no model "no-such-model"`, "the server's own message is in the error")

	// A dies (kill -9): the next phase says so instead of hanging or restarting it.
	require.NoError(t, h.pool.Activate(ctx, "A"))
	pidA := h.pool.Procs().PID("A")
	require.NoError(t, syscall.Kill(pidA, syscall.SIGKILL))
	require.Eventually(t, func() bool { return !h.pool.Running("A") }, 5*time.Second, 5*time.Millisecond, "A's exit is noticed")
	start := time.Now()
	_, err = protocol.Sleep{Env: h.env, Level: 1}.Run(ctx, "A", t.Logf)
	require.Error(t, err)
	assert.ErrorContains(t, err, "server A exited: signal: killed")
	assert.Less(t, time.Since(start), 5*time.Second)

	rep, err := h.Close([]record.Failure{{Phase: "TestX", Error: "test failed"}})
	require.NoError(t, err)
	assert.False(t, server.GroupAlive(pidA))
	assert.Equal(t, "FAIL", rep.Status)
	written := readReport(t, cfg.OutDir)
	assert.Equal(t, "FAIL", written.Status)
	require.Len(t, written.Failures, 3)
	assert.Equal(t, record.Failure{Phase: "restart", Model: "B", Step: "start", Error: written.Failures[0].Error}, written.Failures[0])
	assert.Equal(t, "sleep-level1", written.Failures[1].Phase)
	assert.Equal(t, "activate", written.Failures[1].Step)
	assert.Equal(t, "TestX", written.Failures[2].Phase)
	assert.Equal(t, 2, written.Models["A"].RestartInitial.N+written.Models["A"].RestartWarm.N, "A's restarts are kept")
}

// TestAnyServerProgramAndNoMemory points command at a vllmsim binary by
// path (the code path real vLLM takes) with memory "none": it runs, labels
// itself simulated from /version, and says why memory figures are absent.
func TestAnyServerProgramAndNoMemory(t *testing.T) {
	sim, err := backend.BuildSim(t.Context())
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "some-vllm")
	require.NoError(t, os.Symlink(sim, bin))
	cfg := small(t)
	cfg.Command, cfg.Memory = bin, "none"
	require.NoError(t, cfg.Validate())
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	cyclesOut, err := protocol.Sleep{Env: h.env, Level: 1}.Run(t.Context(), "A", t.Logf)
	cycles := cyclesOut.Value
	require.NoError(t, err)
	require.Len(t, cycles, 2)
	assert.True(t, math.IsNaN(cycles[0].ResidualGiB))
	rep, err := h.Close(nil)
	require.NoError(t, err)
	assert.Equal(t, "PASS", rep.Status)
	require.NotNil(t, rep.Simulated, "a server reporting vllmsim is labelled simulated")
	assert.Contains(t, rep.Runtime, "(vllmsim)")
	assert.Equal(t, "unknown GPU (memory source none)", rep.GPU)
	assert.Equal(t, "none", rep.Memory.Source)
	assert.Contains(t, rep.Memory.Note, "no GPU memory was sampled")
	assert.Zero(t, rep.Models["A"].Sleep["1"].ResidualGiB.N)
	assert.Zero(t, rep.Memory.L1ReleaseFraction["A"].N)
	assert.Zero(t, rep.Memory.PhysicalPeakGiB.N)
	assert.Equal(t, 2, rep.Models["A"].Sleep["1"].SuccessfulCycles)
}

func TestNVMLWithoutDriverIsAClearSetupError(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	cfg := small(t)
	cfg.Memory = "nvml"
	_, err := Open(t.Context(), cfg)
	assert.ErrorContains(t, err, `config memory "nvml": NVML init: ERROR_LIBRARY_NOT_FOUND`)
}

// gateRun runs restarts, five level-1 cycles and a baseline of model A at
// the given time scale and returns its bench.txt.
// gateRun runs restarts, level-1 cycles and a baseline of A at the time
// scale given, and returns the open run (the caller closes it).
func gateRun(t *testing.T, scale, tolerancePct float64) (*Run, config.Config) {
	t.Helper()
	cfg := small(t)
	cfg.Sim.TimeScale = scale
	cfg.Thresholds.RegressionPercent = tolerancePct
	cfg.Protocol.SleepL1Cycles = 5
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	_, err = protocol.Sleep{Env: h.env, Level: 1}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	_, err = protocol.Baseline{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	return h, cfg
}

// closedGateRun is gateRun closed: the path of its bench.txt. Its phase
// windows' host loads are set to a quiet machine (no other process took
// CPU: one run gates its timed metrics) on which the run's threads waited
// 10⁹ s a second (no later run waits longer: no phase of it is NOT
// EVALUATED), so that a test of the gate's rules is not a test of how busy
// this box is while it runs; package gate tests those rules.
func closedGateRun(t *testing.T, scale float64) string {
	h, cfg := gateRun(t, scale, 10)
	_, err := h.Close(nil)
	require.NoError(t, err)
	path := filepath.Join(cfg.OutDir, "bench.txt")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	busiest := regexp.MustCompile(`(?m)^(BenchmarkHost/\S+ 1) \S+ %-others-cpu \S+ wait/run$`).ReplaceAll(b, []byte("$1 0 %-others-cpu 1e9 wait/run"))
	require.NotEqual(t, string(b), string(busiest), "the run's windows carry their host loads")
	require.NoError(t, os.WriteFile(path, busiest, 0o644))
	return path
}

// wakeSpread is the coefficient of variation of the level-1 wakes of A a
// bench.txt holds, read as the gate reads it (gate.ReadRun).
func wakeSpread(t *testing.T, path string) float64 {
	t.Helper()
	r, err := gate.ReadRun(path)
	require.NoError(t, err)
	xs := r.Bench.Values[gate.BenchKey{Name: "Sleep/model=A/level=1", Unit: "sec/wake"}]
	require.NotEmpty(t, xs, "%s has A's level-1 wakes", path)
	mean, sd := stat.MeanStdDev(xs, nil)
	return sd / mean
}

// quietBaseline is closedGateRun's bench.txt from a run whose level-1
// wakes a stall of this box did not spread (coefficient of variation at
// most 0.3; at most three runs): under make stress's CPU hog one stall
// made a baseline's wakes 0.07–0.41 s (CV 0.94), whose one-run floor
// (343 %) hid the four times slower run the test is about. The test's
// subject is the gate's verdict against a baseline, not this box's stalls.
func quietBaseline(t *testing.T, scale float64) string {
	t.Helper()
	var path string
	for range 3 {
		path = closedGateRun(t, scale)
		cv := wakeSpread(t, path)
		if cv <= 0.3 {
			break
		}
		t.Logf("baseline run's level-1 wakes spread by a stall (CV %.2f): another run", cv)
	}
	return path
}

// TestRegressionGateEndToEnd: two runs of the same profile pass the gate
// (one baseline run: the one-run rule, its noise floor from the run's own
// spread); a run whose every modelled duration is twice as long fails it
// on the wake (each rule's boundary is tested on fixed samples in package
// gate), with a FAIL check; compare.txt and summary.md name each metric's
// rule, its runs and its power; compare.txt, samples.csv and metrics.jsonl
// of the simulated runs say they are simulated.
func TestRegressionGateEndToEnd(t *testing.T) {
	testmain.Long(t)
	base := quietBaseline(t, 2)
	// Single samples (a start, a round) are not gated by one baseline run;
	// the rest are judged on their noise floors. 50 % keeps this check
	// about the same run passing, not about this shared 2-core box.
	same, _ := gateRun(t, 2, 50)
	ds, _, err := same.Gate(t.Context(), base)
	require.NoError(t, err)
	for _, d := range ds {
		assert.False(t, d.Regression, "same profile: %s %s %+.1f%% (%s: %s)", d.Name, d.Unit, d.ChangePct, d.Rule, d.How)
	}
	rep, err := same.Close(nil)
	require.NoError(t, err)
	assert.Equal(t, "PASS", rep.Status)

	// Four times slower: one run's floors are Bonferroni-wide (z at α/m
	// over the run's gated metrics) and a loaded box (make test runs every
	// package at once) spreads a baseline's wakes: twice slower sat inside
	// them once in a few loaded runs.
	slow, cfg := gateRun(t, 8, 10)
	ds, table, err := slow.Gate(t.Context(), base)
	require.NoError(t, err)
	found := false
	for _, d := range ds {
		if d.Name == "Sleep/model=A/level=1" && d.Unit == "sec/wake" {
			found = true
			assert.True(t, d.Regression, "a four times slower wake: %+.1f%% (%s: %s)", d.ChangePct, d.Rule, d.How)
			assert.Equal(t, gate.RuleOneRun, d.Rule)
		}
	}
	assert.True(t, found)
	rep, err = slow.Close(nil)
	require.NoError(t, err)
	assert.Equal(t, "FAIL", rep.Status)
	assert.Contains(t, table, "this run is simulated: vllmsim profile tiny, time scale 8")
	assert.Contains(t, table, "the baseline is simulated")
	written, err := os.ReadFile(filepath.Join(cfg.OutDir, "compare.txt"))
	require.NoError(t, err)
	assert.Equal(t, table, string(written))
	assert.Contains(t, table, "baseline: 1 run(s), oldest first:\n  1. "+base+" (started line ")
	assert.Contains(t, table, "smallest flagged")
	assert.Contains(t, table, "Sleep/model=A/level=1 sec/wake: one run: noise floor ")
	summary, err := os.ReadFile(filepath.Join(cfg.OutDir, "summary.md"))
	require.NoError(t, err)
	assert.Contains(t, string(summary), "## Regression gate (")
	assert.Regexp(t, `\| Sleep/model=A/level=1 \| sec/wake \| one run \(1\) \| [0-9.e-]+ \| [0-9.e-]+ \| \+[0-9.]+ % \| [0-9.e-]+ \([0-9.]+ %\) \| \*\*REGRESSION\*\* \|`, string(summary))
	assert.Regexp(t, `\| Restart/model=A/kind=initial \| sec/ready \| one run \(1\) \| .* \| none \| not gated: one baseline run with fewer than 5 samples`, string(summary),
		"a single start: no power, and the report says why")

	csv, err := os.ReadFile(filepath.Join(cfg.OutDir, "samples.csv"))
	require.NoError(t, err)
	rows := strings.Split(strings.TrimSpace(string(csv)), "\n")
	assert.Equal(t, "unix_s,source,label,pid,bytes,simulated", rows[0])
	require.Greater(t, len(rows), 10)
	for _, row := range rows[1:] {
		require.True(t, strings.HasSuffix(row, ",1"), "every row of a simulated run says so: %s", row)
	}
	metrics, err := os.ReadFile(filepath.Join(cfg.OutDir, "metrics.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(metrics)), "\n")
	require.NotEmpty(t, lines)
	for _, l := range lines {
		require.Contains(t, l, `"simulated":true`)
	}
}

// TestEveryThresholdIsChecked: with every threshold set, each one appears
// in the report's checks, per model (and per concurrency or direction).
func TestEveryThresholdIsChecked(t *testing.T) {
	testmain.Long(t)
	cfg := small(t)
	cfg.Protocol.SleepL1Cycles, cfg.Protocol.Handoffs = 1, 2
	// Every threshold set, each judged PASS. The two ratios of a window
	// after a wake to one before (tok/s, decode rate) are set where no
	// crowded machine takes them (make stress's hog took the tok/s ratio
	// to 0.32 with 0.5 here): what this test holds is that each is judged;
	// what they catch is TestAfterWakeCatchesASlowerDecode's and the gate
	// package's.
	cfg.Thresholds = config.Thresholds{MaxFailedRequests: 0, MinL1ReleasePercent: 50, MaxResidualGiB: 5,
		MaxL1WakeToFirstTokenS: 30, MaxL2WakeToFirstTokenS: 30, MinAfterWakeTPSRatio: 0.05, MaxSwitchToFirstTokenS: 30,
		MinSpecAcceptanceRatio: 0.5, MinPrefixHitRatio: 0.5, MinDecodeRateRatio: 0.05, MaxAdapterHitChange: 0.5, MaxLostPrefixS: 30,
		RegressionPercent: 10, RegressionAlpha: 0.05}
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	ctx, logf := t.Context(), func(string, ...any) {}
	var checks []record.Check
	for _, l := range h.Labels() {
		rsOut, err := protocol.Restart{Env: h.env}.Run(ctx, l, logf)
		require.NoError(t, err)
		checks = append(checks, rsOut.Checks...)
	}
	for _, l := range []string{"B", "A"} { // each model's engine health before its first sleep
		runsOut, err := protocol.Baseline{Env: h.env}.Run(ctx, l, logf)
		require.NoError(t, err)
		checks = append(checks, runsOut.Checks...)
	}
	for _, level := range []int{1, 2} {
		csOut, err := protocol.Sleep{Env: h.env, Level: level}.Run(ctx, "A", logf)
		require.NoError(t, err)
		checks = append(checks, csOut.Checks...)
	}
	runsOut, err := protocol.AfterWake{Env: h.env, Level: 1}.Run(ctx, "A", logf)
	require.NoError(t, err)
	checks = append(checks, runsOut.Checks...)
	hosOut, err := protocol.Switch{Env: h.env}.Run(ctx, logf)
	require.NoError(t, err)
	checks = append(checks, hosOut.Checks...)
	rep, err := h.Close(nil)
	require.NoError(t, err)

	var names []string
	for _, c := range checks {
		names = append(names, c.Name+"/"+c.Model)
		assert.Equal(t, "PASS", c.Verdict, c.String())
	}
	assert.ElementsMatch(t, []string{
		"restart.starts/A", "restart.starts/B",
		"baseline.conc2.failed_requests/A", "baseline.conc2.rounds_passed/A", "baseline.conc2.failed_requests/B", "baseline.conc2.rounds_passed/B",
		"sleep.level1.successful_cycles/A", "sleep.level1.to_first_token_s.p95/A", "sleep.level1.residual_gib.median/A", "memory.l1_release_fraction.median/A",
		"sleep.level1.engine_disagreements/A", "correctness.sleep-level1.mismatches/A",
		"sleep.level2.successful_cycles/A", "sleep.level2.to_first_token_s.p95/A", "sleep.level2.residual_gib.median/A",
		"sleep.level2.engine_disagreements/A", "correctness.sleep-level2.mismatches/A",
		"after-wake.conc2.failed_requests/A", "after-wake.conc2.rounds_passed/A", "after-wake.conc2.tps_ratio/A",
		"correctness.after-wake.mismatches/A", "memory.l1_release_fraction.median/A",
		"lost_prefix.level1.price_s/A", "health.after-wake.prefix_hit_ratio/A", "health.after-wake.decode_rate_ratio/A",
		"health.switch.prefix_hit_ratio/A", "health.switch.decode_rate_ratio/A",
		"health.switch.prefix_hit_ratio/B", "health.switch.decode_rate_ratio/B",
		"switch.successful_handoffs/", "switch.A→B.to_first_token_s.p95/", "switch.B→A.to_first_token_s.p95/",
		"switch.A→B.engine_disagreements/", "switch.B→A.engine_disagreements/",
		"correctness.switch.mismatches/A", "correctness.switch.mismatches/B",
		"memory.l1_release_fraction.median/A", "memory.l1_release_fraction.median/B",
	}, names, "the release check again after every phase that adds level-1 sleeps")
	// A check evaluated again replaces the earlier one where it stood; Close
	// adds the memory source's own check.
	var latest []record.Check
	for _, c := range checks {
		if i := slices.IndexFunc(latest, func(l record.Check) bool { return l.Name == c.Name && l.Model == c.Model }); i >= 0 {
			latest[i] = c
		} else {
			latest = append(latest, c)
		}
	}
	assert.Equal(t, append(latest, record.Evaluate("memory.sampler_errors", "", 0, "==", 0)), rep.Checks, "report.json's checks are the ones evaluated")
}

// TestInitialStartIsColdAndSaysSo: with fresh_caches (the default) every
// run's initial start compiles, whatever ran on the runner before, and
// restart_baseline says so from the server's own log; without, a second
// run's initial start loads from the runner's cache and the report says
// that instead of calling it cold.
func TestInitialStartIsColdAndSaysSo(t *testing.T) {
	_, err := backend.BuildSim(t.Context()) // before the cache home moves: go build's cache lives there too
	require.NoError(t, err)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the runner's own caches, for this test alone
	run := func(fresh bool) (report.Report, []record.Restart) {
		cfg := small(t)
		cfg.FreshCaches = fresh
		h, err := Open(t.Context(), cfg)
		require.NoError(t, err)
		rsOut, err := protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
		rs := rsOut.Value
		require.NoError(t, err)
		rep, err := h.Close(nil)
		require.NoError(t, err)
		return rep, rs
	}
	run(false) // fills the runner's cache
	rep, rs := run(false)
	assert.Equal(t, vllm.LoadedFromCache, rs[0].Compile, "the runner's cache makes the initial start warm")
	assert.Contains(t, rep.RestartBaseline.Summary, "the runner's own compile caches (fresh_caches off)")
	assert.Contains(t, rep.RestartBaseline.Summary, "A: initial start loaded from cache")

	rep, rs = run(true) // the runner's cache is warm, the run's are not
	assert.Equal(t, vllm.Compiled, rs[0].Compile, "initial start")
	assert.Equal(t, vllm.LoadedFromCache, rs[1].Compile, "warm start")
	assert.Contains(t, rep.RestartBaseline.Summary, "fresh, empty compile caches")
	assert.Contains(t, rep.RestartBaseline.Summary, "A: initial start compiled, ")
	assert.Contains(t, rep.RestartBaseline.Summary, "KiB written into its fresh caches")
	assert.Contains(t, rep.RestartBaseline.Summary, "B: no initial start measured")
}

// TestEndingNamesTheLostOutputsAndTheDiskError: after a disk full mid-soak
// (soak.csv and report.json not written), the ending lists the outputs
// that failed and, for report.json, names the disk error instead of
// leaving the provisional report's "killed (SIGKILL, out of memory)" as
// the only account of the run. Its last lines name only what was really
// written: an error that names no output (a stop error) is no lost
// output, and a lost bench.txt is not given as the benchstat file.
func TestEndingNamesTheLostOutputsAndTheDiskError(t *testing.T) {
	enospc := errors.New("no space left on device")
	closeErr := errors.Join(
		fmt.Errorf("soak.csv: 1 write(s) lost, the file holds only whole lines before the first: %w", enospc),
		fmt.Errorf("write /out/timeline.svg: %w", enospc),
		errors.Join(nil, fmt.Errorf("write /out/report.json: %w", enospc)))
	end := Ending(report.Report{Status: "PASS"}, closeErr, "/out")
	assert.Contains(t, end, "wakebench: status FAIL")
	assert.Contains(t, end, "not all outputs were written (report.json, soak.csv, timeline.svg):")
	assert.Contains(t, end, "report /out/report.json was NOT replaced: the run finished, but writing its report failed (write /out/report.json: no space left on device)")
	assert.NotContains(t, end, "()")

	assert.Contains(t, end, "benchstat file /out/bench.txt, samples /out/samples.csv", "those two were written")

	// A stop error names no output: every output was written, and the
	// ending says so rather than "not all outputs were written".
	end = Ending(report.Report{Status: "FAIL"}, errors.New("stop A: process group still alive after SIGKILL"), "/out")
	assert.Contains(t, end, "the run ended with an error that names no output as lost (report.json, summary.md, bench.txt written): stop A: process group still alive after SIGKILL")
	assert.NotContains(t, end, "not all outputs were written")
	assert.Contains(t, end, "wakebench: report /out/report.json\n")

	// A full disk that lost bench.txt: the last line does not name it as written.
	end = Ending(report.Report{Status: "PASS"}, fmt.Errorf("write /out/bench.txt: %w", enospc), "/out")
	assert.Contains(t, end, "benchstat file /out/bench.txt NOT written, samples /out/samples.csv,")
}

// TestSoakCSVIsStreamed: soak.csv holds each cycle's row as soon as the
// cycle is recorded, before the run ends (a disk that fills, or a kill,
// at cycle 60 keeps the 60 rows before it); Close leaves the same rows,
// and a run whose soak did not run writes no soak.csv.
func TestSoakCSVIsStreamed(t *testing.T) {
	cfg := small(t)
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	path := filepath.Join(cfg.OutDir, "soak.csv")
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "no soak yet: no soak.csv")
	h.rec.PlanSoak(150, 1)
	for i := range 60 {
		h.ObserveSoakCycle(record.SoakCycle{Cycle: i + 1, From: "A", To: "B", Level: 1, OK: true, SleepS: 0.5, ResidualGiB: math.NaN()})
	}
	lines := func() []string {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	during := lines()
	require.Len(t, during, 61, "the header and the 60 cycles, on disk while the run goes")
	assert.True(t, strings.HasPrefix(during[0], "cycle,from,to,level,ok,sleep_s"))
	assert.True(t, strings.HasPrefix(during[60], "60,A,B,1,true,0.5,"))
	_, err = h.Close(nil)
	require.NoError(t, err)
	assert.Equal(t, during, lines())
}

// TestCloseKeepsTheThresholdsOfOffPhases: a threshold the user set whose
// phase the config turns off reaches the report Close writes, NOT
// EVALUATED and required, so the run FAILs naming the key (offPhaseChecks
// decides; this holds the harness to adding its checks).
func TestCloseKeepsTheThresholdsOfOffPhases(t *testing.T) {
	cfg := small(t)
	cfg.Protocol.CostDwellS = 0
	cfg.Thresholds.MaxSleepingPowerW = 18
	cfg.UserThresholds = append(cfg.UserThresholds, "max_sleeping_power_w")
	require.NoError(t, cfg.Validate())
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	rep, err := h.Close(nil)
	require.NoError(t, err)
	assert.Equal(t, "FAIL", rep.Status)
	var off []string
	for _, c := range rep.Checks {
		if c.Verdict == record.NotEvaluated && c.Required && strings.Contains(c.Reason, "protocol.cost_dwell_s is 0") {
			off = append(off, c.Name+"/"+c.Model)
		}
	}
	assert.ElementsMatch(t, []string{"cost.level1.own_power_w/A", "cost.level2.own_power_w/A", "cost.level1.own_power_w/B", "cost.level2.own_power_w/B"}, off)
}
