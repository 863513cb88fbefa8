package phases

import (
	"maps"
	"slices"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/traffic"
)

// Plan is what a phase will do to one model with a config when every step
// succeeds: the requests it sends and what it records for them. The run's
// request accounting, TestOutputs and docs/protocol.md read the plans
// (Planned); none re-derives them from the config.
type Plan struct {
	Serving  []string // serving stages, each len(concurrency) × rounds × requests_per_round requests (PerfRun.Planned)
	Waves    []string // wave stages: serving stages whose rounds are each one wave of `concurrency` requests sent at once, Σ concurrency × rounds requests each
	Probes   int      // every other single request: first-token probes, held and lost-prefix probes, traffic's arrivals and requests in flight at a sleep
	Health   []string // engine-health windows: each health_requests requests to the model and as many to each adapter
	Replays  []string // a correctness replay by stage, one per wake replayed: each the model's probe set (correctness_max_tokens 0: none)
	L1Sleeps int      // measured level-1 sleeps: a level-1 release figure each
	// Cycles are the sleep cycles it runs by level (0, 1, 2,
	// record.LevelKVRelease): report.json's models.*.sleep.*.planned_cycles
	// where each runs (a level-1 sleep outside a cycle, after-wake's, is
	// no cycle). A level the servers cannot run (Can) has none here, where
	// report.json gives the config's count and why it was off.
	Cycles map[int]int
}

// Performance is how many serving requests p sends with cfg
// (report.json's requests.planned_performance, summed over the models).
func (p Plan) Performance(cfg config.Config) int {
	pc := cfg.Protocol
	waves := 0
	for _, c := range pc.Concurrency {
		waves += c
	}
	return len(p.Serving)*len(pc.Concurrency)*pc.Rounds*pc.RequestsPerRound + len(p.Waves)*waves*pc.Rounds
}

// Requests is how many inference requests p sends to m with cfg.
func (p Plan) Requests(cfg config.Config, m config.Model) int {
	pc := cfg.Protocol
	n := p.Probes + p.Performance(cfg)
	n += len(p.Health) * pc.HealthRequests * (1 + len(m.LoRAModules))
	if pc.CorrectnessMaxTokens > 0 {
		n += len(p.Replays) * probeSet(m)
	}
	return n
}

// probeSet is the number of prompts in m's correctness probe set
// (oracle.Set): a short and a long one, and one per LoRA adapter.
func probeSet(m config.Model) int { return 2 + len(m.LoRAModules) }

// Add is p and q together.
func (p Plan) Add(q Plan) Plan {
	return Plan{Serving: append(slices.Clone(p.Serving), q.Serving...), Waves: append(slices.Clone(p.Waves), q.Waves...), Probes: p.Probes + q.Probes,
		Health: append(slices.Clone(p.Health), q.Health...), Replays: append(slices.Clone(p.Replays), q.Replays...),
		L1Sleeps: p.L1Sleeps + q.L1Sleeps, Cycles: addCycles(p.Cycles, q.Cycles)}
}

// addCycles is a and b summed by level (nil where both are empty).
func addCycles(a, b map[int]int) map[int]int {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[int]int{}
	}
	for level, n := range b {
		out[level] += n
	}
	return out
}

// cycles is n cycles at level (none where n is 0).
func cycles(level, n int) map[int]int {
	if n <= 0 {
		return nil
	}
	return map[int]int{level: n}
}

// addTo adds q to label's plan in plans.
func addTo(plans map[string]Plan, label string, q Plan) { plans[label] = plans[label].Add(q) }

// woken is a wake's plan: its first token and its replay under stage.
func woken(stage string) Plan { return Plan{Probes: 1, Replays: []string{stage}} }

// Inputs are what a phase's plan and invariants read beyond its own
// values: the run's config and the traffic plan read before the run.
type Inputs struct {
	Config  config.Config
	Traffic *traffic.Plan // nil: none (the traffic phase then plans no arrival)
}

// Can is what a run's servers and GPU can do that a phase needs: a phase
// (or a part of one) that needs what they cannot plans nothing of it, and
// the run records why (docs/vllm-api.md's eras, the traffic's ideal run).
type Can struct {
	Pause     bool // /pause, /resume, /is_paused and the pause modes (vLLM PR #34528)
	KVRelease bool // /release_kv_cache_memory (vLLM PR #44890)
	AllAwake  bool // every model awake at once: the traffic phase's ideal run
}

// Everything is a run that can do all of it: vllmsim's default era.
var Everything = Can{Pause: true, KVRelease: true, AllAwake: true}

// perModelPlan is a phase's plan with the same plan for every model.
func perModelPlan(f func(cfg config.Config, has Can) Plan) func(Inputs, Can) map[string]Plan {
	return func(in Inputs, has Can) map[string]Plan {
		out := map[string]Plan{}
		for _, m := range in.Config.Models {
			out[m.Label] = f(in.Config, has)
		}
		return out
	}
}

// times is n copies of s.
func times(n int, s string) []string { return slices.Repeat([]string{s}, max(n, 0)) }

// Planned is the run's plan per model: every phase's of List that its
// config does not turn off, with the correctness reference each model's
// first sleep takes (its probe set, once).
func Planned(in Inputs, has Can) map[string]Plan {
	cfg := in.Config
	out := map[string]Plan{}
	for _, m := range cfg.Models {
		out[m.Label] = Plan{Probes: reference(cfg, m)}
	}
	for _, ph := range List() {
		if ph.Off != nil && ph.Off(cfg) != "" {
			continue
		}
		for l, p := range ph.Plan(in, has) {
			addTo(out, l, p)
		}
	}
	return out
}

// reference is the requests of m's correctness reference: its probe set,
// sent once before its first sleep (correctness_max_tokens 0: none).
func reference(cfg config.Config, m config.Model) int {
	if cfg.Protocol.CorrectnessMaxTokens == 0 {
		return 0
	}
	return probeSet(m)
}

// Total is the requests of a plan per model, as Planned gives it.
func Total(cfg config.Config, plans map[string]Plan) int {
	n := 0
	for l, p := range plans {
		if m, ok := cfg.Model(l); ok {
			n += p.Requests(cfg, m)
		}
	}
	return n
}

// The plans of List's phases.

func restartPlan(cfg config.Config, _ Can) Plan {
	return Plan{Probes: 1 + cfg.Protocol.RestartWarm} // each start's first token
}

func servingPlan(stage string) func(config.Config, Can) Plan {
	return func(config.Config, Can) Plan {
		return Plan{Serving: []string{stage}, Health: []string{stage}}
	}
}

func sleepPlan(level int) func(config.Config, Can) Plan {
	return func(cfg config.Config, _ Can) Plan {
		n, phase := cfg.Protocol.SleepL1Cycles, record.PhaseSleepL1
		if level == 2 {
			n, phase = cfg.Protocol.SleepL2Cycles, record.PhaseSleepL2
		}
		p := Plan{Probes: n, Replays: times(n, phase), Cycles: cycles(level, n)} // each wake's first token and replay
		if level == 1 {
			p.L1Sleeps = n
		}
		return p
	}
}

func afterWakePlan(level int) func(config.Config, Can) Plan {
	return func(cfg config.Config, _ Can) Plan {
		phase := record.PhaseAfterWake // its serving, health and replay stage
		if level == 2 {
			phase = record.PhaseAfterWakeL2
		}
		p := Plan{Serving: []string{phase}, Health: []string{phase}, Replays: []string{phase}}
		if cfg.Protocol.LostPrefixLen() > 0 {
			p.Probes = 3 // the lost-prefix probe twice warm, once after the wake
		}
		if level == 1 {
			p.L1Sleeps = 1
		}
		return p
	}
}

func level0Plan(cfg config.Config, has Can) Plan {
	n := cfg.Protocol.SleepL0Cycles
	if !has.Pause || n == 0 {
		return Plan{}
	}
	// Each cycle: the probe held while paused and the wake's first token;
	// then once the probe held between /pause and /resume.
	return Plan{Probes: 2*n + 1, Replays: times(n, record.PhaseSleepL0), Cycles: cycles(0, n)}
}

func kvReleasePlan(cfg config.Config, has Can) Plan {
	n := cfg.Protocol.KVReleaseCycles
	if !has.Pause || !has.KVRelease || n == 0 {
		return Plan{}
	}
	return Plan{Probes: n, Replays: times(n, record.PhaseKVRelease), Health: []string{record.PhaseKVRelease}, Cycles: cycles(record.LevelKVRelease, n)}
}

func stateCostPlan(_ config.Config, has Can) Plan {
	p := Plan{Probes: 3} // the first token after the level-1 and level-2 wakes and the cold start's
	if has.Pause && has.KVRelease {
		p.Probes++ // after the KV cache's restore
	}
	return p
}

// switchPlan: the initial activation hands the GPU from the last model
// to the first (the last is the one awake: the per-model phases end on
// it, and the switch starts the others leaving the last started awake),
// then handoff i goes from model i mod n to the next (round-robin); each
// wake's first token and replay, each sleep a measured level-1 one at
// switch_level 1 (at 2 no release figure), the
// first handoff to a model (not the initial activation) its health
// window.
func switchPlan(in Inputs, _ Can) map[string]Plan {
	cfg := in.Config
	out := map[string]Plan{}
	n := len(cfg.Models)
	if n == 0 {
		return out
	}
	sleep := Plan{} // a handoff's sleep: a level-1 release figure where switch_level is 1
	if cfg.Protocol.SwitchLevel == 1 {
		sleep.L1Sleeps = 1
	}
	addTo(out, cfg.Models[n-1].Label, sleep)
	addTo(out, cfg.Models[0].Label, woken(record.PhaseSwitch))
	for i := range cfg.Protocol.Handoffs {
		from, to := cfg.Models[i%n].Label, cfg.Models[(i+1)%n].Label
		addTo(out, from, sleep)
		addTo(out, to, woken(record.PhaseSwitch))
		if !slices.Contains(out[to].Health, record.PhaseSwitch) {
			addTo(out, to, Plan{Health: []string{record.PhaseSwitch}})
		}
	}
	return out
}

// SoakPlan is the soak's (TestSoak's, not one of List's phases, run
// where protocol.soak_cycles is set): cycle i hands the GPU from model i
// mod n to the next, round-robin, a sleep at protocol.soak_level (at
// level 1 a measured level-1 sleep), then the woken model's first token
// and replay; every model has its correctness reference already.
func SoakPlan(cfg config.Config) map[string]Plan {
	out := map[string]Plan{}
	n := len(cfg.Models)
	if n == 0 {
		return out
	}
	for i := range cfg.Protocol.SoakCycles {
		from, to := cfg.Models[i%n].Label, cfg.Models[(i+1)%n].Label
		if cfg.Protocol.SoakLevel == 1 {
			addTo(out, from, Plan{L1Sleeps: 1})
		}
		addTo(out, to, woken(record.PhaseSoak))
	}
	return out
}

// trafficPlan: each arrival of the traffic plan (read before the run)
// to its model through the router (none shed by a full queue), and again
// with every model awake (the ideal run, where on and the GPU holds every
// model); the requests in
// flight at a sleep in each pause mode, on the first model, each with
// the wake's first token after it (a mode other than abort needs the
// pause API).
func trafficPlan(in Inputs, has Can) map[string]Plan {
	cfg := in.Config
	out := map[string]Plan{}
	if in.Traffic != nil {
		runs := 1
		if cfg.Traffic.Ideal && has.AllAwake {
			runs = 2
		}
		for _, a := range in.Traffic.Arrivals {
			addTo(out, a.Model, Plan{Probes: runs})
		}
	}
	tr := cfg.Traffic
	if len(cfg.Models) == 0 || tr.InFlightRequests == 0 {
		return out
	}
	if !has.Pause { // before pause-first a sleep with requests in flight kills the engine: every mode is off
		return out
	}
	for range tr.InFlightModes {
		addTo(out, cfg.Models[0].Label, Plan{Probes: tr.InFlightRequests + 1})
	}
	return out
}
