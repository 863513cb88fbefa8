package report

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/stats"
)

// GiB is 2^30 bytes.
const GiB = 1 << 30

// Restart is one start: spawn → /health 200 → first token of a probe.
type Restart struct {
	Warm        bool
	ReadyS      float64
	FirstTokenS float64
}

// Cycle is one sleep/wake cycle.
type Cycle struct {
	Level         int
	OK            bool
	SleepS        float64 // sleep request sent → response
	WakeAPIS      float64 // first wake request sent → last wake step answered
	ToFirstTokenS float64 // first wake request sent → first token of the probe
	ResidualGiB   float64 // model's GPU memory while asleep; NaN when unknown
}

// PerfRun is one stage × concurrency of serving.
type PerfRun struct {
	Stage        string
	Concurrency  int
	Rounds       int
	Planned      int
	Success      int
	RoundsPassed int
	RoundTPS     []float64
	TTFT         []float64 // per successful request
	TPOT         []float64
	PromptTokens []int
}

// Handoff is one switch from one model to another.
type Handoff struct {
	From, To      string
	Initial       bool // the initial activation, not a counted handoff
	OK            bool
	SleepS        float64 // sleep of From: request → response
	WakeS         float64 // wake of To: request → response
	ToFirstTokenS float64 // sleep request sent → To's first token
}

// RSSSample is one host RSS reading of a server's process tree.
type RSSSample struct {
	Time  time.Time
	Label string
	Bytes uint64
}

// Event is a sleep or wake of a model, for the timeline.
type Event struct {
	Time  time.Time
	Label string
	Kind  string // "sleep L1", "sleep L2", "wake"
}

// Raw is everything a run measured, before summarising.
type Raw struct {
	Labels        []string          // model labels in config order
	Names         map[string]string // label → model name
	GPU, Runtime  string
	ContextTokens int
	KVGiB         float64
	Simulated     *Simulated
	GPUFacts      *GPUFacts
	MemorySource  string
	MemoryNote    string

	Restarts map[string][]Restart
	Cycles   map[string][]Cycle
	Planned  map[string]map[int]int // label → level → planned cycles
	Perf     map[string][]PerfRun
	Handoffs []Handoff
	Release  map[string][]float64 // label → percent released by each level-1 sleep
	Windows  map[string]Window
	Phases   []string
	Checks   []Check
	Failures []Failure
	Requests Requests

	Events        []Event
	DeviceUsedGiB []float64 // every device sample
	RSSPeak       map[string]uint64
	Weights       map[string]Weight // label → weight size, for the physical limits
	Started       time.Time
	Finished      time.Time // zero: Build takes the time it runs
}

// Recorder collects Raw from concurrent phases.
type Recorder struct {
	mu  sync.Mutex
	raw Raw
}

// NewRecorder starts a record for the labelled models.
func NewRecorder(labels []string, names map[string]string) *Recorder {
	return &Recorder{raw: Raw{
		Labels: labels, Names: names, Started: time.Now(),
		Restarts: map[string][]Restart{}, Cycles: map[string][]Cycle{}, Planned: map[string]map[int]int{},
		Perf: map[string][]PerfRun{}, Release: map[string][]float64{}, Windows: map[string]Window{},
		RSSPeak: map[string]uint64{}, Weights: map[string]Weight{},
	}}
}

// Update runs f on the raw record under the lock.
func (r *Recorder) Update(f func(*Raw)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.raw)
}

// Raw returns a copy of the record.
func (r *Recorder) Raw() Raw {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.raw
	c.Restarts = cloneMap(r.raw.Restarts)
	c.Cycles = cloneMap(r.raw.Cycles)
	c.Perf = cloneMap(r.raw.Perf)
	c.Release = cloneMap(r.raw.Release)
	c.Planned = maps.Clone(r.raw.Planned)
	c.Windows = maps.Clone(r.raw.Windows)
	c.RSSPeak = maps.Clone(r.raw.RSSPeak)
	c.Weights = maps.Clone(r.raw.Weights)
	c.Handoffs = slices.Clone(r.raw.Handoffs)
	c.Phases = slices.Clone(r.raw.Phases)
	c.Checks = slices.Clone(r.raw.Checks)
	c.Failures = slices.Clone(r.raw.Failures)
	c.DeviceUsedGiB = slices.Clone(r.raw.DeviceUsedGiB)
	c.Events = slices.Clone(r.raw.Events)
	return c
}

func cloneMap[V any](m map[string][]V) map[string][]V {
	out := make(map[string][]V, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// Fail records a failure.
func (r *Recorder) Fail(f Failure) { r.Update(func(w *Raw) { w.Failures = append(w.Failures, f) }) }

// Window records a phase window, widened by pad on both sides.
func (r *Recorder) Window(name string, start, end time.Time, pad time.Duration) {
	r.Update(func(w *Raw) {
		w.Windows[name] = Window{Start: unix(start.Add(-pad)), End: unix(end.Add(pad))}
	})
}

// Request counts one executed inference request.
func (r *Recorder) Request(ok bool) {
	r.Update(func(w *Raw) {
		w.Requests.Executed++
		if ok {
			w.Requests.Success++
		} else {
			w.Requests.Failure++
		}
	})
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// summary is stats.Summarize with the zero Summary (n = 0) for no samples.
func summary(xs []float64) stats.Summary {
	s, err := stats.Summarize(xs)
	if err != nil {
		return stats.Summary{}
	}
	return s
}

// Build summarises raw into the report. Status is PASS only when there is no
// failure and no failed check; the caller adds test failures as Failures.
func Build(raw Raw) Report {
	rep := Report{
		Runtime: raw.Runtime, GPU: raw.GPU, ContextTokens: raw.ContextTokens, KVGiB: raw.KVGiB,
		Models: map[string]*Model{}, Requests: raw.Requests, PercentileMethod: stats.PercentileMethod,
		RestartBaseline: "same host, warm local caches, servers started one at a time; not a cold node or container start",
		DRA:             "not executed; shared GPU within one host",
		Windows:         raw.Windows, Simulated: raw.Simulated, GPUFacts: raw.GPUFacts,
		Phases: raw.Phases, Checks: raw.Checks, Failures: raw.Failures,
		Started: unix(raw.Started), Finished: unix(raw.Finished),
	}
	if raw.Finished.IsZero() {
		rep.Finished = unix(time.Now())
	}
	if rep.Checks == nil {
		rep.Checks = []Check{}
	}
	if rep.Failures == nil {
		rep.Failures = []Failure{}
	}
	if rep.Phases == nil {
		rep.Phases = []string{}
	}
	if rep.Windows == nil {
		rep.Windows = map[string]Window{}
	}
	for _, l := range raw.Labels {
		m := &Model{Name: raw.Names[l], Sleep: map[string]*SleepLevel{}, Performance: []Perf{}}
		var ini, warm, iniReady, warmReady []float64
		for _, rs := range raw.Restarts[l] {
			if rs.Warm {
				warm, warmReady = append(warm, rs.FirstTokenS), append(warmReady, rs.ReadyS)
			} else {
				ini, iniReady = append(ini, rs.FirstTokenS), append(iniReady, rs.ReadyS)
			}
		}
		m.RestartInitial, m.RestartWarm = summary(ini), summary(warm)
		m.RestartReadyInitial, m.RestartReadyWarm = summary(iniReady), summary(warmReady)
		for _, level := range []int{1, 2} {
			sl := &SleepLevel{PlannedCycles: raw.Planned[l][level]}
			var sleep, wake, ftt, resid []float64
			for _, c := range raw.Cycles[l] {
				if c.Level != level || !c.OK {
					continue
				}
				sl.SuccessfulCycles++
				sleep, wake, ftt = append(sleep, c.SleepS), append(wake, c.WakeAPIS), append(ftt, c.ToFirstTokenS)
				if !math.IsNaN(c.ResidualGiB) {
					resid = append(resid, c.ResidualGiB)
				}
			}
			sl.SleepS, sl.WakeAPIS, sl.ToFirstTokenS, sl.ResidualGiB = summary(sleep), summary(wake), summary(ftt), summary(resid)
			m.Sleep[levelKey(level)] = sl
		}
		for _, p := range raw.Perf[l] {
			counts := slices.Compact(slices.Sorted(slices.Values(p.PromptTokens)))
			if counts == nil {
				counts = []int{}
			}
			m.Performance = append(m.Performance, Perf{
				Stage: p.Stage, Concurrency: p.Concurrency, Rounds: p.Rounds, Planned: p.Planned,
				Success: p.Success, RoundsPassed: p.RoundsPassed,
				OutputTPS: summary(p.RoundTPS), TTFTS: summary(p.TTFT), TPOTS: summary(p.TPOT),
				PromptTokenCounts: counts,
			})
			rep.Requests.PlannedPerformance += p.Planned
		}
		m.PhysicalLimits = limits(raw, l, m)
		rep.Models[l] = m
	}

	rep.Switch.Directions = map[string]*Direction{}
	dirs := map[string][3][]float64{}
	for _, h := range raw.Handoffs {
		if h.Initial {
			rep.Switch.InitialActivation++
			continue
		}
		rep.Switch.Handoffs++
		if !h.OK {
			continue
		}
		rep.Switch.Success++
		k := DirectionKey(h.From, h.To)
		d := dirs[k]
		d[0], d[1], d[2] = append(d[0], h.ToFirstTokenS), append(d[1], h.SleepS), append(d[2], h.WakeS)
		dirs[k] = d
	}
	for k, d := range dirs {
		rep.Switch.Directions[k] = &Direction{N: len(d[0]), ToFirstTokenS: summary(d[0]), SleepS: summary(d[1]), WakeS: summary(d[2])}
	}

	rep.Memory = Memory{PhysicalPeakGiB: summary(raw.DeviceUsedGiB), RSSPeakGiB: map[string]float64{},
		L1ReleaseFraction: map[string]stats.Summary{}, Source: raw.MemorySource, Note: raw.MemoryNote}
	for _, l := range raw.Labels {
		rep.Memory.RSSPeakGiB[l] = float64(raw.RSSPeak[l]) / GiB
		rep.Memory.L1ReleaseFraction[l] = summary(raw.Release[l])
	}

	rep.Status = "PASS"
	if len(rep.Failures) > 0 {
		rep.Status = "FAIL"
	}
	for _, c := range rep.Checks {
		if c.Verdict != "PASS" {
			rep.Status = "FAIL"
		}
	}
	return rep
}

// DirectionKey is the report key of a handoff direction, e.g. "A→B".
func DirectionKey(from, to string) string { return from + "→" + to }

func levelKey(level int) string { return strconv.Itoa(level) }
