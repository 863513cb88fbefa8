package record

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queued is a Collector of facts handed to it: the pool's log, for tests.
type queued struct {
	mu sync.Mutex // guards f
	f  Facts      // handed to it since the last Collect
}

func (q *queued) add(f Facts) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.f.Merge(f)
}

func (q *queued) Collect() Facts {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.f
	q.f = Facts{}
	return out
}

// TestRegisterGathers: what a collector learned is in the record at the
// Recorder's next call, appended (events, first sleeps) or replacing
// (weights, references, the version) as it would be had it been written
// when learned; a version set between two gathers keeps that order.
func TestRegisterGathers(t *testing.T) {
	r := New([]string{"A", "B"}, nil)
	a, b := &queued{}, &queued{}
	r.Register(a)
	r.Register(b)
	t0 := time.Unix(100, 0)
	a.add(Facts{Events: []Event{{Time: t0, Label: "A", Kind: "sleep L1"}}, FirstSleeps: map[string][]FirstSleep{"A": {{Level: 1, SleepS: 9}}},
		Weights: map[string]Weight{"A": {GiB: 1}}, Versions: []ServerVersion{{"0.31.0", "13.0"}}})
	r.Read(func(raw *Raw) {
		require.Len(t, raw.Events, 1)
		assert.Equal(t, "sleep L1", raw.Events[0].Kind)
		assert.Equal(t, []FirstSleep{{Level: 1, SleepS: 9}}, raw.FirstSleeps["A"])
		assert.Equal(t, 1.0, raw.Weights["A"].GiB)
		assert.Equal(t, "vLLM 0.31.0 / CUDA 13.0", raw.Runtime)
	})
	a.add(Facts{Events: []Event{{Time: t0.Add(time.Second), Label: "A", Kind: "wake"}}, Weights: map[string]Weight{"A": {GiB: 2}}})
	b.add(Facts{FirstSleeps: map[string][]FirstSleep{"B": {{Level: 2, SleepS: 3}}}, References: map[string]Reference{"B": {Basis: "text"}}})
	a.add(Facts{Versions: []ServerVersion{{"0.32.0", "13.0"}}}) // learned before the call below
	r.SetServerVersion("0.33.0", "13.0")                        // after the facts above: it wins
	raw := r.Raw()
	assert.Equal(t, []string{"sleep L1", "wake"}, []string{raw.Events[0].Kind, raw.Events[1].Kind}, "appended in order")
	assert.Len(t, raw.FirstSleeps["A"], 1, "gathered once")
	assert.Equal(t, 2.0, raw.Weights["A"].GiB, "a later start's weight replaces")
	assert.Equal(t, "text", raw.References["B"].Basis)
	assert.Equal(t, "vLLM 0.33.0 / CUDA 13.0", raw.Runtime, "set after the start's: the later one")
	a.add(Facts{Versions: []ServerVersion{{"0.1.0-vllmsim", ""}, {"0.33.0", ""}}}) // two starts between two calls
	assert.True(t, r.Simulated(), "a vllmsim server gathered labels the run simulated, though a later start's version is not one")
	assert.Equal(t, "vLLM 0.33.0 (vllmsim) / simulated GPU", r.Raw().Runtime)
}
