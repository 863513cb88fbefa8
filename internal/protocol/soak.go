package protocol

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/energy"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

// Soak is the soak phase (record.PhaseSoak, TestSoak): not one of the
// protocol's phases; off unless protocol.soak_cycles is set.
type Soak struct{ *Env }

// Run runs the soak's cycles and judges them: every cycle succeeded,
// residual growth within its limit, the servers' account agrees, no
// correctness mismatch.
func (p Soak) Run(ctx context.Context, logf Logf) (Outcome[[]record.SoakCycle], error) {
	cs, err := p.run(ctx, logf)
	return Judged(cs, err, func() []record.Check { return p.checks(cs) })
}

// run hands the GPU round-robin over every model protocol.soak_cycles
// times (A→B, B→C, C→A, …), each sleep at protocol.soak_level, and
// records per cycle the slept model's residual, release and host RSS, the
// free memory against the woken model's awake footprint before its wake
// (a wake that cannot fit is named before it is tried), the sleep, wake
// and switch → first token times, the servers' own account and a
// correctness replay.
func (p Soak) run(ctx context.Context, logf Logf) ([]record.SoakCycle, error) {
	labels := p.pool.Labels()
	n, level := p.cfg.Protocol.SoakCycles, p.cfg.Protocol.SoakLevel
	defer p.Begin(ctx, record.PhaseSoak, labels...)()
	p.rec.PlanSoak(n, level)
	if len(labels) < 3 {
		return nil, p.Fail(record.PhaseSoak, "", "plan", fmt.Errorf("the soak rotates over at least 3 models, the config has %d", len(labels)))
	}
	if err := p.StartAll(ctx, record.PhaseSoak, level); err != nil {
		return nil, err
	}
	var out []record.SoakCycle
	m := energy.NewMeter(p.pool.Memory().Energy) // once it says there is no counter, it reads no more
	every := max(1, n/10)
	t0 := time.Now()
	for i := range n {
		from, to := labels[i%len(labels)], labels[(i+1)%len(labels)]
		c, who, step, err := p.soakCycle(ctx, m, i+1, from, to, level)
		out = append(out, c)
		p.w.Soak.Add(c)
		if p.obs != nil {
			p.obs.ObserveSoakCycle(c)
		}
		if err != nil {
			return out, p.Fail(record.PhaseSoak, who, fmt.Sprintf("cycle %d %s", i+1, step), err)
		}
		if (i+1)%every == 0 || i+1 == n {
			logf("soak %d/%d (%.1fs): %s→%s sleep %.3fs, wake %.3fs, %s residual %.3f GiB, host %.3f GiB (locked %.3f, pinned %.3f), headroom %.2f GiB, %.3g J",
				i+1, n, time.Since(t0).Seconds(), from, to, c.SleepS, c.WakeS, from, c.ResidualGiB, c.RSSGiB, c.LockedGiB, c.PinnedGiB, c.HeadroomGiB, c.EnergyJ)
		}
	}
	return out, nil
}

// StartAll starts every model's server that is not running (one at a
// time, the others asleep), puts every model but the first to sleep at
// level (a model left asleep at another level, by an earlier phase or by
// making room, always at level 1, is woken and slept again, unmeasured),
// so that the phase's first wake of each is one from level, and leaves the
// first model awake; an error is a failure of phase naming the model.
func (p *Env) StartAll(ctx context.Context, phase string, level int) error {
	labels := p.pool.Labels()
	for _, l := range labels[1:] {
		if !p.pool.Running(l) {
			if err := p.pool.Activate(ctx, l); err != nil {
				return p.Fail(phase, l, "start", err)
			}
		}
	}
	for _, l := range labels[1:] {
		if err := p.sleepAt(ctx, phase, l, level); err != nil {
			return err
		}
	}
	if err := p.pool.Activate(ctx, labels[0]); err != nil {
		return p.Fail(phase, labels[0], "activate", err)
	}
	return nil
}

// sleepAt puts label to sleep at level, unmeasured, unless it sleeps
// there already: one asleep at another level (an earlier phase's, or
// making room's, always level 1) is woken first. An error is a failure of
// phase naming the model.
func (p *Env) sleepAt(ctx context.Context, phase, label string, level int) error {
	at, asleep := p.pool.AsleepAt(label)
	if asleep && at == level {
		return nil
	}
	if asleep {
		if err := p.pool.Activate(ctx, label); err != nil {
			return p.Fail(phase, label, fmt.Sprintf("wake to sleep at level %d", level), err)
		}
	}
	if _, err := p.pool.Run(ctx, label, pool.Sleep(level)); err != nil {
		return p.Fail(phase, label, fmt.Sprintf("sleep at level %d", level), err)
	}
	return nil
}

// soakCycle is one soak handoff from → to; on error it names the model and
// step that failed.
func (p Soak) soakCycle(ctx context.Context, m *energy.Meter, i int, from, to string, level int) (c record.SoakCycle, who, step string, err error) {
	nan := math.NaN()
	c = record.SoakCycle{Cycle: i, From: from, To: to, Level: level, ResidualGiB: nan, ReleasePct: nan,
		FreeGiB: nan, NeedGiB: nan, HeadroomGiB: nan, RSSGiB: nan, LockedGiB: nan, PinnedGiB: nan, EnergyJ: nan}
	fail := func(who, step string, err error) (record.SoakCycle, string, string, error) {
		c.Err = err.Error()
		return c, who, step, err
	}
	markFrom, markTo := p.pool.Engine().Mark(ctx, from), p.pool.Engine().Mark(ctx, to)
	// Switch → first token is timed as the switch phase's handoff: from
	// /sleep sent to the woken model's first token, the memory reads
	// outside it. The one read that must come between the sleep and the
	// wake, the headroom (a wake that cannot fit is named before it is
	// sent), is left out of it, as is device-delta's read of the device
	// asleep (pool.MeasuredSleep.Held): held is their time, the sleep's
	// answer to the energy reading before the wake. vLLM frees
	// the memory before /sleep answers (CuMemAllocator.sleep,
	// vllm/device_allocator/cumem.py), so the headroom is read at once; only
	// a wake that would not fit waits settle_s after the sleep answered and
	// reads again (a release the device shows late must not refuse a wake
	// that fits), and that wait is held time too.
	// The cycle's energy: the counter read just before /sleep is sent
	// (after the memory read pool.Memory.Before makes: meteredSleep) and right after the first
	// token, less the held span as the time: read at the sleep's answer
	// (ea) and once the headroom is read (eh) (energy.Without).
	var eh energy.Reading
	ms, e0, ea, eaErr, err := meteredSleep(ctx, p.pool, m, from, level)
	if ms != nil {
		c.SleepS = ms.Took.Seconds()
	}
	if err != nil {
		return fail(from, "sleep", err)
	}
	if eaErr != nil {
		return fail(from, "energy at the sleep's answer", eaErr)
	}
	// asleep reads from's residual settle_s after its sleep answered, its
	// release and its host memory (a process scan: RSS, locked, pinned).
	asleep := func() error {
		resid, err := p.finishSleep(ctx, ms) // settle_s after the answer (pool.MeasuredSleep.Finish)
		if err != nil {
			return err
		}
		c.ResidualGiB = resid
		if !math.IsNaN(ms.ReleasedGiB) && !math.IsNaN(resid) && ms.ReleasedGiB+resid > 0 {
			c.ReleasePct = 100 * ms.ReleasedGiB / (ms.ReleasedGiB + resid)
		}
		if h, err := p.pool.Procs().Host(from); err == nil {
			c.RSSGiB, c.LockedGiB, c.PinnedGiB = gib(h.RSS), gib(h.Locked), gib(h.Pinned)
		}
		return nil
	}
	free, need, err := p.pool.Memory().Headroom(ctx, to)
	if err == nil && free < need {
		p.settleFrom(ctx, ms.Answered())
		free, need, err = p.pool.Memory().Headroom(ctx, to)
	}
	if err != nil {
		return fail(to, "read GPU memory before the wake", err)
	}
	if eh, err = m.Now(ctx); err != nil {
		return fail(to, "energy before the wake", err)
	}
	held := time.Since(ms.Answered()) // the sleep's confirmation, device-delta's read, the headroom, the energy reads: the span energy.Without takes out
	c.FreeGiB, c.NeedGiB, c.HeadroomGiB = free, need, free-need
	if c.HeadroomGiB < 0 {
		_ = asleep() // what the slept model kept, for the failed cycle's row; the wake's refusal is the error
		return fail(to, "headroom before the wake", fmt.Errorf("waking %s needs %.2f GiB (its memory awake) but the GPU has %.2f GiB free: the wake would run out of memory (CUDA out of memory at cumem_allocator); the residuals of the sleeping models grew (see soak.models.*.residual_slope_mib_per_cycle)", to, need, free))
	}
	if err := p.pool.MakeRoom(ctx, to); err != nil {
		return fail(to, "make room", err)
	}
	// The probe and the energy reading go out at the wake's answer, the
	// wake's verification reads after them (pool.Transition.Verify).
	var eerr error
	t, err := p.pool.Do(ctx, to, pool.Wake())
	c.WakeS = t.Took.Seconds()
	if err != nil {
		return fail(to, "wake", err)
	}
	pr := p.pool.Requests().StartProbe(ctx, to)
	if at, ok := pr.First(); ok { // at the first token, before the probe's others are read
		c.EnergyJ, c.EnergyNote, eerr = energy.CloseInterval(ctx, m, e0, at)
		c.EnergyJ, c.EnergyNote = energy.Without(c.EnergyJ, c.EnergyNote, ea, eh, ms.Answered(), m)
	}
	s, perr := pr.Rest()
	if err := t.Verify(ctx); err != nil {
		return fail(to, "wake", err)
	}
	if perr != nil {
		return fail(to, "first token", perr)
	}
	if eerr != nil {
		return fail(to, "energy after the first token", eerr)
	}
	c.ToFirstTokenS = (s.Tokens[0].Sub(ms.Sent) - held).Seconds()
	// After the first token: the slept model's residual, release and host RSS.
	if err := asleep(); err != nil {
		return fail(from, "memory of "+from+" asleep", err)
	}
	c.Engine = p.engine(ctx, []*pool.Transition{ms.T}, t, markFrom, markTo, c.SleepS, c.WakeS, ms.ReleasedGiB)
	if err := p.verify(ctx, record.PhaseSoak, to); err != nil {
		return fail(to, "correctness replay", err)
	}
	c.OK = true
	return c, "", "", nil
}

// settleFrom waits until protocol.settle_s after t (at once if that has
// passed), or until ctx ends.
func (p *Env) settleFrom(ctx context.Context, t time.Time) {
	d := time.Until(t.Add(seconds(p.cfg.Protocol.SettleS)))
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

// checks: every cycle succeeded, residual growth within its limit,
// the servers' account agrees, no correctness mismatch; at level 1 every
// model's release again, with the soak's sleeps'.
func (p Soak) checks(cycles []record.SoakCycle) []record.Check {
	cs := append(soakChecks(p.cfg, cycles), p.correctnessChecks(record.PhaseSoak)...)
	if p.cfg.Protocol.SoakLevel == 1 { // its sleeps added level-1 releases
		labels := p.Labels()
		p.rec.Read(func(raw *record.Raw) { cs = append(cs, releaseChecks(p.cfg, raw, labels...)...) })
	}
	return p.Record(record.PhaseSoak, cs...)
}

func gib(b uint64) float64 { return float64(b) / record.GiB }

// soakChecks: every planned cycle succeeded; each model's residual grows by no
// more than max_residual_growth_mib_per_cycle (the fitted slope; not
// evaluated for a model with fewer than 3 residuals); the engine's account
// agrees.
func soakChecks(cfg config.Config, cycles []record.SoakCycle) []record.Check {
	ok := 0
	var engines = map[string][]*record.Engine{}
	for _, c := range cycles {
		if c.OK {
			ok++
			engines[c.From] = append(engines[c.From], c.Engine)
		}
	}
	out := []record.Check{record.Evaluate("soak.successful_cycles", "", float64(ok), "==", float64(cfg.Protocol.SoakCycles))}
	residuals := record.ResidualSeriesMiB(cycles)
	for _, l := range slices.Sorted(maps.Keys(engines)) {
		limit := cfg.ThresholdsFor(l).MaxResidualGrowthMiBPerCycle
		if limit > 0 {
			if tr := record.Trend(residuals[l]); tr != nil { // report.json's residual_slope_mib_per_cycle
				out = append(out, record.Evaluate("soak.residual_growth_mib_per_cycle", l, tr.Slope, "<=", limit))
			} else {
				c := notEvaluated(cfg, "soak.residual_growth_mib_per_cycle", l, "<=", limit, "max_residual_growth_mib_per_cycle")
				if _, none := MemoryRequired(cfg, l, "max_residual_growth_mib_per_cycle"); none == "" { // else it says "memory": "none"
					c.Reason = "no trend: fewer than 3 residuals of the model (memory not sampled or not attributed, or too few cycles)"
				}
				out = append(out, c)
			}
		}
		out = append(out, engineAgreement("soak", l, engines[l])...)
	}
	return out
}
