package record

import (
	"slices"
	"time"
)

// Runs of the traffic phase.
const (
	RunShared = "shared" // through the wake-on-demand router, one model awake at a time
	RunIdeal  = "ideal"  // the same arrivals, every model awake
)

// TrafficRequest is one request of the traffic phase.
type TrafficRequest struct {
	Run    string
	Index  int
	Model  string
	WarmUp bool
	// Planned, Issued (the generator sent it on), Dispatched (the router
	// let it go to the server), FirstToken, Done; zero when not reached.
	Planned, Issued, Dispatched, FirstToken, Done time.Time
	Waited                                        bool // its model was asleep (or being woken) when it arrived
	PromptTokens, OutputTokens                    int
	TTFTS, TPOTS, E2ES                            float64 // issued → first token; TPOT; issued → last token
	HasTPOT                                       bool
	ITLS                                          []float64
	Good                                          bool // succeeded within every SLO
	Err                                           string
	// Shed: the router's queue was full (traffic.max_queue), so it was
	// refused and never sent; Err says so. Not a failed request: counted
	// apart and gated by thresholds.max_shed_requests.
	Shed bool
}

// RouterSwitch is one handover the router made.
type RouterSwitch struct {
	From, To      string
	Start, End    time.Time
	SleepS, WakeS float64
	Released      int
	Err           string
}

// QueueDepth is the router's queue from At on.
type QueueDepth struct {
	At     time.Time
	Queued int
}

// InFlight is a sleep sent while requests decode, in one pause mode.
type InFlight struct {
	Mode     string `json:"mode"`
	Requests int    `json:"requests"`
	// What each request saw: aborted (finish_reason abort), finished before
	// the sleep answered, held (its last token after the wake), error.
	Aborted  int `json:"aborted"`
	Finished int `json:"finished"`
	Held     int `json:"held"`
	Errors   int `json:"errors"`
	// Unexpected counts requests whose outcome is not the mode's (abort:
	// aborted or finished first; wait: finished; keep: held).
	Unexpected int     `json:"unexpected"`
	SleepS     float64 `json:"sleep_s"`  // /sleep sent → answered (wait: includes the drain)
	Survived   bool    `json:"survived"` // the server answered a probe after the wake
	Detail     string  `json:"detail,omitempty"`
	// Off says why the mode was not tried (a server without pause modes,
	// or a step before it that failed): then nothing was sent (Requests
	// 0) and nothing else is measured.
	Off string `json:"off,omitempty"`
}

// Traffic is the traffic phase.
type Traffic struct {
	Start     time.Time
	DurationS float64 // of the shared run: first planned arrival → last request done
	Arrivals  string  // how the arrivals were made, in words
	Level     int     // the router's sleep level
	Router    string  // the router's policy, in words
	MaxQueue  int     // the router's queue bound: one more request is shed
	Requests  []TrafficRequest
	Switches  []RouterSwitch
	Depth     []QueueDepth
	IdealRan  bool
	IdealNote string // why the ideal run did not run
	// SharedJ and IdealJ are the GPU energy of each run over its span,
	// first planned arrival → last request done (J, every GPU, from the
	// energy counter); NaN when unknown, EnergyNote says why.
	SharedJ, IdealJ float64
	EnergyNote      string
	InFlight        []InFlight
}

func cloneTraffic(t *Traffic) *Traffic {
	if t == nil {
		return nil
	}
	c := *t
	c.Requests = slices.Clone(t.Requests)
	c.Switches = slices.Clone(t.Switches)
	c.Depth = slices.Clone(t.Depth)
	c.InFlight = slices.Clone(t.InFlight)
	return &c
}

// Span is a run's first planned arrival and its last request done
// (answered or failed), its warm-up included: the one span of its
// duration_s, its energy and its goodput (docs/traffic.md). Zero times
// without requests.
func (t Traffic) Span(run string) (first, last time.Time) {
	for _, r := range t.Requests {
		if r.Run != run {
			continue
		}
		if first.IsZero() || (!r.Planned.IsZero() && r.Planned.Before(first)) {
			first = r.Planned
		}
		if r.Done.After(last) {
			last = r.Done
		}
	}
	return first, last
}

// SpanS is Span in seconds, 0 without requests.
func (t Traffic) SpanS(run string) float64 {
	first, last := t.Span(run)
	if first.IsZero() || !last.After(first) {
		return 0
	}
	return last.Sub(first).Seconds()
}

// GoodputRPS is a run's good requests (every SLO met; the warm-up not
// counted) per second of its Span. Issue 50: it took the span from the
// first arrival after the warm-up, 6 % shorter than duration_s's.
func (t Traffic) GoodputRPS(run string) float64 {
	span := t.SpanS(run)
	if span == 0 {
		return 0
	}
	good := 0
	for _, r := range t.Requests {
		if r.Run == run && !r.WarmUp && r.Good {
			good++
		}
	}
	return float64(good) / span
}
