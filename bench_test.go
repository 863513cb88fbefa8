// The protocol's benchmark run: TestProtocol runs every phase in
// phases.List's order (the restart and serving phases' invariants are here;
// the sleep phases' in sleep_test.go, the switching ones' in switch_test.go),
// TestOutputs checks what the run writes, TestRegressionGate judges it
// against a baseline, and the Benchmark functions measure one protocol
// step per iteration for go test -bench.

package wakebench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/harness"
	"github.com/wakebench/wakebench/internal/phases"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/shape"
	"github.com/wakebench/wakebench/internal/stats"
)

// invariants are what a phase's measurements must show beyond its
// threshold checks, by phase name; a phase without an entry is judged on
// its checks alone. Each is given its step's Result.Value.
var invariants = map[string]func(*testing.T, any){
	record.PhaseRestart:     restartInvariants,
	record.PhaseBaseline:    servingInvariants,
	record.PhaseSleepL1:     cycleInvariants,
	record.PhaseAfterWake:   servingInvariants,
	record.PhaseSleepL2:     cycleInvariants,
	record.PhaseAfterWakeL2: servingInvariants,
	record.PhaseSleepL0:     cycleInvariants,
	record.PhaseKVRelease:   cycleInvariants,
	record.PhaseStateCost:   costInvariants,
	record.PhaseSwitch:      switchInvariants,
	record.PhaseTraffic:     trafficInvariants,
}

// TestProtocol runs the protocol's phases in phases.List's order, one
// subtest each (TestProtocol/restart, TestProtocol/sleep-level1, …), each
// step of a phase one call: a subtest per model (TestProtocol/restart/A)
// or, for a phase over every model, the phase's test itself. A phase run
// alone (-run 'TestProtocol/switch') puts the GPU in the state it needs:
// servers started, the other models asleep.
func TestProtocol(t *testing.T) {
	skipShort(t)
	for name := range invariants {
		require.Contains(t, phases.Names(), name, "invariants of a phase phases.List does not list")
	}
	for _, ph := range phases.List() {
		t.Run(ph.Name, func(t *testing.T) {
			skipIfStopped(t)
			h, ctx := begin(t, ph.Name)
			if ph.Off != nil {
				if why := ph.Off(h.Config()); why != "" {
					t.Skip(why)
				}
			}
			for _, st := range ph.Steps(h.On()) {
				if st.Name == "" {
					runStep(t, ctx, ph.Name, st)
					continue
				}
				t.Run(st.Name, func(t *testing.T) {
					skipIfStopped(t)
					runStep(t, ctx, ph.Name, st)
				})
			}
		})
	}
}

// runStep runs one step of phase: no error, its invariants, and no
// threshold check that fails the run.
func runStep(t *testing.T, ctx context.Context, phase string, st phases.Step) {
	res, err := st.Run(ctx, progress(t))
	if err == nil && res.Skip != "" {
		t.Skip(res.Skip)
	}
	assert.NoError(t, err)
	if inv, ok := invariants[phase]; ok && res.Value != nil {
		inv(t, res.Value)
	}
	passes(t, res.Checks)
}

// skipIfStopped skips what is left of a run that was stopped (a signal,
// the -timeout guard): the phase in flight has reported the cause, once.
func skipIfStopped(t *testing.T) {
	if ctx := suite.ctx; ctx.Err() != nil {
		t.Skipf("not run: %v", context.Cause(ctx))
	}
}

// restartInvariants: every start became ready, then answered.
func restartInvariants(t *testing.T, v any) {
	for _, r := range v.([]record.Restart) {
		assert.Positive(t, r.ReadyS, "spawn → ready")
		assert.GreaterOrEqual(t, r.FirstTokenS, r.ReadyS, "first token comes after ready")
	}
}

// servingInvariants: a serving phase ran every concurrency.
func servingInvariants(t *testing.T, v any) {
	assert.Len(t, v.([]record.PerfRun), len(suite.h.Config().Protocol.Concurrency), "one run per concurrency")
}

// healthWindows holds each model's engine-health windows to the protocol:
// one before the first sleep (baseline), one after each after-wake
// phase's wake, one after the first KV-only release where it ran, one
// after the first handoff to the model; each with a prefix-cache hit
// rate and a decode rate (vllmsim exports both; speculative acceptance
// only under --speculative-config), each adapter's too, and the same hit
// rate at every stage (the burst's prompt is the same length each time).
// It returns the requests the windows sent.
func healthWindows(t *testing.T, raw record.Raw, cfg config.Config, ran map[string]map[int]bool) int {
	t.Helper()
	n := cfg.Protocol.HealthRequests
	if n == 0 {
		assert.Empty(t, raw.Health, "health_requests 0: no window")
		return 0
	}
	sent := 0
	for _, m := range cfg.Models {
		want := []string{record.StageHealthBaseline, record.HealthAfterL1, record.HealthAfterL2}
		if ran[m.Label][record.LevelKVRelease] {
			want = append(want, record.HealthAfterKV)
		}
		if slices.ContainsFunc(raw.Handoffs, func(h record.Handoff) bool { return !h.Initial && h.To == m.Label }) {
			want = append(want, record.HealthAfterSwitch)
		}
		var got []string
		for _, h := range raw.Health[m.Label] {
			got = append(got, h.Stage)
			sent += h.Requests * (1 + len(h.Adapters))
			assert.Equal(t, n, h.Requests, "%s %s", m.Label, h.Stage)
			assert.Len(t, h.Adapters, len(m.LoRAModules), "%s %s: a part per adapter", m.Label, h.Stage)
			if raw.Simulated != nil {
				assert.Empty(t, h.Note, "%s %s", m.Label, h.Stage)
				assert.Positive(t, h.DecodeTPS, "%s %s: the engine's decode rate", m.Label, h.Stage)
				assert.Equal(t, m.Speculative(), !math.IsNaN(h.SpecAcceptance), "%s %s: acceptance where speculative", m.Label, h.Stage)
				if m.PrefixCaching() {
					// n requests of one prompt: the first finds nothing of the burst's cached.
					assert.InDelta(t, raw.Health[m.Label][0].PrefixHitRate, h.PrefixHitRate, 1e-9, "%s %s: the same burst hits as much", m.Label, h.Stage)
					assert.Less(t, h.PrefixHitRate, float64(n-1)/float64(n)+1e-9, "%s %s", m.Label, h.Stage)
				}
			}
		}
		assert.ElementsMatch(t, want, got, "%s: engine-health windows", m.Label)
	}
	return sent
}

// TestOutputs checks what the run will write, after every phase ran: the
// report has every key path of the L20 reference report with the same JSON
// type, the request accounting adds up, and bench.txt parses as benchfmt
// with a result for every phase.
func TestOutputs(t *testing.T) {
	h, _ := begin(t, "outputs")
	raw := h.Raw()
	for _, p := range phases.Names() {
		if !slices.Contains(raw.Phases, p) {
			t.Skipf("phase %s did not run (a -run filter?): the output checks need every phase; ran %v", p, raw.Phases)
		}
	}
	rep := report.Build(raw)

	ours, err := json.Marshal(rep)
	require.NoError(t, err)
	ref, err := os.ReadFile(filepath.Join("testdata", "l20-reference-report.json"))
	require.NoError(t, err)
	// The reference ran models A and B: a run of the same labels must have
	// exactly its keys; other labels are compared by shape.
	var dataKeyed []string
	if !slices.Equal(h.Labels(), []string{"A", "B"}) {
		dataKeyed = report.DataKeyed
	}
	diffs, err := shape.Diff(ref, ours, dataKeyed...)
	require.NoError(t, err)
	// restart_baseline and dra, sentences in the reference, are objects
	// whose summary is the sentence (report.Widened): nothing else differs.
	diffs = slices.DeleteFunc(diffs, report.WidenedDiff)
	assert.Empty(t, diffs, "key paths of the reference report missing or of another type in ours")
	assert.NotEmpty(t, rep.RestartBaseline.Summary)
	assert.NotEmpty(t, rep.DRA.Summary)

	// Every timed figure of bench.txt names the phase window whose host
	// load the regression gate reads to tell a busy machine from a slower
	// code (docs/compare.md), and that window carries one.
	run, err := gate.RunOf(gate.BenchOf(report.BenchUnits(), report.BenchResults(raw)), "this run", raw.Started)
	require.NoError(t, err)
	for k := range run.Bench.Values {
		_, ok := run.HostWindow(k)
		assert.True(t, ok, "%s %s: no phase window with a host load", k.Name, k.Unit)
	}

	cfg := h.Config()
	p := cfg.Protocol
	// The level-0 and KV-only release cycles run where they are on and the
	// server has their endpoints (vLLM with the pause API, PR #44890's
	// release); where they are on and did not run, the record says why.
	ran := ranCycles(t, raw, cfg)
	perModel := 3 * len(p.Concurrency) * p.Rounds * p.RequestsPerRound // baseline, after-wake, after-wake-l2
	assert.Equal(t, len(cfg.Models)*perModel, rep.Requests.PlannedPerformance, "planned_performance")
	assert.Equal(t, rep.Requests.Executed, rep.Requests.Success+rep.Requests.Failure+rep.Requests.AbortedByDesign, "executed = success + failure + aborted by design")
	// Performance requests plus one probe per start, cycle and handoff
	// (the reference run: 128 + 42 = 170), plus the correctness probe set
	// (2 prompts and one per LoRA adapter) once before each model's first
	// sleep and once after each of its wakes: every cycle, the after-wake
	// wake, every handoff to it (the initial activation too).
	probes := len(cfg.Models)*(1+p.RestartWarm+p.SleepL1Cycles+p.SleepL2Cycles) + 1 + p.Handoffs
	if p.LostPrefixTokens > 0 { // the lost-prefix probe at each level: twice warm, once after the wake
		probes += len(cfg.Models) * 2 * 3
	}
	probes += healthWindows(t, raw, cfg, ran)
	// Level 0: a probe after the wake and one held while paused; a KV-only
	// release: a probe after the wake (none where the cycles were off).
	// After the level-0 cycles, one probe held between /pause and /resume.
	extraWakes := map[string]int{}
	for _, m := range cfg.Models {
		level0 := 0
		for _, c := range raw.Cycles[m.Label] {
			switch c.Level {
			case 0:
				probes += 2
				extraWakes[m.Label]++
				level0++
			case record.LevelKVRelease:
				probes++
				extraWakes[m.Label]++
			}
		}
		if level0 == p.SleepL0Cycles && level0 > 0 {
			probes++
		}
	}
	if p.CorrectnessMaxTokens > 0 {
		for _, m := range cfg.Models {
			wakes := p.SleepL1Cycles + p.SleepL2Cycles + 2 + extraWakes[m.Label] // the after-wake phases': 2
			for _, ho := range raw.Handoffs {
				if ho.To == m.Label {
					wakes++
				}
			}
			probes += (1 + wakes) * (2 + len(m.LoRAModules))
			c := rep.Models[m.Label].Correctness
			if assert.NotNil(t, c, "correctness of %s", m.Label) {
				stages := []string{record.ReplayLevel1, record.ReplayLevel2, record.ReplayAfterWake, record.ReplayAfterWakeL2, record.ReplaySwitch}
				if ran[m.Label][0] {
					stages = append(stages, record.ReplayLevel0)
				}
				if ran[m.Label][record.LevelKVRelease] {
					stages = append(stages, record.ReplayKVRelease)
				}
				for _, st := range stages {
					assert.Contains(t, c.Stages, st, "%s replayed after its %s wakes", m.Label, st)
				}
			}
		}
	}
	// The state-cost phase: a probe after each wake (level 1, level 2, the
	// KV cache's restore where measured) and the cold start's.
	for _, c := range raw.Cost {
		probes += 3
		if s, ok := c.State(record.StateKVReleased); ok && s.Skipped == "" {
			probes++
		}
	}
	if t := raw.Traffic; t != nil {
		// Every traffic request (both runs), the in-flight requests of each
		// mode and a probe after each of those wakes; a mode the server
		// cannot do (Off, with why) sends none.
		probes += len(t.Requests)
		for _, f := range t.InFlight {
			if f.Off == "" {
				probes += cfg.Traffic.InFlightRequests + 1
			}
		}
	}
	if slices.Contains(raw.Phases, record.PhaseSoak) {
		// A soak in the same run: each cycle hands over to the next model
		// round-robin, with a probe and (correctness on) a replay of the
		// woken model's probe set; every model has its reference already.
		for i := range p.SoakCycles {
			probes++
			if to := cfg.Models[(i+1)%len(cfg.Models)]; p.CorrectnessMaxTokens > 0 {
				probes += 2 + len(to.LoRAModules)
			}
		}
	}
	assert.Equal(t, rep.Requests.PlannedPerformance+probes, rep.Requests.Executed, "executed requests")

	// Memory figures: present when a memory source listed the servers'
	// processes, else absent with the reason in memory.note.
	haveMemory := cfg.Memory != "none" && rep.Memory.Note == ""
	if !haveMemory {
		assert.NotEmpty(t, rep.Memory.Note, "absent memory figures are explained")
	}
	for _, l := range h.Labels() {
		// One release per measured level-1 sleep: every cycle, the
		// after-wake sleep, and every switch away from the model (the
		// reference run: 5 + 1 + 10 = 16), and a level-1 soak's.
		n := p.SleepL1Cycles + 1
		for _, ho := range raw.Handoffs {
			if ho.From == l {
				n++
			}
		}
		if slices.Contains(raw.Phases, record.PhaseSoak) && p.SoakLevel == 1 {
			for i := range p.SoakCycles { // and every soak sleep of it
				if cfg.Models[i%len(cfg.Models)].Label == l {
					n++
				}
			}
		}
		got := rep.Memory.L1ReleaseFraction[l].N
		if haveMemory {
			assert.Equal(t, n, got, "level-1 sleeps measured for %s", l)
		} else {
			assert.Zero(t, got, "no memory source, no release figures for %s", l)
		}
	}
	// Physical limits: every model's level-1 wake and TPOT at c=1 against
	// the link and memory bandwidths, below the limit (fraction ≤ 1), each
	// source named (and simulated ones labelled so).
	for _, l := range h.Labels() {
		lim := rep.Models[l].PhysicalLimits
		if !assert.NotNil(t, lim, "physical_limits of %s", l) {
			continue
		}
		if !slices.Contains(p.Concurrency, 1) || cfg.Memory == "none" {
			continue
		}
		realDevice := rep.Simulated != nil && rep.Simulated.RealDevice
		// A model that decodes speculatively emits several tokens per read of
		// the weights: its TPOT below the one-read floor is a fact the note
		// states, not a failure (issue 47).
		tpotMax := 1.0
		if spec := cfg.Models[slices.IndexFunc(cfg.Models, func(m config.Model) bool { return m.Label == l })].Speculative(); spec && lim.TPOTFractionOfHBM > 1 {
			tpotMax = math.Inf(1)
			assert.Contains(t, lim.Note, report.SpeculativeNote, l)
		} else if realDevice { // vllmsim's real-device mode says what its steps' weight reads are
			assert.Equal(t, report.RealDeviceNote, lim.Note, l)
		} else {
			assert.Empty(t, lim.Note, l)
		}
		// A wake against a measured link may beat the probe's 64 MiB copies with its one large
		// copy, by report.MeasuredSlack at most.
		wakeMax := 1.0
		if lim.PCIeBasis == "measured" {
			wakeMax = report.MeasuredSlack
		}
		for name, lim := range map[string]struct{ f, max float64 }{"l1 wake / PCIe": {lim.L1WakeFractionOfFloor, wakeMax}, "tpot / HBM": {lim.TPOTFractionOfHBM, tpotMax}} {
			assert.True(t, lim.f > 0 && lim.f <= lim.max, "%s %s fraction %v in (0, %g]", l, name, lim.f, lim.max)
		}
		assert.NotEmpty(t, lim.WeightSource)
		switch {
		case realDevice: // the GPU's own copies: the measured link, NVML's memory bandwidth
			assert.Contains(t, lim.PCIeSource, "link probe")
			assert.Contains(t, lim.HBMSource, "real-device mode")
		case rep.Simulated != nil:
			assert.Contains(t, lim.PCIeSource, "simulated")
			assert.Contains(t, lim.HBMSource, "simulated")
		}
	}
	for _, w := range []string{"A-baseline", "A-sleep-level1", "A-after-wake", "B-baseline", "AB-switch"} {
		if len(cfg.Models) == 2 && cfg.Models[0].Label == "A" && cfg.Models[1].Label == "B" {
			assert.Contains(t, rep.Windows, w)
		}
	}

	var buf bytes.Buffer
	require.NoError(t, report.WriteBench(&buf, raw))
	text := buf.String()
	rd := benchfmt.NewReader(strings.NewReader(text), "bench.txt")
	names := map[string]int{}
	units := map[string]bool{}
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Errorf("bench.txt: %v", rec)
		case *benchfmt.Result:
			base, _ := rec.Name.Parts()
			names[string(base)]++
			for _, v := range rec.Values {
				units[v.OrigUnit+v.Unit] = true
			}
			if !strings.Contains(rec.Name.String(), "model=") && !strings.HasPrefix(rec.Name.String(), "Switch/dir=") && !strings.HasPrefix(rec.Name.String(), "TrafficEnergy/run=") && !strings.HasPrefix(rec.Name.String(), record.HostWindowBench) {
				assert.Equal(t, "Memory/device", rec.Name.String())
			}
		}
	}
	require.NoError(t, rd.Err())
	benches := []string{"Restart", "Sleep", "Serve", "Switch", record.HostBench}
	wantUnits := []string{report.UnitReady, report.UnitFirstToken, report.UnitSleep, report.UnitWake, report.UnitTTFT, report.UnitTPOT, report.UnitTPS, report.UnitReqTPS,
		report.UnitOthersCPU, report.UnitWaitPerRun} // every phase window's host load
	anyL0, anyKV := false, false
	for _, l := range h.Labels() {
		anyL0, anyKV = anyL0 || ran[l][0], anyKV || ran[l][record.LevelKVRelease]
	}
	if anyKV { // the KV-only release's /release_kv_cache_memory
		wantUnits = append(wantUnits, report.UnitRelease2)
	}
	if anyL0 { // level 0: a request held while paused
		wantUnits = append(wantUnits, report.UnitHeld)
	}
	if p.CostDwellS > 0 { // the state-cost phase: host memory from /proc
		wantUnits = append(wantUnits, report.UnitHostGiB)
	}
	if haveMemory {
		benches = append(benches, "Memory")
		// GiB/peak (Memory/device) is summed from every sample at Close,
		// after this test.
		wantUnits = append(wantUnits, report.UnitResidual, report.UnitRelease)
		if cfg.GPUs > 1 { // models across GPUs: the worst GPU's residual
			wantUnits = append(wantUnits, report.UnitResidualGPU)
		}
		if anyL0 || anyKV { // what a pause or a KV-only release freed
			wantUnits = append(wantUnits, report.UnitFreed)
		}
		if p.CostDwellS > 0 { // the simulated GPU's energy counter
			wantUnits = append(wantUnits, report.UnitPower, report.UnitWakeJ, report.UnitSleepJ, report.UnitStartJ)
		}
		// The same counter: each handoff's energy, and each traffic run's.
		wantUnits = append(wantUnits, report.UnitSwitchJ)
		if raw.Traffic != nil && len(raw.Traffic.Requests) > 0 {
			wantUnits = append(wantUnits, report.UnitJ)
		}
	} else {
		assert.Zero(t, names["Memory"], "no memory source, no BenchmarkMemory results")
	}
	for _, b := range benches {
		assert.Positive(t, names[b], "bench.txt has Benchmark%s results", b)
	}
	for _, u := range wantUnits {
		assert.True(t, units[u], "bench.txt has %s values", u)
	}
	assert.Len(t, units, len(wantUnits), "no other units: %v", units)
	assert.Equal(t, p.Handoffs, countPrefix(text, "BenchmarkSwitch/"), "one line per handoff")
}

// ranCycles is, per model, whether its level-0 (0) and KV-only release
// (record.LevelKVRelease) cycles ran to success. Cycles that are on in the
// config but did not run must be said off in the record, with why (a server
// without the endpoints), or have failed the run.
func ranCycles(t *testing.T, raw record.Raw, cfg config.Config) map[string]map[int]bool {
	t.Helper()
	out := map[string]map[int]bool{}
	for _, m := range cfg.Models {
		out[m.Label] = map[int]bool{}
		for _, c := range raw.Cycles[m.Label] {
			if c.OK && (c.Level == 0 || c.Level == record.LevelKVRelease) {
				out[m.Label][c.Level] = true
			}
		}
		for level, n := range map[int]int{0: cfg.Protocol.SleepL0Cycles, record.LevelKVRelease: cfg.Protocol.KVReleaseCycles} {
			if n > 0 && !out[m.Label][level] && len(raw.Failures) == 0 {
				assert.NotEmpty(t, raw.CyclesOff[m.Label][level], "%s: %d cycles at level %d asked for, none ran, and the record does not say why", m.Label, n, level)
			}
		}
	}
	return out
}

func countPrefix(s, prefix string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

// TestRegressionGate judges this run against the baseline runs named by
// WAKEBENCH_BASELINE (bench.txt files or directories of runs, comma- or
// colon-separated; see package gate for each metric's rule), prints the
// table (also to out/compare.txt) and fails on every regression: worse by
// more than thresholds.regression_percent and significant by its rule.
func TestRegressionGate(t *testing.T) {
	h, ctx := begin(t, harness.PhaseGate)
	cfg := h.Config()
	if cfg.Baseline == "" {
		t.Skip("no baseline: set WAKEBENCH_BASELINE=path/to/old/bench.txt (or a directory of runs) to gate this run on regressions")
	}
	// Stopped (a signal, the -timeout guard) or unable to read the
	// baseline, Gate records why, and the report FAILs naming it.
	vs, table, err := h.Gate(ctx, cfg.Baseline)
	require.NoError(t, err)
	t.Output().Write([]byte(table))
	for _, v := range vs {
		if v.Regression {
			assert.Fail(t, "regression", "%s %s: %+.1f%% (%s rule, %d runs), flagged beyond %.3g%%", v.Name, v.StatLabel(), v.ChangePct, v.Rule, v.Runs, v.ThresholdPct)
		}
	}
	// The whole comparison's check: NOT EVALUATED, failing the run, where the
	// gate judged fewer metrics than thresholds.regression_min_judged; the
	// test fails with it, not only the report (issue 47).
	var whole []record.Check
	for _, c := range h.Raw().Checks {
		if c.Name == harness.CheckRegressions {
			whole = append(whole, c)
		}
	}
	require.Len(t, whole, 1, "the comparison's check")
	passes(t, whole)
}

// The benchmarks measure one protocol step per iteration and report it
// under the names and units of bench.txt, so go test output is benchstat
// input too:
//
//	go test -run '^$' -bench . -benchtime 1x -count 5 . | tee new.txt
//	go tool benchstat old.txt new.txt
//
// They are extra measurements: report.json holds the tests' protocol run.

func BenchmarkRestart(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	for _, l := range h.Labels() {
		b.Run("model="+l+"/kind=warm", func(b *testing.B) {
			var ready, first []float64
			for b.Loop() {
				rs, err := protocol.NewSteps(h.Env()).WarmStart(ctx, l)
				if err != nil {
					b.Fatal(err)
				}
				ready, first = append(ready, rs.ReadyS), append(first, rs.FirstTokenS)
			}
			reportMean(b, ready, report.UnitReady)
			reportMean(b, first, report.UnitFirstToken)
		})
	}
}

func BenchmarkSleep(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	for _, l := range h.Labels() {
		for _, level := range []int{1, 2} {
			b.Run(fmt.Sprintf("model=%s/level=%d", l, level), func(b *testing.B) {
				var sleep, wake, first, resid []float64
				for b.Loop() {
					c, err := protocol.NewSteps(h.Env()).Cycle(ctx, l, level)
					if err != nil {
						b.Fatal(err)
					}
					sleep, wake, first = append(sleep, c.SleepS), append(wake, c.WakeAPIS), append(first, c.ToFirstTokenS)
					if c.ResidualGiB == c.ResidualGiB {
						resid = append(resid, c.ResidualGiB)
					}
				}
				reportMean(b, sleep, report.UnitSleep)
				reportMean(b, wake, report.UnitWake)
				reportMean(b, first, report.UnitFirstToken)
				reportMean(b, resid, report.UnitResidual)
			})
		}
	}
}

func BenchmarkServe(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	for _, l := range h.Labels() {
		for _, c := range h.Config().Protocol.Concurrency {
			b.Run(fmt.Sprintf("model=%s/stage=baseline/conc=%d", l, c), func(b *testing.B) {
				var tps, ttft, tpot []float64
				for b.Loop() {
					res, err := protocol.NewSteps(h.Env()).ServeRound(ctx, l, c)
					if err != nil {
						b.Fatal(err)
					}
					tps = append(tps, res.Rounds[0].TPS)
					for _, q := range res.Requests {
						ttft = append(ttft, q.TTFT.Seconds())
						if q.HasTPOT {
							tpot = append(tpot, q.TPOT.Seconds())
						}
					}
				}
				reportMean(b, tps, report.UnitTPS)
				reportMedian(b, ttft, report.UnitTTFT)
				reportMedian(b, tpot, report.UnitTPOT)
			})
		}
	}
}

func BenchmarkSwitch(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	labels := h.Labels()
	if len(labels) < 2 {
		b.Skip("switching needs two models")
	}
	for i, from := range labels {
		to := labels[(i+1)%len(labels)]
		b.Run("dir="+record.DirectionKey(from, to), func(b *testing.B) {
			var sleep, wake, first []float64
			for b.Loop() {
				ho, err := protocol.NewSteps(h.Env()).Handoff(ctx, from, to)
				if err != nil {
					b.Fatal(err)
				}
				sleep, wake, first = append(sleep, ho.SleepS), append(wake, ho.WakeS), append(first, ho.ToFirstTokenS)
			}
			reportMean(b, sleep, report.UnitSleep)
			reportMean(b, wake, report.UnitWake)
			reportMean(b, first, report.UnitFirstToken)
		})
	}
}

// reportMean reports the mean per iteration (with -benchtime 1x: the
// sample itself) and drops the ns/op column, which times the harness.
func reportMean(b *testing.B, xs []float64, unit string) {
	if len(xs) == 0 {
		return
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	b.ReportMetric(sum/float64(len(xs)), unit)
	b.ReportMetric(0, "ns/op")
}

// reportMedian reports the median of per-request figures.
func reportMedian(b *testing.B, xs []float64, unit string) {
	if s, err := stats.Summarize(xs); err == nil {
		b.ReportMetric(s.Median, unit)
	}
	b.ReportMetric(0, "ns/op")
}
