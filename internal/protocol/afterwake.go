package protocol

import (
	"context"
	"errors"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
)

// AfterWake is the after-wake phase (PhaseAfterWake): serving again
// straight after a level-1 sleep and wake, then the correctness replay.
type AfterWake struct{ *Env }

// Run measures label's serving after a wake and judges it against the
// baseline's tok/s, with the replay and the level-1 release.
func (p AfterWake) Run(ctx context.Context, label string, logf Logf) (Outcome[[]record.PerfRun], error) {
	runs, err := p.run(ctx, label, logf)
	return Judged(runs, err, func() []record.Check { return p.checks(label, runs) })
}

// checks: the baseline's serving checks and after-wake tok/s against the baseline's;
// the model's level-1 release again, with the after-wake sleep's.
func (p AfterWake) checks(label string, runs []record.PerfRun) []record.Check {
	raw := p.rec.Raw()
	cs := append(gate.AfterWake(p.cfg, label, runs, raw.Perf[label]), gate.Correctness(label, record.ReplayAfterWake, raw.Replays[label])...)
	return p.Record(append(cs, releaseChecks(p.cfg, raw, label)...)...)
}

// run puts label through one level-1 sleep and wake, then measures
// serving again, then replays the correctness probes: the serving comes
// first, straight after the wake (a replay would warm the engine).
func (p AfterWake) run(ctx context.Context, label string, logf Logf) ([]record.PerfRun, error) {
	defer p.Begin(ctx, PhaseAfterWake, label)()
	if err := p.pool.Activate(ctx, label); err != nil {
		return nil, p.Fail(PhaseAfterWake, label, "activate", err)
	}
	if _, _, err := p.measureSleep(ctx, label, 1); err != nil {
		return nil, p.Fail(PhaseAfterWake, label, "sleep", err)
	}
	if _, err := p.pool.Wake(ctx, label); err != nil {
		return nil, p.Fail(PhaseAfterWake, label, "wake", err)
	}
	runs, err := p.Serve(ctx, label, gate.StageAfterWake, logf)
	if !p.pool.Running(label) || ctx.Err() != nil {
		return runs, err // nothing to replay on
	}
	if verr := p.verify(ctx, PhaseAfterWake, label, record.ReplayAfterWake); verr != nil {
		err = errors.Join(err, p.Fail(PhaseAfterWake, label, "correctness replay", verr))
	}
	return runs, err
}
