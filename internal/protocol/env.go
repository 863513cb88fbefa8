// Package protocol is the protocol's phases and what they run on: Env (the
// run's config, its servers, and its record as a Recording, which the
// runner holds: what every phase records through), a type per phase (Restart, Baseline, Sleep, AfterWake, Level0,
// KVRelease, Switch; Soak, opt-in) whose Run returns what it measured and
// its threshold checks together (each phase's beside it: sleepChecks in
// sleep.go; those they share in checks.go), and Steps, the one-step
// measurements of go test -bench. Package phases lists the phases in run
// order; packages statecost and traffic are phases of their own, run on
// the same Env.
package protocol

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

// Recording is what the phases may do with the run's record: write
// what they measure through its typed series (Writers), mark its frame
// (a phase ran, its window, its plans, failures, checks, the memory's
// notes), register a pool view whose facts it gathers (Observed) and read
// the few series a check judges in place (Read: under the record's lock,
// by contract copying nothing). The runner (package harness) holds the record
// (*record.Recorder) and hands it to the phases as this: it has no way
// to set the run up, take the run's copy (Raw) or finish it.
type Recording interface {
	Writers() record.Writers
	PhaseRan(phase string)
	Window(name string, start, end time.Time, pad time.Duration, host *record.HostLoad)
	PlanCycles(label string, level, n int)
	CyclesOff(label string, level int, why string)
	PlanSoak(cycles, level int)
	AddChecks(cs ...record.Check)
	Fail(f record.Failure)
	Failed(phase string) bool
	FailedFor(phase, model string) bool
	NoteMemory(note string)
	Register(c record.Collector)
	Read(f func(raw *record.Raw))
}

// Observed is a view of f's servers whose requests rec counts and whose
// facts (events, first sleeps, weights, the version, references) rec
// gathers at each of its calls: the run's record, or a benchmark's
// scratch record.
func Observed(f *pool.Pool, rec Recording) *pool.Pool {
	w := rec.Writers()
	v := f.Observed(pool.Observer{Request: w.Requests.Done, AbortedByDesign: w.Requests.Aborted})
	rec.Register(v)
	return v
}

// Outcome is what one run of a phase returns: what it measured (Value)
// and its threshold checks on it (Checks), recorded in the run's record
// already, so a phase run through any entry leaves its verdicts in
// report.json.
type Outcome[T any] struct {
	Value  T
	Checks []record.Check
}

// Judged is the outcome of a phase's step that measured v and returned
// err: v with checks(), its verdicts, unless err says the run's stop (a
// signal, the -timeout guard) cut the step short: its partial figures are
// no model's verdict, as Fail files the stop under no model. A step that
// failed otherwise is judged on what it measured, and its checks say
// where it falls short.
func Judged[T any](v T, err error, checks func() []record.Check) (Outcome[T], error) {
	if errors.As(err, new(record.Stopped)) {
		return Outcome[T]{Value: v}, err
	}
	return Outcome[T]{Value: v, Checks: checks()}, err
}

// Logf prints a progress line.
type Logf func(format string, args ...any)

// Observer is told when a phase starts and ends (when is "before" or
// "after"), with the models it covers: the harness scrapes /metrics then;
// and of each soak cycle once it is recorded: the harness streams soak.csv
// (outside the record's lock, in the cycles' order). HostLoad starts a
// reading of the machine's load at a phase's start, whose end gives the
// load over the phase (nil: none), recorded with the phase's window for
// the regression gate: the harness reads this process's tree
// (hostload.Window).
type Observer interface {
	ObservePhase(ctx context.Context, phase, when string, labels []string)
	ObserveSoakCycle(c record.SoakCycle)
	HostLoad() (end func() *record.HostLoad)
}

// Env is what every phase runs on: the run's config, its servers (a
// pool), its record and the observer told of each phase's start and end;
// its methods are the steps the phases share (a phase's window and
// failures, a measured sleep, a correctness replay, a handoff). A phase is
// a type of its own that embeds it (Restart, Sleep, Switch, …): adding one
// adds nothing here.
type Env struct {
	cfg  config.Config
	pool *pool.Pool
	rec  Recording
	// w is rec's typed series: what the phases measure is written
	// through them; rec keeps the run's frame (windows, failures, checks).
	w   record.Writers
	obs Observer
	// mismatched: a correctness mismatch of this model/stage was
	// recorded as a failure (the check counts the rest).
	mismatched map[string]bool
}

// NewEnv is the phases' environment of cfg on f, recording into rec; obs may be nil.
func NewEnv(cfg config.Config, f *pool.Pool, rec Recording, obs Observer) *Env {
	return &Env{cfg: cfg, pool: f, rec: rec, w: rec.Writers(), obs: obs}
}

// Config is the run's configuration.
func (p *Env) Config() config.Config { return p.cfg }

// Pool is the run's servers, for a phase in a package of its own (traffic).
func (p *Env) Pool() *pool.Pool { return p.pool }

// Labels are the model labels in config order.
func (p *Env) Labels() []string { return p.pool.Labels() }

// Costs are the state costs recorded so far, by label (a copy of the
// map, as record.Raw.Clone makes it: a Cost's slices never change once
// recorded), for the fit table: not a copy of the whole record.
func (p *Env) Costs() map[string]record.Cost {
	var out map[string]record.Cost
	p.rec.Read(func(raw *record.Raw) { out = maps.Clone(raw.Cost) })
	return out
}

// Fail records a failure and returns it as an error naming phase, model
// and step. A step the run's stop interrupted (record.Stopped) says so
// first: it is no failure of the model.
func (p *Env) Fail(phase, label, step string, err error) error {
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
func (p *Env) Failed(phase string) bool { return p.rec.Failed(phase) }

// Begin starts a phase for labels: it is listed in the report, the
// observer is told, and the returned end records the phase window (named
// <label>-<phase>, or the labels joined for several), records every
// server that exited meanwhile as a failure of the phase (unless one of
// its steps named that model's failure), tells the observer again and
// returns the machine's load over the phase (nil: none read), for a
// phase that judges a speed ratio on its own window (NoteCrowded).
func (p *Env) Begin(ctx context.Context, phase string, labels ...string) (end func() *record.HostLoad) {
	p.rec.PhaseRan(phase)
	if p.obs != nil {
		p.obs.ObservePhase(ctx, phase, "before", labels)
	}
	start, exits := time.Now(), p.pool.Procs().ExitMark()
	host := func() *record.HostLoad { return nil } // no observer: no load read
	if p.obs != nil {
		host = p.obs.HostLoad() // the machine's load over the phase, for the regression gate
	}
	return func() *record.HostLoad {
		load := host()
		p.rec.Window(record.WindowName(phase, labels...), start, time.Now(), seconds(p.cfg.Protocol.WindowPadS), load)
		// A server that exited during the phase is a failure of it, also
		// where no step met it (a request's error, a restart since).
		// How each model's memory is attributed (its latest start's
		// footprint, pool.Memory), for the report.
		for _, l := range p.pool.Labels() {
			if how := p.pool.Memory().Attribution(l); how != "" {
				p.w.Attribution.Add(l, how)
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
		return load
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Record records threshold verdicts as phase's (a check evaluated again
// replaces the earlier one, and is the later phase's) and returns them.
func (p *Env) Record(phase string, cs ...record.Check) []record.Check {
	out := make([]record.Check, len(cs))
	for i, c := range cs {
		c.Phase = phase
		out[i] = c
	}
	p.rec.AddChecks(out...)
	return out
}

// releaseChecks re-evaluates min_l1_release_percent on every level-1
// release of labels measured so far: each phase whose level-1 sleeps add
// releases (sleep-level1, after-wake, switch, soak) records it again, so
// the check (recorded once, the latest replacing the earlier) judges the
// samples report.json's memory.l1_release_fraction summarises.
func releaseChecks(cfg config.Config, raw *record.Raw, labels ...string) []record.Check {
	var out []record.Check
	for _, l := range labels {
		out = append(out, l1ReleaseChecks(cfg, l, raw.Release[l], false)...)
	}
	return out
}

// healthChecks: label's engine health after phase's wakes against before
// its first sleep (engineHealthChecks); a decode-rate ratio missed while other
// processes crowded the machine in phase's window (over ran, the labels
// the phase ran over) or label's baseline window says so.
func healthChecks(cfg config.Config, raw *record.Raw, label, phase string, ran ...string) []record.Check {
	return NoteCrowded(engineHealthChecks(cfg, label, phase, raw.Health[label]), ".decode_rate_ratio", raw.Windows,
		record.WindowName(phase, ran...), record.WindowName(record.PhaseBaseline, label))
}

// correctnessChecks: every model's replays of stage (after the handoffs
// or soak cycles that woke it) matched its reference.
func (p *Env) correctnessChecks(stage string) []record.Check {
	var out []record.Check
	labels := p.Labels()
	p.rec.Read(func(raw *record.Raw) {
		for _, l := range labels {
			out = append(out, replayChecks(l, stage, raw.Replays[l])...)
		}
	})
	return out
}

const restartFirstTok = "probe first token"

// Settle waits protocol.settle_s (or until ctx ends).
func (p *Env) Settle(ctx context.Context) { p.settleFrom(ctx, time.Now()) }

// verify replays label's correctness probes after a wake of phase (the
// replay's stage), records the replay, and records the first mismatch of
// each model and phase as a failure of phase naming the probe and token;
// every mismatch counts in the check. The error is a replay that could not
// be made.
func (p *Env) verify(ctx context.Context, phase, label string) error {
	got, err := p.pool.Oracle().Replay(ctx, label, phase)
	if got == nil {
		return err
	}
	rp := p.w.Replays.Add(label, *got) // numbered among the model's replays of phase
	if err != nil {
		return err
	}
	for _, r := range rp.Results {
		key := label + "/" + phase
		if r.Match || p.mismatched[key] {
			continue
		}
		if p.mismatched == nil {
			p.mismatched = map[string]bool{}
		}
		p.mismatched[key] = true
		p.rec.Fail(record.Failure{Phase: phase, Model: label, Step: fmt.Sprintf("correctness after %s wake %d", phase, rp.Cycle),
			Error: fmt.Sprintf("probe %q diverged from its answer before the first sleep at token %d (%s): %s", r.Probe, r.Position, r.Kind, r.Detail)})
	}
	return nil
}

// engine is the servers' own account of a sleep (asleep: the transitions
// that put the model to sleep, a KV-only release cycle's pause and
// release; from marks its server's metric before them) and the wake that
// followed (to marks its server's; the same mark in a cycle), as
// pool.Engine.Account reads it, judged against the harness's HTTP times of
// the call that put it asleep (httpAsleep: /sleep, or
// /release_kv_cache_memory) and the wake, and the GiB released; nil when
// the servers reported nothing.
func (p *Env) engine(ctx context.Context, asleep []*pool.Transition, wake *pool.Transition, from, to pool.EngineMark, httpAsleep, httpWake, released float64) *record.Engine {
	e := p.pool.Engine().Account(ctx, asleep, wake, from, to)
	if e != nil {
		e.Disagreements = disagreements(e, httpAsleep, httpWake, released, p.cfg.Protocol.EngineTolerancePercent)
	}
	return e
}

func round2(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Round(x*100) / 100
	}
	return out
}
