// Package capacity is the arithmetic of keeping models asleep on one node,
// pure functions of measured state costs: how many of a run's models can
// sleep at level 1 or level 2 beside the largest one awake, which resource
// binds first and which level to choose (Plan); and after how long idle
// stopping a model and starting it cold again costs less energy than
// keeping it asleep (BreakEven).
package capacity

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Level is a model's state: awake (0) or asleep at vLLM sleep level 1 or 2.
type Level int

// The states a plan chooses between.
const (
	Awake  Level = 0
	Level1 Level = 1
	Level2 Level = 2
)

// State is what one model costs in one state, as a run measured it.
type State struct {
	// GPUGiB is the device memory the model's server holds in the state
	// (per process from NVML, summed over the run's GPUs).
	GPUGiB float64
	// HostGiB is the host memory of the server's process tree in the
	// state (RSS, its locked and pinned part included: a level-1 sleep's
	// weight backup is pinned host memory).
	HostGiB float64
	// SleepPeakHostGiB is the tree's host memory at the peak of the sleep
	// call into this state (≥ HostGiB; 0 for unknown, taken as HostGiB):
	// the call needs it transiently, and fails on a host that cannot back
	// it.
	SleepPeakHostGiB float64
	// PowerW is the GPU power the model adds in this state over a dwell,
	// above the same GPU with the model stopped: (energy over the dwell −
	// energy over an equal dwell stopped) / dwell, from the energy counter.
	PowerW float64
	// WakeJ is the energy of waking from this state (wake request sent →
	// first token) above the same GPU with the model stopped: the energy
	// counter's difference less the stopped power × WakeS; 0 for Awake.
	WakeJ float64
	// WakeS is the wake latency: wake request sent → first token.
	WakeS float64
	// SleepJ is the energy of the sleep call into this state (sent →
	// answered, SleepS) above the same GPU with the model stopped, as
	// WakeJ; 0 for Awake. The asleep path of the break-even begins with it.
	SleepJ, SleepS float64
	// WokenHostGiB is the tree's host memory awake again after a wake
	// from this state (0: unknown, taken as Awake's): vLLM keeps a level-1
	// sleep's pinned weight copy for the process's life (pinned by cumem.py, cached by PyTorch's host allocator: pytorch/pytorch#275) unless
	// VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY=1 frees it at the wake, so a
	// model woken from level 1 may hold more than one never put to sleep.
	WokenHostGiB float64
}

// Model is one model's costs: each state, and a cold start.
type Model struct {
	Label         string
	Awake, L1, L2 State
	ColdStartJ    float64 // energy of a cold start (spawn → first token) above the model stopped, as WakeJ
	ColdStartS    float64 // its latency
}

// At is the model's state at level l.
func (m Model) At(l Level) State {
	switch l {
	case Level1:
		return m.L1
	case Level2:
		return m.L2
	}
	return m.Awake
}

// Node is what the node offers this run's models, with none of them loaded.
type Node struct {
	// GPUFreeGiB is the device memory free for the run's models: total −
	// reserved − other users' (summed over the run's GPUs).
	GPUFreeGiB float64
	// HostGiB is the host memory the runner may use (package hostmem:
	// the cgroup's headroom in a container or Pod, else MemAvailable), and
	// HostSource where that figure came from.
	HostGiB    float64
	HostSource string
	// HostHeadroomGiB is host memory to keep free (min_host_headroom_gib):
	// the plan fits models into HostGiB − HostHeadroomGiB.
	HostHeadroomGiB float64
}

// Resource names what stops more models from fitting.
type Resource string

// The resources a plan runs out of.
const (
	NoResource Resource = ""         // every model fits
	GPU        Resource = "gpu"      // device memory
	Host       Resource = "host"     // host memory
	Both       Resource = "gpu+host" // either alone would stop at the same count, or only both together stop it
)

// LevelFit is how many of the other models fit asleep at one level beside
// the largest one awake.
type LevelFit struct {
	Level  Level
	Others int      // the models besides the largest
	Fit    int      // how many of them fit asleep at Level
	Asleep []string // one largest set that fits, in the models' order
	// NeedGPUGiB and NeedHostGiB are what all Others asleep at Level would
	// need (host: their HostGiB plus the largest transient sleep peak).
	NeedGPUGiB, NeedHostGiB float64
	// LeftGPUGiB and LeftHostGiB are what stays free in the fullest state
	// of the largest and Asleep: the largest awake with Asleep asleep, or
	// any state their switching reaches (Fit; host: after HostHeadroomGiB
	// and the peak).
	LeftGPUGiB, LeftHostGiB float64
	// Binds is the resource that stops more from fitting: the one under
	// which, alone, fewer models fit; NoResource when all fit.
	Binds Resource
}

// Plan is the fit table of a run's models on a node.
type Plan struct {
	Largest string // the model kept awake: the most device memory awake
	// LargestFits says whether the largest fits awake at all; Short names
	// the resource it lacks when not.
	LargestFits bool
	Short       Resource
	Levels      []LevelFit // level 1, then level 2
	// Choose is the level to put the others to sleep at (Awake: none fits
	// at either level; stop them instead), and Why says why.
	Choose Level
	Why    string
}

// maxOthers bounds the exact search (2^n subsets).
const maxOthers = 20

// Fit plans models on node: the largest model (most awake GPU memory, then
// host memory) is the one kept awake; for each sleep level, the largest
// number of the others that fit asleep beside it, where a set S fits when
//
//	Σ_{m∈S} GPU_m(level) ≤ GPUFree − GPU_largest(awake)
//	Σ_{m∈S} Host_m(level) + max_{m∈S}(Peak_m(level) − Host_m(level))
//	    ≤ HostGiB − HostHeadroomGiB − Host_largest(awake)
//
// (one sleep call at a time: only one transient peak at once), and when
// it also fits in every state the run's switching among K = S ∪ {largest}
// reaches (reach): any one of K awake and the rest asleep at the level,
// or one of K in its sleep call (its transient peak) and the rest asleep.
// The largest awake is not the only state: asleep at level 1 the largest
// holds its weights' pinned copy in host memory, and a switch to a small
// model needs that beside the small one awake. The count is exact (every
// subset is tried; at most 20 others). The level chosen is the one at
// which more models fit; on a tie, the one whose sleepers wake faster in
// total (Σ WakeS), then the one drawing less power asleep, then level 1.
func Fit(models []Model, node Node) (Plan, error) {
	if len(models) == 0 {
		return Plan{}, errors.New("capacity: no models")
	}
	if len(models)-1 > maxOthers {
		return Plan{}, fmt.Errorf("capacity: %d models: at most %d beside the largest", len(models), maxOthers)
	}
	big := 0
	for i, m := range models {
		if a, b := m.Awake, models[big].Awake; a.GPUGiB > b.GPUGiB || (a.GPUGiB == b.GPUGiB && a.HostGiB > b.HostGiB) {
			big = i
		}
	}
	var others []Model
	for i, m := range models {
		if i != big {
			others = append(others, m)
		}
	}
	p := Plan{Largest: models[big].Label}
	gpuBudget := node.GPUFreeGiB - models[big].Awake.GPUGiB
	hostBudget := node.HostGiB - node.HostHeadroomGiB - models[big].Awake.HostGiB
	p.LargestFits = gpuBudget >= 0 && hostBudget >= 0
	if !p.LargestFits {
		p.Short = binds(gpuBudget < 0, hostBudget < 0)
	}
	for _, l := range []Level{Level1, Level2} {
		p.Levels = append(p.Levels, fitLevel(models[big], others, l, node, gpuBudget, hostBudget))
	}
	p.Choose, p.Why = choose(p, others)
	return p, nil
}

func binds(gpu, host bool) Resource {
	switch {
	case gpu && host:
		return Both
	case gpu:
		return GPU
	case host:
		return Host
	}
	return NoResource
}

// peak is the transient host memory of a sleep into st beyond its steady figure.
func peak(st State) float64 { return max(0, st.SleepPeakHostGiB-st.HostGiB) }

// need is the GPU and host memory of set (a bit mask over others) asleep at l.
func need(others []Model, l Level, set uint32) (gpu, host float64) {
	var top float64
	for i, m := range others {
		if set&(1<<i) == 0 {
			continue
		}
		st := m.At(l)
		gpu += st.GPUGiB
		host += st.HostGiB
		top = max(top, peak(st))
	}
	return gpu, host + top
}

// reach is the most GPU and the most host memory a state of the run's
// switching needs, among big and the set of others kept at level l: one
// of them awake and the rest asleep at l, or (host; only where there is a
// switch, two or more kept) one of them in its sleep call into l, at its
// transient peak, and the rest asleep.
func reach(big Model, others []Model, l Level, set uint32) (gpu, host float64) {
	kept := []Model{big}
	for i, m := range others {
		if set&(1<<i) != 0 {
			kept = append(kept, m)
		}
	}
	// An unknown figure (NaN: a state not measured) counts 0 here, as the
	// largest's asleep states did before they were counted at all; need
	// carries the others' unknowns.
	var asleepGPU, asleepHost float64
	for _, m := range kept {
		asleepGPU += known(m.At(l).GPUGiB)
		asleepHost += known(m.At(l).HostGiB)
	}
	for _, m := range kept {
		st := m.At(l)
		gpu = max(gpu, asleepGPU-known(st.GPUGiB)+known(m.Awake.GPUGiB))
		// m switched to: woken from l.
		host = max(host, asleepHost-known(st.HostGiB)+max(known(m.Awake.HostGiB), known(st.WokenHostGiB)))
		// A switch: m's sleep call, then all asleep until the next wakes.
		if len(kept) > 1 {
			host = max(host, asleepHost+known(peak(st)))
		}
	}
	return gpu, host
}

// known is x, or 0 for an unknown (NaN) figure.
func known(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return x
}

// left is what stays free of each resource in the fullest state a set
// reaches: the largest awake with the others asleep (g, h against the
// budgets left beside it) or any state of the switching (rg, rh against
// the node's whole budgets).
func left(g, h, rg, rh, gpuBudget, hostBudget float64, node Node) (gpu, host float64) {
	return min(gpuBudget-g, node.GPUFreeGiB-rg), min(hostBudget-h, node.HostGiB-node.HostHeadroomGiB-rh)
}

func fitLevel(big Model, others []Model, l Level, node Node, gpuBudget, hostBudget float64) LevelFit {
	f := LevelFit{Level: l, Others: len(others)}
	all := uint32(1)<<len(others) - 1
	f.NeedGPUGiB, f.NeedHostGiB = need(others, l, all)
	best, bestCount, bestSlack := uint32(0), -1, math.Inf(-1)
	var gpuAlone, hostAlone int // the most that fit under one resource alone
	for set := uint32(0); set <= all; set++ {
		g, h := need(others, l, set)
		rg, rh := reach(big, others, l, set)
		lg, lh := left(g, h, rg, rh, gpuBudget, hostBudget, node)
		c := bits.OnesCount32(set)
		if lg >= 0 {
			gpuAlone = max(gpuAlone, c)
		}
		if lh >= 0 {
			hostAlone = max(hostAlone, c)
		}
		if lg < 0 || lh < 0 {
			continue
		}
		// Of the largest sets, the one leaving the most of the scarcer
		// resource (as a share of its budget) free.
		slack := min(share(lg, gpuBudget), share(lh, hostBudget))
		if c > bestCount || (c == bestCount && slack > bestSlack) {
			best, bestCount, bestSlack = set, c, slack
		}
	}
	if bestCount < 0 { // the largest alone does not fit: nothing does
		f.LeftGPUGiB, f.LeftHostGiB = gpuBudget, hostBudget
		f.Binds = binds(gpuBudget < 0, hostBudget < 0)
		return f
	}
	f.Fit = bestCount
	for i, m := range others {
		if best&(1<<i) != 0 {
			f.Asleep = append(f.Asleep, m.Label)
		}
	}
	g, h := need(others, l, best)
	rg, rh := reach(big, others, l, best)
	f.LeftGPUGiB, f.LeftHostGiB = left(g, h, rg, rh, gpuBudget, hostBudget, node)
	if f.Fit < f.Others {
		switch {
		case gpuAlone < hostAlone:
			f.Binds = GPU
		case hostAlone < gpuAlone:
			f.Binds = Host
		default:
			f.Binds = Both
		}
	}
	return f
}

func share(left, budget float64) float64 {
	if budget <= 0 {
		return 0
	}
	return left / budget
}

func choose(p Plan, others []Model) (Level, string) {
	l1, l2 := p.Levels[0], p.Levels[1]
	if !p.LargestFits {
		return Awake, fmt.Sprintf("%s does not fit awake (%s short)", p.Largest, p.Short)
	}
	if len(others) == 0 {
		return Awake, "one model: nothing to put to sleep"
	}
	if l1.Fit == 0 && l2.Fit == 0 {
		return Awake, "no other model fits asleep at either level: stop them"
	}
	if l1.Fit != l2.Fit {
		if l2.Fit > l1.Fit {
			return Level2, fmt.Sprintf("level 2 keeps %d asleep, level 1 %d (%s binds)", l2.Fit, l1.Fit, l1.Binds)
		}
		return Level1, fmt.Sprintf("level 1 keeps %d asleep, level 2 %d (%s binds)", l1.Fit, l2.Fit, l2.Binds)
	}
	sum := func(f LevelFit, get func(State) float64) float64 {
		var s float64
		for _, m := range others {
			if slices.Contains(f.Asleep, m.Label) {
				s += get(m.At(f.Level))
			}
		}
		return s
	}
	w1, w2 := sum(l1, func(s State) float64 { return s.WakeS }), sum(l2, func(s State) float64 { return s.WakeS })
	if w1 != w2 {
		if w2 < w1 {
			return Level2, fmt.Sprintf("both keep %d asleep; level 2 wakes them in %.3g s against %.3g s", l1.Fit, w2, w1)
		}
		return Level1, fmt.Sprintf("both keep %d asleep; level 1 wakes them in %.3g s against %.3g s", l1.Fit, w1, w2)
	}
	p1, p2 := sum(l1, func(s State) float64 { return s.PowerW }), sum(l2, func(s State) float64 { return s.PowerW })
	if p2 < p1 {
		return Level2, fmt.Sprintf("both keep %d asleep and wake as fast; level 2 draws %.3g W against %.3g W", l1.Fit, p2, p1)
	}
	return Level1, fmt.Sprintf("both keep %d asleep, wake as fast and draw as much: level 1", l1.Fit)
}

// BreakEven is, for one model asleep at one level, the idle time after
// which stopping it and starting it cold again costs less GPU energy than
// keeping it asleep, and what the cold start costs in latency instead.
type BreakEven struct {
	Label string
	Level Level
	// IdleS is t*, where the two paths cost the same energy over one time
	// span: the model goes idle at 0 and the next request comes at t.
	// Asleep: the sleep call (E_sleep over s s), P_sleep until t, then the wake (E_wake over w s), then awake
	// (P_awake) until the cold start would have served, t + c. Stopped:
	// P_stopped·t, then the cold start (E_cold over c s). Over [0, t + c],
	// with every power and energy above the model stopped (P_stopped = 0;
	// the GPU's own draw is the same on both paths and cancels):
	//
	//	E_sleep + P_sleep·(t − s) + E_wake + P_awake·(c − w) = E_cold
	//	t* = (E_cold − E_sleep − E_wake − P_awake·(c − w)) / P_sleep + s
	//
	// E_sleep is the sleep call that begins the asleep path, over its s
	// seconds (issue 50: it was left out); the stop that begins the other
	// is left out, a process's end that the state-cost phase does not
	// measure (SIGTERM to the group: well under a second of a draw that
	// falls to P_stopped).
	//
	// Past t*, stopping costs less. 0 when stopping costs no more even at
	// t = 0 (the numerator ≤ 0); +Inf when sleeping draws nothing above
	// stopped; NaN when a figure is unknown (NaN).
	IdleS float64
	// WakeS and ColdStartS are the two latencies (request sent → first
	// token); LatencyS = ColdStartS − WakeS is the price of stopping:
	// what the first request after the idle time waits longer.
	WakeS, ColdStartS, LatencyS float64
}

// BreakEvenIdle is t* = (coldJ − sleepJ − wakeJ − awakeW·(coldS − wakeS))
// / sleepW + sleepS in seconds (BreakEven.IdleS: energies and powers above
// the model stopped): 0 when the numerator ≤ 0, +Inf when sleepW ≤ 0 (and
// the numerator > 0), NaN when any input is NaN.
func BreakEvenIdle(coldJ, coldS, sleepJ, sleepS, wakeJ, wakeS, awakeW, sleepW float64) float64 {
	for _, x := range []float64{coldJ, coldS, sleepJ, sleepS, wakeJ, wakeS, awakeW, sleepW} {
		if math.IsNaN(x) {
			return math.NaN()
		}
	}
	d := coldJ - sleepJ - wakeJ - awakeW*(coldS-wakeS)
	if d <= 0 {
		return 0
	}
	if sleepW <= 0 {
		return math.Inf(1)
	}
	return d/sleepW + sleepS
}

// BreakEvens is m's break-even at level 1 and level 2.
func BreakEvens(m Model) []BreakEven {
	var out []BreakEven
	for _, l := range []Level{Level1, Level2} {
		st := m.At(l)
		out = append(out, BreakEven{Label: m.Label, Level: l,
			IdleS: BreakEvenIdle(m.ColdStartJ, m.ColdStartS, st.SleepJ, st.SleepS, st.WakeJ, st.WakeS, m.Awake.PowerW, st.PowerW),
			WakeS: st.WakeS, ColdStartS: m.ColdStartS, LatencyS: m.ColdStartS - st.WakeS})
	}
	return out
}
