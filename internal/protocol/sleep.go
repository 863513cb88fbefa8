package protocol

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

// Sleep is a sleep phase: record.PhaseSleepL1 (Level 1) or record.PhaseSleepL2 (Level 2).
type Sleep struct {
	*Env
	Level int // 1 or 2
}

// Run measures label's sleep/wake cycles at the phase's level and judges
// them: every cycle succeeded; wake → first token, residual and (level 1)
// release within their limits; the correctness replays.
func (p Sleep) Run(ctx context.Context, label string, logf Logf) (Outcome[[]record.Cycle], error) {
	cycles, err := p.run(ctx, label, p.Level, logf)
	return Judged(cycles, err, func() []record.Check { return p.checks(label, p.Level, cycles) })
}

// sleepPhase is level's sleep phase, also the stage of its replays.
func sleepPhase(level int) string {
	if level == 2 {
		return record.PhaseSleepL2
	}
	return record.PhaseSleepL1
}

// checks: every cycle succeeded; wake → first token, residual and
// (level 1) release within their limits.
func (p Sleep) checks(label string, level int, cycles []record.Cycle) []record.Check {
	phase := sleepPhase(level)
	var cs []record.Check
	p.rec.Read(func(raw *record.Raw) {
		cs = append(gate.Sleep(p.cfg, label, level, cycles, raw.Release[label]), gate.Correctness(label, phase, raw.Replays[label])...)
	})
	return p.Record(phase, cs...)
}

// measureSleep sleeps label at level with its memory read before and,
// protocol.settle_s after the sleep's answer, asleep (pool.MeasuredSleep): it returns the
// sleep (its duration, what it released and, on a run of several GPUs,
// the memory left on each; nil when /sleep was never sent) and the memory
// left asleep in GiB.
func (p *Env) measureSleep(ctx context.Context, label string, level int) (*pool.MeasuredSleep, float64, error) {
	ms, err := p.pool.Memory().Sleep(ctx, label, pool.Sleep(level))
	if err != nil {
		return ms, math.NaN(), err
	}
	resid, err := p.finishSleep(ctx, ms) // settle_s after the sleep's answer (pool.MeasuredSleep.Finish)
	return ms, resid, err
}

// finishSleep completes a measured sleep (pool.MeasuredSleep.Finish) and
// records what it measured: the level-1 release, in all and per GPU, or
// the memory note saying why the figures are absent. It returns the memory
// left asleep in GiB.
func (p *Env) finishSleep(ctx context.Context, ms *pool.MeasuredSleep) (float64, error) {
	resid, err := ms.Finish(ctx)
	if err != nil {
		return resid, err
	}
	if ms.Note != "" {
		p.rec.NoteMemory(ms.Note)
	}
	if !math.IsNaN(ms.ReleasePercent) {
		p.w.Release.Add(ms.Label, ms.ReleasePercent)
	}
	if ms.ReleasePercentPerGPU != nil {
		p.w.ReleasePerGPU.Add(ms.Label, ms.ReleasePercentPerGPU)
	}
	return resid, nil
}

// run runs protocol.sleep_l{1,2}_cycles sleep/wake cycles on label:
// sleep time, wake API time, wake → first token, residual GiB. A failed
// step ends the cycles (the server's state is then unknown).
func (p Sleep) run(ctx context.Context, label string, level int, logf Logf) ([]record.Cycle, error) {
	phase, n := sleepPhase(level), p.cfg.Protocol.SleepL1Cycles
	if level == 2 {
		n = p.cfg.Protocol.SleepL2Cycles
	}
	defer p.Begin(ctx, phase, label)()
	p.rec.PlanCycles(label, level, n)
	if err := p.pool.Activate(ctx, label); err != nil {
		return nil, p.Fail(phase, label, "activate", err)
	}
	var out []record.Cycle
	for i := range n {
		c, step, err := p.cycle(ctx, label, level)
		out = append(out, c)
		p.w.Cycles.Add(label, c)
		if err != nil {
			return out, p.Fail(phase, label, fmt.Sprintf("cycle %d %s", i+1, step), err)
		}
		logf("%s level %d cycle %d/%d: sleep %.3fs, wake %.3fs, first token %.3fs, residual %.3f GiB",
			label, level, i+1, n, c.SleepS, c.WakeAPIS, c.ToFirstTokenS, c.ResidualGiB)
		p.Settle(ctx)
	}
	return out, nil
}

// cycle is one sleep/wake cycle of an awake model: sleep, hold settle_s
// and read the residual, wake, probe the first token. On error it names the
// step that failed.
func (p *Env) cycle(ctx context.Context, label string, level int) (record.Cycle, string, error) {
	c := record.Cycle{Level: level, ResidualGiB: math.NaN()}
	phase := sleepPhase(level)
	mark := p.pool.Engine().Mark(ctx, label)
	ms, resid, err := p.measureSleep(ctx, label, level)
	if ms != nil {
		c.SleepS, c.ResidualPerGPU = ms.Took.Seconds(), ms.ResidualPerGPU
	}
	c.ResidualGiB = resid
	if err != nil {
		return c, "sleep", err
	}
	_, wd, step, err := p.wakeToFirstToken(ctx, &c, label, pool.Wake())
	c.WakeAPIS = wd.Seconds()
	if err != nil {
		return c, step, err
	}
	c.Engine = p.engine(ctx, mark, mark, true, c.SleepS, c.WakeAPIS, ms.ReleasedGiB)
	if err := p.verify(ctx, phase, label); err != nil {
		return c, "correctness replay", err
	}
	c.OK = true
	return c, "", nil
}

// wakeToFirstToken wakes label with op (pool.Wake or pool.WakeKV),
// sending the probe at the wake's answer, before the harness's
// verification reads (pool.Transition.Verify), and sets the cycle's wake →
// first token. It returns when the wake was sent, its answer's time and,
// on error, the step that failed: a verification that fails is the wake's
// error, whatever the probe met.
func (p *Env) wakeToFirstToken(ctx context.Context, c *record.Cycle, label string, op pool.Op) (tw time.Time, wd time.Duration, step string, err error) {
	t, err := p.pool.Do(ctx, label, op)
	tw, wd = t.Sent, t.Took
	if err != nil {
		return tw, wd, "wake", err
	}
	s, perr := p.pool.Requests().Probe(ctx, label)
	if err := t.Verify(ctx); err != nil {
		return tw, wd, "wake", err
	}
	if perr != nil {
		return tw, wd, "first token after wake", perr
	}
	c.ToFirstTokenS = s.Tokens[0].Sub(tw).Seconds()
	return tw, wd, "", nil
}
