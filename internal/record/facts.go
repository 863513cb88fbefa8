package record

import "maps"

// Facts are what the servers' own calls learned that no caller records:
// each sleep and wake (the timeline's marks), each server process's first
// sleep, the weight size and version each start logged, each model's
// correctness reference. Package pool keeps them, one log a view of its
// servers, and never holds the record; the Recorder gathers them from each
// Collector registered with it, as a metrics registry gathers from the
// instrumented code that keeps its own counters.
type Facts struct {
	Events      []Event                 // in the order they happened
	FirstSleeps map[string][]FirstSleep // by model, in order
	Weights     map[string]Weight       // by model: its latest start's
	References  map[string]Reference    // by model: its latest reference
	// Versions are the versions the starts read, in order, each with the
	// CUDA driver's beside it.
	Versions []ServerVersion
}

// ServerVersion is what a server said of itself (GET /version; "" when it
// answered none) and the CUDA driver version NVML reports.
type ServerVersion struct{ Version, CUDA string }

// A Collector hands over the facts it learned since its last Collect.
// Collect must not call the Recorder: it runs under the Recorder's lock.
type Collector interface {
	Collect() Facts
}

// Register makes r gather c's facts: at each of its calls, before it
// reads or writes anything, r adds what c learned since, so the record is
// as it would be had c written each fact when it learned it (a run's
// version from a later Kubernetes phase still overrides a start's). The
// facts of several collectors are added collector by collector, each in
// the order it learned them; a run's record has one (its pool's view).
func (r *Recorder) Register(c Collector) {
	defer r.lock()()
	r.collectors = append(r.collectors, c)
}

// Merge adds g's facts after f's: events, first sleeps and versions
// appended, weights and references replacing.
func (f *Facts) Merge(g Facts) {
	f.Events = append(f.Events, g.Events...)
	for l, fs := range g.FirstSleeps {
		if f.FirstSleeps == nil {
			f.FirstSleeps = map[string][]FirstSleep{}
		}
		f.FirstSleeps[l] = append(f.FirstSleeps[l], fs...)
	}
	if len(g.Weights) > 0 {
		if f.Weights == nil {
			f.Weights = map[string]Weight{}
		}
		maps.Copy(f.Weights, g.Weights)
	}
	if len(g.References) > 0 {
		if f.References == nil {
			f.References = map[string]Reference{}
		}
		maps.Copy(f.References, g.References)
	}
	f.Versions = append(f.Versions, g.Versions...)
}

// gather adds what r's collectors learned since their last Collect; r.mu
// is held.
func (r *Recorder) gather() {
	for _, c := range r.collectors {
		w := &r.raw
		now := Facts{Events: w.Events, FirstSleeps: w.FirstSleeps, Weights: w.Weights, References: w.References}
		now.Merge(c.Collect())
		w.Events, w.FirstSleeps, w.Weights, w.References = now.Events, now.FirstSleeps, now.Weights, now.References
		for _, v := range now.Versions { // the record keeps no list: each sets the runtime in turn
			r.setServerVersion(v.Version, v.CUDA)
		}
	}
}
