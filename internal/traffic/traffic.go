// Package traffic is the protocol's traffic phase: open-loop arrivals for
// every model (from a trace, a dataset or an arrival process, read and
// checked before the run) through a wake-on-demand router, the same
// arrivals with every model awake (the ideal), and sleeps with requests in
// flight in each of vLLM's pause modes.
package traffic

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/energy"
	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/router"
	"github.com/wakebench/wakebench/internal/vllm"
)

// Phase runs the traffic phase on a protocol's pool and record: its
// window, failures and checks go through the protocol as every phase's do.
type Phase struct {
	cfg   config.Config
	pool  *pool.Pool
	proto *protocol.Env                // the runner: the phase's window, failures and checks go through it
	plan  *Plan                        // planned before the run; nil: when the phase runs
	out   record.Value[record.Traffic] // what it measured: the series of the record it writes
}

// New is the traffic phase on env, recording what it measured into out
// (the run record's Traffic).
func New(env *protocol.Env, out record.Value[record.Traffic]) *Phase {
	return &Phase{cfg: env.Config(), pool: env.Pool(), proto: env, out: out}
}

// Run runs the traffic phase and judges it (goodput, asleep p99, shed and
// failed requests, the pause modes' outcomes).
func (ph *Phase) Run(ctx context.Context, logf protocol.Logf) (protocol.Outcome[record.Traffic], error) {
	var crowd *record.HostLoad // the machine's load over the phase's window
	t, err := ph.run(ctx, logf, &crowd)
	return protocol.Judged(t, err, func() []record.Check { return ph.checks(t, crowd) })
}

// UseTrafficPlan makes plan the traffic phase's requests (NewPlan, before
// any server started) instead of planning them when it runs.
func (ph *Phase) UseTrafficPlan(plan Plan) { ph.plan = &plan }

// TrafficPlan is the traffic phase's requests as planned before the run
// (nil: planned when the phase runs).
func (ph *Phase) TrafficPlan() *Plan { return ph.plan }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Plan is the traffic phase's requests, every model's interleaved,
// and a line saying what they are. It is made once, before any server
// starts (NewPlan), so a bad trace or dataset fails the run at once.
type Plan struct {
	Arrivals []load.Arrival
	What     string
}

// NewPlan reads and checks the traffic phase's input: traffic.trace,
// or each model's arrival process at its rate over traffic.duration_s
// with its first traffic.warmup_requests marked warm-up (lengths from the
// workload, traffic.workload.dataset read here). budget is the time the
// run has before go test's -timeout guard stops it (0: unbounded): the
// phase, its ideal run again and traffic.min_dwell_s must fit in it, and
// no request may arrive later than a day. A plan of more than
// config.MaxArrivals requests, or of more than config.MaxPlanBytes with
// their results, is refused, as is a request beyond the models' context.
// Each error names the key.
func NewPlan(cfg config.Config, budget time.Duration) (Plan, error) {
	tr := cfg.Traffic
	span := time.Duration(config.MaxSpanS) * time.Second
	if budget > 0 {
		span = min(span, budget)
	}
	var plan Plan
	var err error
	key := "traffic.rate/rates/duration_s/warmup_requests"
	switch {
	case tr.Trace != "":
		key = "traffic.trace " + tr.Trace
		plan.Arrivals, err = readTrace(cfg, span)
		plan.What = "trace " + tr.Trace
	case tr.DurationS > 0:
		plan, err = arrivals(cfg)
	}
	if err != nil || len(plan.Arrivals) == 0 {
		return plan, err
	}
	if err := checkOpenFiles(tr.MaxInFlight, len(plan.Arrivals), load.OpenFileLimit()); err != nil {
		return Plan{}, err
	}
	last := plan.Arrivals[len(plan.Arrivals)-1].At
	runs := time.Duration(1)
	if tr.Ideal {
		runs = 2
	}
	switch need := last*runs + seconds(tr.MinDwellS); {
	case plan.Arrivals[0].At < 0 || last > span && budget == 0:
		return Plan{}, fmt.Errorf("%s: the last request arrives at %v: at most a day in one run", key, last)
	case budget > 0 && need >= budget:
		return Plan{}, fmt.Errorf("%s: the last request arrives at %v; with the ideal run again and traffic.min_dwell_s (%gs) the phase needs %v, but the run has %v before go test's -timeout stops it: shorten the traffic, or run with -timeout 0",
			key, last.Round(time.Millisecond), tr.MinDwellS, need.Round(time.Millisecond), budget)
	}
	return plan, nil
}

// checkOpenFiles refuses a plan whose requests in flight at once (at most
// maxInFlight, at most all n) do not fit in limit open files (0: unknown):
// load.CheckOpenFiles.
func checkOpenFiles(maxInFlight, n int, limit uint64) error {
	return load.CheckOpenFiles("traffic.max_in_flight", maxInFlight, fmt.Sprintf("with %d arrivals", n), min(maxInFlight, n), limit)
}

// arrivals are each model's arrival process at its rate over
// traffic.duration_s, the first traffic.warmup_requests marked warm-up.
func arrivals(cfg config.Config) (Plan, error) {
	tr := cfg.Traffic
	w := load.Workload{Kind: tr.Workload.Kind, PromptTokens: tr.Workload.PromptTokens, OutputTokens: tr.Workload.OutputTokens,
		MinPromptTokens: tr.Workload.MinPromptTokens, MinOutputTokens: tr.Workload.MinOutputTokens,
		SharedPrefixTokens: tr.Workload.SharedPrefixTokens}
	if w.Kind == load.Dataset {
		var err error
		if w.Samples, err = readDataset(cfg); err != nil {
			return Plan{}, err
		}
	}
	var lists [][]load.Arrival
	var desc []string
	for i, m := range cfg.Models {
		rate := tr.RateOf(m.Label)
		if rate == 0 {
			continue
		}
		n := tr.WarmupRequests + int(math.Round(rate*tr.DurationS))
		a := load.Arrivals{Process: tr.Arrivals, Rate: rate, Burstiness: tr.Burstiness, Seed: uint64(tr.Seed) + uint64(i)}
		offs, err := a.Offsets(n)
		if err != nil {
			return Plan{}, fmt.Errorf("traffic, model %s: %w", m.Label, err)
		}
		if n > 0 && (offs[n-1] < 0 || offs[n-1] > time.Duration(config.MaxSpanS)*time.Second) { // a rate so low the offsets overflow
			return Plan{}, fmt.Errorf("traffic.rates.%s %g: its %d requests would arrive over more than a day", m.Label, rate, n)
		}
		w.Seed = uint64(tr.Seed)*1000 + uint64(i)
		reqs, err := w.Requests(m.Name, n)
		if err != nil {
			return Plan{}, fmt.Errorf("traffic, model %s: %w", m.Label, err)
		}
		list := make([]load.Arrival, n)
		for k := range list {
			list[k] = load.Arrival{At: offs[k], Model: m.Label, Request: reqs[k], WarmUp: k < tr.WarmupRequests}
		}
		lists = append(lists, list)
		desc = append(desc, fmt.Sprintf("%s %g req/s", m.Label, rate))
	}
	if len(lists) == 0 {
		return Plan{}, nil // every rate 0: no traffic
	}
	what := fmt.Sprintf("%s arrivals over %gs (%s), %s lengths", tr.Arrivals, tr.DurationS, strings.Join(desc, ", "), tr.Workload.Kind)
	if tr.Arrivals == load.Gamma {
		what += fmt.Sprintf(", burstiness %g", tr.Burstiness)
	}
	return Plan{load.Merge(lists...), what}, nil
}

// readTrace reads traffic.trace (load.ReadTrace) into arrivals, each row's
// prompt made of its prompt_tokens words.
func readTrace(cfg config.Config, budget time.Duration) ([]load.Arrival, error) { // budget: the latest arrival
	f, err := os.Open(cfg.Traffic.Trace)
	if err != nil {
		return nil, fmt.Errorf("traffic.trace: %w", err)
	}
	defer f.Close()
	labels, _ := cfg.ModelNames()
	rows, err := load.ReadTrace(f, cfg.Traffic.Trace, load.TraceLimits{Labels: labels, ContextTokens: cfg.Protocol.ContextTokens,
		MaxRows: config.MaxArrivals, MaxSpan: budget, MaxBytes: config.MaxPlanBytes,
		RowBytes: func(pt, ot int) int64 { return config.RequestBytes(pt, ot, cfg.Traffic.Ideal) }})
	if err != nil {
		return nil, fmt.Errorf("traffic.trace %w", err)
	}
	out := make([]load.Arrival, len(rows))
	for i, r := range rows {
		m, _ := cfg.Model(r.Model)
		reqs, err := load.Workload{Kind: load.Fixed, PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens, Seed: uint64(i + 1)}.Requests(m.Name, 1)
		if err != nil {
			return nil, fmt.Errorf("traffic.trace row %d: %w", i+1, err)
		}
		out[i] = load.Arrival{At: r.At, Model: r.Model, Request: reqs[0]}
	}
	return load.Merge(out), nil
}

// readDataset reads traffic.workload.dataset (load.ReadDataset).
func readDataset(cfg config.Config) ([]load.Sample, error) {
	name := cfg.Traffic.Workload.Dataset
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("traffic.workload.dataset: %w", err)
	}
	defer f.Close()
	// Every prompt starts with the shared prefix: the entries have the rest.
	ctx := cfg.Protocol.ContextTokens - cfg.Traffic.Workload.SharedPrefixTokens
	s, err := load.ReadDataset(f, name, load.DatasetLimits{ContextTokens: ctx, MaxEntries: config.MaxArrivals})
	if err != nil {
		return nil, fmt.Errorf("traffic.workload.dataset %w", err)
	}
	return s, nil
}

// run runs the traffic phase: the arrivals through a wake-on-demand
// router (one model awake at a time, the others asleep at
// traffic.sleep_level), the same arrivals with every model awake (the
// ideal, where the GPU holds them all), then a sleep with requests in
// flight in each of traffic.in_flight_modes.
func (ph *Phase) run(ctx context.Context, logf protocol.Logf, crowd **record.HostLoad) (record.Traffic, error) {
	labels := ph.pool.Labels()
	end := ph.proto.Begin(ctx, record.PhaseTraffic, labels...)
	defer func() { *crowd = end() }()
	tr := ph.cfg.Traffic
	out := record.Traffic{Level: tr.SleepLevel, SharedJ: math.NaN(), IdealJ: math.NaN()}
	plan := ph.plan
	if plan == nil { // not planned before the run (a test running the phase alone)
		pl, err := NewPlan(ph.cfg, 0)
		if err != nil {
			return out, ph.proto.Fail(record.PhaseTraffic, "", "plan", err)
		}
		plan = &pl
	}
	arrivals, what := plan.Arrivals, plan.What
	out.Arrivals = what
	var errs []error
	defer func() { ph.out.Set(out) }()
	if len(arrivals) > 0 {
		if err := ph.proto.StartAll(ctx, record.PhaseTraffic, tr.SleepLevel); err != nil {
			return out, err
		}
		// Every correctness reference is taken before a model's first
		// sleep; here, before the router starts, not inside its first
		// switch (and the requests queued behind it).
		for _, l := range labels {
			if err := ph.pool.Oracle().EnsureReference(ctx, l); err != nil {
				return out, ph.proto.Fail(record.PhaseTraffic, l, "correctness reference", err)
			}
		}
		rt := router.NewWith(ph.pool, router.Options{Level: tr.SleepLevel, MinDwell: seconds(tr.MinDwellS), MaxQueue: tr.MaxQueue}, labels[0])
		out.Router = fmt.Sprintf("first come, first served, at most %d waiting (one more is shed); at most %d in flight in either run", tr.MaxQueue, tr.MaxInFlight)
		out.MaxQueue = tr.MaxQueue
		if tr.MinDwellS > 0 {
			out.Router += fmt.Sprintf(", a woken model kept awake at least %gs", tr.MinDwellS)
		}
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { rt.Run(rctx) })
		logf("traffic: %d requests, %s, through the router", len(arrivals), what)
		out.Start = time.Now()
		et := energy.StartTrace(ctx, ph.pool.Memory().Energy, energyEvery)
		opens := load.RunOpenBounded(ctx, rt, arrivals, seconds(ph.cfg.Timeouts.RequestS+2*ph.cfg.Timeouts.WakeS), tr.MaxInFlight)
		et.Stop(ctx)
		stop()
		wg.Wait()
		// The burst's connections, idle now, are closed: an open file each.
		ph.pool.Procs().CloseIdle()
		out.Requests = ph.trafficRequests(record.RunShared, opens)
		out.SharedJ, out.EnergyNote = runEnergy(et, out, record.RunShared)
		out.DurationS = out.SpanS(record.RunShared) // the router's shutdown is not part of the run
		if first, _ := out.Span(record.RunShared); !first.IsZero() {
			out.Start = first // per_second[] counts from the first arrival, over duration_s
		}
		for _, s := range rt.Switches() {
			out.Switches = append(out.Switches, record.RouterSwitch(s))
			if s.Err != "" {
				errs = append(errs, ph.proto.Fail(record.PhaseTraffic, s.To, fmt.Sprintf("router wake %s→%s", s.From, s.To), errors.New(s.Err)))
			}
		}
		for _, d := range rt.Depths() {
			out.Depth = append(out.Depth, record.QueueDepth(d))
		}
		logf("traffic: %d switches in %.1fs", len(out.Switches), out.DurationS)
		if n := rt.Shed(); n > 0 {
			logf("traffic: %d requests shed: the router's queue held traffic.max_queue (%d) already", n, tr.MaxQueue)
		}
		if ctx.Err() != nil { // stopped: what was measured is kept, nothing more is tried
			return out, errors.Join(append(errs, ph.proto.Fail(record.PhaseTraffic, "", "traffic through the router", context.Cause(ctx)))...)
		}
		if tr.Ideal {
			if note := ph.wakeAll(ctx); note != "" {
				out.IdealNote = note
				logf("traffic: ideal run not executed: %s", note)
			} else {
				et := energy.StartTrace(ctx, ph.pool.Memory().Energy, energyEvery)
				ideal := load.RunOpenBounded(ctx, direct{ph}, arrivals, seconds(ph.cfg.Timeouts.RequestS), tr.MaxInFlight) // as the router's run: a fair comparison
				et.Stop(ctx)
				ph.pool.Procs().CloseIdle()
				out.IdealRan = true
				out.Requests = append(out.Requests, ph.trafficRequests(record.RunIdeal, ideal)...)
				var note string
				out.IdealJ, note = runEnergy(et, out, record.RunIdeal)
				if out.EnergyNote == "" {
					out.EnergyNote = note
				}
			}
			if ctx.Err() != nil {
				return out, errors.Join(append(errs, ph.proto.Fail(record.PhaseTraffic, "", "ideal run", context.Cause(ctx)))...)
			}
		}
	}
	if tr.InFlightRequests > 0 && len(tr.InFlightModes) > 0 {
		// Pause modes came with the engine's pause machinery, and with it
		// the pause before every sleep (PR #34528, docs/vllm-api.md era b).
		// A server without /is_paused ignores mode=wait|keep, and sleeps
		// with its requests still running: the engine's next step reads
		// freed memory and it dies (vllm#28714 on v0.11.1, #15483). Every
		// mode is then off, with that cause, not tried and not failed: the
		// run keeps its server.
		modes, step, err := false, "activate", ph.pool.Activate(ctx, labels[0])
		if err == nil {
			step = "GET /is_paused"
			modes, err = ph.pool.SupportsPause(ctx, labels[0])
		}
		if err != nil {
			errs = append(errs, ph.proto.Fail(record.PhaseTraffic, labels[0], step, err))
		}
		for _, mode := range tr.InFlightModes {
			if err != nil || !modes { // not tried: nothing sent (Requests 0)
				off := OffBeforePauseFirst(mode)
				if err != nil {
					off = fmt.Sprintf("not tried: %s failed before it: %v", step, err)
				}
				out.InFlight = append(out.InFlight, record.InFlight{Mode: mode, Off: off})
				logf("traffic: sleep (mode %s) with requests in flight: off (%s)", mode, off)
				continue
			}
			f, err := ph.inFlight(ctx, labels[0], mode)
			out.InFlight = append(out.InFlight, f)
			logf("traffic: sleep (mode %s) with %d requests in flight: %d aborted, %d finished, %d held, %d errors; survived %v",
				mode, f.Requests, f.Aborted, f.Finished, f.Held, f.Errors, f.Survived)
			if err != nil {
				errs = append(errs, ph.proto.Fail(record.PhaseTraffic, labels[0], "sleep with requests in flight, mode "+mode, err))
				break
			}
		}
	}
	return out, errors.Join(errs...)
}

// energyEvery is how often the energy counter is read during a traffic
// run: a run's energy takes the counter at its first planned arrival and
// its last request done, each interpolated between the readings around it.
const energyEvery = 50 * time.Millisecond

// runEnergy is a run's energy over its span (record.Traffic.Span: first
// planned arrival → last request done, as duration_s), from the counter
// traced across it; NaN with why when there is none.
func runEnergy(et *energy.Trace, t record.Traffic, run string) (float64, string) {
	first, last := t.Span(run)
	if first.IsZero() || !last.After(first) {
		return math.NaN(), "the run has no requests"
	}
	return et.Between(first, last)
}

// direct sends straight to the model's server: the ideal run.
type direct struct{ ph *Phase }

func (d direct) Send(ctx context.Context, a load.Arrival) (load.Delivery, error) {
	del := load.Delivery{Dispatched: time.Now()}
	s, err := d.ph.pool.Requests().Stream(ctx, a.Model, a.Request)
	del.Stream = s
	return del, err
}

// wakeAll wakes every model without putting any to sleep, when the GPU's
// free memory holds their awake footprints; else it says why not.
func (ph *Phase) wakeAll(ctx context.Context) string {
	var need float64
	free := math.NaN()
	for _, l := range ph.pool.Labels() {
		if !ph.pool.Asleep(l) {
			continue
		}
		f, n, err := ph.pool.Memory().Headroom(ctx, l)
		if err != nil {
			return "GPU memory could not be read: " + err.Error()
		}
		free = f
		if !math.IsNaN(n) {
			need += n
		}
	}
	if !math.IsNaN(free) && need > free {
		return fmt.Sprintf("the models need %.2f GiB more awake, the GPU has %.2f GiB free", need, free)
	}
	for _, l := range ph.pool.Labels() {
		if ph.pool.Asleep(l) {
			if _, err := ph.pool.Run(ctx, l, pool.Wake()); err != nil {
				return "waking " + l + ": " + err.Error()
			}
		}
	}
	return ""
}

// trafficRequests turns a run's requests into the record's.
func (ph *Phase) trafficRequests(run string, opens []load.Open) []record.TrafficRequest {
	slo := load.SLO{TTFT: seconds(ph.cfg.Traffic.SLO.TTFTS), TPOT: seconds(ph.cfg.Traffic.SLO.TPOTS), E2E: seconds(ph.cfg.Traffic.SLO.E2ES)}
	out := make([]record.TrafficRequest, len(opens))
	for i, o := range opens {
		r := record.TrafficRequest{Run: run, Index: o.Index, Model: o.Model, WarmUp: o.WarmUp, Planned: o.Planned, Issued: o.Issued,
			Dispatched: o.Dispatched, FirstToken: o.FirstToken, Done: o.Done, Waited: o.Waited,
			PromptTokens: o.PromptTokens, OutputTokens: o.OutputTokens, TTFTS: o.TTFT().Seconds(), TPOTS: o.TPOT.Seconds(),
			E2ES: o.E2E().Seconds(), HasTPOT: o.HasTPOT, Good: slo.Good(o)}
		for _, g := range o.ITL {
			r.ITLS = append(r.ITLS, g.Seconds())
		}
		if o.Err != nil {
			r.Err = o.Err.Error()
			r.Shed = errors.Is(o.Err, router.ErrShed)
		}
		out[i] = r
	}
	return out
}

// OffBeforePauseFirst is why a sleep in mode with requests in flight is
// not tried on a server without /is_paused (a vLLM before PR #34528).
func OffBeforePauseFirst(mode string) string {
	why := "the server has no /is_paused: a vLLM before pause-first sleeps (PR #34528) sleeps with its requests still running, and its engine dies of it (CUDA illegal memory access after the sleep's 200: vllm#28714, #15483): not tried"
	if mode != vllm.SleepAbort {
		why += "; it ignores mode=" + mode + " too"
	}
	return why
}

// inFlight puts label to sleep in mode while traffic.in_flight_requests
// requests decode (as /metrics counts them running), wakes it, and says
// what each request saw and whether the server lived on.
func (ph *Phase) inFlight(ctx context.Context, label, mode string) (record.InFlight, error) {
	n := ph.cfg.Traffic.InFlightRequests
	f := record.InFlight{Mode: mode, Requests: n}
	if err := ph.pool.Activate(ctx, label); err != nil {
		return f, err
	}
	tokens := min(512, ph.cfg.Protocol.ContextTokens/2)
	type result struct {
		s   *vllm.Stream
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	// In mode abort the server ends these requests with finish_reason
	// abort by design (vLLM's EngineCore.pause_scheduler, PR #34528): so
	// counted, not as failed requests. In the other modes an abort fails.
	send := ph.pool.Requests().Stream
	if mode == vllm.SleepAbort {
		send = ph.pool.Requests().StreamAbortable
	}
	for i := range n {
		wg.Go(func() {
			s, err := send(ctx, label, vllm.CompletionRequest{Prompt: ph.cfg.Protocol.Prompt, MaxTokens: tokens, IgnoreEOS: true})
			results[i] = result{s, err}
		})
	}
	ph.waitRunning(ctx, label, n)
	st, sleepErr := ph.pool.Run(ctx, label, pool.SleepIn(1, mode))
	f.SleepS = st.Took.Seconds()
	answered := st.Answered()
	var woke time.Time
	if sleepErr == nil {
		ph.proto.Settle(ctx)
		woke = time.Now()
		if _, err := ph.pool.Run(ctx, label, pool.Wake()); err != nil {
			sleepErr = err
		}
	}
	wg.Wait()
	for _, r := range results {
		outcome := ""
		switch {
		case r.s != nil && r.s.FinishReason == "abort":
			f.Aborted++
			outcome = "aborted"
		case r.err != nil:
			f.Errors++
			outcome = "error: " + r.err.Error()
		case !woke.IsZero() && r.s.Last().After(woke):
			f.Held++
			outcome = "held"
		default:
			f.Finished++
			outcome = "finished"
			if !r.s.Last().Before(answered) && mode == vllm.SleepWait {
				outcome = "finished after /sleep answered"
			}
		}
		if want := documented(mode); !slices.Contains(want, outcome) {
			f.Unexpected++
			if f.Detail == "" {
				f.Detail = fmt.Sprintf("mode %s: a request %s (expected %s)", mode, outcome, strings.Join(want, " or "))
			}
		}
	}
	if sleepErr != nil {
		return f, sleepErr
	}
	if _, err := ph.pool.Requests().Probe(ctx, label); err != nil {
		f.Detail = "no answer after the wake: " + err.Error()
		return f, fmt.Errorf("after a sleep in mode %s with requests in flight: %w", mode, err)
	}
	f.Survived = true
	return f, nil
}

// documented is what each pause mode does to a request decoding when the
// sleep is sent (vLLM's EngineCore.pause_scheduler): abort ends it (or it
// finished first), wait lets it finish, keep holds it until the wake.
func documented(mode string) []string {
	switch mode {
	case vllm.SleepAbort:
		return []string{"aborted", "finished"}
	case vllm.SleepWait:
		return []string{"finished"}
	case vllm.SleepKeep:
		return []string{"held"}
	}
	return nil // not a mode: config refuses it
}

// waitRunning waits until label's server counts n requests running (or
// for at most 5 s, or until a metric read fails: then a short pause).
func (ph *Phase) waitRunning(ctx context.Context, label string, n int) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		m, err := ph.pool.Engine().Metrics(ctx, label)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			return
		}
		if m["vllm:num_requests_running"] >= float64(n) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checks: the traffic phase's thresholds; a goodput ratio missed while
// other processes crowded the machine over the phase (crowd) says so.
func (ph *Phase) checks(t record.Traffic, crowd *record.HostLoad) []record.Check {
	w := record.WindowName(record.PhaseTraffic, ph.pool.Labels()...)
	cs := protocol.NoteCrowded(trafficChecks(ph.cfg, t), ".goodput_ratio", map[string]record.Window{w: {Host: crowd}}, w)
	return ph.proto.Record(record.PhaseTraffic, cs...)
}
