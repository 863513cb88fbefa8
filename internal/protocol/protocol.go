// Package protocol is wakebench's protocol: the phases (restart, baseline,
// sleep levels 1 and 2, after-wake, the state costs, switching; traffic, run by package
// traffic through Begin, Fail and StartAll) in their run order and the
// soak, each a method that drives the pool, writes what it measured to
// the record and says where it failed; and each phase's threshold checks
// (package gate). The go test suite calls the phases and asserts the checks.
package protocol

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

// Phase is one step of the protocol.
type Phase struct {
	Name string // as the report's phases, windows and failures give it
	Doc  string // what it does per model, as the phase table in docs/protocol.md says (Markdown)
}

// Phase names.
const (
	PhaseRestart   = "restart"
	PhaseBaseline  = "baseline"
	PhaseSleepL1   = "sleep-level1"
	PhaseAfterWake = "after-wake"
	PhaseSleepL2   = "sleep-level2"
	PhaseSleepL0   = "sleep-level0"
	PhaseKVRelease = "kv-release"
	PhaseStateCost = "state-cost"
	PhaseSwitch    = "switch"
	PhaseTraffic   = "traffic" // run by package traffic, through Begin, Fail and StartAll
)

// Phases is the protocol in run order: the one list the suite runs, the
// Makefile and docs/protocol.md name, and TestOutputs expects in the report.
func Phases() []Phase {
	return []Phase{
		{PhaseRestart, "1 initial + `restart_warm` (2) warm starts: spawn → `/health` 200 → first token; other models asleep; the last start stays up"},
		{PhaseBaseline, "serving at each `concurrency` (1, 4): `rounds` (2) × `requests_per_round` (8), prompt ≈ 26 tokens, `max_tokens` 128 with `ignore_eos`; other models asleep; in a server process that has never slept (one that has, as the restart phase leaves all but the last model, is started afresh first)"},
		{PhaseSleepL1, "`sleep_l1_cycles` (5) × (sleep level 1, hold `settle_s`, read residual, wake, probe first token, hold)"},
		{PhaseAfterWake, "one level-1 sleep and wake, then serving again as in baseline straight after the wake, against the baseline's tok/s; then the correctness replay"},
		{PhaseSleepL2, "`sleep_l2_cycles` (3) cycles at level 2; the wake is `wake_up?tags=weights`, `collective_rpc {\"method\":\"reload_weights\"}`, `wake_up?tags=kv_cache`, `reset_prefix_cache`; every first token is checked for garbage"},
		{PhaseSleepL0, "`sleep_l0_cycles` (3) × (sleep level 0: the scheduler paused, nothing freed; hold `settle_s`, read memory; a probe sent while paused, held until the wake; wake, probe first token); then once `/pause`, a held probe, `/resume`; off, and said so, on a vLLM without `/pause`"},
		{PhaseKVRelease, "once a release without a pause (vLLM must refuse it), then `kv_release_cycles` (3) × (`/pause`, `/release_kv_cache_memory`, hold `settle_s`, read the GiB freed, `wake_up?tags=kv_cache`, probe first token); off, and said so, on a vLLM without it (before PR #44890)"},
		{PhaseStateCost, "each state held `cost_dwell_s` (1 s; 0: off) and measured (GPU GiB per GPU, host GiB of the server's process tree with its locked and pinned parts, GPU W from the energy counter): awake idle, asleep at level 1, at level 2, KV released (where the server has `/release_kv_cache_memory`), stopped; the energy (J) of each sleep, wake and a cold start (spawn → first token), the level-1 sleep's transient host peak and what its wake gives back; the break-even per level; then the node's fit table over every model ([cost.md](cost.md))"},
		{PhaseSwitch, "all models: 1 initial activation (A awake, others asleep), then `handoffs` (19) handoffs A→B, B→A, … (round-robin for more models): sleep the active model at level 1, wake the next, first token"},
		{PhaseTraffic, "all models: open-loop `traffic.arrivals` (Poisson) at `traffic.rate` (2 req/s) per model for `traffic.duration_s` (6 s) through a wake-on-demand router (one model awake, the others asleep at `traffic.sleep_level`); the same arrivals with every model awake (the ideal); then a sleep with `in_flight_requests` (4) decoding in each pause mode (abort, wait, keep)"},
	}
}

// PhaseNames are the names of Phases, in order.
func PhaseNames() []string {
	var out []string
	for _, p := range Phases() {
		out = append(out, p.Name)
	}
	return out
}

// Logf prints a progress line.
type Logf func(format string, args ...any)

// Observer is told when a phase starts and ends (when is "before" or
// "after"), with the models it covers: the harness scrapes /metrics then.
type Observer interface {
	ObservePhase(ctx context.Context, phase, when string, labels []string)
}

// Protocol runs the phases on a pool and records them.
type Protocol struct {
	cfg  config.Config
	pool *pool.Pool
	rec  *record.Recorder
	obs  Observer
	// mismatched: a correctness mismatch of this model/stage was
	// recorded as a failure (the check counts the rest).
	mismatched map[string]bool
	// kvRefused: the model's server refused a KV-only release without a
	// pause, as vLLM must (KVReleaseCycles).
	kvRefused map[string]bool
	// pauseResumed: the model's /pause held a request until /resume
	// (PauseCycles).
	pauseResumed map[string]bool
}

// New is the protocol of cfg on f, recording into rec; obs may be nil.
func New(cfg config.Config, f *pool.Pool, rec *record.Recorder, obs Observer) *Protocol {
	return &Protocol{cfg: cfg, pool: f, rec: rec, obs: obs, kvRefused: map[string]bool{}, pauseResumed: map[string]bool{}}
}

// bench is p for benchmarks: the same servers, but the measurements a
// benchmark step makes (requests, releases, events) go to a record of its
// own, never into the run's report.
func (p *Protocol) bench() *Protocol {
	scratch := record.New(p.cfg.ModelNames()) // not a copy of the whole record per step
	return &Protocol{cfg: p.cfg, pool: p.pool.Recording(scratch), rec: scratch}
}

// Config is the run's configuration.
func (p *Protocol) Config() config.Config { return p.cfg }

// Labels are the model labels in config order.
func (p *Protocol) Labels() []string { return p.pool.Labels() }

// Raw is a copy of what the run has recorded so far.
func (p *Protocol) Raw() record.Raw { return p.rec.Raw() }

// Fail records a failure and returns it as an error naming phase, model
// and step. A step the run's stop interrupted (record.Stopped) says so
// first: it is no failure of the model.
func (p *Protocol) Fail(phase, label, step string, err error) error {
	if errors.As(err, new(record.Stopped)) { // filed under no model: it is none's failure
		if label != "" {
			step += " of " + label
		}
		step, label = "run stopped during "+step, ""
	}
	p.rec.Fail(record.Failure{Phase: phase, Model: label, Step: step, Error: err.Error()})
	return fmt.Errorf("%s %s: %s: %w", phase, label, step, err)
}

// Failed reports whether a failure of phase is recorded.
func (p *Protocol) Failed(phase string) bool { return p.rec.Failed(phase) }

// Begin is begin, for a phase run by another package (traffic).
func (p *Protocol) Begin(ctx context.Context, phase string, labels ...string) (end func()) {
	return p.begin(ctx, phase, labels...)
}

// begin starts a phase for labels: it is listed in the report, the
// observer is told, and the returned end records the phase window (named
// <label>-<phase>, or the labels joined for several), records every
// server that exited meanwhile as a failure of the phase (unless one of
// its steps named that model's failure), and tells the observer again.
func (p *Protocol) begin(ctx context.Context, phase string, labels ...string) (end func()) {
	p.rec.PhaseRan(phase)
	if p.obs != nil {
		p.obs.ObservePhase(ctx, phase, "before", labels)
	}
	start, exits := time.Now(), p.pool.Procs().ExitMark()
	return func() {
		p.rec.Window(strings.Join(labels, "")+"-"+phase, start, time.Now(), seconds(p.cfg.Protocol.WindowPadS))
		// A server that exited during the phase is a failure of it, also
		// where no step met it (a request's error, a restart since).
		// How each model's memory is attributed (its latest start's
		// footprint, pool.Memory), for the report.
		for _, l := range p.pool.Labels() {
			if how := p.pool.Memory().Attribution(l); how != "" {
				p.rec.SetAttribution(l, how)
			}
		}
		ls, errs := p.pool.Procs().Exits(exits)
		for i, l := range ls {
			if !p.rec.FailedFor(phase, l) {
				p.rec.Fail(record.Failure{Phase: phase, Model: l, Step: "server exited during the phase", Error: errs[i].Error()})
			}
		}
		if p.obs != nil {
			p.obs.ObservePhase(ctx, phase, "after", labels)
		}
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Record records threshold verdicts (a check evaluated again replaces the
// earlier one) and returns them.
func (p *Protocol) Record(cs ...record.Check) []record.Check {
	p.rec.AddChecks(cs...)
	return cs
}

// RestartChecks: every planned start happened.
func (p *Protocol) RestartChecks(label string, rs []record.Restart) []record.Check {
	return p.Record(gate.Restart(p.cfg, label, rs)...)
}

// ServeChecks: failed requests within the limit and every round passed, per concurrency.
func (p *Protocol) ServeChecks(label string, runs []record.PerfRun) []record.Check {
	return p.Record(gate.Serve(p.cfg, label, runs)...)
}

// AfterWakeChecks: ServeChecks and after-wake tok/s against the baseline's;
// the model's level-1 release again, with the after-wake sleep's.
func (p *Protocol) AfterWakeChecks(label string, runs []record.PerfRun) []record.Check {
	raw := p.rec.Raw()
	cs := append(gate.AfterWake(p.cfg, label, runs, raw.Perf[label]), gate.Correctness(label, record.ReplayAfterWake, raw.Replays[label])...)
	return p.Record(append(cs, releaseChecks(p.cfg, raw, label)...)...)
}

// releaseChecks re-evaluates min_l1_release_percent on every level-1
// release of labels measured so far: each phase whose level-1 sleeps add
// releases (sleep-level1, after-wake, switch, soak) records it again, so
// the check (recorded once, the latest replacing the earlier) judges the
// samples report.json's memory.l1_release_fraction summarises.
func releaseChecks(cfg config.Config, raw record.Raw, labels ...string) []record.Check {
	var out []record.Check
	for _, l := range labels {
		out = append(out, gate.Release(cfg, l, raw.Release[l], false)...)
	}
	return out
}

// SleepChecks: every cycle succeeded; wake → first token, residual and
// (level 1) release within their limits.
func (p *Protocol) SleepChecks(label string, level int, cycles []record.Cycle) []record.Check {
	raw := p.rec.Raw()
	stage := record.ReplayLevel1
	if level == 2 {
		stage = record.ReplayLevel2
	}
	return p.Record(append(gate.Sleep(p.cfg, label, level, cycles, raw.Release[label]), gate.Correctness(label, stage, raw.Replays[label])...)...)
}

// SwitchChecks: every handoff succeeded; switch → first token per
// direction; every model's level-1 release again, with its switch sleeps'.
func (p *Protocol) SwitchChecks(handoffs []record.Handoff) []record.Check {
	cs := append(gate.Switch(p.cfg, handoffs), p.correctnessChecks(record.ReplaySwitch)...)
	return p.Record(append(cs, releaseChecks(p.cfg, p.rec.Raw(), p.Labels()...)...)...)
}

// correctnessChecks: every model's replays of stage (after the handoffs
// or soak cycles that woke it) matched its reference.
func (p *Protocol) correctnessChecks(stage string) []record.Check {
	raw := p.rec.Raw()
	var out []record.Check
	for _, l := range p.Labels() {
		out = append(out, gate.Correctness(l, stage, raw.Replays[l])...)
	}
	return out
}
