package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

// TestBenchStepsRecordApart: a benchmark step's environment writes its
// measurements (a cycle, a replay, a handoff, a release) to a scratch
// record of its own through that record's series, never to the run's and
// never through a series left unset (which would panic mid-benchmark).
func TestBenchStepsRecordApart(t *testing.T) {
	cfg := config.Default()
	run := record.New(cfg.ModelNames())
	env := NewEnv(cfg, Observed(pool.New(cfg, pool.Options{}), run), run, nil)
	b := NewSteps(env, func() Recording { return record.New(cfg.ModelNames()) }).bench()
	l := cfg.Models[0].Label
	b.w.Cycles.Add(l, record.Cycle{Level: 1, OK: true})
	b.w.Replays.Add(l, record.Replay{Stage: record.PhaseSleepL1})
	b.w.Release.Add(l, 90)
	b.w.Handoffs.Add(record.Handoff{From: l})
	b.rec.Read(func(raw *record.Raw) {
		assert.Len(t, raw.Cycles[l], 1)
		assert.Len(t, raw.Replays[l], 1)
		assert.Equal(t, []float64{90}, raw.Release[l])
		assert.Len(t, raw.Handoffs, 1)
	})
	run.Read(func(raw *record.Raw) {
		assert.Empty(t, raw.Cycles[l], "the run's record")
		assert.Empty(t, raw.Replays[l])
		assert.Empty(t, raw.Release[l])
		assert.Empty(t, raw.Handoffs)
	})
}
