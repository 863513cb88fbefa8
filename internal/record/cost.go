package record

// The state-cost phase (docs/cost.md): what each state of a model costs
// in GPU memory, host memory and GPU power, the energy of each transition,
// the break-even per level, and the node's fit table.

import "math"

// The states a model's cost is measured in.
const (
	StateAwake      = "awake"       // awake and idle
	StateL1         = "asleep-l1"   // asleep at level 1
	StateL2         = "asleep-l2"   // asleep at level 2
	StateKVReleased = "kv-released" // paused, KV cache released (vLLM PR #44890)
	StateStopped    = "stopped"     // the server stopped
)

// The transitions whose energy is measured.
const (
	OpSleepL1 = "sleep-l1" // /sleep?level=1 sent → answered
	OpSleepL2 = "sleep-l2"
	OpWakeL1  = "wake-l1" // the first wake request sent → first token
	OpWakeL2  = "wake-l2"
	OpStart   = "start" // a cold start: spawn → first token
)

// States is the states in their order (report.json, summary.md, the record).
func States() []string {
	return []string{StateAwake, StateL1, StateL2, StateKVReleased, StateStopped}
}

// Ops is the transitions in their order.
func Ops() []string { return []string{OpSleepL1, OpWakeL1, OpSleepL2, OpWakeL2, OpStart} }

// StateCost is one state of a model held for the dwell. A figure not
// measured is NaN (nil per GPU), with Note saying why.
type StateCost struct {
	State string
	// GPUGiB is the model's GPU memory on each GPU (its processes', from
	// the memory source), read at the start of the dwell.
	GPUGiB []float64
	// HostGiB is the host RSS of the server's process tree, LockedGiB and
	// PinnedGiB its VmLck and VmPin parts, SwapGiB its VmSwap (0 stopped).
	HostGiB, LockedGiB, PinnedGiB, SwapGiB float64
	// PowerW is the GPU power over the dwell: the energy counter's
	// difference (all GPUs) over the time between its two readings;
	// DwellS is that time.
	PowerW, DwellS float64
	// Skipped says why the state was not measured ("": it was).
	Skipped string
}

// Transition is one transition's latency and GPU energy.
type Transition struct {
	Op string
	S  float64 // from the event that starts it to the one that ends it (Op's comment)
	// J is the energy over exactly that interval: the counter's
	// difference between readings just before and just after, less the
	// power of the state before × the time from the first reading to the
	// start, and of the state after × from the end to the second reading.
	// NaN without an energy counter.
	J float64
}

// BreakEven is, for one level, the idle time after which stopping the
// model and starting it cold again costs less GPU energy than keeping it
// asleep (capacity.BreakEvens), and the latency price.
type BreakEven struct {
	Level                       int
	IdleS                       float64 // NaN when a figure is unknown; +Inf when sleeping costs nothing
	WakeS, ColdStartS, LatencyS float64 // LatencyS = ColdStartS − WakeS
}

// Cost is one model's state-cost phase.
type Cost struct {
	DwellS      float64 // protocol.cost_dwell_s
	States      []StateCost
	Transitions []Transition
	// SleepPeakHostGiB is the transient host memory of the level-1 sleep
	// call: the tree's largest RSS polled while the call ran, less its RSS
	// just before (NaN: not measured).
	SleepPeakHostGiB float64
	// WakeReturnedHostGiB is the host memory given back by the level-1
	// wake: the tree's RSS asleep less its RSS after the wake and first
	// token (pinned memory kept after a wake shows as ≈ 0).
	WakeReturnedHostGiB float64
	// ReleaseHostEnv is VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY as the server
	// had it ("" unset).
	ReleaseHostEnv string
	BreakEvens     []BreakEven
	// EnergyNote says why the power and energy figures are absent ("":
	// they are not).
	EnergyNote string
}

// State is the measured state st of c, and whether it is there.
func (c Cost) State(st string) (StateCost, bool) {
	for _, s := range c.States {
		if s.State == st {
			return s, true
		}
	}
	return StateCost{}, false
}

// OwnPowerW is the power the model adds to the device in state st: the
// state's PowerW (the whole device's) less the stopped state's, every
// other model held as it was in both dwells (NVML has no per-process
// energy); NaN where either state is missing or skipped, or its power
// unknown.
func (c Cost) OwnPowerW(st string) float64 {
	s, ok := c.State(st)
	stopped, stoppedOK := c.State(StateStopped)
	if !ok || !stoppedOK || s.Skipped != "" || stopped.Skipped != "" {
		return math.NaN()
	}
	return s.PowerW - stopped.PowerW
}

// Transition is c's transition op, and whether it is there.
func (c Cost) Transition(op string) (Transition, bool) {
	for _, t := range c.Transitions {
		if t.Op == op {
			return t, true
		}
	}
	return Transition{}, false
}

// FitLevel is how many of the other models fit asleep at one level beside
// the largest awake (capacity.LevelFit).
type FitLevel struct {
	Level        int
	Others, Fits int
	Asleep       []string
	Binds        string // "gpu", "host", "gpu+host", "" when all fit
	NeedGPUGiB   float64
	NeedHostGiB  float64
	LeftGPUGiB   float64
	LeftHostGiB  float64
}

// Fit is the node's fit table for the run's models (capacity.Fit).
type Fit struct {
	GPUFreeGiB      float64 // the GPUs' free memory with none of the run's models loaded
	HostGiB         float64 // host memory the runner may use beside the run's servers
	HostSource      string  // where that came from: the cgroup's headroom or MemAvailable
	HostHeadroomGiB float64 // min_host_headroom_gib
	Largest         string
	LargestFits     bool
	Short           string
	Levels          []FitLevel
	Choose          int // the level to choose (0: none fits asleep; stop them)
	Why             string
}
