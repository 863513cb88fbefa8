package protocol

import (
	"context"
	"errors"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

// AfterWake is an after-wake phase: record.PhaseAfterWake (Level 1) or
// record.PhaseAfterWakeL2 (Level 2). One sleep at the level and its wake, with
// the lost-prefix probe around them; then serving again, the engine's
// health and the correctness replay.
type AfterWake struct {
	*Env
	Level int // 1 or 2
}

// phase is the level's phase, which is its serving, engine-health and
// replay stage too.
func (p AfterWake) phase() string {
	if p.Level == 2 {
		return record.PhaseAfterWakeL2
	}
	return record.PhaseAfterWake
}

// Run measures label's serving after a wake and judges it against the
// baseline's tok/s, with the lost prefix's price, the engine's health
// against before the first sleep, the replay and the level-1 release.
func (p AfterWake) Run(ctx context.Context, label string, logf Logf) (Outcome[[]record.PerfRun], error) {
	runs, err := p.run(ctx, label, logf)
	return Judged(runs, err, func() []record.Check { return p.checks(label, runs) })
}

// checks: the baseline's serving checks and after-wake tok/s against the
// baseline's; the lost prefix's price at the level; the engine's health
// against before the first sleep; the replay; at level 1 the model's
// level-1 release again, with the after-wake sleep's.
func (p AfterWake) checks(label string, runs []record.PerfRun) []record.Check {
	phase := p.phase()
	var cs []record.Check
	p.rec.Read(func(raw *record.Raw) {
		cs = gate.NoteCrowded(gate.AfterWake(p.cfg, label, phase, runs, raw.Perf[label]), ".tps_ratio", raw.Windows, record.WindowName(phase, label), record.WindowName(record.PhaseBaseline, label))
		cs = append(cs, gate.Correctness(label, phase, raw.Replays[label])...)
		cs = append(cs, gate.LostPrefix(p.cfg, label, p.Level, raw.LostPrefix[label])...)
		cs = append(cs, healthChecks(p.cfg, raw, label, phase, label)...)
		if p.Level == 1 {
			cs = append(cs, releaseChecks(p.cfg, raw, label)...)
		}
	})
	return p.Record(phase, cs...)
}

// run sends the lost-prefix probe twice (warm), puts label through one
// sleep at the level and its wake, sends the probe again as the first
// request, then measures serving, then the engine's health, then replays
// the correctness probes: serving comes straight after the wake and the
// probe (a replay would warm the engine).
func (p AfterWake) run(ctx context.Context, label string, logf Logf) ([]record.PerfRun, error) {
	phase := p.phase()
	defer p.Begin(ctx, phase, label)()
	if err := p.pool.Activate(ctx, label); err != nil {
		return nil, p.Fail(phase, label, "activate", err)
	}
	warm, err := p.warmPrefix(ctx, label, p.Level)
	if err != nil {
		return nil, p.Fail(phase, label, "lost-prefix probe", err)
	}
	if _, _, err := p.measureSleep(ctx, label, p.Level); err != nil {
		return nil, p.Fail(phase, label, "sleep", err)
	}
	if _, err := p.pool.Run(ctx, label, pool.Wake()); err != nil {
		return nil, p.Fail(phase, label, "wake", err)
	}
	if err := p.wokenPrefix(ctx, label, p.Level, warm, logf); err != nil {
		return nil, p.Fail(phase, label, "lost-prefix probe", err)
	}
	runs, err := p.Serve(ctx, label, phase, logf)
	if !p.pool.Running(label) || ctx.Err() != nil {
		return runs, err // nothing to probe or replay on
	}
	if herr := p.health(ctx, label, phase, logf); herr != nil {
		err = errors.Join(err, p.Fail(phase, label, "engine health", herr))
	}
	if verr := p.verify(ctx, phase, label); verr != nil {
		err = errors.Join(err, p.Fail(phase, label, "correctness replay", verr))
	}
	return runs, err
}
