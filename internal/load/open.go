package load

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"time"

	"math/rand/v2"

	"github.com/wakebench/wakebench/internal/vllm"
)

// Arrival processes of open-loop load.
const (
	Constant = "constant" // one request every 1/rate
	Poisson  = "poisson"  // exponential gaps of mean 1/rate
	Gamma    = "gamma"    // gamma gaps of mean 1/rate, shape burstiness (< 1 burstier than Poisson)
)

// Arrivals is when an open-loop load sends its requests: a process at a
// rate, as vllm bench serve's --request-rate and --burstiness (gaps drawn
// from a gamma distribution of shape burstiness and mean 1/rate; Poisson
// is burstiness 1), from a seed so a run can be repeated.
type Arrivals struct {
	Process    string
	Rate       float64 // requests per second
	Burstiness float64 // gamma shape; 0 means 1
	Seed       uint64
}

// Offsets are the send times of n requests from the start, the first at 0.
func (a Arrivals) Offsets(n int) ([]time.Duration, error) {
	if !(a.Rate > 0) || math.IsInf(a.Rate, 0) {
		return nil, fmt.Errorf("arrival rate %v: want requests per second > 0", a.Rate)
	}
	shape := a.Burstiness
	if shape == 0 {
		shape = 1
	}
	var gap func() float64
	switch a.Process {
	case Constant:
		gap = func() float64 { return 1 / a.Rate }
	case Poisson, Gamma:
		if a.Process == Poisson {
			shape = 1
		}
		if !(shape > 0) {
			return nil, fmt.Errorf("burstiness %v: want > 0 (1 is Poisson)", a.Burstiness)
		}
		r := rand.New(rand.NewPCG(a.Seed, 0x5eed))
		gap = func() float64 { return gammaRand(r, shape) / (shape * a.Rate) }
	default:
		return nil, fmt.Errorf("arrival process %q: want %q, %q or %q", a.Process, Constant, Poisson, Gamma)
	}
	out := make([]time.Duration, n)
	t := 0.0
	for i := range out {
		out[i] = time.Duration(t * float64(time.Second))
		t += gap()
	}
	return out, nil
}

// gammaRand draws from the gamma distribution of shape k and scale 1
// (Marsaglia and Tsang, ACM TOMS 26(3), 2000; for k < 1 boosted by
// U^(1/k)). The shape-1 case is the exponential.
func gammaRand(r *rand.Rand, k float64) float64 {
	if k == 1 {
		return r.ExpFloat64()
	}
	if k < 1 {
		return gammaRand(r, k+1) * math.Pow(r.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// Arrival is one planned request of an open-loop load.
type Arrival struct {
	At      time.Duration // from the start
	Model   string        // label of the model it is for
	Request vllm.CompletionRequest
	WarmUp  bool // sent, not counted in the figures
}

// Merge interleaves several models' arrivals by time (stable for ties).
func Merge(lists ...[]Arrival) []Arrival {
	var out []Arrival
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// Sender sends one arrival's request; a router in front of several
// models decides when (it may hold it while its model wakes).
type Sender interface {
	Send(ctx context.Context, a Arrival) (Delivery, error)
}

// Delivery is what became of a request a Sender sent.
type Delivery struct {
	Stream     *vllm.Stream // what the server streamed (nil if it never went out)
	Dispatched time.Time    // when it left the router for the server
	Waited     bool         // it was held: its model was asleep (or another was being woken)
}

// Open is one request of an open-loop load, as it went.
type Open struct {
	Arrival
	Index      int
	Planned    time.Time // start + At
	Issued     time.Time // when the generator handed it on (Issued − Planned: its schedule error)
	Dispatched time.Time // when it left the router for the server
	Waited     bool      // the router held it while its model woke
	Sent       time.Time // just before it was written to the server
	FirstToken time.Time // arrival of the first non-empty token
	Done       time.Time
	ITL        []time.Duration // gaps between token chunks
	TPOT       time.Duration
	HasTPOT    bool
	PromptTokens,
	OutputTokens int
	FinishReason string
	Err          error
}

// E2E is issued → last token (0 without one).
func (o Open) E2E() time.Duration {
	if o.Err != nil || o.Done.IsZero() {
		return 0
	}
	return o.Done.Sub(o.Issued)
}

// TTFT is issued → first token: for a request held while its model woke,
// the wait counts (what the user waited).
func (o Open) TTFT() time.Duration {
	if o.FirstToken.IsZero() {
		return 0
	}
	return o.FirstToken.Sub(o.Issued)
}

// SLO is a per-request service-level objective (0: not set).
type SLO struct {
	TTFT, TPOT, E2E time.Duration
}

// Good reports whether o succeeded within every SLO set (a request with
// one token has no TPOT and meets that one, as in vllm bench).
func (s SLO) Good(o Open) bool {
	if o.Err != nil {
		return false
	}
	return (s.TTFT == 0 || o.TTFT() <= s.TTFT) && (s.TPOT == 0 || !o.HasTPOT || o.TPOT <= s.TPOT) && (s.E2E == 0 || o.E2E() <= s.E2E)
}

// RunOpen sends arrivals at their times, each on its own goroutine through
// sender, and returns every request as it went, in arrival order. It never
// waits for an answer before the next send (open loop). ctx ending stops
// the sends; requests not issued are errors. Timeout bounds each request.
func RunOpen(ctx context.Context, sender Sender, arrivals []Arrival, timeout time.Duration) []Open {
	return RunOpenBounded(ctx, sender, arrivals, timeout, 0)
}

// RunOpenBounded is RunOpen with at most maxInFlight requests in flight at
// once (0: unbounded), as a client's connection pool bounds them (each
// holds a connection, an open file): an arrival beyond it is issued on
// time and waits for a request to end before it is sent, the wait part of
// its latency (TTFT and E2E count from its issue). Without a bound a high
// rate opens a file per request until the process's limit fails them.
func RunOpenBounded(ctx context.Context, sender Sender, arrivals []Arrival, timeout time.Duration, maxInFlight int) []Open {
	var slots chan struct{} // one per request in flight; nil: unbounded
	if maxInFlight > 0 {
		slots = make(chan struct{}, maxInFlight)
	}
	out := make([]Open, len(arrivals))
	var wg sync.WaitGroup
	start := time.Now()
	for i, a := range arrivals {
		o := &out[i]
		o.Arrival, o.Index, o.Planned = a, i, start.Add(a.At)
		if err := sleepUntil(ctx, o.Planned); err != nil {
			for j := i; j < len(out); j++ {
				out[j].Arrival, out[j].Index, out[j].Planned = arrivals[j], j, start.Add(arrivals[j].At)
				out[j].Err = fmt.Errorf("not sent: %w", err)
			}
			break
		}
		o.Issued = time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if slots != nil {
				select {
				case slots <- struct{}{}:
					defer func() { <-slots }()
				case <-ctx.Done():
					o.Done, o.Err = time.Now(), fmt.Errorf("not sent: waiting for one of %d requests in flight to end: %w", maxInFlight, context.Cause(ctx))
					return
				}
			}
			send(ctx, sender, o, timeout)
		}()
		// Let the new goroutine write its request now, not after the next
		// hold: parked on a timer that has expired by the time it blocks,
		// the generator is made runnable first again (the runtime readies an
		// expired timer's goroutine ahead of the queue), after its one turn.
		time.Sleep(time.Microsecond)
	}
	wg.Wait()
	return out
}

func send(ctx context.Context, sender Sender, o *Open, timeout time.Duration) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	d, err := sender.Send(ctx, o.Arrival)
	s := d.Stream
	o.Done, o.Dispatched, o.Waited, o.Err = time.Now(), d.Dispatched, d.Waited, err
	if s == nil {
		return
	}
	o.Sent, o.PromptTokens, o.OutputTokens, o.FinishReason = s.Sent, s.PromptTokens, s.OutputTokens, s.FinishReason
	if len(s.Tokens) > 0 {
		o.FirstToken, o.Done = s.Tokens[0], s.Tokens[len(s.Tokens)-1]
		for k := 1; k < len(s.Tokens); k++ {
			o.ITL = append(o.ITL, s.Tokens[k].Sub(s.Tokens[k-1]))
		}
	}
	if err == nil {
		o.TPOT, o.HasTPOT = s.TPOT()
	}
}

// The runtime's timers wake a sleeper up to a millisecond late (Linux,
// measured: p99 1.06 ms for a 100 µs timer): the generator sleeps on a
// timer until spin before a send time, polls the clock yielding the
// processor to the requests in flight until hold before it, then holds it
// without yielding, so a burst of answers being read cannot push the send
// late by more than one goroutine's turn.
const (
	spin = 1500 * time.Microsecond
	hold = 300 * time.Microsecond
)

// sleepUntil returns at t (or when ctx ends).
func sleepUntil(ctx context.Context, t time.Time) error {
	if d := time.Until(t) - spin; d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-ctx.Done():
			tm.Stop()
			return context.Cause(ctx)
		case <-tm.C:
		}
	}
	for time.Until(t) > hold {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		runtime.Gosched()
	}
	for time.Now().Before(t) {
	}
	return nil
}
