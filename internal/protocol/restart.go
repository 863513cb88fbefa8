package protocol

import (
	"context"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// Restart is the restart phase (record.PhaseRestart): 1 initial and
// protocol.restart_warm warm starts of each model.
type Restart struct{ *Env }

// Run measures label's starts (spawn → /health 200 → first token of a
// probe; the other models asleep, the last start left awake) and judges
// them: every planned start happened.
func (p Restart) Run(ctx context.Context, label string, logf Logf) (Outcome[[]record.Restart], error) {
	rs, err := p.run(ctx, label, logf)
	return Judged(rs, err, func() []record.Check { return p.checks(label, rs) })
}

// checks: every planned start happened.
func (p Restart) checks(label string, rs []record.Restart) []record.Check {
	return p.Record(record.PhaseRestart, restartChecks(p.cfg, label, rs)...)
}

// run measures 1 initial and protocol.restart_warm warm starts of label:
// spawn → /health 200 → first token of a probe. Other models are put to
// sleep first; the last start is left running and awake.
func (p Restart) run(ctx context.Context, label string, logf Logf) ([]record.Restart, error) {
	defer p.Begin(ctx, record.PhaseRestart, label)()
	var out []record.Restart
	for i := range 1 + p.cfg.Protocol.RestartWarm {
		rs, step, err := p.startOnce(ctx, label, i > 0)
		if err != nil {
			return out, p.Fail(record.PhaseRestart, label, step, err)
		}
		out = append(out, rs)
		p.w.Restarts.Add(label, rs)
		kind := "initial"
		if rs.Warm {
			kind = "warm"
		}
		logf("%s restart %s: ready %.3fs, first token %.3fs", label, kind, rs.ReadyS, rs.FirstTokenS)
	}
	return out, nil
}

// startOnce stops label's server if it runs, puts the other models to
// sleep, starts it and probes its first token.
func (p *Env) startOnce(ctx context.Context, label string, warm bool) (record.Restart, string, error) {
	if err := p.pool.Stop(label); err != nil {
		return record.Restart{}, "stop before restart", err
	}
	if err := p.pool.MakeRoom(ctx, label); err != nil {
		return record.Restart{}, "make room", err
	}
	ready, err := p.pool.Start(ctx, label)
	if err != nil {
		return record.Restart{}, "start", err
	}
	spawned := p.pool.Procs().Spawned(label)
	s, err := p.pool.Requests().Probe(ctx, label)
	if err != nil {
		return record.Restart{}, restartFirstTok, err
	}
	// After the first token, outside both intervals: the /proc scan, the
	// start log, GET /version and the memory read.
	if err := p.pool.Started(ctx, label); err != nil {
		return record.Restart{}, "after the start", err
	}
	return record.Restart{Warm: warm, ReadyS: ready.Seconds(), FirstTokenS: s.Tokens[0].Sub(spawned).Seconds(),
		Compile: p.pool.Procs().StartCompile(label)}, "", nil
}

// restartChecks: every planned start happened.
func restartChecks(cfg config.Config, label string, rs []record.Restart) []record.Check {
	return []record.Check{record.Evaluate("restart.starts", label, float64(len(rs)), "==", float64(1+cfg.Protocol.RestartWarm))}
}
