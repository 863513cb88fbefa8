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

// Switch is the switch phase (record.PhaseSwitch): one initial activation, then
// protocol.handoffs handoffs round-robin over every model.
type Switch struct{ *Env }

// Run measures the handoffs and judges them: every handoff succeeded;
// switch → first token per direction; the replays; every model's
// level-1 release again, with its switch sleeps' where they are level 1.
func (p Switch) Run(ctx context.Context, logf Logf) (Outcome[[]record.Handoff], error) {
	hs, err := p.run(ctx, logf)
	return Judged(hs, err, func() []record.Check { return p.checks(hs) })
}

// checks: every handoff succeeded; switch → first token per
// direction; every model's level-1 release again, with its switch sleeps'.
func (p Switch) checks(handoffs []record.Handoff) []record.Check {
	cs := append(switchChecks(p.cfg, handoffs), p.correctnessChecks(record.PhaseSwitch)...)
	labels := p.Labels()
	p.rec.Read(func(raw *record.Raw) {
		for _, l := range labels {
			cs = append(cs, healthChecks(p.cfg, raw, l, record.PhaseSwitch, labels...)...)
		}
		cs = append(cs, releaseChecks(p.cfg, raw, labels...)...)
	})
	return p.Record(record.PhaseSwitch, cs...)
}

// meteredSleep puts label to sleep at level with its memory read before
// (pool.Memory.Before) and the energy counter read last before /sleep is
// sent, after the pool's own checks (e0), and at its answer, before the
// sleep's verification reads (ea): a handoff's and a soak cycle's energy
// opens at e0 and leaves out the harness's own span from ea. ms is nil
// when /sleep was never sent; err is the sleep's (e0's read included),
// eaErr ea's.
func meteredSleep(ctx context.Context, f *pool.Pool, m *energy.Meter, label string, level int) (ms *pool.MeasuredSleep, e0, ea energy.Reading, eaErr, err error) {
	op := pool.Sleep(level)
	if ms, err = f.Memory().Before(ctx, label, op); err != nil {
		return nil, e0, ea, nil, err
	}
	pend, err := f.Prepare(ctx, label, op)
	if err != nil {
		return nil, e0, ea, nil, err
	}
	if e0, err = m.Now(ctx); err != nil {
		return nil, e0, ea, nil, err
	}
	t, err := pend.Send(ctx)
	ms.Sent, ms.Took, ms.T = t.Sent, t.Took, t
	if err != nil {
		return ms, e0, ea, nil, err
	}
	ea, eaErr = m.Now(ctx)
	if err := t.Verify(ctx); err != nil {
		return ms, e0, ea, eaErr, err
	}
	return ms, e0, ea, eaErr, ms.Asleep(ctx, t)
}

// handoff hands the GPU from one model (none: "") to another: sleep from at
// protocol.switch_level, put any other awake model to sleep, wake to, probe its first
// token. On error it names the model and step that failed.
func (p *Env) handoff(ctx context.Context, m *energy.Meter, from, to string) (ho record.Handoff, who, step string, err error) {
	ho = record.Handoff{From: from, To: to, EnergyJ: math.NaN(), Level: p.cfg.Protocol.SwitchLevel}
	dir := record.DirectionKey(from, to)
	var markFrom pool.EngineMark
	if from != "" {
		markFrom = p.pool.Engine().Mark(ctx, from)
	}
	markTo := p.pool.Engine().Mark(ctx, to)
	// The handoff's energy: the counter read just before /sleep is sent
	// (the initial activation: before anything is sent) and right after
	// to's first token, less the span the time leaves out, the sleep's
	// confirmation and device-delta's read (pool.MeasuredSleep.Held): the
	// counter is read again at the sleep's answer (ea) and once they are
	// done (eh) (energy.IntervalJ, energy.Without).
	var e0, ea, eh energy.Reading
	if from == "" {
		if e0, err = m.Now(ctx); err != nil {
			return ho, to, "energy before the wake", err
		}
	}
	t0 := time.Now()
	var ms *pool.MeasuredSleep
	var held time.Duration // the sleep's answer → the closing energy read before the wake: the harness's own span
	if from != "" {
		// The memory reads around the sleep stay outside the interval: it
		// starts when /sleep is sent, and from's memory asleep is read
		// after to's first token, settle_s after the sleep answered at the
		// earliest (pool.MeasuredSleep.Finish), as every release.
		var eaErr error
		ms, e0, ea, eaErr, err = meteredSleep(ctx, p.pool, m, from, p.cfg.Protocol.SwitchLevel)
		if ms != nil {
			t0, ho.SleepS = ms.Sent, ms.Took.Seconds()
		}
		if err != nil {
			return ho, from, "sleep " + dir, err
		}
		if eaErr != nil {
			return ho, from, "energy at the sleep's answer " + dir, eaErr
		}
		if eh, err = m.Now(ctx); err != nil {
			return ho, from, "energy before the wake " + dir, err
		}
		held = time.Since(ms.Answered())
	}
	if err := p.pool.MakeRoom(ctx, to); err != nil {
		return ho, to, "make room", err
	}
	// The probe, and the energy reading that closes the interval, go out
	// at the wake's answer; the wake's verification reads follow them.
	var first time.Time // the probe's first token
	var perr, eerr error
	firstToken := func(ctx context.Context) {
		pr := p.pool.Requests().StartProbe(ctx, to)
		if at, ok := pr.First(); ok { // at the first token, before the probe's others are read
			ho.EnergyJ, ho.EnergyNote, eerr = energy.CloseInterval(ctx, m, e0, at)
			if ms != nil {
				ho.EnergyJ, ho.EnergyNote = energy.Without(ho.EnergyJ, ho.EnergyNote, ea, eh, ms.Answered(), m)
			}
		}
		s, err := pr.Rest()
		if perr = err; err == nil {
			first = s.Tokens[0]
		}
	}
	var wake *pool.Transition // nil: to was awake
	if p.pool.Asleep(to) {
		t, err := p.pool.Do(ctx, to, pool.Wake())
		wake = t
		ho.WakeS = t.Took.Seconds()
		if err != nil {
			return ho, to, "wake " + dir, err
		}
		firstToken(ctx)
		if err := t.Verify(ctx); err != nil {
			return ho, to, "wake " + dir, err
		}
	} else {
		firstToken(ctx)
	}
	if perr != nil {
		return ho, to, "first token " + dir, perr
	}
	if eerr != nil {
		return ho, to, "energy after the first token " + dir, eerr
	}
	ho.ToFirstTokenS = first.Sub(t0).Seconds()
	ho.ToFirstTokenS -= held.Seconds() // the sleep's confirmation, device-delta's read, the energy reads

	released := math.NaN()
	var asleep []*pool.Transition // none: the first activation
	if ms != nil {
		if _, err := p.finishSleep(ctx, ms); err != nil {
			return ho, from, "memory of " + from + " asleep", err
		}
		released, asleep = ms.ReleasedGiB, []*pool.Transition{ms.T}
	}
	ho.Engine = p.engine(ctx, asleep, wake, markFrom, markTo, ho.SleepS, ho.WakeS, released)
	if err := p.verify(ctx, record.PhaseSwitch, to); err != nil {
		return ho, to, "correctness replay " + dir, err
	}
	ho.OK = true
	return ho, "", "", nil
}

// run starts every model, activates the first (the initial activation),
// then hands the GPU on protocol.handoffs times round-robin (A→B, B→A, …):
// sleep the active model at protocol.switch_level, wake the next, first token.
func (p Switch) run(ctx context.Context, logf Logf) ([]record.Handoff, error) {
	labels := p.pool.Labels()
	defer p.Begin(ctx, record.PhaseSwitch, labels...)()
	if len(labels) < 2 {
		return nil, p.Fail(record.PhaseSwitch, "", "plan", fmt.Errorf("switching needs at least two models, the config has %d", len(labels)))
	}
	first, level := labels[0], p.cfg.Protocol.SwitchLevel
	// Every server up, the last one started left awake.
	for _, l := range labels[1:] {
		if !p.pool.Running(l) {
			if err := p.pool.Activate(ctx, l); err != nil {
				return nil, p.Fail(record.PhaseSwitch, l, "start", err)
			}
		}
	}
	if !p.pool.Running(first) {
		// Start the first model with the others asleep, then put it back to
		// sleep so the initial activation is a real wake.
		if err := p.pool.Activate(ctx, first); err != nil {
			return nil, p.Fail(record.PhaseSwitch, first, "start", err)
		}
		if _, err := p.pool.Run(ctx, first, pool.Sleep(level)); err != nil {
			return nil, p.Fail(record.PhaseSwitch, first, "sleep before initial activation", err)
		}
	}
	// Every other model asleep at switch_level, so that each handoff's
	// wake is one from that level: a model the phases before (or making
	// room, always at level 1) left asleep at another level is woken and
	// put back to sleep at it, unmeasured.
	for _, l := range labels[1:] {
		if _, asleep := p.pool.AsleepAt(l); asleep { // the one awake stays awake: the initial activation hands over from it
			if err := p.sleepAt(ctx, record.PhaseSwitch, l, level); err != nil {
				return nil, err
			}
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
	m := energy.NewMeter(p.pool.Memory().Energy) // once it says there is no counter, it reads no more
	hand := func(from, to string, initial bool) (record.Handoff, error) {
		ho, who, step, err := p.handoff(ctx, m, from, to)
		ho.Initial = initial
		out = append(out, ho)
		p.w.Handoffs.Add(ho)
		if err != nil {
			return ho, p.Fail(record.PhaseSwitch, who, step, err)
		}
		return ho, nil
	}
	if _, err := hand(from, first, true); err != nil {
		return out, err
	}
	cur := first
	checked := map[string]bool{} // models whose engine health was taken after a handoff's wake
	for i := range p.cfg.Protocol.Handoffs {
		next := labels[(i+1)%len(labels)]
		ho, err := hand(cur, next, false)
		if err != nil {
			return out, err
		}
		logf("switch %d/%d %s: sleep %.3fs, wake %.3fs, first token %.3fs", i+1, p.cfg.Protocol.Handoffs,
			record.DirectionKey(cur, next), ho.SleepS, ho.WakeS, ho.ToFirstTokenS)
		if !checked[next] { // after the first counted handoff to each model, outside the handoffs' intervals
			checked[next] = true
			if err := p.health(ctx, next, record.PhaseSwitch, logf); err != nil {
				return out, p.Fail(record.PhaseSwitch, next, "engine health after "+record.DirectionKey(cur, next), err)
			}
		}
		cur = next
	}
	return out, nil
}

// switchChecks: every handoff succeeded; switch → first token p95 per direction
// within its limit when set.
func switchChecks(cfg config.Config, handoffs []record.Handoff) []record.Check {
	dirs := record.DirectionsOf(handoffs) // report.json's switch.directions reads the same
	ok := 0
	for _, d := range dirs {
		ok += len(d.FirstToken)
	}
	out := []record.Check{record.Evaluate("switch.successful_handoffs", "", float64(ok), "==", float64(cfg.Protocol.Handoffs))}
	keys := slices.Sorted(maps.Keys(dirs))
	if limit := cfg.Thresholds.MaxSwitchToFirstTokenS; limit > 0 {
		for _, k := range keys {
			out = append(out, record.Evaluate("switch."+k+".to_first_token_s.p95", "", record.Summary(dirs[k].FirstToken).P95, "<=", limit))
		}
	}
	for _, k := range keys {
		out = append(out, engineAgreement("switch."+k, "", dirs[k].Engines)...)
	}
	return out
}
