package pool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

var _ record.Collector = (*Pool)(nil)

// TestViewsKeepTheirOwnFacts: each view of the servers keeps what its own
// calls learned, Collect hands it over once, and a record that registered
// the view has it at its next call, the other view's not.
func TestViewsKeepTheirOwnFacts(t *testing.T) {
	cfg := config.Default()
	run := New(cfg, Options{})
	bench := run.Observed(Observer{})
	at := time.Unix(1, 0)
	run.facts.event(record.Event{Time: at, Label: "A", Kind: "sleep L1"})
	run.facts.firstSleep("A", record.FirstSleep{Level: 1, SleepS: 2})
	run.facts.version("0.33.0", "13.0")
	bench.facts.event(record.Event{Time: at, Label: "A", Kind: "wake"})
	bench.facts.weight("A", record.Weight{GiB: 3})
	bench.facts.reference("A", record.Reference{Basis: "text"})

	rec := record.New(cfg.ModelNames())
	rec.Register(run)
	raw := rec.Raw()
	assert.Equal(t, []record.Event{{Time: at, Label: "A", Kind: "sleep L1"}}, raw.Events, "the run's view's, not the benchmark's")
	assert.Equal(t, []record.FirstSleep{{Level: 1, SleepS: 2}}, raw.FirstSleeps["A"])
	assert.Empty(t, raw.Weights)
	assert.Empty(t, raw.References)
	assert.Equal(t, "vLLM 0.33.0 / CUDA 13.0", raw.Runtime)
	assert.Equal(t, record.Facts{}, run.Collect(), "handed over once")

	got := bench.Collect()
	assert.Equal(t, []record.Event{{Time: at, Label: "A", Kind: "wake"}}, got.Events)
	assert.Equal(t, map[string]record.Weight{"A": {GiB: 3}}, got.Weights)
	assert.Equal(t, "text", got.References["A"].Basis)
	assert.Empty(t, got.Versions)
}
