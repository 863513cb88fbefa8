package kubephase

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
	tr := newTracker(context.Background())
	tr.goTrack(waitFor(tr.ctx, "ready"))
	own := errors.New("/v1/models lists [x]")
	assert.Equal(t, own, tr.fail(own))

	// A Track failed first (a crashing container) and cancelled the step:
	// the step's error only echoes it, whichever Track started first.
	tr = newTracker(context.Background())
	crash := errors.New("container exited with code 2")
	tr.goTrack(waitFor(tr.ctx, "routable"))
	tr.goTrack(func() error { return crash })
	<-tr.ctx.Done()
	assert.Equal(t, crash, tr.fail(fmt.Errorf("/health: %w", context.Cause(tr.ctx))))

	// The step's time ran out: every Track saw it, and the first-started
	// one says what was missing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	tr = newTracker(ctx)
	tr.goTrack(waitFor(tr.ctx, "scheduled"))
	tr.goTrack(waitFor(tr.ctx, "routable"))
	<-tr.ctx.Done()
	err := tr.fail(context.Cause(tr.ctx))
	assert.ErrorContains(t, err, "scheduled never seen")
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	// The run was cancelled (an interrupt): that is what the step says.
	run, stop := context.WithCancelCause(context.Background())
	tr = newTracker(run)
	tr.goTrack(waitFor(tr.ctx, "ready"))
	interrupted := errors.New("interrupted by interrupt")
	stop(interrupted)
	assert.Equal(t, interrupted, tr.fail(context.Cause(tr.ctx)))
}
