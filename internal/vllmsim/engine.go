package vllmsim

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// token is one generated token handed to a request's stream.
type token struct {
	genToken
	finish string // "", "length", "stop" or "abort"
	at     time.Time
}

// seq is one request inside the engine.
type seq struct {
	ctx          context.Context
	id           string // the request's id (cmpl-…), for /abort_requests
	prompt       string // for the prefix cache
	adapter      string // its LoRA adapter ("" for the base model): its cached blocks are its own
	promptTokens int
	cached       int // prompt tokens the prefix cache held at its prefill
	maxTokens    int
	stopAt       int        // tokens after which the model emits EOS (≥ maxTokens when ignore_eos)
	gen          generator  // the tokens it generates
	out          chan token // buffered for every token: the engine never blocks on a slow reader
	emitted      int
	queuedAt     time.Time
	firstAt      time.Time // its first token: vLLM's decode time runs from it to the last
	recompute    bool      // frozen by a keep sleep: its prefill covers the tokens so far too
	aborted      bool      // ended by /abort_requests during its prefill (guarded by the engine's mu)
}

// engine is a continuous-batching scheduler over a simulated clock: each step
// admits every waiting sequence in one prefill step, or runs one decode step
// that gives every running sequence one token. Steps are scheduled on
// absolute deadlines so rounding does not accumulate.
type engine struct {
	phys  Physics
	clock clock
	m     *metrics

	deadline time.Time // end of the current step; only the run goroutine touches it

	// stepping is whether engine steps run (a request admitted or
	// decoding); only the run goroutine sets it, and calls onStepping
	// (when set before run starts) after each change.
	stepping   atomic.Bool
	onStepping func()

	mu        sync.Mutex
	kick      chan struct{} // signalled when work arrives or the engine is resumed
	waiting   []*seq
	running   []*seq
	admitting []*seq // in the prefill step now: neither waiting nor running
	paused    bool   // nothing is scheduled (an abort or keep pause, or asleep)
	// drain: no new request is admitted, the running ones go on (a wait
	// pause); idle is closed when none runs.
	drain bool
	idle  chan struct{}
	// slowdown multiplies every decode step's cost (1 by default; the
	// slow-decode-after-wake fault raises it at the first wake).
	slowdown float64

	// extraPrefill and extraDecode are added to every prefill step and to
	// every decode step after a sequence's first token (the slow=OP:S
	// fault); set before run starts, read only by it.
	extraPrefill, extraDecode time.Duration

	// readWeights (real-device mode; set before run starts) reads the weights once on the
	// device, as each step does: its time is the device's, the rest of the step is modelled
	// after it.
	readWeights func()

	prefix *prefixCache // nil: no prefix caching

	spec *spec // nil: no speculative decoding (set before run starts)
}

// spec is speculative decoding as its figures show it: each decode step
// of a sequence past its first token proposes k draft tokens, of which
// the target accepts a share (the profile's acceptance; spread evenly
// over the steps, so the figures are exact), emitting the accepted ones
// and one token of its own; the draft's pass adds draftCost of the step
// per draft token. Fault spec-off-after-wake (#52479: the draft model not
// reloaded after a level-2 wake) leaves the drafts rejected from the
// first level-2 wake on: the tokens are the same, the rate falls.
type spec struct {
	k         int
	accept    float64 // accepted share of the draft tokens
	draftCost float64 // a step's extra cost per draft token (a fraction of the step)
	carry     float64 // accepted tokens owed by the even spread (only the run goroutine touches it)
	off       atomic.Bool
}

// specDraftCost is a draft token's cost as a fraction of the target's
// decode step (simulated: a draft model or MTP head is a few layers).
const specDraftCost = 0.05

// accepted is how many of a step's k draft tokens the target accepts.
func (sp *spec) accepted() int {
	if sp.off.Load() {
		return 0
	}
	sp.carry += sp.accept * float64(sp.k)
	n := min(int(sp.carry), sp.k)
	sp.carry -= float64(n)
	return n
}

func newEngine(p Physics, c clock, m *metrics) *engine {
	return &engine{phys: p, clock: c, m: m, kick: make(chan struct{}, 1), slowdown: 1}
}

// slowDecode makes every later decode step factor times as long.
func (e *engine) slowDecode(factor float64) {
	e.mu.Lock()
	e.slowdown = factor
	e.mu.Unlock()
}

func (e *engine) signal() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// submit queues s; it is scheduled once the engine is awake.
func (e *engine) submit(s *seq) {
	s.out = make(chan token, s.maxTokens+1)
	s.queuedAt = time.Now()
	e.mu.Lock()
	e.waiting = append(e.waiting, s)
	e.m.setQueue(len(e.running), len(e.waiting))
	e.mu.Unlock()
	e.signal()
}

// Pause modes of /sleep (vLLM's PauseMode, since PR #34528).
const (
	modeAbort = "abort" // abort every request in flight (the default)
	modeWait  = "wait"  // admit nothing new; sleep once the running requests finish
	modeKeep  = "keep"  // freeze every request; they go on after the wake
)

// pause stops scheduling as a sleep in mode does (vLLM's
// EngineCore.pause_scheduler): abort ends every request in flight with
// finish_reason "abort"; keep freezes them; wait admits nothing new and
// returns, once the running requests have finished, when ctx ends first
// with false. Requests submitted later wait for resume.
func (e *engine) pause(ctx context.Context, mode string) bool {
	e.mu.Lock()
	switch mode {
	case modeKeep:
		e.paused = true
	case modeWait:
		e.drain = true
		if e.computing() {
			e.idle = make(chan struct{})
			idle := e.idle
			e.mu.Unlock()
			e.signal()
			select {
			case <-idle:
			case <-ctx.Done():
				e.mu.Lock()
				e.drain = false // the sleep was called off: admit again
				e.mu.Unlock()
				e.signal()
				return false
			}
			e.mu.Lock()
		}
		e.paused = true
	default:
		e.paused = true
		now := time.Now()
		for _, s := range append(e.running, e.waiting...) {
			s.out <- token{finish: "abort", at: now}
			close(s.out)
			e.m.finished("abort")
		}
		e.running, e.waiting = nil, nil
		e.abortAdmitting(nil, now) // in their prefill: left out when it ends
		e.m.setQueue(0, 0)
	}
	e.mu.Unlock()
	return true
}

// abort ends the requests in flight whose id is in ids (every one for
// none) with finish_reason "abort", as pause's abort does; it returns how
// many it ended.
func (e *engine) abort(ids []string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	n := 0
	drop := func(list []*seq) []*seq {
		out := list[:0]
		for _, s := range list {
			if len(ids) > 0 && !slices.Contains(ids, s.id) {
				out = append(out, s)
				continue
			}
			s.out <- token{finish: "abort", at: now}
			close(s.out)
			e.m.finished("abort")
			n++
		}
		clear(list[len(out):])
		return out
	}
	e.running, e.waiting = drop(e.running), drop(e.waiting)
	n += e.abortAdmitting(ids, now)
	e.m.setQueue(len(e.running), len(e.waiting))
	return n
}

// abortAdmitting ends the requests in their prefill step whose id is in
// ids (every one for none): the abort token now, left out of the running
// when the step ends. It returns how many it ended. Caller holds e.mu.
func (e *engine) abortAdmitting(ids []string, now time.Time) int {
	n := 0
	for _, s := range e.admitting {
		if !s.aborted && (len(ids) == 0 || slices.Contains(ids, s.id)) {
			s.aborted = true
			s.out <- token{finish: "abort", at: now}
			close(s.out)
			e.m.finished("abort")
			n++
		}
	}
	return n
}

// clearPrefixCache drops the prefix cache (the KV cache is gone or reset).
func (e *engine) clearPrefixCache() { e.prefix.clear() }

// busy reports whether any request is running or waiting.
func (e *engine) busy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.waiting) > 0 || e.computing()
}

// decoding reports whether a request whose client is still there is in
// a prefill or decoding: one whose client went away is dropped first, as
// the next step would.
func (e *engine) decoding() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropCancelled()
	return e.computing()
}

// computing reports whether a request is in a prefill or decoding (not
// one ended in its prefill). Caller holds e.mu.
func (e *engine) computing() bool {
	return len(e.running) > 0 || slices.ContainsFunc(e.admitting, func(s *seq) bool { return !s.aborted })
}

// resume schedules again. Requests frozen while running (keep) lost their
// KV cache with the sleep: they are prefilled again, prompt and tokens so
// far, before they go on.
func (e *engine) resume() {
	e.mu.Lock()
	e.paused, e.drain = false, false
	for _, s := range e.running {
		s.recompute = true
	}
	e.waiting = append(e.running, e.waiting...)
	e.running = nil
	e.mu.Unlock()
	e.signal()
}

// run schedules until ctx ends.
func (e *engine) run(ctx context.Context) {
	for {
		e.mu.Lock()
		idle := e.paused || (len(e.running) == 0 && (e.drain || len(e.waiting) == 0))
		if len(e.running) == 0 && e.idle != nil {
			close(e.idle) // a wait pause: nothing runs (finished, or its clients went away)
			e.idle = nil
		}
		e.mu.Unlock()
		if e.stepping.Swap(!idle) == idle && e.onStepping != nil {
			e.onStepping() // the server's power state follows
		}
		if idle {
			e.deadline = time.Time{} // the next step starts a fresh schedule
			select {
			case <-ctx.Done():
				return
			case <-e.kick:
				continue
			}
		}
		if !e.step(ctx) {
			return
		}
	}
}

// step runs one prefill or decode step; false when ctx ended.
func (e *engine) step(ctx context.Context) bool {
	e.mu.Lock()
	e.dropCancelled()
	var admit []*seq
	if !e.drain {
		admit, e.waiting = e.waiting, nil
		e.admitting = admit
	}
	tokens := 0 // the prefill's: each prompt less its cached prefix (set here, under mu: its answer reads it)
	for _, s := range admit {
		s.cached = e.prefix.hit(s.prompt, s.adapter, s.promptTokens)
		if e.prefix != nil && e.prefix.on {
			e.m.prefixLookup(s.promptTokens, s.cached)
		}
		tokens += s.promptTokens - s.cached
		if s.recompute {
			tokens += s.emitted
		}
	}
	batch, slowdown := len(e.running), e.slowdown
	// A decode step past some sequence's first token: the first token is
	// the prefill's in vLLM (GPUModelRunner.execute_model,
	// vllm/v1/worker/gpu_model_runner.py, samples every scheduled request
	// and discards the token only for a partial prefill), this
	// simulator's one step later.
	extra := time.Duration(0)
	if slices.ContainsFunc(e.running, func(s *seq) bool { return s.emitted > 0 }) {
		extra = e.extraDecode
	}
	e.mu.Unlock()

	if len(admit) > 0 {
		e.deviceRead()
		if !e.wait(ctx, e.phys.Prefill(tokens), e.extraPrefill) {
			return false
		}
		for _, s := range admit {
			e.prefix.add(s.prompt, s.adapter)
		}
		e.mu.Lock()
		e.admitting = nil
		admit = slices.DeleteFunc(admit, func(s *seq) bool { return s.aborted })
		e.running = append(e.running, admit...)
		if len(e.running) == 0 && e.idle != nil {
			close(e.idle) // a wait pause: every request in the prefill was aborted
			e.idle = nil
		}
		e.m.setQueue(len(e.running), len(e.waiting))
		e.mu.Unlock()
		e.m.prompt(tokens)
		return true
	}
	if batch == 0 {
		return true
	}
	e.deviceRead()
	cost := e.phys.DecodeStep(batch) * slowdown
	if e.spec != nil {
		cost *= 1 + e.spec.draftCost*float64(e.spec.k)
	}
	if !e.wait(ctx, cost, extra) {
		return false
	}
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.paused { // put to sleep during the step: pause already aborted everything
		return true
	}
	kept := e.running[:0]
	for _, s := range e.running {
		if !e.emit(s, now) {
			kept = append(kept, s)
		}
	}
	clear(e.running[len(kept):])
	e.running = kept
	e.m.setQueue(len(e.running), len(e.waiting))
	if len(e.running) == 0 && e.idle != nil {
		close(e.idle) // a wait pause: the last running request finished
		e.idle = nil
	}
	return true
}

// emit gives s its tokens of a decode step ending at now: one, or past
// its first token under speculative decoding one more per accepted draft
// token (vLLM's rejection sampler emits the accepted prefix and a token
// of the target's own). true when s finished. Caller holds e.mu.
func (e *engine) emit(s *seq, now time.Time) (finished bool) {
	n := 1
	if e.spec != nil && s.emitted > 0 {
		a := e.spec.accepted()
		e.m.draft(e.spec.k, a)
		n += a
	}
	for range n {
		t := token{genToken: s.gen.token(s.emitted), at: now}
		s.emitted++
		switch {
		case s.emitted >= s.maxTokens:
			t.finish = "length"
		case s.emitted >= s.stopAt:
			t.finish = "stop"
		}
		if s.emitted == 1 {
			s.firstAt = now
			e.m.ttft(now.Sub(s.queuedAt))
		}
		// The token's stats before the token: a client that reads
		// /metrics once its stream ended finds them counted.
		e.m.generated()
		if t.finish != "" {
			e.m.finished(t.finish)
			e.m.decodeTime(now.Sub(s.firstAt))
		}
		s.out <- t
		if t.finish != "" {
			close(s.out)
			return true
		}
	}
	return false
}

// deviceRead is a step's read of the weights on a real device (nothing without one); the
// modelled rest of the step starts when it is done.
func (e *engine) deviceRead() {
	if e.readWeights == nil {
		return
	}
	e.readWeights()
	if now := time.Now(); now.After(e.deadline) {
		e.deadline = now
	}
}

// wait ends the current step seconds (modelled) after the previous step's
// planned end (after now if the engine was idle), so timer overshoot does
// not accumulate over a stream: a late step is followed by a shorter one.
func (e *engine) wait(ctx context.Context, seconds float64, extra time.Duration) bool {
	if e.deadline.IsZero() {
		e.deadline = time.Now()
	}
	e.deadline = e.deadline.Add(e.clock.dur(seconds) + extra)
	return e.clock.sleepUntil(ctx, e.deadline)
}

// dropCancelled removes sequences whose client went away. Caller holds mu.
func (e *engine) dropCancelled() {
	keep := func(list []*seq) []*seq {
		out := list[:0]
		for _, s := range list {
			if s.ctx.Err() != nil {
				close(s.out)
				e.m.finished("abort")
				continue
			}
			out = append(out, s)
		}
		clear(list[len(out):])
		return out
	}
	e.running = keep(e.running)
	e.waiting = keep(e.waiting)
}

// clock scales modelled durations onto the wall clock.
type clock struct {
	scale float64
}

func (c clock) dur(seconds float64) time.Duration {
	return time.Duration(seconds * c.scale * float64(time.Second))
}

// sleep waits the scaled duration; false if ctx ended first.
func (c clock) sleep(ctx context.Context, seconds float64) bool {
	return c.sleepUntil(ctx, time.Now().Add(c.dur(seconds)))
}

// sleepUntil waits until t; false if ctx ended first.
func (c clock) sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
