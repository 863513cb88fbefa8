package protocol

import (
	"context"
	"math"
	"sync"
	"time"
)

// intervalJ is the GPU energy (J, every GPU) from a reading a taken just
// before an interval's first event (the meter takes a value as of its
// read's return: /sleep is sent right after) to its last event end (the
// woken model's first token), from b, the reading taken right after it:
// the soak's cycle and the switch's handoff. Nothing inside the interval
// is subtracted: the harness's reads there are part of what the GPU drew
// while the models changed state. Only b's lateness is left out: the
// probe's remaining tokens after the first and b's own read latency
// (end → b.t), at the interval's mean power; a second read to measure the
// power after would span microseconds, finer than the counter updates.
// NaN with why when the device has no counter.
func intervalJ(a, b energyReading, end time.Time, m *meter) (float64, string) {
	if why := m.unreadable(a, b); why != "" || a.j == nil || b.j == nil {
		return math.NaN(), why
	}
	all, in := b.t.Sub(a.t).Seconds(), end.Sub(a.t).Seconds()
	if all <= 0 || in >= all {
		return joules(a, b), ""
	}
	return joules(a, b) * max(0, in) / all, ""
}

// closeInterval reads the counter right after an interval's last event
// end and returns its energy from a (intervalJ).
func closeInterval(ctx context.Context, m *meter, a energyReading, end time.Time) (float64, string, error) {
	b, err := m.now(ctx)
	if err != nil {
		return math.NaN(), "", err
	}
	j, why := intervalJ(a, b, end, m)
	return j, why, nil
}

// EnergyTrace reads the energy counter every interval in the background,
// so that the energy between two instants known only afterwards (a run's
// first planned arrival, its last request done) can be taken from the
// counter: each instant's value is interpolated linearly between the
// readings around it.
type EnergyTrace struct {
	m    *meter
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex // guards pts and err
	pts  []energyReading
	err  error
}

// TraceEnergy reads the counter through read (pool.Energy) once, then
// every interval in the background; Stop ends it.
func TraceEnergy(ctx context.Context, read func(context.Context) ([]float64, error), every time.Duration) *EnergyTrace {
	tr := &EnergyTrace{m: &meter{read: read}, stop: make(chan struct{})}
	if !tr.sample(ctx) { // before TraceEnergy returns: before what it traces begins
		return tr
	}
	tr.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-tr.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !tr.sample(ctx) {
				return
			}
		}
	})
	return tr
}

// sample reads the counter once; false: no counter or an error, stop.
func (tr *EnergyTrace) sample(ctx context.Context) bool {
	e, err := tr.m.now(ctx)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if err != nil {
		tr.err = err
		return false
	}
	if e.j == nil {
		return false
	}
	tr.pts = append(tr.pts, e)
	return true
}

// Stop takes a last reading (the end of what was traced) and stops.
func (tr *EnergyTrace) Stop(ctx context.Context) {
	close(tr.stop)
	tr.wg.Wait() // a trace that never started its goroutine has none to wait for
	if tr.m.off == "" && tr.err == nil {
		tr.sample(ctx)
	}
}

// Between is the energy from a to b (J, summed over the GPUs), each
// interpolated between the readings around it; NaN with why when there
// is no counter, a read failed, or the readings do not cover [a, b].
func (tr *EnergyTrace) Between(a, b time.Time) (float64, string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch {
	case tr.m.off != "":
		return math.NaN(), tr.m.off
	case tr.err != nil:
		return math.NaN(), tr.err.Error()
	case len(tr.pts) < 2 || a.Before(tr.pts[0].t) || b.After(tr.pts[len(tr.pts)-1].t) || !b.After(a):
		return math.NaN(), "the energy counter's readings do not cover the run"
	}
	if tr.pts[tr.segment(a)-1].gen != tr.pts[tr.segment(b)].gen {
		return math.NaN(), tr.m.bad // the counter went backwards or stalled within what [a, b] interpolates
	}
	return tr.at(b) - tr.at(a), ""
}

// segment is the index i of the readings pts[i-1], pts[i] that t lies
// between (t within the readings, at least two): the two at interpolates
// t from.
func (tr *EnergyTrace) segment(t time.Time) int {
	for i := 1; i < len(tr.pts); i++ {
		if !t.After(tr.pts[i].t) {
			return i
		}
	}
	return len(tr.pts) - 1
}

// at is the counter's value at t summed over the GPUs, interpolated
// between the readings around it (t within the readings).
func (tr *EnergyTrace) at(t time.Time) float64 {
	sum := func(e energyReading) float64 {
		var s float64
		for _, x := range e.j {
			s += x
		}
		return s
	}
	for i := 1; i < len(tr.pts); i++ {
		p, q := tr.pts[i-1], tr.pts[i]
		if t.After(q.t) {
			continue
		}
		d := q.t.Sub(p.t).Seconds()
		if d <= 0 {
			return sum(q)
		}
		f := t.Sub(p.t).Seconds() / d
		return sum(p) + f*(sum(q)-sum(p))
	}
	return sum(tr.pts[len(tr.pts)-1])
}
