package record

import (
	"maps"
	"slices"
)

// Reference is a model's probe set as answered before its first sleep.
type Reference struct {
	Basis   string   // what could be compared (oracle.Basis)
	Probes  []string // probe names, in order
	Seconds float64  // the probe set's wall time
}

// ProbeResult is one probe replayed against its reference.
type ProbeResult struct {
	Probe    string
	Match    bool
	Position int    // 1-based first diverging token; 0 when none
	Kind     string // "token", "logprob", "length", "text"
	Detail   string
	Tie      int     // a near-tie stopped the comparison at this token (not a mismatch)
	MaxDelta float64 // largest |Δ logprob| over the compared tokens
}

// Replay is one replay of a model's probe set after a wake.
type Replay struct {
	Stage   string // the phase whose wake it followed (PhaseSleepL1, PhaseSwitch, …)
	Cycle   int    // 1-based, per model and stage
	Seconds float64
	Results []ProbeResult
	Err     string // the replay could not be made (the server failed)
}

// Mismatches counts the probes that diverged.
func (r Replay) Mismatches() int {
	n := 0
	for _, p := range r.Results {
		if !p.Match {
			n++
		}
	}
	return n
}

// Engine is what the server itself reported of one sleep and the wake that
// followed: its log lines and its sleep-mode metric, beside the harness's
// HTTP times. A figure the server did not report is NaN.
type Engine struct {
	SleepS, WakeS             float64 // "It took X seconds to fall asleep / to wake up" (wake: every wake call's sum)
	FreedGiB, InUseGiB        float64 // "Sleep mode freed X GiB memory, Y GiB memory is still in use" (workers summed)
	MetricSleepS, MetricWakeS float64 // vllm:sleep_mode_operation_duration_seconds, this cycle's share of its sum
	// MetricReleaseS is the same for operation release_kv_cache_memory
	// (a KV-only release cycle's release).
	MetricReleaseS float64
	// WakeCallsS is the HTTP time of the wake's /wake_up calls, summed
	// (level 2's reload_weights and reset_prefix_cache left out); 0:
	// not known apart from the wake's API time.
	WakeCallsS float64
	// Disagreements says where the sources disagree beyond the tolerance.
	Disagreements []string
}

// FirstSleep is the first sleep of one server process: where vLLM
// allocates its pinned host buffer (pinned by cumem.py, cached by PyTorch's host allocator: pytorch/pytorch#275), often far slower than
// the steady state, and in this protocol often an unmeasured sleep that
// makes room for another model.
type FirstSleep struct {
	Level  int
	SleepS float64
}

// SoakCycle is one cycle of the soak phase: From sleeps, To wakes.
type SoakCycle struct {
	Cycle         int // 1-based
	From, To      string
	Level         int
	OK            bool
	SleepS        float64
	WakeS         float64
	ToFirstTokenS float64 // /sleep sent → To's first token
	ResidualGiB   float64 // From's memory asleep (NaN unknown)
	ReleasePct    float64 // share of From's memory the sleep released (NaN unknown)
	// FreeGiB is the device's free memory just before To's wake, NeedGiB
	// To's awake footprint (NaN unknown); HeadroomGiB = FreeGiB − NeedGiB.
	FreeGiB, NeedGiB, HeadroomGiB float64
	RSSGiB                        float64 // host RSS of From's process tree once asleep (read after To's first token)
	// LockedGiB and PinnedGiB are the locked (mlock) and pinned
	// (VmPin) parts of RSSGiB, read with it (NaN unknown).
	LockedGiB, PinnedGiB float64
	// EnergyJ is the GPU energy counter's difference from just before
	// /sleep was sent to right after To's first token (J, every GPU); NaN
	// when the device has no counter, EnergyNote says why.
	EnergyJ    float64
	EnergyNote string
	Engine     *Engine
	Err        string
}

// ResidualSeriesMiB is each model's residual in MiB over its successful
// soak sleeps, in order (unknown residuals left out): the series whose
// slope is the residual growth per cycle.
func ResidualSeriesMiB(cycles []SoakCycle) map[string][]float64 {
	out := map[string][]float64{}
	for _, c := range cycles {
		if c.OK && c.ResidualGiB == c.ResidualGiB { // not NaN
			out[c.From] = append(out[c.From], c.ResidualGiB*1024)
		}
	}
	return out
}

// PlanSoak records the soak's planned cycles and level.
func (r *Recorder) PlanSoak(cycles, level int) {
	defer r.lock()()
	r.raw.SoakPlanned, r.raw.SoakLevel = cycles, level
}

func cloneCorrectness(c *Raw, r Raw) {
	c.References = maps.Clone(r.References)
	c.Replays = cloneMap(r.Replays)
	c.FirstSleeps = cloneMap(r.FirstSleeps)
	c.Soak = slices.Clone(r.Soak)
}
