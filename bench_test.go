// The protocol's benchmark run: TestProtocol runs every phase in
// phases.List's order, each step held to its phase's invariants
// (phases.Phase.Holds), TestOutputs checks what the run writes against
// the phases' plans (phases.Planned), TestRegressionGate judges it
// against a baseline, and the Benchmark functions measure one protocol
// step per iteration for go test -bench (the sleep's in sleep_test.go,
// the switch's in switch_test.go).

package wakebench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/shape"
	"github.com/wakebench/wakebench/internal/stats"
)

// TestProtocol runs the protocol's phases in phases.List's order, one
// subtest each (TestProtocol/restart, TestProtocol/sleep-level1, …), each
// step of a phase one call: a subtest per model (TestProtocol/restart/A)
// or, for a phase over every model, the phase's test itself. A phase run
// alone (-run 'TestProtocol/switch') puts the GPU in the state it needs:
// servers started, the other models asleep.
func TestProtocol(t *testing.T) {
	skipShort(t)
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
					runStep(t, ctx, h, ph, st)
					continue
				}
				t.Run(st.Name, func(t *testing.T) {
					skipIfStopped(t)
					runStep(t, ctx, h, ph, st)
				})
			}
		})
	}
}

// runStep runs one step of ph: no error, the phase's invariants
// (Phase.Holds), and no threshold check that fails the run.
func runStep(t *testing.T, ctx context.Context, h *harness.Run, ph phases.Phase, st phases.Step) {
	res, err := st.Run(ctx, progress(t))
	if err == nil && res.Skip != "" {
		t.Skip(res.Skip)
	}
	assert.NoError(t, err)
	if ph.Holds != nil && res.Value != nil {
		assert.NoError(t, ph.Holds(h.On().Inputs(), res.Value), "%s's invariants", ph.Name)
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

// healthWindows holds each model's engine-health windows to its plan
// (phases.Planned): one before the first sleep (baseline), one after each
// after-wake phase's wake, one after the first KV-only release where it
// ran, one after the first handoff to the model; each with a prefix-cache
// hit rate and a decode rate (vllmsim exports both; speculative acceptance
// only under --speculative-config), each adapter's too, and the same hit
// rate at every stage (the burst's prompt is the same length each time).
func healthWindows(t *testing.T, raw record.Raw, cfg config.Config, plans map[string]phases.Plan) {
	t.Helper()
	n := cfg.Protocol.HealthRequests
	if n == 0 {
		assert.Empty(t, raw.Health, "health_requests 0: no window")
		return
	}
	for _, m := range cfg.Models {
		want := plans[m.Label].Health
		var got []string
		for _, h := range raw.Health[m.Label] {
			got = append(got, h.Stage)
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
}

// can is what the run's servers and GPU could do, as its phases recorded
// it: a level-0 or KV-only release cycle, a state-cost hold or a pause
// mode off for a server without /pause (or /is_paused), or without
// /release_kv_cache_memory, says so in its reason (TestEveryEraPasses
// holds each era's reasons); the traffic's ideal run says why it did not
// run (the models do not fit awake together).
func can(raw record.Raw) phases.Can {
	var why []string
	for _, byLevel := range raw.CyclesOff {
		why = slices.AppendSeq(why, maps.Values(byLevel))
	}
	for _, c := range raw.Cost {
		for _, s := range c.States {
			why = append(why, s.Skipped)
		}
	}
	has := phases.Everything
	if raw.Traffic != nil {
		for _, f := range raw.Traffic.InFlight {
			why = append(why, f.Off)
		}
		has.AllAwake = raw.Traffic.IdealRan || raw.Traffic.IdealNote == ""
	}
	for _, w := range why {
		if strings.Contains(w, "no /pause") || strings.Contains(w, "no /is_paused") {
			has.Pause = false
		}
		if strings.Contains(w, "no /release_kv_cache_memory") {
			has.KVRelease = false
		}
	}
	has.KVRelease = has.KVRelease && has.Pause // the release needs a completed pause
	return has
}

// simCan is what vllmsim can do in era (docs/vllm-api.md §1): a (vLLM ≤
// 0.11) has no pause API and no KV-only release, b (0.17 to 0.30) the
// pause API alone, c, d and proposed both; every model fits awake (the
// caller reads that from the run).
func simCan(era string) phases.Can {
	switch era {
	case "a":
		return phases.Can{AllAwake: true}
	case "b":
		return phases.Can{Pause: true, AllAwake: true}
	}
	return phases.Everything
}

// TestOutputs checks what the run will write, after every phase ran: the
// report has every key path of the L20 reference report with the same JSON
// type, the request accounting, each model's sleep cycles by level and
// report.json's planned cycles add up to the phases' plans, and bench.txt
// parses as benchfmt, each of its lines of a bench family a phase that ran
// declares (phases.Phase.Bench) and each such family with lines.
func TestOutputs(t *testing.T) {
	h, _ := begin(t, "outputs")
	raw := h.Raw()
	for _, p := range phases.Running(h.Config()) {
		if !slices.Contains(raw.Phases, p) {
			t.Skipf("phase %s did not run (a -run filter?): the output checks need every phase the config runs; ran %v", p, raw.Phases)
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
	// The request accounting adds up to the phases' plans (phases.Planned,
	// checked by hand in its package) on what the servers and GPU could do.
	// On vllmsim what the servers can do is its era's, not what the run
	// found: a phase that turned itself off on a server that can do it
	// fails here, instead of taking its plan away with it.
	has := can(raw)
	if raw.Simulated != nil {
		want := simCan(cfg.Sim.Era)
		want.AllAwake = has.AllAwake // a fact of the GPU's memory, not the era's
		// What no phase of the run tried is not known from it (an era
		// without the KV-only release, in a run with no release cycle,
		// no state cost and no sleep with requests in flight): the era's.
		inFlight := raw.Traffic != nil && len(raw.Traffic.InFlight) > 0
		if pc := cfg.Protocol; pc.KVReleaseCycles == 0 && pc.CostDwellS == 0 && !inFlight {
			has.KVRelease = want.KVRelease
			if pc.SleepL0Cycles == 0 {
				has.Pause = want.Pause
			}
		}
		assert.Equal(t, want, has, "what vllmsim's era %q can do, as the run's phases found it", cfg.Sim.Era)
		has = want
	}
	plans := phases.Planned(h.On().Inputs(), has)
	if slices.Contains(raw.Phases, record.PhaseSoak) { // a soak in the same run
		for l, sp := range phases.SoakPlan(cfg) {
			plans[l] = plans[l].Add(sp)
		}
	}
	planned := 0
	for _, pl := range plans {
		planned += pl.Performance(cfg)
	}
	assert.Equal(t, planned, rep.Requests.PlannedPerformance, "planned_performance")
	assert.Equal(t, rep.Requests.Executed, rep.Requests.Success+rep.Requests.Failure+rep.Requests.AbortedByDesign, "executed = success + failure + aborted by design")
	requests := phases.Total(cfg, plans)
	if tr := raw.Traffic; tr != nil {
		// An arrival the router's full queue shed (traffic.max_queue) is
		// planned but never sent.
		for _, r := range tr.Requests {
			if r.Shed {
				requests--
			}
		}
	}
	healthWindows(t, raw, cfg, plans)
	// The sleep cycles each model ran, by level, are its plan's, and
	// report.json plans as many.
	for _, l := range h.Labels() {
		got := map[int]int{}
		for _, c := range raw.Cycles[l] {
			got[c.Level]++
		}
		want := plans[l].Cycles
		if want == nil {
			want = map[int]int{}
		}
		assert.Equal(t, want, got, "%s's sleep cycles by level", l)
		planned := map[string]bool{} // report.json's keys of the plan's levels
		for level, n := range want {
			key := record.LevelKey(level)
			planned[key] = true
			if sl := rep.Models[l].Sleep[key]; assert.NotNil(t, sl, "%s level %s", l, key) {
				assert.Equal(t, n, sl.PlannedCycles, "%s level %s planned_cycles", l, key)
			}
		}
		// A level report.json gives that the plan has no cycle of: one
		// the config asks for (its planned_cycles) that the server could
		// not run, saying why.
		for key, sl := range rep.Models[l].Sleep {
			if !planned[key] && sl != nil && sl.PlannedCycles > 0 {
				assert.NotEmpty(t, sl.Off, "%s level %s: %d cycles asked for, none planned, and no reason", l, key, sl.PlannedCycles)
			}
		}
	}
	for _, m := range cfg.Models {
		if c := rep.Models[m.Label].Correctness; p.CorrectnessMaxTokens > 0 && assert.NotNil(t, c, "correctness of %s", m.Label) {
			for _, st := range slices.Compact(slices.Sorted(slices.Values(plans[m.Label].Replays))) {
				assert.Contains(t, c.Stages, st, "%s replayed after its %s wakes", m.Label, st)
			}
		}
	}
	assert.Equal(t, requests, rep.Requests.Executed, "executed requests")

	// Memory figures: present when a memory source listed the servers'
	// processes, else absent with the reason in memory.note.
	haveMemory := cfg.Memory != "none" && rep.Memory.Note == ""
	if !haveMemory {
		assert.NotEmpty(t, rep.Memory.Note, "absent memory figures are explained")
	}
	for _, l := range h.Labels() {
		// One release per measured level-1 sleep the plan has: every
		// cycle, the after-wake sleep, and every switch away from the model
		// (the reference run: 5 + 1 + 10 = 16), and a level-1 soak's.
		n := plans[l].L1Sleeps
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
	// Every line is of a family a phase that ran declares, or of one of no
	// phase's window (phases.Unwindowed: the level-1 releases, the device's
	// peak, the host load over each window), and carries only units its
	// family declares (phases.Family.Units).
	have := phases.Have{Memory: haveMemory, GPUs: cfg.GPUs > 1}
	lines := map[string]int{}            // the lines of each family, by ID
	seen := map[string]map[string]bool{} // the units on them
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Errorf("bench.txt: %v", rec)
		case *benchfmt.Result:
			f, ph, ok := phases.LineFamily(record.ParseBenchName(rec.Name.String())) // a file's names, split where it is read
			if !ok {
				t.Errorf("%s: of no phase's bench families (phases.Phase.Bench) nor phases.Unwindowed", rec.Name)
				continue
			}
			if ph != "" {
				assert.Contains(t, raw.Phases, ph, "%s: phase %s wrote it and did not run", rec.Name, ph)
			}
			lines[f.ID()]++
			if seen[f.ID()] == nil {
				seen[f.ID()] = map[string]bool{}
			}
			for _, v := range rec.Values {
				u := v.OrigUnit + v.Unit
				seen[f.ID()][u] = true
				assert.True(t, f.Has(u), "%s: unit %s, which its family %s does not declare (phases.Family.Units)", rec.Name, u, f.ID())
			}
		}
	}
	require.NoError(t, rd.Err())
	// Every family of every phase that ran has lines, where its phase
	// measured it: level 0 and the KV-only release where the server has
	// them, a family of memory figures where a memory source listed the
	// servers (Family.Possible), the traffic's where it counted a request
	// (a config may plan none: the variant examples'); and its lines carry
	// each unit the run had what it needs for.
	counted := raw.Traffic != nil && slices.ContainsFunc(raw.Traffic.Requests, func(r record.TrafficRequest) bool { return !r.WarmUp && r.Err == "" })
	sent := raw.Traffic != nil && len(raw.Traffic.Requests) > 0 // a run's energy spans every request, warm-ups too
	families := phases.Unwindowed()
	for _, ph := range phases.List() {
		if slices.Contains(raw.Phases, ph.Name) {
			families = append(families, ph.Bench...)
		}
	}
	for _, f := range families {
		switch {
		case !f.Possible(have),
			f.Base == "Sleep" && f.Value == record.LevelKey(0) && !anyRan(ran, 0),
			f.Base == "Sleep" && f.Value == record.LevelKey(record.LevelKVRelease) && !anyRan(ran, record.LevelKVRelease),
			f.Base == "Traffic" && !counted,
			f.Base == "TrafficEnergy" && !sent:
			assert.Zero(t, lines[f.ID()], "%s: lines of a family the run could not measure", f.ID())
			continue
		}
		if !assert.Positive(t, lines[f.ID()], "bench.txt has lines of the family %s", f.ID()) {
			continue
		}
		for _, u := range f.Units {
			if u.Required(have) {
				assert.True(t, seen[f.ID()][u.Name], "%s: no line carries %s", f.ID(), u.Name)
			} else if !u.Possible(have) {
				assert.False(t, seen[f.ID()][u.Name], "%s: a %s value the run could not measure", f.ID(), u.Name)
			}
		}
	}
	if slices.Contains(raw.Phases, record.PhaseSwitch) {
		assert.Equal(t, p.Handoffs, countPrefix(text, "BenchmarkSwitch/"), "one line per handoff")
	}
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

// anyRan says whether any model's cycles at level ran (ranCycles).
func anyRan(ran map[string]map[int]bool, level int) bool {
	for _, r := range ran {
		if r[level] {
			return true
		}
	}
	return false
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
		if c.Name == gate.CheckRegressions {
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
				rs, err := h.Steps().WarmStart(ctx, l)
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

func BenchmarkServe(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	for _, l := range h.Labels() {
		for _, c := range h.Config().Protocol.Concurrency {
			b.Run(fmt.Sprintf("model=%s/stage=baseline/conc=%d", l, c), func(b *testing.B) {
				var tps, ttft, tpot []float64
				for b.Loop() {
					run, err := h.Steps().ServeRound(ctx, l, c)
					if err != nil {
						b.Fatal(err)
					}
					tps = append(tps, run.RoundTPS...)
					ttft = append(ttft, run.TTFT...)
					tpot = append(tpot, run.TPOT...)
				}
				reportMean(b, tps, report.UnitTPS)
				reportMedian(b, ttft, report.UnitTTFT)
				reportMedian(b, tpot, report.UnitTPOT)
			})
		}
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
