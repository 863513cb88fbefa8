package record

import "slices"

// Series is one kind of per-model measurement in the record and the one
// way to write it: what a phase records goes through the series it is
// handed (a field of Writers), as instrumented code holds a Counter and
// never the registry. Add takes the Recorder's lock.
type Series[T any] struct {
	r   *Recorder
	put func(raw *Raw, label string, v T) T
}

// Add records v for label and returns it as recorded (a replay with its
// ordinal in its stage).
func (s Series[T]) Add(label string, v T) T {
	defer s.r.lock()()
	return s.put(&s.r.raw, label, v)
}

// Log is a whole-run list of measurements (the handoffs, the soak's
// cycles), written only through Add.
type Log[T any] struct {
	r   *Recorder
	put func(raw *Raw, v T)
}

// Add appends v.
func (l Log[T]) Add(v T) {
	defer l.r.lock()()
	l.put(&l.r.raw, v)
}

// Value is a whole-run measurement set once (a later Set replaces it).
type Value[T any] struct {
	r   *Recorder
	put func(raw *Raw, v T)
}

// Set records v.
func (v Value[T]) Set(x T) {
	defer v.r.lock()()
	v.put(&v.r.raw, x)
}

// RequestCounter counts the run's executed inference requests (the pool's
// Observer writes it).
type RequestCounter struct{ r *Recorder }

// Done counts one executed request: answered (ok) or failed.
func (q RequestCounter) Done(ok bool) {
	defer q.r.lock()()
	q.r.raw.Requests.Executed++
	if ok {
		q.r.raw.Requests.Success++
	} else {
		q.r.raw.Requests.Failure++
	}
}

// Aborted counts one executed request that the server aborted as
// the harness asked it to: neither a success nor a failure.
func (q RequestCounter) Aborted() {
	defer q.r.lock()()
	q.r.raw.Requests.Executed++
	q.r.raw.Requests.AbortedByDesign++
}

// Writers are the record's typed series, one per kind of measurement:
// protocol's Env holds them for its phases (each writes the few it
// measures), the pool's Observer the request counter. What the servers'
// calls learn beside (events, first sleeps, weights, references, the
// version) the record gathers from the pool (Facts). The Recorder's own methods keep the run's frame
// (setup, phases and windows, plans, checks, failures, the end).
type Writers struct {
	Restarts      Series[Restart]
	Cycles        Series[Cycle] // failed ones too
	Perf          Series[PerfRun]
	Release       Series[float64]   // the percent a level-1 sleep released
	ReleasePerGPU Series[[]float64] // … per GPU (runs of several GPUs)
	Health        Series[Health]
	LostPrefix    Series[LostPrefix]
	Replays       Series[Replay] // Add sets the replay's Cycle: its ordinal in its stage
	Costs         Series[Cost]   // a model's state costs (replaces)
	Attribution   Series[string] // how a model's memory figures were attributed (replaces)

	Handoffs Log[Handoff] // failed ones too
	Soak     Log[SoakCycle]

	Fit             Value[Fit]
	Traffic         Value[Traffic]
	Kubernetes      Value[Kubernetes]
	Gate            Value[Gate]
	DevicePerGPU    Value[[][]float64] // every sample's used memory per GPU (a row per sample)
	RestartBaseline Value[string]      // what the run's starts were

	Requests RequestCounter
}

// appendTo is a per-model series appended to the map field reads.
func appendTo[T any](field func(*Raw) *map[string][]T) func(*Raw, string, T) T {
	return func(raw *Raw, label string, v T) T {
		m := field(raw)
		if *m == nil {
			*m = map[string][]T{}
		}
		(*m)[label] = append((*m)[label], v)
		return v
	}
}

// setIn is a per-model value set in the map field reads.
func setIn[T any](field func(*Raw) *map[string]T) func(*Raw, string, T) T {
	return func(raw *Raw, label string, v T) T {
		m := field(raw)
		if *m == nil {
			*m = map[string]T{}
		}
		(*m)[label] = v
		return v
	}
}

// Writers are r's series.
func (r *Recorder) Writers() Writers {
	return Writers{
		Restarts: Series[Restart]{r, appendTo(func(w *Raw) *map[string][]Restart { return &w.Restarts })},
		Cycles:   Series[Cycle]{r, appendTo(func(w *Raw) *map[string][]Cycle { return &w.Cycles })},
		Perf:     Series[PerfRun]{r, appendTo(func(w *Raw) *map[string][]PerfRun { return &w.Perf })},
		Release:  Series[float64]{r, appendTo(func(w *Raw) *map[string][]float64 { return &w.Release })},
		ReleasePerGPU: Series[[]float64]{r, func(w *Raw, label string, pcts []float64) []float64 {
			return appendTo(func(w *Raw) *map[string][][]float64 { return &w.ReleasePerGPU })(w, label, slices.Clone(pcts))
		}},
		Health: Series[Health]{r, func(w *Raw, label string, h Health) Health {
			h.Adapters = slices.Clone(h.Adapters)
			return appendTo(func(w *Raw) *map[string][]Health { return &w.Health })(w, label, h)
		}},
		LostPrefix: Series[LostPrefix]{r, appendTo(func(w *Raw) *map[string][]LostPrefix { return &w.LostPrefix })},
		Replays: Series[Replay]{r, func(w *Raw, label string, rp Replay) Replay {
			rp.Cycle = 1
			for _, o := range w.Replays[label] {
				if o.Stage == rp.Stage {
					rp.Cycle++
				}
			}
			return appendTo(func(w *Raw) *map[string][]Replay { return &w.Replays })(w, label, rp)
		}},
		Costs:       Series[Cost]{r, setIn(func(w *Raw) *map[string]Cost { return &w.Cost })},
		Attribution: Series[string]{r, setIn(func(w *Raw) *map[string]string { return &w.Attribution })},

		Handoffs: Log[Handoff]{r, func(w *Raw, h Handoff) { w.Handoffs = append(w.Handoffs, h) }},
		Soak:     Log[SoakCycle]{r, func(w *Raw, c SoakCycle) { w.Soak = append(w.Soak, c) }},

		Fit:             Value[Fit]{r, func(w *Raw, f Fit) { w.Fit = &f }},
		Traffic:         Value[Traffic]{r, func(w *Raw, t Traffic) { w.Traffic = &t }},
		Kubernetes:      Value[Kubernetes]{r, func(w *Raw, k Kubernetes) { w.Kubernetes = &k }},
		Gate:            Value[Gate]{r, func(w *Raw, g Gate) { w.Gate = &g }},
		DevicePerGPU:    Value[[][]float64]{r, func(w *Raw, used [][]float64) { w.DeviceUsedGiBPerGPU = used }},
		RestartBaseline: Value[string]{r, func(w *Raw, s string) { w.RestartBaseline = s }},

		Requests: RequestCounter{r},
	}
}
