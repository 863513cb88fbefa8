package kube

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// waitFor is a Track that only ends with its context, as a watch for a
// milestone still to come does.
func waitFor(ctx context.Context, what string) func() error {
	return func() error {
		<-ctx.Done()
		return fmt.Errorf("%s never seen: %w", what, context.Cause(ctx))
	}
}

func TestTrackerFailSaysTheCause(t *testing.T) {
	// The step fails on its own (a wrong /v1/models): that is the cause,
	// not the Tracks' echo of the cancellation.
	tr := NewTracker(context.Background())
	tr.Go(waitFor(tr.Context(), "ready"))
	own := errors.New("/v1/models lists [x]")
	assert.Equal(t, own, tr.Fail(own))

	// A Track failed first (a crashing container) and cancelled the step:
	// the step's error only echoes it, whichever Track started first.
	tr = NewTracker(context.Background())
	crash := errors.New("container exited with code 2")
	tr.Go(waitFor(tr.Context(), "routable"))
	tr.Go(func() error { return crash })
	<-tr.Context().Done()
	assert.Equal(t, crash, tr.Fail(fmt.Errorf("/health: %w", context.Cause(tr.Context()))))

	// The step's time ran out: every Track saw it, and the first-started
	// one says what was missing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	tr = NewTracker(ctx)
	tr.Go(waitFor(tr.Context(), "scheduled"))
	tr.Go(waitFor(tr.Context(), "routable"))
	<-tr.Context().Done()
	err := tr.Fail(context.Cause(tr.Context()))
	assert.ErrorContains(t, err, "scheduled never seen")
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	// The run was cancelled (an interrupt): that is what the step says.
	run, stop := context.WithCancelCause(context.Background())
	tr = NewTracker(run)
	tr.Go(waitFor(tr.Context(), "ready"))
	interrupted := errors.New("interrupted by interrupt")
	stop(interrupted)
	assert.Equal(t, interrupted, tr.Fail(context.Cause(tr.Context())))
}
