package protocol

import (
	"context"
	"fmt"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// Baseline is the baseline phase (record.PhaseBaseline): serving before any
// sleep, in a server process that has never slept.
type Baseline struct{ *Env }

// Run measures label's serving at every concurrency and judges it: failed
// requests within the limit, every round passed.
func (p Baseline) Run(ctx context.Context, label string, logf Logf) (Outcome[[]record.PerfRun], error) {
	runs, err := p.run(ctx, label, logf)
	return Judged(runs, err, func() []record.Check { return p.checks(label, runs) })
}

// checks: failed requests within the limit and every round passed, per concurrency.
func (p Baseline) checks(label string, runs []record.PerfRun) []record.Check {
	return p.Record(record.PhaseBaseline, serveChecks(p.cfg, label, runs)...)
}

// run measures label's serving before any sleep: in a server process
// that has never slept. The restart phase puts each model to sleep to start
// the next, so a server that has slept is stopped and started afresh (the
// other models asleep), before the phase's window opens: that start is
// neither serving nor one of the restart phase's starts.
func (p Baseline) run(ctx context.Context, label string, logf Logf) ([]record.PerfRun, error) {
	step, err := p.freshProcess(ctx, label, logf)
	defer p.Begin(ctx, record.PhaseBaseline, label)()
	if err != nil {
		return nil, p.Fail(record.PhaseBaseline, label, step, err)
	}
	runs, err := p.Serve(ctx, label, record.PhaseBaseline, logf)
	if err != nil || ctx.Err() != nil {
		return runs, err
	}
	// The engine's health before the first sleep: what each wake's is compared with.
	if herr := p.health(ctx, label, record.PhaseBaseline, logf); herr != nil {
		return runs, p.Fail(record.PhaseBaseline, label, "engine health", herr)
	}
	return runs, nil
}

// freshProcess makes label awake in a server process that has never slept
// (started afresh if its server has slept); on error it names the step.
func (p Baseline) freshProcess(ctx context.Context, label string, logf Logf) (string, error) {
	if p.pool.Slept(label) {
		logf("%s has slept since it started: a fresh server for a baseline before any sleep", label)
		if err := p.pool.Stop(label); err != nil {
			return "stop a server that has slept", err
		}
	}
	if err := p.pool.Activate(ctx, label); err != nil {
		return "activate", err
	}
	return "", nil
}

// serveChecks: failed requests within max_failed_requests, and rounds with a
// failed request no more than the failures allowed (each can spoil one
// round: with the default 0, every round must pass), per concurrency.
func serveChecks(cfg config.Config, label string, runs []record.PerfRun) []record.Check {
	limit := cfg.ThresholdsFor(label).MaxFailedRequests
	var out []record.Check
	for _, r := range runs {
		out = append(out,
			record.Evaluate(fmt.Sprintf("%s.conc%d.failed_requests", r.Stage, r.Concurrency), label,
				float64(r.Planned-r.Success), "<=", float64(limit)),
			record.Evaluate(fmt.Sprintf("%s.conc%d.rounds_passed", r.Stage, r.Concurrency), label, float64(r.RoundsPassed), ">=", float64(max(0, r.Rounds-limit))))
	}
	return out
}
