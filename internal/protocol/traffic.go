package protocol

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/router"
	"github.com/wakebench/wakebench/internal/vllm"
)

// PhaseTraffic is the traffic phase.
const PhaseTraffic = "traffic"

// Arrivals are the traffic phase's requests, every model's interleaved:
// from traffic.trace, or each model's arrival process at its rate over
// traffic.duration_s with its first traffic.warmup_requests marked warm-up.
func Arrivals(cfg config.Config) ([]load.Arrival, string, error) {
	tr := cfg.Traffic
	if tr.Trace != "" {
		a, err := readTrace(cfg)
		return a, "trace " + tr.Trace, err
	}
	if tr.DurationS == 0 {
		return nil, "", nil
	}
	w := load.Workload{Kind: tr.Workload.Kind, PromptTokens: tr.Workload.PromptTokens, OutputTokens: tr.Workload.OutputTokens,
		MinPromptTokens: tr.Workload.MinPromptTokens, MinOutputTokens: tr.Workload.MinOutputTokens,
		SharedPrefixTokens: tr.Workload.SharedPrefixTokens}
	if w.Kind == load.Dataset {
		f, err := os.Open(tr.Workload.Dataset)
		if err != nil {
			return nil, "", fmt.Errorf("traffic.workload.dataset: %w", err)
		}
		defer f.Close()
		if w.Samples, err = load.ReadDataset(f, tr.Workload.Dataset); err != nil {
			return nil, "", fmt.Errorf("traffic.workload.dataset: %w", err)
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
			return nil, "", fmt.Errorf("traffic, model %s: %w", m.Label, err)
		}
		w.Seed = uint64(tr.Seed)*1000 + uint64(i)
		reqs, err := w.Requests(m.Name, n)
		if err != nil {
			return nil, "", fmt.Errorf("traffic, model %s: %w", m.Label, err)
		}
		list := make([]load.Arrival, n)
		for k := range list {
			list[k] = load.Arrival{At: offs[k], Model: m.Label, Request: reqs[k], WarmUp: k < tr.WarmupRequests}
		}
		lists = append(lists, list)
		desc = append(desc, fmt.Sprintf("%s %g req/s", m.Label, rate))
	}
	what := fmt.Sprintf("%s arrivals over %gs (%s), %s lengths", tr.Arrivals, tr.DurationS, strings.Join(desc, ", "), tr.Workload.Kind)
	if tr.Arrivals == load.Gamma {
		what += fmt.Sprintf(", burstiness %g", tr.Burstiness)
	}
	return load.Merge(lists...), what, nil
}

// readTrace reads traffic.trace: CSV rows t_s,model,prompt_tokens,output_tokens
// (a header row is skipped), the model a label.
func readTrace(cfg config.Config) ([]load.Arrival, error) {
	f, err := os.Open(cfg.Traffic.Trace)
	if err != nil {
		return nil, fmt.Errorf("traffic.trace: %w", err)
	}
	defer f.Close()
	rd := csv.NewReader(f)
	rd.FieldsPerRecord = 4
	rd.TrimLeadingSpace = true
	var out []load.Arrival
	for line := 1; ; line++ {
		row, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("traffic.trace: %w", err)
		}
		if line == 1 && row[0] == "t_s" {
			continue
		}
		t, err1 := strconv.ParseFloat(row[0], 64)
		pt, err2 := strconv.Atoi(row[2])
		ot, err3 := strconv.Atoi(row[3])
		m, ok := cfg.Model(row[1])
		if err := errors.Join(err1, err2, err3); err != nil || !ok || t < 0 || pt < 1 || ot < 1 {
			return nil, fmt.Errorf("traffic.trace %s:%d: want t_s ≥ 0, a model label, prompt_tokens ≥ 1, output_tokens ≥ 1; got %q", cfg.Traffic.Trace, line, strings.Join(row, ","))
		}
		reqs, _ := load.Workload{Kind: load.Fixed, PromptTokens: pt, OutputTokens: ot, Seed: uint64(line)}.Requests(m.Name, 1)
		out = append(out, load.Arrival{At: time.Duration(t * float64(time.Second)), Model: m.Label, Request: reqs[0]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("traffic.trace %s: no rows", cfg.Traffic.Trace)
	}
	return load.Merge(out), nil
}

// Traffic runs the traffic phase: the arrivals through a wake-on-demand
// router (one model awake at a time, the others asleep at
// traffic.sleep_level), the same arrivals with every model awake (the
// ideal, where the GPU holds them all), then a sleep with requests in
// flight in each of traffic.in_flight_modes.
func (p *Protocol) Traffic(ctx context.Context, logf Logf) (record.Traffic, error) {
	labels := p.fleet.Labels()
	defer p.begin(ctx, PhaseTraffic, labels...)()
	tr := p.cfg.Traffic
	out := record.Traffic{Level: tr.SleepLevel}
	arrivals, what, err := Arrivals(p.cfg)
	if err != nil {
		return out, p.Fail(PhaseTraffic, "", "plan", err)
	}
	out.Arrivals = what
	var errs []error
	defer func() { p.rec.SetTraffic(out) }()
	if len(arrivals) > 0 {
		if err := p.startAll(ctx, PhaseTraffic); err != nil {
			return out, err
		}
		// Every correctness reference is taken before a model's first
		// sleep; here, before the router starts, not inside its first
		// switch (and the requests queued behind it).
		for _, l := range labels {
			if err := p.fleet.EnsureReference(ctx, l); err != nil {
				return out, p.Fail(PhaseTraffic, l, "correctness reference", err)
			}
		}
		rt := router.NewWith(p.fleet, router.Options{Level: tr.SleepLevel, MinDwell: seconds(tr.MinDwellS)}, labels[0])
		out.Router = "first come, first served"
		if tr.MinDwellS > 0 {
			out.Router += fmt.Sprintf(", a woken model kept awake at least %gs", tr.MinDwellS)
		}
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { rt.Run(rctx) })
		logf("traffic: %d requests, %s, through the router", len(arrivals), what)
		out.Start = time.Now()
		opens := load.RunOpen(ctx, rt, arrivals, seconds(p.cfg.Timeouts.RequestS+2*p.cfg.Timeouts.WakeS))
		stop()
		wg.Wait()
		out.Requests = p.trafficRequests(record.RunShared, opens)
		out.DurationS = span(opens).Seconds() // the router's shutdown is not part of the run
		for _, s := range rt.Switches() {
			out.Switches = append(out.Switches, record.RouterSwitch(s))
			if s.Err != "" {
				errs = append(errs, p.Fail(PhaseTraffic, s.To, fmt.Sprintf("router wake %s→%s", s.From, s.To), errors.New(s.Err)))
			}
		}
		for _, d := range rt.Depths() {
			out.Depth = append(out.Depth, record.QueueDepth(d))
		}
		logf("traffic: %d switches in %.1fs", len(out.Switches), out.DurationS)
		if ctx.Err() != nil { // stopped: what was measured is kept, nothing more is tried
			return out, errors.Join(append(errs, p.Fail(PhaseTraffic, "", "traffic through the router", context.Cause(ctx)))...)
		}
		if tr.Ideal {
			if note := p.wakeAll(ctx); note != "" {
				out.IdealNote = note
				logf("traffic: ideal run not executed: %s", note)
			} else {
				t0 := time.Now()
				ideal := load.RunOpen(ctx, direct{p}, arrivals, seconds(p.cfg.Timeouts.RequestS))
				out.IdealS = time.Since(t0).Seconds()
				out.IdealRan = true
				out.Requests = append(out.Requests, p.trafficRequests(record.RunIdeal, ideal)...)
			}
			if ctx.Err() != nil {
				return out, errors.Join(append(errs, p.Fail(PhaseTraffic, "", "ideal run", context.Cause(ctx)))...)
			}
		}
	}
	if tr.InFlightRequests > 0 {
		for _, mode := range tr.InFlightModes {
			f, err := p.inFlight(ctx, labels[0], mode)
			out.InFlight = append(out.InFlight, f)
			logf("traffic: sleep (mode %s) with %d requests in flight: %d aborted, %d finished, %d held, %d errors; survived %v",
				mode, f.Requests, f.Aborted, f.Finished, f.Held, f.Errors, f.Survived)
			if err != nil {
				errs = append(errs, p.Fail(PhaseTraffic, labels[0], "sleep with requests in flight, mode "+mode, err))
				break
			}
		}
	}
	return out, errors.Join(errs...)
}

// span is a run's first planned arrival → its last request done (answered
// or failed); 0 without requests.
func span(opens []load.Open) time.Duration {
	var first, last time.Time
	for _, o := range opens {
		if first.IsZero() || (!o.Planned.IsZero() && o.Planned.Before(first)) {
			first = o.Planned
		}
		if o.Done.After(last) {
			last = o.Done
		}
	}
	if first.IsZero() || !last.After(first) {
		return 0
	}
	return last.Sub(first)
}

// direct sends straight to the model's server: the ideal run.
type direct struct{ p *Protocol }

func (d direct) Send(ctx context.Context, a load.Arrival) (load.Delivery, error) {
	del := load.Delivery{Dispatched: time.Now()}
	s, err := d.p.fleet.Stream(ctx, a.Model, a.Request)
	del.Stream = s
	return del, err
}

// wakeAll wakes every model without putting any to sleep, when the GPU's
// free memory holds their awake footprints; else it says why not.
func (p *Protocol) wakeAll(ctx context.Context) string {
	var need float64
	free := math.NaN()
	for _, l := range p.fleet.Labels() {
		if !p.fleet.Asleep(l) {
			continue
		}
		f, n, err := p.fleet.Headroom(ctx, l)
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
	for _, l := range p.fleet.Labels() {
		if p.fleet.Asleep(l) {
			if _, err := p.fleet.Wake(ctx, l); err != nil {
				return "waking " + l + ": " + err.Error()
			}
		}
	}
	return ""
}

// trafficRequests turns a run's requests into the record's.
func (p *Protocol) trafficRequests(run string, opens []load.Open) []record.TrafficRequest {
	slo := load.SLO{TTFT: seconds(p.cfg.Traffic.SLO.TTFTS), TPOT: seconds(p.cfg.Traffic.SLO.TPOTS), E2E: seconds(p.cfg.Traffic.SLO.E2ES)}
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
		}
		out[i] = r
	}
	return out
}

// inFlight puts label to sleep in mode while traffic.in_flight_requests
// requests decode (as /metrics counts them running), wakes it, and says
// what each request saw and whether the server lived on.
func (p *Protocol) inFlight(ctx context.Context, label, mode string) (record.InFlight, error) {
	n := p.cfg.Traffic.InFlightRequests
	f := record.InFlight{Mode: mode, Requests: n}
	if err := p.fleet.Activate(ctx, label); err != nil {
		return f, err
	}
	tokens := min(512, p.cfg.Protocol.ContextTokens/2)
	type result struct {
		s   *vllm.Stream
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := p.fleet.Stream(ctx, label, vllm.CompletionRequest{Prompt: p.cfg.Protocol.Prompt, MaxTokens: tokens, IgnoreEOS: true})
			results[i] = result{s, err}
		})
	}
	p.waitRunning(ctx, label, n)
	sent, d, sleepErr := p.fleet.SleepMode(ctx, label, 1, mode)
	f.SleepS = d.Seconds()
	answered := sent.Add(d)
	var woke time.Time
	if sleepErr == nil {
		p.settle(ctx)
		woke = time.Now()
		if _, err := p.fleet.Wake(ctx, label); err != nil {
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
	if _, err := p.fleet.Probe(ctx, label); err != nil {
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
func (p *Protocol) waitRunning(ctx context.Context, label string, n int) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		m, err := p.fleet.Metrics(ctx, label)
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

// TrafficChecks: the traffic phase's thresholds.
func (p *Protocol) TrafficChecks(t record.Traffic) []record.Check {
	return p.Record(gate.Traffic(p.cfg, t)...)
}
