// Package router is the wake-on-demand router of the traffic phase: what
// users put in front of several models sharing one GPU (llm-d,
// production-stack, llama-swap). One model is awake at a time. A request
// for it is sent at once; a request for a sleeping model waits in a queue
// while the router drains the awake model's requests in flight, puts it to
// sleep and wakes the model asked for, then releases the queue. Requests
// queue first-come first-served: once one waits, the awake model takes no
// new request ahead of it, so no model starves — except during a minimum
// dwell after each wake (Options.MinDwell), when the awake model keeps
// taking its requests and the switch waits for the dwell to end: fewer
// switches, longer waits for the other models. The queue is bounded
// (Options.MaxQueue): a request that finds it full is shed — refused at
// once with ErrShed, never sent — as a router in front of a pool sheds
// load it cannot hold rather than hold every arrival in memory.
package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/pool"
)

// Switch is one handover the router made.
type Switch struct {
	From, To      string    // From "" when nothing was awake
	Start, End    time.Time // drain done, handover begun → the woken model's wake answered
	SleepS, WakeS float64
	Released      int // requests it released
	Err           string
}

// Depth is the number of requests waiting, from At on.
type Depth struct {
	At     time.Time
	Queued int
}

// ErrShed is the error of a request the router shed: its queue held
// Options.MaxQueue requests already, so it was refused without being sent.
var ErrShed = errors.New("shed: the router's queue is full")

// Options are a router's policy.
type Options struct {
	Level    int           // sleep level of an idle model
	MinDwell time.Duration // a woken model stays awake at least this long (0: switch as soon as asked)
	// MaxQueue bounds the requests waiting for a wake (0: unbounded); one
	// more is shed (ErrShed).
	MaxQueue int
}

// Router sends each request to its model, waking it on demand.
type Router struct {
	f        *pool.Pool
	level    int
	dwell    time.Duration
	maxQueue int

	// mu guards every field below it.
	mu          sync.Mutex
	active      string
	activeSince time.Time
	dwellTimer  *time.Timer
	inflight    int
	queue       []*waiter
	kick        chan struct{}
	switches    []Switch
	depth       []Depth
	shed        int // requests refused with the queue full
}

type waiter struct {
	model string
	ready chan error // closed (nil) when released, or the switch's error
}

// New is a router over f whose awake model is active ("" for none),
// putting idle models to sleep at level, switching as soon as asked.
func New(f *pool.Pool, level int, active string) *Router {
	return NewWith(f, Options{Level: level}, active)
}

// NewWith is a router with the policy o; active's dwell starts now.
func NewWith(f *pool.Pool, o Options, active string) *Router {
	return &Router{f: f, level: o.Level, dwell: o.MinDwell, maxQueue: o.MaxQueue, active: active, activeSince: time.Now(), kick: make(chan struct{}, 1)}
}

// dwelling reports whether the active model is within its minimum dwell;
// the caller holds mu.
func (r *Router) dwelling() bool {
	return r.dwell > 0 && r.active != "" && time.Since(r.activeSince) < r.dwell
}

func (r *Router) signal() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run makes the switches until ctx ends.
func (r *Router) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			r.mu.Lock()
			if r.dwellTimer != nil {
				r.dwellTimer.Stop()
			}
			r.mu.Unlock()
			r.failAll(context.Cause(ctx))
			return
		case <-r.kick:
		}
		for r.step(ctx) {
		}
	}
}

// step releases or switches once; false when there is nothing to do now.
func (r *Router) step(ctx context.Context) bool {
	r.mu.Lock()
	if len(r.queue) == 0 {
		r.mu.Unlock()
		return false
	}
	target := r.queue[0].model
	if target == r.active {
		r.release(target)
		r.mu.Unlock()
		return true
	}
	if r.dwelling() { // the awake model's dwell: woken again when it ends
		if r.dwellTimer == nil {
			r.dwellTimer = time.AfterFunc(r.dwell-time.Since(r.activeSince), func() {
				r.mu.Lock()
				r.dwellTimer = nil
				r.mu.Unlock()
				r.signal()
			})
		}
		r.mu.Unlock()
		return false
	}
	if r.inflight > 0 { // drain first: woken again when the last one ends
		r.mu.Unlock()
		return false
	}
	from := r.active
	r.mu.Unlock()

	sw := Switch{From: from, To: target, Start: time.Now()}
	err := r.handover(ctx, &sw)
	if sw.End.IsZero() {
		sw.End = time.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		sw.Err = err.Error()
		r.active = ""
		r.failModel(target, fmt.Errorf("router: waking %s for this request: %w", target, err))
	} else {
		r.active, r.activeSince = target, time.Now()
		sw.Released = r.release(target)
	}
	r.switches = append(r.switches, sw)
	return err == nil || ctx.Err() == nil
}

// handover puts from to sleep (if awake) and wakes to. A switch ends when
// to's wake is answered (End), not after the /is_sleeping confirmation
// that follows; one that started to ends when it is ready.
func (r *Router) handover(ctx context.Context, sw *Switch) error {
	if sw.From != "" {
		t, err := r.f.Run(ctx, sw.From, pool.Sleep(r.level))
		sw.SleepS = t.Took.Seconds()
		if err != nil {
			return err
		}
	}
	if err := r.f.MakeRoom(ctx, sw.To); err != nil {
		return err
	}
	if r.f.Asleep(sw.To) {
		t, err := r.f.Run(ctx, sw.To, pool.Wake())
		sw.WakeS = t.Took.Seconds()
		if err == nil {
			sw.End = t.Answered()
		}
		return err
	}
	if r.f.Running(sw.To) {
		return r.f.Activate(ctx, sw.To) // awake already
	}
	// Not started yet, or crashed: start it. The switch ends when it is
	// ready; the harness's reads after a start (its processes, its log,
	// GET /version, its memory: pool.Started) come after the switch.
	if err := r.f.Stop(sw.To); err != nil { // a crashed server's remains (its exit is kept: pool.Exits)
		return err
	}
	if _, err := r.f.Start(ctx, sw.To); err != nil {
		return err
	}
	sw.End = time.Now()
	return r.f.Started(ctx, sw.To)
}

// take removes model's waiting requests from the queue and returns them;
// the caller holds mu.
func (r *Router) take(model string) []*waiter {
	var taken []*waiter
	kept := r.queue[:0]
	for _, w := range r.queue {
		if w.model == model {
			taken = append(taken, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.queue[len(kept):])
	r.queue = kept
	r.noteDepth()
	return taken
}

// release lets every waiting request of model go (they count in flight
// from now); the caller holds mu. It returns how many.
func (r *Router) release(model string) int {
	ws := r.take(model)
	for _, w := range ws {
		r.inflight++
		close(w.ready)
	}
	return len(ws)
}

// failModel fails every waiting request of model with err; the caller holds mu.
func (r *Router) failModel(model string, err error) {
	for _, w := range r.take(model) {
		w.ready <- err
	}
}

func (r *Router) failAll(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.queue {
		w.ready <- fmt.Errorf("router stopped: %w", err)
	}
	r.queue = nil
	r.noteDepth()
}

func (r *Router) noteDepth() { r.depth = append(r.depth, Depth{At: time.Now(), Queued: len(r.queue)}) }

// Send sends a's request to its model: at once when that model is awake
// and nothing waits, else after the switch that wakes it; with the queue
// full (Options.MaxQueue waiting) at once with ErrShed, not sent. It
// implements load.Sender.
func (r *Router) Send(ctx context.Context, a load.Arrival) (load.Delivery, error) {
	r.mu.Lock()
	waited := false
	if a.Model != r.active || (len(r.queue) > 0 && !r.dwelling()) {
		if r.maxQueue > 0 && len(r.queue) >= r.maxQueue {
			r.shed++
			r.mu.Unlock()
			return load.Delivery{}, fmt.Errorf("%w (%d requests waiting, traffic.max_queue %d): not sent", ErrShed, r.maxQueue, r.maxQueue)
		}
		waited = true
		w := &waiter{model: a.Model, ready: make(chan error, 1)}
		r.queue = append(r.queue, w)
		r.noteDepth()
		r.mu.Unlock()
		r.signal()
		select {
		case err, ok := <-w.ready:
			if ok && err != nil {
				return load.Delivery{Waited: true}, err
			}
		case <-ctx.Done():
			r.mu.Lock()
			if r.drop(w) { // still queued: it never went out
				r.mu.Unlock()
				return load.Delivery{Waited: true}, fmt.Errorf("waiting for %s to wake: %w", a.Model, context.Cause(ctx))
			}
			r.mu.Unlock()
			if err, ok := <-w.ready; ok && err != nil { // failed meanwhile
				return load.Delivery{Waited: true}, err
			} // released meanwhile: it counts in flight, send it
		}
	} else {
		r.inflight++
		r.mu.Unlock()
	}
	defer func() {
		r.mu.Lock()
		r.inflight--
		idle := r.inflight == 0
		r.mu.Unlock()
		if idle {
			r.signal()
		}
	}()
	d := load.Delivery{Dispatched: time.Now(), Waited: waited}
	s, err := r.f.Requests().Stream(ctx, a.Model, a.Request)
	d.Stream = s
	return d, err
}

// drop removes w from the queue; false if it was not there.
func (r *Router) drop(w *waiter) bool {
	for i, x := range r.queue {
		if x == w {
			r.queue = append(r.queue[:i], r.queue[i+1:]...)
			r.noteDepth()
			return true
		}
	}
	return false
}

// Switches are the handovers so far.
func (r *Router) Switches() []Switch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Switch(nil), r.switches...)
}

// Shed is the number of requests refused with the queue full.
func (r *Router) Shed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.shed
}

// Depths is the queue depth after every change.
func (r *Router) Depths() []Depth {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Depth(nil), r.depth...)
}
