package kube

import (
	"context"
	"errors"
	"sync"
)

// Tracker runs Track calls in the background beside a step. The first
// Track to fail cancels the step's context with its error as the cause,
// so the step fails at once and says why.
type Tracker struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu   sync.Mutex    // guards n and errs
	n    int           // Tracks started
	errs map[int]error // each failed Track's error, by the order it started in
}

// NewTracker is a Tracker for a step running under ctx; the step uses the
// Tracker's Context from then on.
func NewTracker(ctx context.Context) *Tracker {
	c, cancel := context.WithCancelCause(ctx)
	return &Tracker{ctx: c, cancel: cancel}
}

// Context is the step's context: cancelled when a Track fails, with its
// error as the cause.
func (t *Tracker) Context() context.Context { return t.ctx }

// errStep cancels the Tracks of a step that failed on its own.
var errStep = errors.New("the step failed")

// Go runs f, a Track, in the background.
func (t *Tracker) Go(f func() error) {
	t.mu.Lock()
	i := t.n
	t.n++
	t.mu.Unlock()
	t.wg.Go(func() {
		if err := f(); err != nil {
			t.mu.Lock()
			if t.errs == nil {
				t.errs = map[int]error{}
			}
			t.errs[i] = err
			t.mu.Unlock()
			t.cancel(err)
		}
	})
}

// Wait waits for every Track and says why one failed (nil: none did): a
// Track that failed on its own (a crash, a refusal) cancelled the others,
// which only echo it; when the step's time ran out every Track saw it, and
// the first-started one says what was missing (never scheduled, never
// routable); when the run was cancelled, that.
func (t *Tracker) Wait() error {
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	var first error
	for i := range t.n {
		if first = t.errs[i]; first != nil {
			break
		}
	}
	if first == nil {
		return nil
	}
	if cause := context.Cause(t.ctx); cause != nil && cause != errStep && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return first
}

// Fail ends the step on err and says why it failed: err when the step
// failed on its own (what the Tracks return once cancelled is the echo),
// else what Wait says.
func (t *Tracker) Fail(err error) error {
	t.cancel(errStep) // a no-op if a Track, the timeout or the run ended the step first
	werr := t.Wait()
	if context.Cause(t.ctx) == errStep || werr == nil {
		return err
	}
	return werr
}
