package protocol

import (
	"context"
	"fmt"
	"math"

	"github.com/wakebench/wakebench/internal/config"
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
		cs = append(sleepChecks(p.cfg, label, level, cycles, raw.Release[label]), replayChecks(label, phase, raw.Replays[label])...)
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
	wake, step, err := p.wakeToFirstToken(ctx, &c, label, pool.Wake())
	c.WakeAPIS = wake.Took.Seconds()
	if err != nil {
		return c, step, err
	}
	c.Engine = p.engine(ctx, []*pool.Transition{ms.T}, wake, mark, mark, c.SleepS, c.WakeAPIS, ms.ReleasedGiB)
	if err := p.verify(ctx, phase, label); err != nil {
		return c, "correctness replay", err
	}
	c.OK = true
	return c, "", nil
}

// wakeToFirstToken wakes label with op (pool.Wake or pool.WakeKV),
// sending the probe at the wake's answer, before the harness's
// verification reads (pool.Transition.Verify), and sets the cycle's wake →
// first token. It returns the wake (never nil: its Sent and Took, its
// engine's account) and, on error, the step that failed: a verification that fails is the wake's
// error, whatever the probe met.
func (p *Env) wakeToFirstToken(ctx context.Context, c *record.Cycle, label string, op pool.Op) (t *pool.Transition, step string, err error) {
	t, err = p.pool.Do(ctx, label, op)
	if err != nil {
		return t, "wake", err
	}
	s, perr := p.pool.Requests().Probe(ctx, label)
	if err := t.Verify(ctx); err != nil {
		return t, "wake", err
	}
	if perr != nil {
		return t, "first token after wake", perr
	}
	c.ToFirstTokenS = s.Tokens[0].Sub(t.Sent).Seconds()
	return t, "", nil
}

// sleepChecks: every cycle succeeded; wake → first token p95, residual median
// and (level 1) the median share released (release: every level-1 release
// of the model so far, as l1ReleaseChecks judges it) within their limits when set.
func sleepChecks(cfg config.Config, label string, level int, cycles []record.Cycle, release []float64) []record.Check {
	t := cfg.ThresholdsFor(label)
	planned, maxFTT := cfg.Protocol.SleepL1Cycles, t.MaxL1WakeToFirstTokenS
	if level == 2 {
		planned, maxFTT = cfg.Protocol.SleepL2Cycles, t.MaxL2WakeToFirstTokenS
	}
	prefix := fmt.Sprintf("sleep.level%d", level)
	fig := record.LevelOf(cycles, level) // report.json's sleep.<level> reads the same
	ftt := fig.FirstToken
	out := []record.Check{record.Evaluate(prefix+".successful_cycles", label, float64(len(ftt)), "==", float64(planned))}
	if s := record.Summary(ftt); s.N > 0 && maxFTT > 0 {
		out = append(out, record.Evaluate(prefix+".to_first_token_s.p95", label, s.P95, "<=", maxFTT))
	}
	// A memory median against its limit (key), when set; not evaluated when
	// cycles succeeded but left no figure.
	median := func(name string, xs []float64, op string, limit float64, key string) {
		if limit <= 0 {
			return
		}
		if s := record.Summary(xs); s.N > 0 {
			out = append(out, record.Evaluate(name, label, s.Median, op, limit))
		} else if len(ftt) > 0 {
			out = append(out, notEvaluated(cfg, name, label, op, limit, key))
		}
	}
	// A model across n GPUs (--tensor-parallel-size n) keeps a CUDA
	// context (and NCCL's buffers) on each: max_residual_gib is per GPU it
	// spans (a healthy TP 4 run of vLLM 0.13 kept 1.14 GB on each,
	// vllm#32714). Not per GPU of the run: a model on one of two GPUs is
	// held to the limit as it is.
	gpus := 1
	if m, ok := cfg.Model(label); ok {
		if tp, ok := config.TensorParallel(m.ExtraArgs); ok && tp > 1 {
			gpus = tp
		}
	}
	median(prefix+".residual_gib.median", fig.Residual, "<=", t.MaxResidualGiB*float64(gpus), "max_residual_gib")
	if len(fig.WorstGPUResidual) > 0 { // a model across GPUs (one GPU has no per-GPU figure)
		median(prefix+".residual_gib_per_gpu.max.median", fig.WorstGPUResidual, "<=", t.MaxResidualGiBPerGPU, "max_residual_gib_per_gpu")
	}
	if level == 1 {
		out = append(out, l1ReleaseChecks(cfg, label, release, len(ftt) > 0)...)
	}
	return append(out, engineAgreement(prefix, label, fig.Engines)...)
}
