package pool

import (
	"sync"

	"github.com/wakebench/wakebench/internal/record"
)

// facts is one view's log of what its calls learned beside what they
// returned: each sleep and wake, each server process's first sleep, the
// weight size and version each start logged, each model's correctness
// reference. The run's record gathers it (Pool.Collect), as a registry
// gathers a counter the instrumented code keeps.
type facts struct {
	mu sync.Mutex   // guards f
	f  record.Facts // learned since the last Collect
}

func (l *facts) add(g record.Facts) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Merge(g)
}

func (l *facts) event(e record.Event) { l.add(record.Facts{Events: []record.Event{e}}) }

func (l *facts) firstSleep(label string, fs record.FirstSleep) {
	l.add(record.Facts{FirstSleeps: map[string][]record.FirstSleep{label: {fs}}})
}

func (l *facts) weight(label string, w record.Weight) {
	l.add(record.Facts{Weights: map[string]record.Weight{label: w}})
}

func (l *facts) version(v, cuda string) {
	l.add(record.Facts{Versions: []record.ServerVersion{{Version: v, CUDA: cuda}}})
}

func (l *facts) reference(label string, ref record.Reference) {
	l.add(record.Facts{References: map[string]record.Reference{label: ref}})
}

// Collect hands over what this view's calls learned since its last
// Collect (record.Collector: a record that registers the view gathers
// them at each of its calls). Only that record calls it: what another
// caller collects the record never sees. A view no record registered
// keeps its log for its life (a bare New's, which the run wraps at once).
func (f *Pool) Collect() record.Facts {
	f.facts.mu.Lock()
	defer f.facts.mu.Unlock()
	out := f.facts.f
	f.facts.f = record.Facts{} // the maps handed over are the caller's alone
	return out
}
