package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
)

// TestAStopIsNotTheModelsFailure: a run stopped from outside (a signal)
// in the middle of a phase files the step it interrupted as stopped, with
// the stop's reason, not as a failure of the model's step, and judges none
// of its partial figures (protocol.Judge): no check blames the model. The
// same step failing for a reason of its own is judged.
func TestAStopIsNotTheModelsFailure(t *testing.T) {
	_, rec, p := simtest.Env(t, nil, func(cfg *config.Config) { cfg.Protocol.SettleS = 0.2 })
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	_, err := protocol.Restart{Env: p}.Run(ctx, "A", t.Logf)
	require.NoError(t, err)
	time.AfterFunc(300*time.Millisecond, func() { cancel(record.Stopped{Reason: "interrupted by terminated"}) })
	out, err := protocol.Sleep{Env: p, Level: 1}.Run(ctx, "A", t.Logf)
	require.Error(t, err)
	assert.Empty(t, out.Checks, "a stopped step is not judged")
	for _, c := range rec.Raw().Checks {
		assert.Equal(t, "restart.starts", c.Name, "only the restart's check is recorded, not the stopped sleep's")
	}
	judged := func() []record.Check { return []record.Check{{Name: "judged"}} }
	failed, _ := protocol.Judged(1, errors.New("sleep: HTTP 500"), judged)
	assert.Len(t, failed.Checks, 1, "a step failed for a reason of its own is judged")
	stopped, _ := protocol.Judged(1, fmt.Errorf("sleep: %w", record.Stopped{Reason: "x"}), judged)
	assert.Empty(t, stopped.Checks, "a wrapped stop is found")
	assert.Equal(t, 1, stopped.Value, "what it measured is kept")
	fs := rec.Raw().Failures
	require.NotEmpty(t, fs)
	f := fs[len(fs)-1]
	assert.True(t, strings.HasPrefix(f.Step, "run stopped during "), "step %q", f.Step)
	assert.Contains(t, f.Step, " of A", "the step still says whose it was")
	assert.Empty(t, f.Model, "filed under no model: the stop is none's failure")
	assert.Contains(t, f.Error, "interrupted by terminated")
}
