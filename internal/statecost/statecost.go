// Package statecost is the state-cost phase (issue 25; docs/cost.md): each
// state of a model held for protocol.cost_dwell_s and measured (GPU memory
// per GPU, host memory of the server's process tree, GPU power from the
// energy counter), the energy of each transition over exactly its interval,
// the host memory a level-1 sleep needs transiently and what its wake gives
// back, the break-even per level; and, over every model, the node's fit
// table (Phase.Fit, package capacity's arithmetic).
package statecost

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/capacity"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/energy"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/server"
)

// Phase is the state-cost phase (record.PhaseStateCost) on a run's
// Env: what each state of a model costs, per model (Run), then the node's
// fit table over every model (Fit).
type Phase struct {
	*protocol.Env
	CostSeries record.Series[record.Cost] // each model's state costs: the series it writes
	FitTable   record.Value[record.Fit]   // the node's fit table (Fit)
}

// Run measures label's states and transitions and judges them
// (max_sleeping_power_w at each level where set).
func (p Phase) Run(ctx context.Context, label string, logf protocol.Logf) (protocol.Outcome[record.Cost], error) {
	c, err := p.run(ctx, label, logf)
	return protocol.Judged(c, err, func() []record.Check { return p.checks(label, c) })
}

// hostPoll is how often the level-1 sleep's transient host peak is polled.
const hostPoll = 5 * time.Millisecond

// peakDuring runs call while a goroutine reads the host memory every
// interval (the first read at once), and returns call's error and the
// largest RSS a read saw (0: none finished). A read under way when call
// returns is waited for: it began during the call.
func peakDuring(ctx context.Context, every time.Duration, read func() (server.HostMemory, error), call func() error) (peak uint64, err error) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex // guards top
	var top uint64
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if m, err := read(); err == nil {
				mu.Lock()
				top = max(top, m.RSS)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	err = call()
	close(done)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return top, err
}

func gib(b uint64) float64 { return float64(b) / record.GiB }

// newState is st with every figure unknown.
func newState(st string) record.StateCost {
	n := math.NaN()
	return record.StateCost{State: st, HostGiB: n, LockedGiB: n, PinnedGiB: n, SwapGiB: n, PowerW: n, DwellS: n}
}

// hold measures label in state st: its GPU memory per GPU and its
// server's host memory (outside the energy window), then the energy
// counter over cost_dwell_s. running false: the server is stopped (0 of
// each). It returns the state and the dwell's closing reading.
func (p Phase) hold(ctx context.Context, label, st string, m *energy.Meter, running bool) (record.StateCost, energy.Reading, error) {
	s := newState(st)
	perGPU, free, err := p.Pool().Memory().GPUGiB(ctx, label)
	if err != nil {
		return s, energy.Reading{}, err
	}
	if running {
		s.GPUGiB = perGPU
		h, err := p.Pool().Procs().Host(label)
		if err != nil {
			return s, energy.Reading{}, err
		}
		s.HostGiB, s.LockedGiB, s.PinnedGiB, s.SwapGiB = gib(h.RSS), gib(h.Locked), gib(h.Pinned), gib(h.Swap)
	} else {
		s.GPUGiB = make([]float64, len(free))
		s.HostGiB, s.LockedGiB, s.PinnedGiB, s.SwapGiB = 0, 0, 0, 0
	}
	a, err := m.Now(ctx)
	if err != nil {
		return s, a, err
	}
	tm := time.NewTimer(seconds(p.Config().Protocol.CostDwellS))
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return s, a, context.Cause(ctx)
	case <-tm.C:
	}
	b, err := m.Now(ctx)
	if err != nil {
		return s, b, err
	}
	s.PowerW = energy.PowerOver(a, b)
	if a.Known() {
		s.DwellS = b.Time().Sub(a.Time()).Seconds()
	}
	return s, b, nil
}

// costRun is one model's measurement under way.
type costRun struct {
	p     Phase
	ctx   context.Context
	label string
	m     *energy.Meter
	c     record.Cost
	awake record.StateCost
}

// run measures label's states (awake idle, asleep at level 1 and 2,
// KV released where the server supports it, stopped) and transitions
// (each sleep, wake and a cold start), records them and returns them;
// protocol.cost_dwell_s 0 turns it off (nothing measured or recorded).
// It leaves label awake.
func (p Phase) run(ctx context.Context, label string, logf protocol.Logf) (record.Cost, error) {
	defer p.Begin(ctx, record.PhaseStateCost, label)()
	if p.Config().Protocol.CostDwellS == 0 {
		return record.Cost{}, nil
	}
	r := &costRun{p: p, ctx: ctx, label: label, m: energy.NewMeter(p.Pool().Memory().Energy),
		c: record.Cost{DwellS: p.Config().Protocol.CostDwellS, SleepPeakHostGiB: math.NaN(), WakeReturnedHostGiB: math.NaN(),
			ReleaseHostEnv: os.Getenv("VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY")}}
	step, err := r.run()
	r.c.EnergyNote = r.m.Off()
	if r.c.EnergyNote == "" {
		r.c.EnergyNote = r.m.Bad() // the figures across the anomaly are NaN
	}
	if err == nil {
		r.c.BreakEvens = breakEvens(r.c)
	}
	p.CostSeries.Add(label, r.c)
	if err != nil {
		return r.c, p.Fail(record.PhaseStateCost, label, step, err)
	}
	for _, s := range r.c.States {
		logf("%s %s: GPU %s GiB, host %.3f GiB (locked %.3f, pinned %.3f), %.1f W%s", label, s.State, fmtGiB(s.GPUGiB), s.HostGiB, s.LockedGiB, s.PinnedGiB, s.PowerW, skipped(s.Skipped))
	}
	for _, t := range r.c.Transitions {
		logf("%s %s: %.3f s, %.2f J", label, t.Op, t.S, t.J)
	}
	if r.c.EnergyNote != "" {
		logf("%s: power or energy figures missing: %s", label, r.c.EnergyNote)
	}
	return r.c, nil
}

func skipped(why string) string {
	if why == "" {
		return ""
	}
	return " (skipped: " + why + ")"
}

// run measures every state in turn; on error it names the step. The
// server is stopped and started cold first, so that awake, level 2 and
// the KV release are measured in a process that never slept at level 1:
// vLLM keeps a level-1 sleep's pinned weight copy for the process's life
// (pinned by cumem.py, cached by PyTorch's host allocator: pytorch/pytorch#275), and a process that had slept at level 1 would count it in
// every later state's host memory. Level 1 comes last. The record holds
// the states and transitions in their usual order.
func (r *costRun) run() (string, error) {
	p, ctx, label := r.p, r.ctx, r.label
	// Running, the others asleep, as in every state after. A model the
	// run has not started yet (the phase run alone) is started here only
	// to be stopped: on the simulator no device exists to read before a
	// server starts; on real vLLM that is one start more.
	if err := p.Pool().Activate(ctx, label); err != nil {
		return "activate", err
	}
	defer r.ordered()
	start, step, err := r.stoppedAndCold()
	if err != nil {
		return step, err
	}
	p.Settle(ctx)
	awake, end, err := p.hold(ctx, label, record.StateAwake, r.m, true)
	r.awake = awake
	r.c.States = append(r.c.States, awake)
	r.c.Transitions = append(r.c.Transitions, start.transition(awake.PowerW))
	if err != nil {
		return "hold awake", err
	}
	if end, err = r.sleepWake(2, end); err != nil {
		return "level 2", err
	}
	if end, err = r.kvReleased(end); err != nil {
		return "KV released", err
	}
	if _, err = r.sleepWake(1, end); err != nil {
		return "level 1", err
	}
	return "", nil
}

// rank is a state's or transition's place in the record's order.
func rank(name string) int {
	for _, order := range [][]string{record.States(), record.Ops()} {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
	}
	return math.MaxInt
}

// ordered puts the states and transitions measured in the record's order.
func (r *costRun) ordered() {
	slices.SortStableFunc(r.c.States, func(a, b record.StateCost) int { return cmp.Compare(rank(a.State), rank(b.State)) })
	slices.SortStableFunc(r.c.Transitions, func(a, b record.Transition) int { return cmp.Compare(rank(a.Op), rank(b.Op)) })
}

// sleepWake puts the awake model to sleep at level (at level 1 with its
// host memory polled while the call runs), holds the state, wakes it and
// probes its first token; after the first token, the host memory the wake
// gave back (level 1). prev is the awake dwell's closing reading.
func (r *costRun) sleepWake(level int, prev energy.Reading) (energy.Reading, error) {
	p, ctx, label := r.p, r.ctx, r.label
	before, err := p.Pool().Procs().Host(label)
	if err != nil {
		return prev, err
	}
	var sent time.Time
	var took time.Duration
	// The readings around the sleep's energy are taken last before it is
	// sent (after the pool's checks, the host headroom's among them: the
	// awake power covers prev → there) and at its answer, before its
	// verification reads (pool.Transition.Verify): the overhangs charged at
	// the neighbouring states' power are those readings' alone.
	var e0, e1 energy.Reading
	sleep := func() error {
		pend, err := p.Pool().Prepare(ctx, label, pool.Sleep(level))
		if err != nil {
			return err
		}
		if e0, err = r.m.Now(ctx); err != nil {
			return err
		}
		t, err := pend.Send(ctx)
		sent, took = t.Sent, t.Took
		if err != nil {
			return err
		}
		e1, err = r.m.Now(ctx)
		if verr := t.Verify(ctx); verr != nil {
			return verr
		}
		return err
	}
	// The correctness reference a model's first sleep takes (its probe
	// set's inference) comes before the reading that opens the sleep's
	// energy: it is no part of the sleep, and the overhang between the
	// reading and /sleep is charged at the awake idle power.
	if err := p.Pool().Oracle().EnsureReference(ctx, label); err != nil {
		return prev, err
	}
	if level == 1 {
		var peak uint64
		peak, err = peakDuring(ctx, hostPoll, func() (server.HostMemory, error) { return p.Pool().Procs().Host(label) }, sleep)
		if peak > 0 {
			r.c.SleepPeakHostGiB = gib(max(peak, before.RSS) - before.RSS)
		}
	} else {
		err = sleep()
	}
	if err != nil {
		return prev, err
	}
	p.Settle(ctx)
	st := record.StateL1
	if level == 2 {
		st = record.StateL2
	}
	asleep, end, err := p.hold(ctx, label, st, r.m, true)
	r.c.States = append(r.c.States, asleep)
	if err != nil {
		return end, err
	}
	r.c.Transitions = append(r.c.Transitions, record.Transition{Op: fmt.Sprintf("sleep-l%d", level), S: took.Seconds(),
		J: energy.TransitionJ(e0, e1, sent, sent.Add(took), r.awake.PowerW, asleep.PowerW)})
	// The probe and the energy reading after its first token go out at
	// the wake's answer; the wake's verification reads come after them.
	var e2 energy.Reading
	var eerr error
	wake, err := p.Pool().Do(ctx, label, pool.Wake())
	if err != nil {
		return end, err
	}
	s, perr := p.Pool().Requests().FirstToken(ctx, label)
	if perr == nil {
		e2, eerr = r.m.Now(ctx)
	}
	if err := wake.Verify(ctx); err != nil {
		return end, err
	}
	wsent := wake.Sent
	if perr != nil {
		return end, fmt.Errorf("first token after wake: %w", perr)
	}
	if eerr != nil {
		return end, eerr
	}
	first := s.Tokens[0]
	r.c.Transitions = append(r.c.Transitions, record.Transition{Op: fmt.Sprintf("wake-l%d", level), S: first.Sub(wsent).Seconds(),
		J: energy.TransitionJ(end, e2, wsent, first, asleep.PowerW, r.awake.PowerW)})
	p.Settle(ctx)
	if level == 1 {
		after, err := p.Pool().Procs().Host(label)
		if err != nil {
			return e2, err
		}
		r.c.WakeReturnedHostGiB = asleep.HostGiB - gib(after.RSS)
	}
	return r.m.Now(ctx)
}

// kvReleased holds the model paused with its KV cache released (vLLM PR
// #44890: sleep level 0, /release_kv_cache_memory), then restores the
// cache (wake_up?tags=kv_cache); a server without the endpoints has the
// state skipped, with why.
func (r *costRun) kvReleased(prev energy.Reading) (energy.Reading, error) {
	p, ctx, label := r.p, r.ctx, r.label
	skip := func(why string) (energy.Reading, error) {
		s := newState(record.StateKVReleased)
		s.Skipped = why
		r.c.States = append(r.c.States, s)
		return prev, nil
	}
	ok, err := p.Pool().SupportsPause(ctx, label)
	if err != nil {
		return prev, fmt.Errorf("GET /is_paused: %w", err)
	}
	if !ok {
		return skip("the server has no /pause (vLLM before the pause API)")
	}
	if _, err := p.Pool().Run(ctx, label, pool.Sleep(0)); err != nil {
		return prev, fmt.Errorf("pause (sleep level 0): %w", err)
	}
	if _, err := p.Pool().Run(ctx, label, pool.ReleaseKV()); err != nil {
		if !pool.Unsupported(err) {
			return prev, fmt.Errorf("release_kv_cache_memory: %w", err)
		}
		if _, err := p.Pool().Run(ctx, label, pool.Wake()); err != nil {
			return prev, fmt.Errorf("wake from the pause: %w", err)
		}
		return skip("the server has no /release_kv_cache_memory (vLLM before PR #44890)")
	}
	p.Settle(ctx)
	s, end, err := p.hold(ctx, label, record.StateKVReleased, r.m, true)
	r.c.States = append(r.c.States, s)
	if err != nil {
		return end, err
	}
	if _, err := p.Pool().Run(ctx, label, pool.WakeKV()); err != nil {
		return end, err
	}
	if _, err := p.Pool().Requests().Probe(ctx, label); err != nil {
		return end, fmt.Errorf("first token after the KV cache's restore: %w", err)
	}
	p.Settle(ctx)
	return r.m.Now(ctx)
}

// coldStart is a cold start measured, its energy not yet computed: it
// needs the awake power after it (the closing reading's overhang).
type coldStart struct {
	a, b           energy.Reading // before the spawn, after the first token
	spawned, first time.Time
	stoppedW       float64
}

// transition is the start's record, awakeW the power after it.
func (s coldStart) transition(awakeW float64) record.Transition {
	return record.Transition{Op: record.OpStart, S: s.first.Sub(s.spawned).Seconds(),
		J: energy.TransitionJ(s.a, s.b, s.spawned, s.first, s.stoppedW, awakeW)}
}

// stoppedAndCold stops the server, holds the GPU without it, then starts
// it cold (spawn → first token) and leaves it awake: a process that never
// slept.
func (r *costRun) stoppedAndCold() (coldStart, string, error) {
	p, ctx, label := r.p, r.ctx, r.label
	if err := p.Pool().Stop(label); err != nil {
		return coldStart{}, "stop", err
	}
	p.Settle(ctx)
	stopped, end, err := p.hold(ctx, label, record.StateStopped, r.m, false)
	r.c.States = append(r.c.States, stopped)
	if err != nil {
		return coldStart{}, "hold stopped", err
	}
	if _, err := p.Pool().Start(ctx, label); err != nil {
		return coldStart{}, "cold start", err
	}
	spawned := p.Pool().Procs().Spawned(label)
	s, err := p.Pool().Requests().FirstToken(ctx, label)
	if err != nil {
		return coldStart{}, "cold start's first token", err
	}
	e1, err := r.m.Now(ctx)
	if err != nil {
		return coldStart{}, "cold start", err
	}
	cs := coldStart{a: end, b: e1, spawned: spawned, first: s.Tokens[0], stoppedW: stopped.PowerW}
	if err := p.Pool().Started(ctx, label); err != nil { // outside the interval, as a restart's
		return cs, "after the cold start", err
	}
	return cs, "", nil
}

// capModel is c as package capacity takes it: GPU memory summed over the
// GPUs, power and the transitions' energy above the model stopped (a
// transition's J less the stopped power × its seconds), the level-1
// sleep's peak as the tree's memory at it.
func capModel(label string, c record.Cost) capacity.Model {
	stopped, _ := c.State(record.StateStopped)
	at := func(st string) capacity.State {
		s, ok := c.State(st)
		if !ok || s.Skipped != "" {
			n := math.NaN()
			return capacity.State{GPUGiB: n, HostGiB: n, PowerW: n, WakeJ: n, WakeS: n}
		}
		var g float64
		for _, x := range s.GPUGiB {
			g += x
		}
		if s.GPUGiB == nil {
			g = math.NaN()
		}
		return capacity.State{GPUGiB: g, HostGiB: s.HostGiB, PowerW: s.PowerW - stopped.PowerW}
	}
	m := capacity.Model{Label: label, Awake: at(record.StateAwake), L1: at(record.StateL1), L2: at(record.StateL2),
		ColdStartJ: math.NaN(), ColdStartS: math.NaN()}
	if !math.IsNaN(c.SleepPeakHostGiB) { // unknown: the state's own figure (capacity.State)
		m.L1.SleepPeakHostGiB = m.Awake.HostGiB + c.SleepPeakHostGiB
	}
	if !math.IsNaN(c.WakeReturnedHostGiB) && !math.IsNaN(m.L1.HostGiB) { // what the level-1 wake kept
		m.L1.WokenHostGiB = m.L1.HostGiB - c.WakeReturnedHostGiB
	}
	for _, lv := range []struct {
		st          *capacity.State
		sleep, wake string
	}{{&m.L1, record.OpSleepL1, record.OpWakeL1}, {&m.L2, record.OpSleepL2, record.OpWakeL2}} {
		lv.st.SleepJ, lv.st.SleepS, lv.st.WakeJ, lv.st.WakeS = math.NaN(), math.NaN(), math.NaN(), math.NaN()
		if t, ok := c.Transition(lv.sleep); ok {
			lv.st.SleepJ, lv.st.SleepS = t.J-stopped.PowerW*t.S, t.S
		}
		if t, ok := c.Transition(lv.wake); ok {
			lv.st.WakeJ, lv.st.WakeS = t.J-stopped.PowerW*t.S, t.S
		}
	}
	if t, ok := c.Transition(record.OpStart); ok {
		m.ColdStartJ, m.ColdStartS = t.J-stopped.PowerW*t.S, t.S
	}
	return m
}

// breakEvens is c's break-even at level 1 and 2 (capacity.BreakEvens).
func breakEvens(c record.Cost) []record.BreakEven {
	var out []record.BreakEven
	for _, b := range capacity.BreakEvens(capModel("", c)) {
		out = append(out, record.BreakEven{Level: int(b.Level), IdleS: b.IdleS, WakeS: b.WakeS, ColdStartS: b.ColdStartS, LatencyS: b.LatencyS})
	}
	return out
}

// Fit is the node's fit table for the models whose state costs were
// measured (capacity.Fit): GPU free memory with none of the run's models
// loaded (the device's free memory now plus what the run's servers hold),
// host memory likewise (hostmem: the cgroup's headroom in a container or
// Pod, else MemAvailable, plus the servers' RSS), less
// min_host_headroom_gib. It records it; nil (with why) when a figure it
// needs is unknown.
func (p Phase) Fit(ctx context.Context, logf protocol.Logf) (*record.Fit, string, error) {
	costs := p.Costs()
	var models []capacity.Model
	var gpuHeld, hostHeld float64
	for _, l := range p.Labels() {
		c, ok := costs[l]
		if !ok {
			return nil, "no state costs of " + l, nil
		}
		m := capModel(l, c)
		if math.IsNaN(m.Awake.GPUGiB) || math.IsNaN(m.L1.GPUGiB) || math.IsNaN(m.L2.GPUGiB) {
			return nil, "GPU memory per model unknown (no memory source, or one that lists no processes)", nil
		}
		models = append(models, m)
		if p.Pool().Running(l) {
			g, _, err := p.Pool().Memory().GPUGiB(ctx, l)
			if err != nil {
				return nil, "", err
			}
			for _, x := range g {
				gpuHeld += x
			}
			if h, err := p.Pool().Procs().Host(l); err == nil {
				hostHeld += gib(h.RSS)
			}
		}
	}
	_, free, err := p.Pool().Memory().GPUGiB(ctx, p.Labels()[0])
	if err != nil {
		return nil, "", err
	}
	var gpuFree float64
	for _, x := range free {
		gpuFree += x
	}
	hc, err := p.Pool().Procs().HostCapacity()
	if err != nil {
		return nil, "", fmt.Errorf("host memory: %w", err)
	}
	node := capacity.Node{GPUFreeGiB: gpuFree + gpuHeld, HostGiB: hc.Available.GiB() + hostHeld, HostSource: hc.Available.Source,
		HostHeadroomGiB: p.Config().Thresholds.MinHostHeadroomGiB}
	plan, err := capacity.Fit(models, node)
	if err != nil {
		return nil, "", err
	}
	f := record.Fit{GPUFreeGiB: node.GPUFreeGiB, HostGiB: node.HostGiB, HostSource: node.HostSource, HostHeadroomGiB: node.HostHeadroomGiB,
		Largest: plan.Largest, LargestFits: plan.LargestFits, Short: string(plan.Short), Choose: int(plan.Choose), Why: plan.Why}
	for _, lf := range plan.Levels {
		f.Levels = append(f.Levels, record.FitLevel{Level: int(lf.Level), Others: lf.Others, Fits: lf.Fit, Asleep: lf.Asleep, Binds: string(lf.Binds),
			NeedGPUGiB: lf.NeedGPUGiB, NeedHostGiB: lf.NeedHostGiB, LeftGPUGiB: lf.LeftGPUGiB, LeftHostGiB: lf.LeftHostGiB})
	}
	p.FitTable.Set(f)
	binds := func(b string) string {
		if b == "" {
			return "every other model fits"
		}
		return b + " binds"
	}
	logf("fit: %s awake; level 1: %d/%d asleep (%s), level 2: %d/%d (%s); choose level %d: %s",
		f.Largest, f.Levels[0].Fits, f.Levels[0].Others, binds(f.Levels[0].Binds), f.Levels[1].Fits, f.Levels[1].Others, binds(f.Levels[1].Binds), f.Choose, f.Why)
	return &f, "", nil
}

// checks: max_sleeping_power_w at each level where set (not
// evaluated, with why, where the device has no energy counter).
func (p Phase) checks(label string, c record.Cost) []record.Check {
	return p.Record(record.PhaseStateCost, stateCostChecks(p.Config(), label, c)...)
}

// fmtGiB is GiB per GPU for a log line.
func fmtGiB(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%.3f", x)
	}
	return "[" + out + "]"
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// stateCostChecks judges one model's state costs: thresholds.max_sleeping_power_w
// against the power the model holds asleep at each level (when set). NVML
// has no per-process energy, so the model's power is a difference on the
// same device: the state's power less the stopped row's, every other
// model held as it was in both dwells (asleep beside it). The device's
// own figure would judge the board and the other models too (A asleep
// beside B reads as B's). Not evaluated, with why, where a power is
// absent (no energy counter, the state not measured).
func stateCostChecks(cfg config.Config, label string, c record.Cost) []record.Check {
	limit := cfg.ThresholdsFor(label).MaxSleepingPowerW
	if limit == 0 {
		return nil
	}
	stopped, stoppedOK := c.State(record.StateStopped)
	var out []record.Check
	for _, lv := range []struct {
		level int
		state string
	}{{1, record.StateL1}, {2, record.StateL2}} {
		name := fmt.Sprintf("cost.level%d.own_power_w", lv.level)
		s, ok := c.State(lv.state)
		why := ""
		switch {
		case !ok || s.Skipped != "":
			why = "state " + lv.state + " not measured"
		case !stoppedOK || stopped.Skipped != "":
			why = "state " + record.StateStopped + " not measured: the model's share of the device's power is unknown"
		case math.IsNaN(s.PowerW) || math.IsNaN(stopped.PowerW):
			why = cmp.Or(c.EnergyNote, "the power asleep or stopped is unknown")
		}
		if why != "" {
			required, none := protocol.MemoryRequired(cfg, label, "max_sleeping_power_w")
			out = append(out, record.Check{Name: name, Model: label, Op: "<=", Limit: limit, Verdict: record.NotEvaluated,
				Reason: cmp.Or(none, why), Required: required})
			continue
		}
		out = append(out, record.Evaluate(name, label, c.OwnPowerW(lv.state), "<=", limit))
	}
	return out
}
