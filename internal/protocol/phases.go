package protocol

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

const restartFirstTok = "probe first token"

// Settle waits protocol.settle_s (or until ctx ends).
func (p *Protocol) Settle(ctx context.Context) { p.settleFrom(ctx, time.Now()) }

// measureSleep sleeps label at level with its memory read before and,
// after protocol.settle_s, asleep (pool.MeasuredSleep): it returns the
// sleep (its duration, what it released and, on a run of several GPUs,
// the memory left on each; nil when /sleep was never sent) and the memory
// left asleep in GiB.
func (p *Protocol) measureSleep(ctx context.Context, label string, level int) (*pool.MeasuredSleep, float64, error) {
	ms, err := p.pool.Memory().StartSleep(ctx, label, level)
	if err != nil {
		return ms, math.NaN(), err
	}
	p.Settle(ctx)
	resid, err := p.finishSleep(ctx, ms)
	return ms, resid, err
}

// finishSleep completes a measured sleep (pool.MeasuredSleep.Finish) and
// records what it measured: the level-1 release, in all and per GPU, or
// the memory note saying why the figures are absent. It returns the memory
// left asleep in GiB.
func (p *Protocol) finishSleep(ctx context.Context, ms *pool.MeasuredSleep) (float64, error) {
	resid, err := ms.Finish(ctx)
	if err != nil {
		return resid, err
	}
	if ms.Note != "" {
		p.rec.NoteMemory(ms.Note)
	}
	if !math.IsNaN(ms.ReleasePercent) {
		p.rec.AddRelease(ms.Label, ms.ReleasePercent)
	}
	if ms.ReleasePercentPerGPU != nil {
		p.rec.AddReleasePerGPU(ms.Label, ms.ReleasePercentPerGPU)
	}
	return resid, nil
}

// verify replays label's correctness probes after a wake (stage) and
// records the first mismatch of each model and stage as a failure of
// phase naming the probe and token; every mismatch counts in the check.
// The error is a replay that could not be made.
func (p *Protocol) verify(ctx context.Context, phase, label, stage string) error {
	rp, err := p.pool.Oracle().Replay(ctx, label, stage)
	if err != nil || rp == nil {
		return err
	}
	for _, r := range rp.Results {
		key := label + "/" + stage
		if r.Match || p.mismatched[key] {
			continue
		}
		if p.mismatched == nil {
			p.mismatched = map[string]bool{}
		}
		p.mismatched[key] = true
		p.rec.Fail(record.Failure{Phase: phase, Model: label, Step: fmt.Sprintf("correctness after %s wake %d", stage, rp.Cycle),
			Error: fmt.Sprintf("probe %q diverged from its answer before the first sleep at token %d (%s): %s", r.Probe, r.Position, r.Kind, r.Detail)})
	}
	return nil
}

// engine is the server's own account of a sleep (marked by from) and the
// wake that followed (marked by to; the same mark in a cycle), judged
// against the harness's HTTP times and the GiB released; nil when the
// servers reported nothing.
func (p *Protocol) engine(ctx context.Context, from, to pool.EngineMark, sameServer bool, httpSleep, httpWake, released float64) *record.Engine {
	e := p.pool.Engine().Since(ctx, from)
	if !sameServer {
		w := p.pool.Engine().Since(ctx, to)
		switch {
		case e == nil:
			e = w
			if e != nil {
				e.SleepS, e.FreedGiB, e.InUseGiB, e.MetricSleepS = math.NaN(), math.NaN(), math.NaN(), math.NaN()
			}
		case w != nil:
			e.WakeS, e.MetricWakeS = w.WakeS, w.MetricWakeS
		default:
			e.WakeS, e.MetricWakeS = math.NaN(), math.NaN()
		}
	}
	if e != nil {
		e.Disagreements = gate.Disagreements(e, httpSleep, httpWake, released, p.cfg.Protocol.EngineTolerancePercent)
	}
	return e
}

// Restart measures 1 initial and protocol.restart_warm warm starts of label:
// spawn → /health 200 → first token of a probe. Other models are put to
// sleep first; the last start is left running and awake.
func (p *Protocol) Restart(ctx context.Context, label string, logf Logf) ([]record.Restart, error) {
	defer p.begin(ctx, PhaseRestart, label)()
	var out []record.Restart
	for i := range 1 + p.cfg.Protocol.RestartWarm {
		rs, step, err := p.startOnce(ctx, label, i > 0)
		if err != nil {
			return out, p.Fail(PhaseRestart, label, step, err)
		}
		out = append(out, rs)
		p.rec.AddRestart(label, rs)
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
func (p *Protocol) startOnce(ctx context.Context, label string, warm bool) (record.Restart, string, error) {
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
	s, err := p.pool.Probe(ctx, label)
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

// WarmStart measures one restart of label (after its first start, so warm),
// for benchmarks; it is not added to the report's restarts.
func (p *Protocol) WarmStart(ctx context.Context, label string) (record.Restart, error) {
	p = p.bench()
	if !p.pool.Running(label) {
		if err := p.pool.Activate(ctx, label); err != nil {
			return record.Restart{}, err
		}
	}
	rs, step, err := p.startOnce(ctx, label, true)
	if err != nil {
		return rs, fmt.Errorf("restart %s: %s: %w", label, step, err)
	}
	return rs, nil
}

// ServeRound activates label and runs one serving round at concurrency c
// (protocol.requests_per_round requests), for benchmarks.
func (p *Protocol) ServeRound(ctx context.Context, label string, c int) (load.Result, error) {
	p = p.bench()
	if err := p.pool.Activate(ctx, label); err != nil {
		return load.Result{}, err
	}
	res, err := p.pool.Serve(ctx, label, c, 1)
	if err != nil {
		return res, fmt.Errorf("serve %s at concurrency %d: %w", label, c, err)
	}
	for _, q := range res.Requests {
		if q.Err != nil {
			return res, p.pool.Procs().Explain(label, fmt.Errorf("serve %s at concurrency %d: %w", label, c, q.Err))
		}
	}
	return res, nil
}

// Serve runs the serving measurement at every configured concurrency on an
// awake label (others asleep) and records it under stage. A failed request
// is one failed request: its round finishes, every concurrency runs and is
// recorded, and thresholds.max_failed_requests decides; a concurrency with
// more failures than that is a failure naming the first error. Only a
// server that dies (or a plan that overruns) ends the phase early.
func (p *Protocol) Serve(ctx context.Context, label, stage string, logf Logf) ([]record.PerfRun, error) {
	if !p.pool.Running(label) || p.pool.Asleep(label) {
		return nil, p.Fail(stage, label, "serve", fmt.Errorf("model %s is not awake; refusing to send inference (a request to a sleeping vLLM hangs)", label))
	}
	pc := p.cfg.Protocol
	limit := p.cfg.ThresholdsFor(label).MaxFailedRequests
	var out []record.PerfRun
	var errs []error
	for _, c := range pc.Concurrency {
		step := fmt.Sprintf("serve at concurrency %d", c)
		res, err := p.pool.Serve(ctx, label, c, pc.Rounds)
		run := record.PerfRun{Stage: stage, Concurrency: c, Rounds: pc.Rounds, Planned: pc.Rounds * pc.RequestsPerRound, Success: res.Success()}
		var firstErr error
		for _, q := range res.Requests {
			if q.Err != nil {
				if firstErr == nil {
					firstErr = q.Err
				}
				continue
			}
			run.TTFT = append(run.TTFT, q.TTFT.Seconds())
			if d := q.Done.Sub(q.Sent); d > 0 {
				run.ReqTPS = append(run.ReqTPS, float64(q.OutputTokens)/d.Seconds())
			}
			if q.HasTPOT {
				run.TPOT = append(run.TPOT, q.TPOT.Seconds())
			}
			run.PromptTokens = append(run.PromptTokens, q.PromptTokens)
		}
		for _, r := range res.Rounds {
			run.RoundTPS = append(run.RoundTPS, r.TPS)
			if r.Passed() {
				run.RoundsPassed++
			}
		}
		p.rec.AddPerf(label, run)
		out = append(out, run)
		logf("%s %s conc=%d: %d/%d ok, rounds passed %d/%d, tok/s %v", label, stage, c, run.Success, run.Planned, run.RoundsPassed, run.Rounds, round2(run.RoundTPS))
		failed := run.Planned - run.Success
		if err == nil && firstErr != nil {
			reqErr := p.pool.Procs().Explain(label, fmt.Errorf("%d of %d requests failed, first: %w", failed, run.Planned, firstErr))
			switch {
			case !p.pool.Running(label) || ctx.Err() != nil:
				err = reqErr // the server died or the run was stopped: nothing more to measure
			case failed > limit:
				errs = append(errs, p.Fail(stage, label, step, fmt.Errorf("%w (max_failed_requests %d)", reqErr, limit)))
			default:
				logf("%s %s conc=%d: %v (within max_failed_requests %d)", label, stage, c, reqErr, limit)
			}
		}
		if err != nil {
			return out, errors.Join(append(errs, p.Fail(stage, label, step, err))...)
		}
	}
	return out, errors.Join(errs...)
}

func round2(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Round(x*100) / 100
	}
	return out
}

// Baseline measures label's serving before any sleep: in a server process
// that has never slept. The restart phase puts each model to sleep to start
// the next, so a server that has slept is stopped and started afresh (the
// other models asleep), before the phase's window opens: that start is
// neither serving nor one of the restart phase's starts.
func (p *Protocol) Baseline(ctx context.Context, label string, logf Logf) ([]record.PerfRun, error) {
	step, err := p.freshProcess(ctx, label, logf)
	defer p.begin(ctx, PhaseBaseline, label)()
	if err != nil {
		return nil, p.Fail(PhaseBaseline, label, step, err)
	}
	return p.Serve(ctx, label, gate.StageBaseline, logf)
}

// freshProcess makes label awake in a server process that has never slept
// (started afresh if its server has slept); on error it names the step.
func (p *Protocol) freshProcess(ctx context.Context, label string, logf Logf) (string, error) {
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

// SleepCycles runs protocol.sleep_l{1,2}_cycles sleep/wake cycles on label:
// sleep time, wake API time, wake → first token, residual GiB. A failed
// step ends the cycles (the server's state is then unknown).
func (p *Protocol) SleepCycles(ctx context.Context, label string, level int, logf Logf) ([]record.Cycle, error) {
	phase := PhaseSleepL1
	n := p.cfg.Protocol.SleepL1Cycles
	if level == 2 {
		phase, n = PhaseSleepL2, p.cfg.Protocol.SleepL2Cycles
	}
	defer p.begin(ctx, phase, label)()
	p.rec.PlanCycles(label, level, n)
	if err := p.pool.Activate(ctx, label); err != nil {
		return nil, p.Fail(phase, label, "activate", err)
	}
	var out []record.Cycle
	for i := range n {
		c, step, err := p.cycle(ctx, label, level)
		out = append(out, c)
		p.rec.AddCycle(label, c)
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
func (p *Protocol) cycle(ctx context.Context, label string, level int) (record.Cycle, string, error) {
	c := record.Cycle{Level: level, ResidualGiB: math.NaN()}
	phase, stage := PhaseSleepL1, record.ReplayLevel1
	if level == 2 {
		phase, stage = PhaseSleepL2, record.ReplayLevel2
	}
	mark := p.pool.Engine().Mark(ctx, label)
	ms, resid, err := p.measureSleep(ctx, label, level)
	if ms != nil {
		c.SleepS, c.ResidualPerGPU = ms.Took.Seconds(), ms.ResidualPerGPU
	}
	c.ResidualGiB = resid
	if err != nil {
		return c, "sleep", err
	}
	tw := time.Now()
	wd, err := p.pool.Wake(ctx, label)
	c.WakeAPIS = wd.Seconds()
	if err != nil {
		return c, "wake", err
	}
	s, err := p.pool.Probe(ctx, label)
	if err != nil {
		return c, "first token after wake", err
	}
	c.ToFirstTokenS = s.Tokens[0].Sub(tw).Seconds()
	c.Engine = p.engine(ctx, mark, mark, true, c.SleepS, c.WakeAPIS, ms.ReleasedGiB)
	if err := p.verify(ctx, phase, label, stage); err != nil {
		return c, "correctness replay", err
	}
	c.OK = true
	return c, "", nil
}

// Cycle activates label and measures one sleep/wake cycle at level, for
// benchmarks; it is not added to the report's cycles.
func (p *Protocol) Cycle(ctx context.Context, label string, level int) (record.Cycle, error) {
	p = p.bench()
	if err := p.pool.Activate(ctx, label); err != nil {
		return record.Cycle{}, err
	}
	c, step, err := p.cycle(ctx, label, level)
	if err != nil {
		return c, fmt.Errorf("%s level %d: %s: %w", label, level, step, err)
	}
	return c, nil
}

// AfterWake puts label through one level-1 sleep and wake, then measures
// serving again, then replays the correctness probes: the serving comes
// first, straight after the wake (a replay would warm the engine).
func (p *Protocol) AfterWake(ctx context.Context, label string, logf Logf) ([]record.PerfRun, error) {
	defer p.begin(ctx, PhaseAfterWake, label)()
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

// handoff hands the GPU from one model (none: "") to another: sleep from at
// level 1, put any other awake model to sleep, wake to, probe its first
// token. On error it names the model and step that failed.
func (p *Protocol) handoff(ctx context.Context, m *meter, from, to string) (ho record.Handoff, who, step string, err error) {
	ho = record.Handoff{From: from, To: to, EnergyJ: math.NaN()}
	dir := record.DirectionKey(from, to)
	var markFrom pool.EngineMark
	if from != "" {
		markFrom = p.pool.Engine().Mark(ctx, from)
	}
	markTo := p.pool.Engine().Mark(ctx, to)
	// The handoff's energy: the counter read just before /sleep is sent
	// (the initial activation: before anything is sent) and right after
	// to's first token; its difference, nothing inside subtracted
	// (intervalJ).
	var e0 energyReading
	mark := func(ctx context.Context) (err error) {
		e0, err = m.now(ctx)
		return err
	}
	if from == "" {
		if err := mark(ctx); err != nil {
			return ho, to, "energy before the wake", err
		}
	}
	t0 := time.Now()
	var ms *pool.MeasuredSleep
	if from != "" {
		// The memory reads around the sleep stay outside the interval: it
		// starts when /sleep is sent, and from's memory asleep is read
		// after to's first token.
		ms, err = p.pool.Memory().StartSleepMarked(ctx, from, 1, mark)
		if ms != nil {
			t0, ho.SleepS = ms.Sent, ms.Took.Seconds()
		}
		if err != nil {
			return ho, from, "sleep " + dir, err
		}
	}
	if err := p.pool.MakeRoom(ctx, to); err != nil {
		return ho, to, "make room", err
	}
	if p.pool.Asleep(to) {
		wd, err := p.pool.Wake(ctx, to)
		ho.WakeS = wd.Seconds()
		if err != nil {
			return ho, to, "wake " + dir, err
		}
	}
	s, err := p.pool.Probe(ctx, to)
	if err != nil {
		return ho, to, "first token " + dir, err
	}
	if ho.EnergyJ, ho.EnergyNote, err = closeInterval(ctx, m, e0, s.Tokens[0]); err != nil {
		return ho, to, "energy after the first token " + dir, err
	}
	ho.ToFirstTokenS = s.Tokens[0].Sub(t0).Seconds()
	if ms != nil {
		ho.ToFirstTokenS -= ms.Held.Seconds() // device-delta's read of the device asleep
	}
	released := math.NaN()
	if ms != nil {
		if _, err := p.finishSleep(ctx, ms); err != nil {
			return ho, from, "memory of " + from + " asleep", err
		}
		released = ms.ReleasedGiB
	}
	ho.Engine = p.engine(ctx, markFrom, markTo, false, ho.SleepS, ho.WakeS, released)
	if err := p.verify(ctx, PhaseSwitch, to, record.ReplaySwitch); err != nil {
		return ho, to, "correctness replay " + dir, err
	}
	ho.OK = true
	return ho, "", "", nil
}

// Handoff measures one handoff from → to (from awake, to running), for
// benchmarks; it is not added to the report's handoffs.
func (p *Protocol) Handoff(ctx context.Context, from, to string) (record.Handoff, error) {
	p = p.bench()
	for _, l := range []string{to, from} {
		if !p.pool.Running(l) {
			if err := p.pool.Activate(ctx, l); err != nil {
				return record.Handoff{}, err
			}
		}
	}
	if err := p.pool.Activate(ctx, from); err != nil {
		return record.Handoff{}, err
	}
	ho, who, step, err := p.handoff(ctx, &meter{read: p.pool.Energy}, from, to)
	if err != nil {
		return ho, fmt.Errorf("%s: %s: %w", who, step, err)
	}
	return ho, nil
}

// Switch starts every model, activates the first (the initial activation),
// then hands the GPU on protocol.handoffs times round-robin (A→B, B→A, …):
// sleep the active model at level 1, wake the next, first token.
func (p *Protocol) Switch(ctx context.Context, logf Logf) ([]record.Handoff, error) {
	labels := p.pool.Labels()
	defer p.begin(ctx, PhaseSwitch, labels...)()
	if len(labels) < 2 {
		return nil, p.Fail(PhaseSwitch, "", "plan", fmt.Errorf("switching needs at least two models, the config has %d", len(labels)))
	}
	first := labels[0]
	// Every server up, the last one started left awake.
	for _, l := range labels[1:] {
		if !p.pool.Running(l) {
			if err := p.pool.Activate(ctx, l); err != nil {
				return nil, p.Fail(PhaseSwitch, l, "start", err)
			}
		}
	}
	if !p.pool.Running(first) {
		// Start the first model with the others asleep, then put it back to
		// sleep so the initial activation is a real wake.
		if err := p.pool.Activate(ctx, first); err != nil {
			return nil, p.Fail(PhaseSwitch, first, "start", err)
		}
		if _, err := p.pool.Sleep(ctx, first, 1); err != nil {
			return nil, p.Fail(PhaseSwitch, first, "sleep before initial activation", err)
		}
	}
	var out []record.Handoff
	// Initial activation: whoever is awake hands over to the first model.
	from := ""
	for _, l := range p.pool.Awake() {
		if l != first {
			from = l
		}
	}
	m := &meter{read: p.pool.Energy} // once it says there is no counter, it reads no more
	hand := func(from, to string, initial bool) (record.Handoff, error) {
		ho, who, step, err := p.handoff(ctx, m, from, to)
		ho.Initial = initial
		out = append(out, ho)
		p.rec.AddHandoff(ho)
		if err != nil {
			return ho, p.Fail(PhaseSwitch, who, step, err)
		}
		return ho, nil
	}
	if _, err := hand(from, first, true); err != nil {
		return out, err
	}
	cur := first
	for i := range p.cfg.Protocol.Handoffs {
		next := labels[(i+1)%len(labels)]
		ho, err := hand(cur, next, false)
		if err != nil {
			return out, err
		}
		logf("switch %d/%d %s: sleep %.3fs, wake %.3fs, first token %.3fs", i+1, p.cfg.Protocol.Handoffs,
			record.DirectionKey(cur, next), ho.SleepS, ho.WakeS, ho.ToFirstTokenS)
		cur = next
	}
	return out, nil
}
