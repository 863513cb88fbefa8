package protocol_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
)

// TestAStopIsNotTheModelsFailure: a run stopped from outside (a signal)
// in the middle of a phase files the step it interrupted as stopped, with
// the stop's reason, not as a failure of the model's step.
func TestAStopIsNotTheModelsFailure(t *testing.T) {
	_, rec, p := simPoolWith(t, nil, func(cfg *config.Config) { cfg.Protocol.SettleS = 0.2 })
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	_, err := protocol.Restart{Env: p}.Run(ctx, "A", t.Logf)
	require.NoError(t, err)
	time.AfterFunc(300*time.Millisecond, func() { cancel(record.Stopped{Reason: "interrupted by terminated"}) })
	_, err = protocol.Sleep{Env: p, Level: 1}.Run(ctx, "A", t.Logf)
	require.Error(t, err)
	fs := rec.Raw().Failures
	require.NotEmpty(t, fs)
	f := fs[len(fs)-1]
	assert.True(t, strings.HasPrefix(f.Step, "run stopped during "), "step %q", f.Step)
	assert.Contains(t, f.Step, " of A", "the step still says whose it was")
	assert.Empty(t, f.Model, "filed under no model: the stop is none's failure")
	assert.Contains(t, f.Error, "interrupted by terminated")
}
