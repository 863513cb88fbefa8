// Package phases is the protocol's phase list: each phase once, in run
// order, with what it does (docs/protocol.md's table is generated from it),
// when it is off, its plan (what it will send and record for each model),
// its steps on a run (one per model, or one over every model), its
// invariants and the bench.txt families it writes with their units
// (WindowOf: the phase window the regression gate reads a metric's host
// load in). TestProtocol
// runs the list, one subtest per phase and one call per step, each held
// to its phase's invariants; TestOutputs expects every name in the
// report, its request accounting and its bench lines to be the plans' and
// the families'.
// Adding a phase is its type (in package protocol, a package of its own
// as traffic, or a file here where Env's exported API is all it needs, as
// wake-burst) and one entry here; an opt-in phase (OptIn) runs only where
// protocol.opt_in names it.
package phases

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/statecost"
	"github.com/wakebench/wakebench/internal/traffic"
)

// Result is what one step of a phase returns: its measurements (the
// phase's own type, e.g. []record.Cycle) and its threshold checks,
// recorded in the run's record already.
type Result struct {
	Value  any
	Checks []record.Check
	Skip   string // the step measured nothing, and why (the fit table without a figure it needs)
}

// Step is one run of a phase: for one model, or once over every model.
type Step struct {
	Name string // the subtest's name: a model's label, "fit"; "" for a phase run once over every model
	Run  func(ctx context.Context, logf protocol.Logf) (Result, error)
}

// On is what a phase's steps run on.
type On struct {
	Env     *protocol.Env
	Traffic *traffic.Phase // the traffic phase, with its plan
	// Writers are the run record's typed series: List hands a phase
	// outside package protocol only the few it writes (wake-burst its
	// Perf, the state-cost phase its Costs and Fit; traffic was handed
	// its Traffic when made); protocol's phases write through Env.
	Writers record.Writers
}

// Phase is one phase of the protocol.
type Phase struct {
	Name  string                                   // as the report's phases, windows and failures give it
	Doc   string                                   // what it does per model, as docs/protocol.md's phase table says (Markdown)
	Off   func(cfg config.Config) string           // why the phase does not run with cfg ("": it runs); nil: always runs
	Plan  func(in Inputs, has Can) map[string]Plan // what it will do to each model (by label) when it runs
	Steps func(on On) []Step                       // its steps, in order
	// Holds says where a step's value (Result.Value) breaks what the
	// phase's measurements must show beyond its threshold checks (nil:
	// nothing); TestProtocol holds every step to it.
	Holds func(in Inputs, v any) error
	// Bench is the bench.txt families the phase writes, each taken in the
	// phase's window (WindowOf, the regression gate's host load).
	Bench []Family
	// OptIn: the phase runs only where protocol.opt_in names it (List
	// makes its Off say so otherwise).
	OptIn bool
}

// optIn is an opt-in phase's Off: off unless protocol.opt_in names it,
// and otherwise off where off (nil: never) says so.
func optIn(name string, off func(config.Config) string) func(config.Config) string {
	return func(cfg config.Config) string {
		if !slices.Contains(cfg.Protocol.OptIn, name) {
			return fmt.Sprintf("%s is an opt-in phase: protocol.opt_in does not name it", name)
		}
		if off != nil {
			return off(cfg)
		}
		return ""
	}
}

// CheckOptIn says which names of protocol.opt_in are no opt-in phase of
// List (nil: none), naming the ones there are.
func CheckOptIn(cfg config.Config) error {
	var known []string
	for _, p := range List() {
		if p.OptIn {
			known = append(known, p.Name)
		}
	}
	var errs []error
	for i, name := range cfg.Protocol.OptIn {
		if !slices.Contains(known, name) {
			errs = append(errs, fmt.Errorf("protocol.opt_in[%d]: %q is no opt-in phase (there are: %s)", i, name, strings.Join(known, ", ")))
		}
	}
	return errors.Join(errs...)
}

// perModel is a step per model of on's run.
func perModel[T any](on On, run func(context.Context, string, protocol.Logf) (protocol.Outcome[T], error)) []Step {
	var out []Step
	for _, l := range on.Env.Labels() {
		out = append(out, Step{Name: l, Run: func(ctx context.Context, logf protocol.Logf) (Result, error) {
			return result(run(ctx, l, logf))
		}})
	}
	return out
}

// whole is a phase's one step over every model.
func whole[T any](run func(context.Context, protocol.Logf) (protocol.Outcome[T], error)) []Step {
	return []Step{{Run: func(ctx context.Context, logf protocol.Logf) (Result, error) {
		return result(run(ctx, logf))
	}}}
}

// result is a phase's outcome as a step's Result.
func result[T any](o protocol.Outcome[T], err error) (Result, error) {
	return Result{Value: o.Value, Checks: o.Checks}, err
}

// List is the protocol in run order: the one list the suite runs, the
// Makefile and docs/protocol.md name, and TestOutputs expects in the
// report, the opt-in phases included (off unless protocol.opt_in names
// them). Each call returns a fresh copy.
func List() []Phase {
	list := phaseList()
	for i, p := range list {
		if p.OptIn {
			list[i].Off = optIn(p.Name, p.Off)
		}
	}
	return list
}

// phaseList is List as written, each opt-in phase's Off its own.
func phaseList() []Phase {
	return []Phase{
		{Name: record.PhaseRestart, Doc: "1 initial + `restart_warm` (2) warm starts: spawn → `/health` 200 → first token; other models asleep; the last start stays up",
			Plan: perModelPlan(restartPlan), Holds: holds(restartHolds), Bench: []Family{{Base: "Restart", PerModel: true, Units: units(0, report.UnitReady, report.UnitFirstToken)}}, Steps: func(on On) []Step { return perModel(on, protocol.Restart{Env: on.Env}.Run) }},
		{Name: record.PhaseBaseline, Doc: "serving at each `concurrency` (1, 4): `rounds` (2) × `requests_per_round` (8), prompt ≈ 26 tokens, `max_tokens` 128 with `ignore_eos`; other models asleep; in a server process that has never slept (one that has, as the restart phase leaves all but the last model, is started afresh first); then the engine-health burst (`health_requests`, 4), what each kind of wake's is compared with",
			Plan: perModelPlan(servingPlan(record.PhaseBaseline)), Holds: holds(servingHolds), Bench: serve(record.PhaseBaseline), Steps: func(on On) []Step { return perModel(on, protocol.Baseline{Env: on.Env}.Run) }},
		{Name: record.PhaseSleepL1, Doc: "`sleep_l1_cycles` (5) × (sleep level 1, hold `settle_s`, read residual, wake, probe first token, hold)",
			Plan: perModelPlan(sleepPlan(1)), Holds: holds(cycleHolds), Bench: sleepAt(1), Steps: func(on On) []Step { return perModel(on, protocol.Sleep{Env: on.Env, Level: 1}.Run) }},
		{Name: record.PhaseAfterWake, Doc: "the lost-prefix probe (`lost_prefix_tokens`, 2048) twice, one level-1 sleep and wake, the probe again as the first request (its TTFT against the warm one's: the lost prefix's price); then serving again as in baseline, against the baseline's tok/s; then the engine-health burst (`health_requests`, 4) against the baseline's; then the correctness replay",
			Plan: perModelPlan(afterWakePlan(1)), Holds: holds(servingHolds), Bench: serve(record.PhaseAfterWake), Steps: func(on On) []Step { return perModel(on, protocol.AfterWake{Env: on.Env, Level: 1}.Run) }},
		{Name: record.PhaseSleepL2, Doc: "`sleep_l2_cycles` (3) cycles at level 2; the wake is `wake_up?tags=weights`, `collective_rpc {\"method\":\"reload_weights\"}`, `wake_up?tags=kv_cache`, `reset_prefix_cache`; every first token is checked for garbage",
			Plan: perModelPlan(sleepPlan(2)), Holds: holds(cycleHolds), Bench: sleepAt(2), Steps: func(on On) []Step { return perModel(on, protocol.Sleep{Env: on.Env, Level: 2}.Run) }},
		{Name: record.PhaseAfterWakeL2, Doc: "after-wake at level 2: the lost-prefix probe, one level-2 sleep and its wake (the reload path, where vllm#52479's draft model was lost), the probe again; serving (stage `after-wake-l2`), the engine-health burst, the correctness replay",
			Plan: perModelPlan(afterWakePlan(2)), Holds: holds(servingHolds), Bench: serve(record.PhaseAfterWakeL2), Steps: func(on On) []Step { return perModel(on, protocol.AfterWake{Env: on.Env, Level: 2}.Run) }},
		{Name: record.PhaseSleepL0, Doc: "`sleep_l0_cycles` (3) × (sleep level 0: the scheduler paused, nothing freed; hold `settle_s`, read memory; a probe sent while paused, held until the wake; the wake once the server has taken the probe (its response headers; once the probe is written, at most `settle_s` more), probe first token); then once `/pause`, a held probe, `/resume`; off, and said so, on a vLLM without `/pause`",
			Plan: perModelPlan(level0Plan), Holds: holds(cycleHolds), Bench: sleepAt(0), Steps: func(on On) []Step { return perModel(on, protocol.Level0{Env: on.Env}.Run) }},
		{Name: record.PhaseKVRelease, Doc: "once a release without a pause (vLLM must refuse it), then `kv_release_cycles` (3) × (`/pause`, `/release_kv_cache_memory`, hold `settle_s`, read the GiB freed, `wake_up?tags=kv_cache`, probe first token), the engine-health burst after the first cycle's wake; off, and said so, on a vLLM without it (before PR #44890)",
			Plan: perModelPlan(kvReleasePlan), Holds: holds(cycleHolds), Bench: sleepAt(record.LevelKVRelease), Steps: func(on On) []Step { return perModel(on, protocol.KVRelease{Env: on.Env}.Run) }},
		{Name: WakeBurst, OptIn: true, Doc: "opt-in (`protocol.opt_in`): the requests that arrive during a level-1 wake, as a wake-on-demand router releases them at its answer: for each `concurrency` c, `rounds` × (sleep level 1, hold `settle_s`, wake, and at its answer one wave of c requests sent at once, no request before it); its serving stage `wake-burst` beside baseline's (summary.md, the regression gate), no threshold of its own",
			Plan: perModelPlan(wakeBurstPlan), Holds: holds(servingHolds), Bench: serve(WakeBurst), Steps: func(on On) []Step { return perModel(on, wakeBurst{env: on.Env, perf: on.Writers.Perf}.Run) }},
		{Name: record.PhaseStateCost, Doc: "each state held `cost_dwell_s` (1 s; 0: off) and measured (GPU GiB per GPU, host GiB of the server's process tree with its locked and pinned parts, GPU W from the energy counter): awake idle, asleep at level 1, at level 2, KV released (where the server has `/release_kv_cache_memory`), stopped; the energy (J) of each sleep, wake and a cold start (spawn → first token), the level-1 sleep's transient host peak and what its wake gives back; the break-even per level; then the node's fit table over every model ([cost.md](cost.md))",
			Off: func(cfg config.Config) string {
				if cfg.Protocol.CostDwellS == 0 {
					return "protocol.cost_dwell_s is 0: the state-cost phase is off"
				}
				return ""
			},
			Plan: perModelPlan(stateCostPlan), Holds: costHolds, Bench: []Family{
				{Base: "Cost", PerModel: true, Units: []Unit{{report.UnitPower, NeedsMemory}, {report.UnitHostGiB, 0}, {report.UnitHostLockedGiB, 0}}}, // VmRSS and VmLck, read together
				{Base: "Energy", PerModel: true, Units: units(NeedsMemory, report.UnitWakeJ, report.UnitSleepJ, report.UnitStartJ)},                    // the energy counter
			},
			Steps: func(on On) []Step {
				sc := statecost.Phase{Env: on.Env, CostSeries: on.Writers.Costs, FitTable: on.Writers.Fit}
				return append(perModel(on, sc.Run), Step{Name: "fit", Run: func(ctx context.Context, logf protocol.Logf) (Result, error) {
					f, why, err := sc.Fit(ctx, logf)
					switch {
					case err != nil:
						return Result{}, err
					case f == nil:
						return Result{Skip: "no fit table: " + why}, nil
					}
					return Result{Value: f}, nil
				}})
			}},
		{Name: record.PhaseSwitch, Doc: "all models: 1 initial activation (A awake, others asleep), then `handoffs` (19) handoffs A→B, B→A, … (round-robin for more models): sleep the active model at `switch_level` (1), wake the next, first token, the slept model's memory read `settle_s` after its sleep answered; the engine-health burst after the first handoff to each model",
			Off: func(cfg config.Config) string {
				if n := len(cfg.Models); n < 2 {
					return fmt.Sprintf("switching needs two models; the config has %d", n)
				}
				return ""
			},
			Plan: switchPlan, Holds: holds(switchHolds), Bench: []Family{{Base: "Switch", Units: append(units(0, report.UnitSleep, report.UnitWake, report.UnitFirstToken), Unit{report.UnitSwitchJ, NeedsMemory})}}, Steps: func(on On) []Step { return whole(protocol.Switch{Env: on.Env}.Run) }},
		{Name: record.PhaseTraffic, Doc: "all models: open-loop `traffic.arrivals` (Poisson) at `traffic.rate` (2 req/s) per model for `traffic.duration_s` (6 s) through a wake-on-demand router (one model awake, the others asleep at `traffic.sleep_level`); the same arrivals with every model awake (the ideal); then a sleep with `in_flight_requests` (4) decoding in each pause mode (abort, wait, keep)",
			Plan: trafficPlan, Holds: holds(trafficHolds), Bench: []Family{{Base: "Traffic", Units: []Unit{{report.UnitFirstToken, 0}, {report.UnitTPOT, Sometimes}}}, {Base: "TrafficEnergy", Units: []Unit{{report.UnitJ, NeedsMemory}}}}, Steps: func(on On) []Step { return whole(on.Traffic.Run) }},
	}
}

// Running are the names of List's phases cfg does not turn off, in
// order: those a whole run runs (an opt-in phase only where named).
func Running(cfg config.Config) []string {
	var out []string
	for _, p := range List() {
		if p.Off == nil || p.Off(cfg) == "" {
			out = append(out, p.Name)
		}
	}
	return out
}

// Serving are the names of Running's phases whose plan serves at
// protocol.concurrency (a serving or a wave stage): the run's open-file
// check of the requests in flight at once is theirs.
func Serving(cfg config.Config) []string {
	var out []string
	on := Running(cfg)
	for _, p := range List() {
		if !slices.Contains(on, p.Name) {
			continue
		}
		for _, pl := range p.Plan(Inputs{Config: cfg}, Everything) {
			if len(pl.Serving)+len(pl.Waves) > 0 {
				out = append(out, p.Name)
				break
			}
		}
	}
	return out
}

// Inputs are the run's inputs its phases' plans and invariants read.
func (on On) Inputs() Inputs {
	in := Inputs{Config: on.Env.Config()}
	if on.Traffic != nil {
		in.Traffic = on.Traffic.TrafficPlan()
	}
	return in
}
