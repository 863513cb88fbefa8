package protocol

import (
	"context"
	"fmt"

	"github.com/wakebench/wakebench/internal/energy"
	"github.com/wakebench/wakebench/internal/record"
)

// Steps are the one-step measurements of go test -bench (a warm start, a
// serving round, a sleep/wake cycle, a handoff): not phases, they record
// nothing in the run's report (each step writes into a scratch record).
type Steps struct {
	env     *Env
	scratch func() Recording
}

// NewSteps are the benchmark steps on env's servers, each step recording
// into a record scratch makes (the runner's: an empty record of the run's
// models).
func NewSteps(env *Env, scratch func() Recording) Steps { return Steps{env: env, scratch: scratch} }

// bench is p's environment for a benchmark step: the same servers, but
// the measurements the step makes (requests, releases, events) go to a
// record of its own, never into the run's report.
func (p Steps) bench() *Env {
	scratch := p.scratch() // not a copy of the whole record per step
	return NewEnv(p.env.cfg, Observed(p.env.pool, scratch), scratch, nil)
}

// WarmStart measures one restart of label (after its first start, so warm),
// for benchmarks; it is not added to the report's restarts.
func (p Steps) WarmStart(ctx context.Context, label string) (record.Restart, error) {
	b := p.bench()
	if !b.pool.Running(label) {
		if err := b.pool.Activate(ctx, label); err != nil {
			return record.Restart{}, err
		}
	}
	rs, step, err := b.startOnce(ctx, label, true)
	if err != nil {
		return rs, fmt.Errorf("restart %s: %s: %w", label, step, err)
	}
	return rs, nil
}

// ServeRound activates label and runs one serving round at concurrency c
// (protocol.requests_per_round requests), for benchmarks: what it measured
// as a phase's serving keeps it (stage baseline's record.PerfRun, the
// figures the report and bench.txt give), not added to the report.
func (p Steps) ServeRound(ctx context.Context, label string, c int) (record.PerfRun, error) {
	b := p.bench()
	if err := b.pool.Activate(ctx, label); err != nil {
		return record.PerfRun{}, err
	}
	run, firstErr, err := b.ServeRun(ctx, label, record.PhaseBaseline, c, 1, b.cfg.Protocol.RequestsPerRound)
	if err != nil {
		return run, fmt.Errorf("serve %s at concurrency %d: %w", label, c, err)
	}
	if firstErr != nil {
		return run, b.pool.Procs().Explain(label, fmt.Errorf("serve %s at concurrency %d: %w", label, c, firstErr))
	}
	return run, nil
}

// Cycle activates label and measures one sleep/wake cycle at level, for
// benchmarks; it is not added to the report's cycles.
func (p Steps) Cycle(ctx context.Context, label string, level int) (record.Cycle, error) {
	b := p.bench()
	if err := b.pool.Activate(ctx, label); err != nil {
		return record.Cycle{}, err
	}
	c, step, err := b.cycle(ctx, label, level)
	if err != nil {
		return c, fmt.Errorf("%s level %d: %s: %w", label, level, step, err)
	}
	return c, nil
}

// Handoff measures one handoff from → to (from awake, to running), for
// benchmarks; it is not added to the report's handoffs.
func (p Steps) Handoff(ctx context.Context, from, to string) (record.Handoff, error) {
	b := p.bench()
	for _, l := range []string{to, from} {
		if !b.pool.Running(l) {
			if err := b.pool.Activate(ctx, l); err != nil {
				return record.Handoff{}, err
			}
		}
	}
	if err := b.pool.Activate(ctx, from); err != nil {
		return record.Handoff{}, err
	}
	ho, who, step, err := b.handoff(ctx, energy.NewMeter(b.pool.Memory().Energy), from, to)
	if err != nil {
		return ho, fmt.Errorf("%s: %s: %w", who, step, err)
	}
	return ho, nil
}
