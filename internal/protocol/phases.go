package protocol

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/vllm"
)

// Phase names, as the report's phases list and failures give them.
const (
	PhaseRestart    = "restart"
	PhaseBaseline   = "baseline"
	PhaseSleepL1    = "sleep-level1"
	PhaseSleepL2    = "sleep-level2"
	PhaseAfterWake  = "after-wake"
	PhaseSwitch     = "switch"
	stageBaseline   = "baseline"
	stageAfterWake  = "after-wake"
	restartFirstTok = "probe first token"
)

func (h *Harness) phaseRan(name string) {
	h.Rec.Update(func(r *report.Raw) {
		if !slices.Contains(r.Phases, name) {
			r.Phases = append(r.Phases, name)
		}
	})
}

func (h *Harness) settle(ctx context.Context) {
	t := time.NewTimer(seconds(h.cfg.Protocol.SettleS))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Restart measures 1 initial and protocol.restart_warm warm starts of label:
// spawn → /health 200 → first token of a probe. Other models are put to
// sleep first; the last start is left running and awake.
func (h *Harness) Restart(ctx context.Context, label string, logf Logf) ([]report.Restart, error) {
	defer h.begin(ctx, PhaseRestart, label)()
	var out []report.Restart
	for i := range 1 + h.cfg.Protocol.RestartWarm {
		rs, step, err := h.startOnce(ctx, label, i > 0)
		if err != nil {
			return out, h.Fail(PhaseRestart, label, step, err)
		}
		out = append(out, rs)
		h.Rec.Update(func(r *report.Raw) { r.Restarts[label] = append(r.Restarts[label], rs) })
		kind := "initial"
		if rs.Warm {
			kind = "warm"
		}
		logf("%s restart %s: ready %.3fs, first token %.3fs", label, kind, rs.ReadyS, rs.FirstTokenS)
	}
	return out, nil
}

// startOnce stops label's server if it runs, puts the other models to
// sleep, starts it and probes its first token.
func (h *Harness) startOnce(ctx context.Context, label string, warm bool) (report.Restart, string, error) {
	if err := h.stop(label, seconds(h.cfg.Timeouts.StopS)); err != nil {
		return report.Restart{}, "stop before restart", err
	}
	if err := h.makeRoom(ctx, label); err != nil {
		return report.Restart{}, "make room", err
	}
	ready, err := h.start(ctx, label)
	if err != nil {
		return report.Restart{}, "start", err
	}
	spawned := h.models[label].srv.Spawned
	s, err := h.probe(ctx, label)
	if err != nil {
		return report.Restart{}, restartFirstTok, err
	}
	return report.Restart{Warm: warm, ReadyS: ready.Seconds(), FirstTokenS: s.Tokens[0].Sub(spawned).Seconds()}, "", nil
}

// WarmStart measures one restart of label (after its first start, so warm),
// for benchmarks; it is not added to the report's restarts.
func (h *Harness) WarmStart(ctx context.Context, label string) (report.Restart, error) {
	if !h.running(label) {
		if err := h.Activate(ctx, label); err != nil {
			return report.Restart{}, err
		}
	}
	rs, step, err := h.startOnce(ctx, label, true)
	if err != nil {
		return rs, fmt.Errorf("restart %s: %s: %w", label, step, err)
	}
	return rs, nil
}

// ServeRound activates label and runs one serving round at concurrency c
// (protocol.requests_per_round requests), for benchmarks.
func (h *Harness) ServeRound(ctx context.Context, label string, c int) (load.Result, error) {
	if err := h.Activate(ctx, label); err != nil {
		return load.Result{}, err
	}
	m := h.models[label]
	res := load.Run(ctx, m.client, h.plan(m, c, 1))
	for _, q := range res.Requests {
		if q.Err != nil {
			return res, h.explain(m, fmt.Errorf("serve %s at concurrency %d: %w", label, c, q.Err))
		}
	}
	return res, nil
}

// plan is the protocol's serving load on m at concurrency c: fixed-length
// outputs (ignore_eos), each checked for garbage.
func (h *Harness) plan(m *model, c, rounds int) load.Plan {
	p := h.cfg.Protocol
	return load.Plan{Concurrency: c, Rounds: rounds, RequestsPerRound: p.RequestsPerRound,
		Request:  vllm.CompletionRequest{Model: m.cfg.Name, Prompt: p.Prompt, MaxTokens: p.MaxTokens, IgnoreEOS: true},
		Timeout:  seconds(h.cfg.Timeouts.RequestS),
		Validate: checkOutput}
}

// Serve runs the serving measurement at every configured concurrency on an
// awake label (others asleep) and records it under stage.
func (h *Harness) Serve(ctx context.Context, label, stage string, logf Logf) ([]report.PerfRun, error) {
	m, err := h.model(label)
	if err != nil {
		return nil, err
	}
	if m.asleep || m.srv == nil {
		return nil, h.Fail(stage, label, "serve", fmt.Errorf("model %s is not awake; refusing to send inference (a request to a sleeping vLLM hangs)", label))
	}
	p := h.cfg.Protocol
	var out []report.PerfRun
	for _, c := range p.Concurrency {
		plan := h.plan(m, c, p.Rounds)
		var res load.Result
		err := h.timeout(ctx, m, time.Duration(plan.Planned()+1)*plan.Timeout, func(ctx context.Context) error {
			res = load.Run(ctx, m.client, plan)
			return nil
		})
		run := report.PerfRun{Stage: stage, Concurrency: c, Rounds: p.Rounds, Planned: plan.Planned(), Success: res.Success()}
		var firstErr error
		for _, q := range res.Requests {
			if !q.Sent.IsZero() || q.Err == nil {
				h.Rec.Request(q.Err == nil)
			}
			if q.Err != nil {
				if firstErr == nil {
					firstErr = q.Err
				}
				continue
			}
			run.TTFT = append(run.TTFT, q.TTFT.Seconds())
			if q.HasTPOT {
				run.TPOT = append(run.TPOT, q.TPOT.Seconds())
			}
			run.PromptTokens = append(run.PromptTokens, q.PromptTokens)
		}
		for _, r := range res.Rounds {
			run.RoundTPS = append(run.RoundTPS, r.TPS)
			if r.Passed() {
				run.RoundsPassed++
			}
		}
		h.Rec.Update(func(r *report.Raw) { r.Perf[label] = append(r.Perf[label], run) })
		out = append(out, run)
		logf("%s %s conc=%d: %d/%d ok, rounds passed %d/%d, tok/s %v", label, stage, c, run.Success, run.Planned, run.RoundsPassed, run.Rounds, round2(run.RoundTPS))
		if err == nil && firstErr != nil {
			err = h.explain(m, fmt.Errorf("%d of %d requests failed, first: %w", run.Planned-run.Success, run.Planned, firstErr))
		}
		if err != nil {
			return out, h.Fail(stage, label, fmt.Sprintf("serve at concurrency %d", c), err)
		}
	}
	return out, nil
}

func round2(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Round(x*100) / 100
	}
	return out
}

// Baseline activates label and measures serving before any sleep.
func (h *Harness) Baseline(ctx context.Context, label string, logf Logf) ([]report.PerfRun, error) {
	defer h.begin(ctx, PhaseBaseline, label)()
	if err := h.Activate(ctx, label); err != nil {
		return nil, h.Fail(PhaseBaseline, label, "activate", err)
	}
	return h.Serve(ctx, label, stageBaseline, logf)
}

// measuredSleep sleeps label at level. When memory is sampled it reads the
// model's GPU memory just before the sleep and once asleep (after
// protocol.settle_s when settle is set, else at once), records the share
// released by a level-1 sleep, and returns the memory left asleep in GiB
// (NaN when memory is not sampled).
func (h *Harness) measuredSleep(ctx context.Context, label string, level int, settle bool) (time.Duration, float64, error) {
	m := h.models[label]
	var before float64
	var found bool
	if h.sampler != nil {
		h.refreshPIDs(m)
		s, err := h.sampler.SampleNow(ctx)
		if err != nil {
			return 0, nan, err
		}
		before, found = h.modelGiB(m, s)
	}
	d, err := h.sleep(ctx, label, level)
	if err != nil {
		return d, nan, err
	}
	if settle {
		h.settle(ctx)
	}
	if h.sampler == nil {
		return d, nan, nil
	}
	s, err := h.sampler.SampleNow(ctx)
	if err != nil {
		return d, nan, err
	}
	asleep, foundAsleep := h.modelGiB(m, s)
	if !found || !foundAsleep {
		h.Rec.Update(func(r *report.Raw) {
			if r.MemoryNote == "" {
				r.MemoryNote = fmt.Sprintf("the %s memory source listed none of model %s's processes %v (NVML in another PID namespace?): residual and release need per-process figures and are absent", h.cfg.Memory, label, m.pids)
			}
		})
		return d, nan, nil
	}
	if level == 1 {
		if pct := gpu.ReleasePercent(before, asleep); !math.IsNaN(pct) {
			h.Rec.Update(func(r *report.Raw) { r.Release[label] = append(r.Release[label], pct) })
		}
	}
	return d, asleep, nil
}

// SleepCycles runs protocol.sleep_l{1,2}_cycles sleep/wake cycles on label:
// sleep time, wake API time, wake → first token, residual GiB. A failed
// step ends the cycles (the server's state is then unknown).
func (h *Harness) SleepCycles(ctx context.Context, label string, level int, logf Logf) ([]report.Cycle, error) {
	phase := PhaseSleepL1
	n := h.cfg.Protocol.SleepL1Cycles
	if level == 2 {
		phase, n = PhaseSleepL2, h.cfg.Protocol.SleepL2Cycles
	}
	defer h.begin(ctx, phase, label)()
	h.Rec.Update(func(r *report.Raw) {
		if r.Planned[label] == nil {
			r.Planned[label] = map[int]int{}
		}
		r.Planned[label][level] += n
	})
	if err := h.Activate(ctx, label); err != nil {
		return nil, h.Fail(phase, label, "activate", err)
	}
	var out []report.Cycle
	for i := range n {
		c, step, err := h.cycle(ctx, label, level)
		out = append(out, c)
		h.Rec.Update(func(r *report.Raw) { r.Cycles[label] = append(r.Cycles[label], c) })
		if err != nil {
			return out, h.Fail(phase, label, fmt.Sprintf("cycle %d %s", i+1, step), err)
		}
		logf("%s level %d cycle %d/%d: sleep %.3fs, wake %.3fs, first token %.3fs, residual %.3f GiB",
			label, level, i+1, n, c.SleepS, c.WakeAPIS, c.ToFirstTokenS, c.ResidualGiB)
		h.settle(ctx)
	}
	return out, nil
}

// cycle is one sleep/wake cycle of an awake model: sleep, hold settle_s
// and read the residual, wake, probe the first token. On error it names the
// step that failed.
func (h *Harness) cycle(ctx context.Context, label string, level int) (report.Cycle, string, error) {
	c := report.Cycle{Level: level, ResidualGiB: nan}
	sd, resid, err := h.measuredSleep(ctx, label, level, true)
	c.SleepS, c.ResidualGiB = sd.Seconds(), resid
	if err != nil {
		return c, "sleep", err
	}
	tw := time.Now()
	wd, err := h.wake(ctx, label)
	c.WakeAPIS = wd.Seconds()
	if err != nil {
		return c, "wake", err
	}
	s, err := h.probe(ctx, label)
	if err != nil {
		return c, "first token after wake", err
	}
	c.ToFirstTokenS = s.Tokens[0].Sub(tw).Seconds()
	c.OK = true
	return c, "", nil
}

// Cycle activates label and measures one sleep/wake cycle at level, for
// benchmarks; it is not added to the report's cycles.
func (h *Harness) Cycle(ctx context.Context, label string, level int) (report.Cycle, error) {
	if err := h.Activate(ctx, label); err != nil {
		return report.Cycle{}, err
	}
	c, step, err := h.cycle(ctx, label, level)
	if err != nil {
		return c, fmt.Errorf("%s level %d: %s: %w", label, level, step, err)
	}
	return c, nil
}

// AfterWake puts label through one level-1 sleep and wake, then measures serving again.
func (h *Harness) AfterWake(ctx context.Context, label string, logf Logf) ([]report.PerfRun, error) {
	defer h.begin(ctx, PhaseAfterWake, label)()
	if err := h.Activate(ctx, label); err != nil {
		return nil, h.Fail(PhaseAfterWake, label, "activate", err)
	}
	if _, _, err := h.measuredSleep(ctx, label, 1, true); err != nil {
		return nil, h.Fail(PhaseAfterWake, label, "sleep", err)
	}
	if _, err := h.wake(ctx, label); err != nil {
		return nil, h.Fail(PhaseAfterWake, label, "wake", err)
	}
	return h.Serve(ctx, label, stageAfterWake, logf)
}

// handoff hands the GPU from one model (none: "") to another: sleep from at
// level 1, put any other awake model to sleep, wake to, probe its first
// token. On error it names the model and step that failed.
func (h *Harness) handoff(ctx context.Context, from, to string) (ho report.Handoff, who, step string, err error) {
	ho = report.Handoff{From: from, To: to}
	dir := report.DirectionKey(from, to)
	t0 := time.Now()
	if from != "" {
		sd, _, err := h.measuredSleep(ctx, from, 1, false)
		ho.SleepS = sd.Seconds()
		if err != nil {
			return ho, from, "sleep " + dir, err
		}
	}
	if err := h.makeRoom(ctx, to); err != nil {
		return ho, to, "make room", err
	}
	if h.models[to].asleep {
		wd, err := h.wake(ctx, to)
		ho.WakeS = wd.Seconds()
		if err != nil {
			return ho, to, "wake " + dir, err
		}
	}
	s, err := h.probe(ctx, to)
	if err != nil {
		return ho, to, "first token " + dir, err
	}
	ho.ToFirstTokenS = s.Tokens[0].Sub(t0).Seconds()
	ho.OK = true
	return ho, "", "", nil
}

// Handoff measures one handoff from → to (from awake, to running), for
// benchmarks; it is not added to the report's handoffs.
func (h *Harness) Handoff(ctx context.Context, from, to string) (report.Handoff, error) {
	for _, l := range []string{to, from} {
		if !h.running(l) {
			if err := h.Activate(ctx, l); err != nil {
				return report.Handoff{}, err
			}
		}
	}
	if err := h.Activate(ctx, from); err != nil {
		return report.Handoff{}, err
	}
	ho, who, step, err := h.handoff(ctx, from, to)
	if err != nil {
		return ho, fmt.Errorf("%s: %s: %w", who, step, err)
	}
	return ho, nil
}

// Switch starts every model, activates the first (the initial activation),
// then hands the GPU on protocol.handoffs times round-robin (A→B, B→A, …):
// sleep the active model at level 1, wake the next, first token.
func (h *Harness) Switch(ctx context.Context, logf Logf) ([]report.Handoff, error) {
	labels := h.order
	defer h.begin(ctx, PhaseSwitch, labels...)()
	if len(labels) < 2 {
		return nil, h.Fail(PhaseSwitch, "", "plan", fmt.Errorf("switching needs at least two models, the config has %d", len(labels)))
	}
	first := labels[0]
	// Every server up, the last one started left awake.
	for _, l := range labels[1:] {
		if !h.running(l) {
			if err := h.Activate(ctx, l); err != nil {
				return nil, h.Fail(PhaseSwitch, l, "start", err)
			}
		}
	}
	if !h.running(first) {
		// Start the first model with the others asleep, then put it back to
		// sleep so the initial activation is a real wake.
		if err := h.Activate(ctx, first); err != nil {
			return nil, h.Fail(PhaseSwitch, first, "start", err)
		}
		if _, err := h.sleep(ctx, first, 1); err != nil {
			return nil, h.Fail(PhaseSwitch, first, "sleep before initial activation", err)
		}
	}
	var out []report.Handoff
	// Initial activation: whoever is awake hands over to the first model.
	from := ""
	for _, l := range h.Awake() {
		if l != first {
			from = l
		}
	}
	hand := func(from, to string, initial bool) (report.Handoff, error) {
		ho, who, step, err := h.handoff(ctx, from, to)
		ho.Initial = initial
		out = append(out, ho)
		h.Rec.Update(func(r *report.Raw) { r.Handoffs = append(r.Handoffs, ho) })
		if err != nil {
			return ho, h.Fail(PhaseSwitch, who, step, err)
		}
		return ho, nil
	}
	if _, err := hand(from, first, true); err != nil {
		return out, err
	}
	cur := first
	for i := range h.cfg.Protocol.Handoffs {
		next := labels[(i+1)%len(labels)]
		ho, err := hand(cur, next, false)
		if err != nil {
			return out, err
		}
		logf("switch %d/%d %s: sleep %.3fs, wake %.3fs, first token %.3fs", i+1, h.cfg.Protocol.Handoffs,
			report.DirectionKey(cur, next), ho.SleepS, ho.WakeS, ho.ToFirstTokenS)
		cur = next
	}
	return out, nil
}
