package phases

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/traffic"
)

// TestPhaseOrder: the reference run's phases (testdata/l20-reference-report.json:
// restart, baseline, level-1 cycles, after-wake, level 2, switch) run in
// its order, whatever runs between them; the traffic phase, whose router
// leaves any model awake, runs last; each name once and documented. A new
// phase is one entry of List, not an edit here.
func TestPhaseOrder(t *testing.T) {
	var names []string
	for _, p := range List() {
		names = append(names, p.Name)
	}
	reference := []string{record.PhaseRestart, record.PhaseBaseline, record.PhaseSleepL1, record.PhaseAfterWake, record.PhaseSleepL2, record.PhaseSwitch}
	last := -1
	for _, r := range reference {
		i := slices.Index(names, r)
		require.GreaterOrEqual(t, i, 0, "%s is not listed", r)
		assert.Greater(t, i, last, "%s runs after the reference phase before it", r)
		last = i
	}
	assert.Equal(t, record.PhaseTraffic, names[len(names)-1], "traffic runs last")
	seen := map[string]bool{}
	for _, p := range List() {
		assert.False(t, seen[p.Name], "%s listed twice", p.Name)
		seen[p.Name] = true
		assert.NotEmpty(t, p.Doc, p.Name)
	}
	ph := List()
	ph[0].Name = "changed"
	assert.Equal(t, record.PhaseRestart, List()[0].Name, "callers get a copy")
}

var update = flag.Bool("update", false, "rewrite the docs/protocol.md's phase table from List")

const (
	tableBegin = "<!-- phases: generated from internal/phases.List by go test ./internal/phases -update -->\n"
	tableEnd   = "<!-- phases end -->\n"
)

// phaseTable is the docs/protocol.md's phase table.
func phaseTable() string {
	var b strings.Builder
	b.WriteString("| phase | run alone | per model | requests to A (default config) |\n|---|---|---|---|\n")
	cfg := config.SimDefault() // the same with -tags gpu, where Default is the reference's 2 rounds of 8
	for _, p := range List() {
		cell := planCell(cfg, p.Plan(Inputs{Config: cfg}, Everything)["A"])
		if p.OptIn { // off in the default config: what it sends where named
			cell = "— (opt-in; named: " + cell + ")"
		}
		fmt.Fprintf(&b, "| %s | `-run 'TestProtocol/%s$'` | %s | %s |\n", p.Name, p.Name, p.Doc, cell)
	}
	return b.String()
}

// planCell is a phase's plan for one model as the phase table gives it:
// its requests, and of them those its serving stages, engine-health
// windows and correctness replays send.
func planCell(cfg config.Config, p Plan) string {
	m := cfg.Models[0]
	n := p.Requests(cfg, m)
	if n == 0 {
		return "—"
	}
	var parts []string
	pc := cfg.Protocol
	if k := p.Performance(cfg); k > 0 {
		parts = append(parts, fmt.Sprintf("%d serving", k))
	}
	if p.Probes > 0 {
		parts = append(parts, fmt.Sprintf("%d probes", p.Probes))
	}
	if k := len(p.Health); k > 0 && pc.HealthRequests > 0 {
		parts = append(parts, fmt.Sprintf("%d health (%s)", k*pc.HealthRequests*(1+len(m.LoRAModules)), plural(k, "window")))
	}
	if k := len(p.Replays); k > 0 && pc.CorrectnessMaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d replayed (%s)", k*probeSet(m), plural(k, "wake")))
	}
	return fmt.Sprintf("%d: %s", n, strings.Join(parts, ", "))
}

// plural is "n thing", or "n things" but for one.
func plural(n int, thing string) string {
	if n != 1 {
		thing += "s"
	}
	return fmt.Sprintf("%d %s", n, thing)
}

// TestDocsListThePhases: docs/protocol.md's phase table is generated from
// List (go test ./internal/phases -update rewrites it).
func TestDocsListThePhases(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "protocol.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(b)
	i, j := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	require.True(t, i >= 0 && j > i, "docs/protocol.md has no generated phase table between %q and %q", tableBegin, tableEnd)
	got := readme[i+len(tableBegin) : j]
	if *update {
		readme = readme[:i+len(tableBegin)] + phaseTable() + readme[j:]
		require.NoError(t, os.WriteFile(path, []byte(readme), 0o644))
		got = phaseTable()
	}
	assert.Equal(t, phaseTable(), got, "docs/protocol.md's phase table is stale: go test ./internal/phases -update")
}

// TestPlanByHand: the default config's plan per model against a hand
// count of what each phase sends (docs/protocol.md's table), and the
// endpoints a server lacks taking their phases' requests away.
func TestPlanByHand(t *testing.T) {
	cfg := config.Default()
	require.Equal(t, []string{"A", "B"}, []string{cfg.Models[0].Label, cfg.Models[1].Label})
	plans := Planned(Inputs{Config: cfg}, Everything)
	// Probes of A: restart 1+2, sleep-level1 5, after-wake 3 (lost prefix),
	// sleep-level2 3, after-wake-l2 3, sleep-level0 3×2+1, kv-release 3,
	// state-cost 4, switch 10 (the initial activation and the 9 odd
	// handoffs), traffic 3 modes × (4 in flight + 1), the reference 2.
	assert.Equal(t, 3+5+3+3+3+7+3+4+10+15+2, plans["A"].Probes)
	// B: the same without traffic's, with the 10 even handoffs to it.
	assert.Equal(t, 3+5+3+3+3+7+3+4+10+2, plans["B"].Probes)
	// Level-1 sleeps: 5 cycles, the after-wake one, the handoffs away
	// (A: 10 of 19; B: 9 and the initial activation's, B → A).
	assert.Equal(t, 5+1+10, plans["A"].L1Sleeps)
	assert.Equal(t, 5+1+9+1, plans["B"].L1Sleeps)
	// Cycles: sleep_l1_cycles, sleep_l2_cycles, sleep_l0_cycles and
	// kv_release_cycles (5, 3, 3, 3); after-wake's sleep is no cycle.
	assert.Equal(t, map[int]int{1: 5, 2: 3, 0: 3, record.LevelKVRelease: 3}, plans["A"].Cycles)
	assert.Equal(t, plans["A"].Cycles, plans["B"].Cycles)
	want := []string{record.PhaseBaseline, record.PhaseAfterWake, record.PhaseAfterWakeL2}
	assert.Equal(t, want, plans["A"].Serving)
	assert.Equal(t, append(want, record.PhaseKVRelease, record.PhaseSwitch), plans["B"].Health)
	// Replays: 5 + 1 + 3 + 1 + 3 (level 0) + 3 (KV) + 10 (switch).
	assert.Len(t, plans["A"].Replays, 26)
	// Requests of A: 3 stages × 2 concurrencies × 16 (the sim's 4 rounds of 4), the probes,
	// 5 health windows × 4, 26 replays × the 2 prompts of the probe set.
	assert.Equal(t, 96+58+20+52, plans["A"].Requests(cfg, cfg.Models[0]))
	assert.Equal(t, 96+58+20+52+96+43+20+52, Total(cfg, plans))

	// A vLLM before the pause API: no level-0 or KV-only release cycle,
	// no state-cost KV hold, no sleep with requests in flight in any of
	// the 3 modes (4 requests and a probe each: such a sleep kills that
	// engine, so none is tried).
	old := Planned(Inputs{Config: cfg}, Can{})
	assert.Equal(t, plans["A"].Probes-7-3-1-3*5, old["A"].Probes)
	assert.Len(t, old["A"].Replays, 26-6)
	assert.NotContains(t, old["A"].Health, record.PhaseKVRelease)
	assert.Equal(t, map[int]int{1: 5, 2: 3}, old["A"].Cycles, "no level-0 or KV-only release cycle")
	// Adapters: each health window, replay and the reference ask the
	// adapter too (a probe set of 3).
	cfg.Models[0].LoRAModules = map[string]string{"sql": "/adapters/sql"}
	assert.Equal(t, 96+(58+1)+5*4*2+26*3, Planned(Inputs{Config: cfg}, Everything)["A"].Requests(cfg, cfg.Models[0]))
	// The traffic plan's arrivals, each through the router and again in
	// the ideal run (on by default), where every model fits awake.
	in := Inputs{Config: config.Default(), Traffic: &traffic.Plan{Arrivals: []load.Arrival{{Model: "A"}, {Model: "B"}, {Model: "A"}}}}
	assert.Equal(t, plans["A"].Probes+2*2, Planned(in, Everything)["A"].Probes)
	assert.Equal(t, plans["B"].Probes+1*2, Planned(in, Everything)["B"].Probes)
	assert.Equal(t, plans["A"].Probes+2, Planned(in, Can{Pause: true, KVRelease: true})["A"].Probes, "no ideal run")
	// A soak of 5 cycles over A and B at level 1: A → B, B → A, A → B,
	// B → A, A → B; A sleeps 3 times, B is woken 3 times.
	cfg.Protocol.SoakCycles = 5
	soak := SoakPlan(cfg)
	assert.Equal(t, Plan{Probes: 2, Replays: []string{record.PhaseSoak, record.PhaseSoak}, L1Sleeps: 3}, soak["A"])
	assert.Equal(t, 3, soak["B"].Probes)
	assert.Equal(t, 2, soak["B"].L1Sleeps)
	cfg.Protocol.SoakLevel = 2
	assert.Zero(t, SoakPlan(cfg)["A"].L1Sleeps, "a level-2 soak measures no level-1 release")
	// A switch at level 2: the same wakes and probes, no level-1 release
	// from its sleeps (A: the 5 cycles and the after-wake one only).
	l2 := config.SimDefault()
	l2.Protocol.SwitchLevel = 2
	at2 := Planned(Inputs{Config: l2}, Everything)
	assert.Equal(t, 5+1, at2["A"].L1Sleeps)
	assert.Equal(t, 5+1, at2["B"].L1Sleeps)
	assert.Equal(t, plans["A"].Probes, at2["A"].Probes)
	assert.Equal(t, plans["B"].Replays, at2["B"].Replays)
	// Off in the config: its plan is not the run's.
	cfg.Protocol.CostDwellS, cfg.Protocol.LostPrefixTokens = 0, 0
	assert.Equal(t, plans["B"].Probes-4-6, Planned(Inputs{Config: cfg}, Everything)["B"].Probes)
	// Opt-in: wake-burst is the run's where protocol.opt_in names it: its
	// one wave stage, the sim's 4 rounds of one wave at each concurrency
	// (1 and 4 requests) and no other request; its sleeps are not measured
	// ones.
	opt := config.SimDefault()
	opt.Protocol.OptIn = []string{WakeBurst}
	on := Planned(Inputs{Config: opt}, Everything)
	assert.Equal(t, want, on["A"].Serving)
	assert.Equal(t, []string{WakeBurst}, on["A"].Waves)
	assert.Equal(t, 96+4*(1+4), on["A"].Performance(opt))
	assert.Equal(t, 96+58+20+52+20, on["A"].Requests(opt, opt.Models[0]))
	assert.Equal(t, plans["A"].Probes, on["A"].Probes)
	assert.Equal(t, plans["A"].L1Sleeps, on["A"].L1Sleeps)
}

// TestOptInPhases: an opt-in phase is off, saying why, unless
// protocol.opt_in names it; a name that is no opt-in phase is an error
// naming the ones there are.
func TestOptInPhases(t *testing.T) {
	cfg := config.Default()
	byName := map[string]Phase{}
	for _, p := range List() {
		byName[p.Name] = p
	}
	wb := byName[WakeBurst]
	require.True(t, wb.OptIn)
	assert.Contains(t, wb.Off(cfg), "protocol.opt_in does not name it")
	assert.Nil(t, byName[record.PhaseBaseline].Off, "the protocol's own phases are not opt-in")
	cfg.Protocol.OptIn = []string{WakeBurst}
	assert.Empty(t, wb.Off(cfg))
	require.NoError(t, CheckOptIn(cfg))
	cfg.Protocol.OptIn = []string{WakeBurst, "baseline", "wake-bust"}
	err := CheckOptIn(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `protocol.opt_in[1]: "baseline" is no opt-in phase (there are: wake-burst)`)
	assert.Contains(t, err.Error(), `protocol.opt_in[2]: "wake-bust"`)
}

// TestInvariantsHold: each phase's invariants pass a value that keeps
// them and name what a value that breaks them broke.
func TestInvariantsHold(t *testing.T) {
	in := Inputs{Config: config.Default(), Traffic: &traffic.Plan{Arrivals: []load.Arrival{{Model: "A"}, {Model: "B"}}}}
	byName := map[string]Phase{}
	for _, p := range List() {
		byName[p.Name] = p
	}
	t0 := time.Unix(100, 0)
	for _, tc := range []struct {
		phase     string
		good, bad any
		says      string
	}{
		{record.PhaseRestart, []record.Restart{{ReadyS: 1, FirstTokenS: 1.2}}, []record.Restart{{ReadyS: 1, FirstTokenS: 0.9}}, "first token 0.9 s before ready 1 s"},
		{record.PhaseBaseline, make([]record.PerfRun, 2), make([]record.PerfRun, 1), "1 serving runs, not one per concurrency (2)"},
		{record.PhaseSleepL1, []record.Cycle{{OK: true, WakeAPIS: 0.1, ToFirstTokenS: 0.2}, {WakeAPIS: 0.3}}, []record.Cycle{{OK: true, WakeAPIS: 0.3, ToFirstTokenS: 0.2}}, "cycle 0: first token 0.2 s before"},
		{record.PhaseStateCost, &record.Fit{Levels: make([]record.FitLevel, 2)}, &record.Fit{}, "0 levels"},
		{record.PhaseStateCost, record.Cost{Transitions: []record.Transition{{Op: "wake-l1", S: 0.1}}}, record.Cost{Transitions: []record.Transition{{Op: "wake-l1"}}}, "wake-l1 took 0 s"},
		{record.PhaseSwitch, []record.Handoff{{OK: true, From: "A", To: "B", SleepS: 1, WakeS: 1, ToFirstTokenS: 2.5}, {OK: true, Initial: true}},
			[]record.Handoff{{OK: true, From: "A", To: "B", SleepS: 1, WakeS: 1, ToFirstTokenS: 1.5}}, "A→B: switch → first token 1.5 s shorter"},
		{record.PhaseTraffic, record.Traffic{Requests: []record.TrafficRequest{{Run: record.RunShared, Dispatched: t0, FirstToken: t0.Add(time.Second)}, {Run: record.RunShared}, {Run: record.RunIdeal}},
			Switches: make([]record.RouterSwitch, 1), InFlight: make([]record.InFlight, 3)},
			record.Traffic{Requests: []record.TrafficRequest{{Run: record.RunShared, Index: 7, Dispatched: t0, FirstToken: t0.Add(-time.Second)}}}, "request 7: first token before it left the router"},
		{record.PhaseSleepL2, []record.Cycle{}, []record.Handoff{}, "measured a []record.Handoff, not a []record.Cycle"},
	} {
		holds := byName[tc.phase].Holds
		require.NotNil(t, holds, tc.phase)
		assert.NoError(t, holds(in, tc.good), tc.phase)
		assert.ErrorContains(t, holds(in, tc.bad), tc.says, tc.phase)
	}
	// A figure never measured (NaN) breaks them too.
	nan := math.NaN()
	assert.ErrorContains(t, byName[record.PhaseRestart].Holds(in, []record.Restart{{ReadyS: nan, FirstTokenS: 1}}), "spawn → ready NaN s")
	assert.Error(t, byName[record.PhaseSleepL1].Holds(in, []record.Cycle{{OK: true, WakeAPIS: 0.1, ToFirstTokenS: nan}}))
	// Without a traffic plan, what the requests broke is said too.
	err := byName[record.PhaseTraffic].Holds(Inputs{Config: in.Config}, record.Traffic{Requests: []record.TrafficRequest{{Run: record.RunShared, Index: 3, Dispatched: t0, FirstToken: t0.Add(-time.Second)}}})
	assert.ErrorContains(t, err, "no traffic plan")
	assert.ErrorContains(t, err, "request 3: first token before it left the router")
	// The traffic's count of arrivals and pause modes.
	err = byName[record.PhaseTraffic].Holds(in, record.Traffic{})
	assert.ErrorContains(t, err, "0 requests through the router, not the plan's 2 arrivals")
	assert.ErrorContains(t, err, "the router woke no model on demand")
	assert.ErrorContains(t, err, "0 sleeps with requests in flight, not one per pause mode (3)")
}
