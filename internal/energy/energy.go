// Package energy reads a GPU's energy counter (gpu.EnergySource: NVML's
// total energy, the simulated device's) into figures that mean what they
// say: a Meter that names a counter that went backwards or stalled instead
// of turning it into a value, the energy and mean power between two
// readings, a transition's energy over exactly its interval (the reads
// around it left out), an interval closed by a read right after its last
// event, and a Trace that reads in the background so that the energy
// between instants known only afterwards can be interpolated.
package energy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/gpu"
)

// Reading is the energy counter's joules on each GPU (nil: no
// counter) and when its read returned: the counter is taken as read then
// (an NVML read takes microseconds; a slow read's latency falls before
// it, outside the interval it ends). gen counts the Meter's anomalies up
// to this reading: two readings of different gen have a counter that went
// backwards or stalled between them, so nothing between them is measured.
type Reading struct {
	t   time.Time
	j   []float64
	gen int
}

// stallAfter is how long a GPU's energy counter may stay put before the
// Meter calls it stalled. A powered GPU draws tens of watts even at its
// deepest idle, and NVML's total-energy counter (mJ) moves at every power
// sample (tens of milliseconds apart); a second without a millijoule is a
// counter that stopped, not an idle board.
const stallAfter = time.Second

// Meter reads the energy counter; once the source says it has none
// (gpu.ErrNoEnergy) it reads nothing more and Off says why. A reading
// lower than the one before on any GPU (a reset, a wrap) or unchanged for
// stallAfter is an anomaly: it starts a new gen, Bad says what was seen,
// and every figure across it is unreadable (NaN with Bad as the reason),
// never a value.
type Meter struct {
	read  func(context.Context) ([]float64, error)
	clock func() time.Time // when a read returned; nil: time.Now
	off   string
	bad   string // the last anomaly seen, "" while none
	last  Reading
	// moved is, per GPU, the reading at which its counter last changed
	// (or the first): a counter unchanged for stallAfter across many
	// readings (a trace reads every 50 ms) is stalled too.
	moved []Reading
}

// Now reads the counter: a reading without a value where the source has
// no counter (Off says why), an error where the read failed.
func (m *Meter) Now(ctx context.Context) (Reading, error) {
	if m.off != "" {
		return Reading{}, nil
	}
	j, err := m.read(ctx)
	t := time.Now()
	if m.clock != nil {
		t = m.clock()
	}
	if errors.Is(err, gpu.ErrNoEnergy) {
		m.off = err.Error()
		return Reading{}, nil
	}
	if err != nil {
		return Reading{}, fmt.Errorf("read the GPU energy counter: %w", err)
	}
	e := Reading{t: t, j: j, gen: m.last.gen}
	why := anomaly(m.last, e)
	if why == "" && len(m.moved) == len(j) {
		for i := range j {
			if since := m.moved[i]; j[i] == since.j[i] && t.Sub(since.t) >= stallAfter {
				why = anomaly(Reading{t: since.t, j: since.j}, e)
				break
			}
		}
	}
	if why != "" {
		e.gen++
		m.bad = why
	}
	if len(m.moved) != len(j) {
		m.moved = make([]Reading, len(j))
	}
	for i := range j {
		if m.moved[i].j == nil || j[i] != m.moved[i].j[i] || why != "" {
			m.moved[i] = e
		}
	}
	m.last = e
	return e, nil
}

// anomaly says how the counter misbehaved from reading a to b ("" when it
// did not, or a is the first reading): it went backwards, or it did not
// move for stallAfter or longer.
func anomaly(a, b Reading) string {
	if a.j == nil {
		return ""
	}
	if len(a.j) != len(b.j) {
		return fmt.Sprintf("the GPU energy counter read %d GPUs, then %d: its energy and power figures are unreadable", len(a.j), len(b.j))
	}
	for i := range a.j {
		switch d := b.t.Sub(a.t); {
		case b.j[i] < a.j[i]:
			return fmt.Sprintf("the GPU energy counter went backwards on GPU %d (%.3f J, then %.3f J %.3f s later: a reset or a wrap): energy and power figures across it are unreadable",
				i, a.j[i], b.j[i], d.Seconds())
		case b.j[i] == a.j[i] && d >= stallAfter:
			return fmt.Sprintf("the GPU energy counter stalled on GPU %d (%.3f J for %.3f s; a powered GPU moves it every power sample): energy and power figures across it are unreadable",
				i, a.j[i], d.Seconds())
		}
	}
	return ""
}

// Unreadable says why no energy figure can span readings a and b: no
// counter (off), or an anomaly between them (bad); "" when one can.
func (m *Meter) Unreadable(a, b Reading) string {
	switch {
	case a.j == nil || b.j == nil:
		return m.off
	case a.gen != b.gen:
		return m.bad
	}
	return ""
}

// Joules is the energy between two readings, summed over the GPUs (NaN
// when either has none, or the counter misbehaved between them).
func Joules(a, b Reading) float64 {
	if a.j == nil || b.j == nil || len(a.j) != len(b.j) || a.gen != b.gen {
		return math.NaN()
	}
	var s float64
	for i := range a.j {
		s += b.j[i] - a.j[i]
	}
	return s
}

// PowerOver is the mean power between two readings: their energy over the
// time between them (not the nominal dwell: a slow read lengthens both).
func PowerOver(a, b Reading) float64 {
	d := b.t.Sub(a.t).Seconds()
	if d <= 0 {
		return math.NaN()
	}
	return Joules(a, b) / d
}

// TransitionJ is the energy over exactly [start, end] from readings a
// (before start) and b (after end): their difference less the state
// before's power pBefore over a → start and the state after's pAfter over
// end → b, so the harness's reads around a transition add nothing.
func TransitionJ(a, b Reading, start, end time.Time, pBefore, pAfter float64) float64 {
	if a.j == nil || b.j == nil || a.gen != b.gen {
		return math.NaN()
	}
	return Joules(a, b) - pBefore*max(0, start.Sub(a.t).Seconds()) - pAfter*max(0, b.t.Sub(end).Seconds())
}

// NewMeter is a meter of the counter read (pool.Memory.Energy).
func NewMeter(read func(context.Context) ([]float64, error)) *Meter { return &Meter{read: read} }

// Off says why the meter reads nothing ("" while it reads): the source
// has no counter.
func (m *Meter) Off() string { return m.off }

// Bad is the last anomaly the meter saw ("" while none).
func (m *Meter) Bad() string { return m.bad }

// Time is when the reading's read returned.
func (e Reading) Time() time.Time { return e.t }

// Known reports whether the reading has a counter value (false: no
// counter, or none read).
func (e Reading) Known() bool { return e.j != nil }

// IntervalJ is the GPU energy (J, every GPU) from a reading a taken just
// before an interval's first event (the Meter takes a value as of its
// read's return: /sleep is sent right after) to its last event end (the
// woken model's first token), from b, the reading taken right after it:
// the soak's cycle and the switch's handoff (which take out the span
// their time leaves out with Without). Here only b's lateness is left out:
// its own read latency (end → b's time; b is read as the first token is
// received, pool.Probing.First), at the interval's mean power; a second read to measure the
// power after would span microseconds, finer than the counter updates.
// NaN with why when the device has no counter.
func IntervalJ(a, b Reading, end time.Time, m *Meter) (float64, string) {
	if why := m.Unreadable(a, b); why != "" || a.j == nil || b.j == nil {
		return math.NaN(), why
	}
	all, in := b.t.Sub(a.t).Seconds(), end.Sub(a.t).Seconds()
	if all <= 0 || in >= all {
		return Joules(a, b), ""
	}
	return Joules(a, b) * max(0, in) / all, ""
}

// CloseInterval reads the counter right after an interval's last event
// end and returns its energy from a (IntervalJ).
func CloseInterval(ctx context.Context, m *Meter, a Reading, end time.Time) (float64, string, error) {
	b, err := m.Now(ctx)
	if err != nil {
		return math.NaN(), "", err
	}
	j, why := IntervalJ(a, b, end, m)
	return j, why, nil
}

// Without is j, an interval's energy, less the energy of a span inside it
// that the interval's time leaves out too: from the instant from (a
// sleep's answer) to reading b (taken once the harness's own reads there
// are done, just before the wake is sent). a is read right after from; the
// part before a's reading (its own latency) is taken at the span's mean
// power, as IntervalJ takes the closing reading's lateness. NaN with why
// where either reading is.
func Without(j float64, why string, a, b Reading, from time.Time, m *Meter) (float64, string) {
	if math.IsNaN(j) {
		return j, why
	}
	if bad := m.Unreadable(a, b); bad != "" || a.j == nil || b.j == nil {
		return math.NaN(), bad
	}
	held := Joules(a, b)
	if read, span := b.t.Sub(a.t), b.t.Sub(from); read > 0 && span > read {
		held *= span.Seconds() / read.Seconds()
	}
	return j - held, why
}

// Trace reads the energy counter every interval in the background,
// so that the energy between two instants known only afterwards (a run's
// first planned arrival, its last request done) can be taken from the
// counter: each instant's value is interpolated linearly between the
// readings around it.
type Trace struct {
	m    *Meter
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex // guards pts and err
	pts  []Reading
	err  error
}

// StartTrace reads the counter through read (pool.Memory.Energy) once, then
// every interval in the background; Stop ends it.
func StartTrace(ctx context.Context, read func(context.Context) ([]float64, error), every time.Duration) *Trace {
	tr := &Trace{m: &Meter{read: read}, stop: make(chan struct{})}
	if !tr.sample(ctx) { // before StartTrace returns: before what it traces begins
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
func (tr *Trace) sample(ctx context.Context) bool {
	e, err := tr.m.Now(ctx)
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
func (tr *Trace) Stop(ctx context.Context) {
	close(tr.stop)
	tr.wg.Wait() // a trace that never started its goroutine has none to wait for
	if tr.m.off == "" && tr.err == nil {
		tr.sample(ctx)
	}
}

// Between is the energy from a to b (J, summed over the GPUs), each
// interpolated between the readings around it; NaN with why when there
// is no counter, a read failed, or the readings do not cover [a, b].
func (tr *Trace) Between(a, b time.Time) (float64, string) {
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
func (tr *Trace) segment(t time.Time) int {
	for i := 1; i < len(tr.pts); i++ {
		if !t.After(tr.pts[i].t) {
			return i
		}
	}
	return len(tr.pts) - 1
}

// at is the counter's value at t summed over the GPUs, interpolated
// between the readings around it (t within the readings).
func (tr *Trace) at(t time.Time) float64 {
	sum := func(e Reading) float64 {
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
