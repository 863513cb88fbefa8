// Package record holds what a run measured, as it is measured: one Recorder
// per run, whose measurements are written through its typed series
// (Writers: Cycles, Handoffs, …, each a typed writer of one kind, held by
// protocol's Env; the pool's Observer counts the requests) or gathered
// from the pool (Facts, Register), and whose frame (setup, windows, checks,
// failures) through its few methods; a phase's checks read the few series
// they judge in place (Read), and the outputs are written from one Raw
// copy taken at the end. Methods a retry could repeat (checks, failures,
// phases) are idempotent. A sleep level's and a switch direction's
// figures, which both a phase's checks and report.json read, are built by
// one function each (LevelOf, DirectionsOf, Summary, Trend), which both
// call.
package record

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GiB is 2^30 bytes.
const GiB = 1 << 30

// Restart is one start: spawn → /health 200 → first token of a probe.
type Restart struct {
	Warm        bool
	ReadyS      float64
	FirstTokenS float64
	Compile     string // what the server logged: "compiled", "loaded from cache" or "" (neither)
}

// Cycle is one sleep/wake cycle.
type Cycle struct {
	Level         int // 0, 1, 2, or LevelKVRelease
	OK            bool
	SleepS        float64 // sleep request sent → response (a KV-only release: the pause, /sleep?level=0)
	WakeAPIS      float64 // first wake request sent → last wake step answered
	ToFirstTokenS float64 // first wake request sent → first token of the probe
	ResidualGiB   float64 // model's GPU memory while asleep; NaN when unknown
	// ResidualPerGPU is ResidualGiB on each GPU of a run of several.
	ResidualPerGPU []float64
	// Engine is the server's own account of the cycle (nil: none read).
	Engine *Engine
	// ReleaseS (a KV-only release): /release_kv_cache_memory sent →
	// answered; NaN otherwise.
	ReleaseS float64
	// FreedGiB (level 0 and a KV-only release): the model's GPU memory
	// just before the pause less once asleep (after settle_s); NaN unknown.
	FreedGiB float64
	// HeldS (level 0): a request sent while the scheduler was paused, sent
	// → its first token; HeldPastWakeS: the wake request sent → that first
	// token (≥ 0: it waited for the wake). NaN otherwise.
	HeldS, HeldPastWakeS float64
}

// LevelKVRelease files a KV-only release cycle (pause, then
// /release_kv_cache_memory, then wake_up?tags=kv_cache; vLLM PR #44890)
// as a sleep level of its own: "kv" in the report and bench.txt.
const LevelKVRelease = -1

// LevelKey is a sleep level's key in report.json's models.*.sleep and
// bench.txt's level= (the phases' bench families name it too): "0", "1",
// "2", and "kv" for a KV-only release.
func LevelKey(level int) string {
	if level == LevelKVRelease {
		return "kv"
	}
	return strconv.Itoa(level)
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
	ReqTPS       []float64 // per successful request: output tokens / (sent → done)
	PromptTokens []int
}

// Handoff is one switch from one model to another.
type Handoff struct {
	From, To      string
	Initial       bool // the initial activation, not a counted handoff
	OK            bool
	Level         int     // the level From was put to sleep at (protocol.switch_level)
	SleepS        float64 // sleep of From: request → response
	WakeS         float64 // wake of To: request → response
	ToFirstTokenS float64 // sleep request sent → To's first token
	// EnergyJ is the GPU energy counter's difference from just before
	// /sleep was sent (the initial activation: before the wake) to right
	// after To's first token (J, every GPU); NaN when unknown, EnergyNote
	// says why.
	EnergyJ    float64
	EnergyNote string
	// Engine is the servers' own account of From's sleep and To's wake
	// (nil: none read).
	Engine *Engine
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

// Weight is how much device memory a model's weights take, and where that
// figure came from.
type Weight struct {
	GiB    float64
	Source string
}

// Requests is the request accounting: Executed = Success + Failure +
// AbortedByDesign.
type Requests struct {
	PlannedPerformance int `json:"planned_performance"`
	Executed           int `json:"executed"`
	Success            int `json:"success"`
	Failure            int `json:"failure"`
	// AbortedByDesign are requests the server ended with finish_reason
	// abort because the harness asked it to (a sleep in pause mode abort,
	// the traffic phase): the expected outcome, not a failure.
	AbortedByDesign int `json:"aborted_by_design"`
}

// Window is a phase's time window (Unix seconds), widened by the configured pad.
type Window struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Host is what the machine did to the run during the phase (package
	// hostload; nil where it could not be read): the regression gate does
	// not attribute a change of a phase other processes crowded to the
	// code.
	Host *HostLoad `json:"host,omitempty"`
}

// HostLoad is the machine's load over a phase window, measured from the
// kernel's counters at its start and end (package hostload).
type HostLoad struct {
	// OthersCPUPct is the CPU time processes outside the run's process
	// tree took (steal included), in percent of all the machine's cores.
	OthersCPUPct float64 `json:"others_cpu_pct"`
	// WaitPerRun is the seconds the run's threads waited on a run queue
	// per second they ran.
	WaitPerRun float64 `json:"wait_per_run"`
}

// Simulated says the numbers come from vllmsim, not hardware.
type Simulated struct {
	Profile   string  `json:"profile"`
	TimeScale float64 `json:"time_scale"`
	Note      string  `json:"note"`
	// RealDevice is vllmsim's real-device mode (sim.device "cuda"): device memory, the
	// sleeps' and wakes' copies and each step's weight read are the real GPU's, unscaled;
	// the rest is modelled at TimeScale.
	RealDevice bool `json:"real_device,omitempty"`
}

// Label is how the outputs name a simulated run in one phrase: "vllmsim profile tiny, time
// scale 1", and for real-device mode what of it is real.
func (s Simulated) Label() string {
	scale := fmt.Sprintf("%g", s.TimeScale)
	if s.TimeScale == 0 { // a vllmsim the run did not start: its scale is the server's own
		scale = "unknown"
	}
	l := fmt.Sprintf("vllmsim profile %s, time scale %s", s.Profile, scale)
	if s.RealDevice {
		l += "; real device: GPU memory, copies and weight reads real and unscaled"
	}
	return l
}

// GPUFacts is what NVML says about the device and its driver (or, with
// simulated true, what the simulated GPU says as NVML would).
type GPUFacts struct {
	Name            string  `json:"name"`
	UUID            string  `json:"uuid"`
	MemoryGiB       float64 `json:"memory_gib"`
	DriverVersion   string  `json:"driver_version"`
	CUDAVersion     string  `json:"cuda_version"`
	PCIeGen         int     `json:"pcie_gen"`   // current link (idle links train down)
	PCIeWidth       int     `json:"pcie_width"` // current link
	MaxPCIeGen      int     `json:"max_pcie_gen"`
	MaxPCIeWidth    int     `json:"max_pcie_width"`
	PCIeGBps        float64 `json:"pcie_gbps"` // raw one-direction bandwidth of the link at its maximum generation × width
	MemBusWidthBits int     `json:"mem_bus_width_bits"`
	MaxMemClockMHz  int     `json:"max_mem_clock_mhz"`
	MemoryGBps      float64 `json:"memory_gbps"` // bus width / 8 × memory clock × 2
	Simulated       bool    `json:"simulated,omitempty"`
}

// Link is one GPU's host↔device link as the run's link probe measured it (package
// linkprobe, once before the first server), beside the rate NVML's maximum link generation
// and width promise (GPUFacts.PCIeGBps).
type Link struct {
	GPU         string  `json:"gpu"`           // which GPU: NVML index, UUID and PCI address, or the simulated one
	H2DGBps     float64 `json:"h2d_gbps"`      // pinned host → device, the median trial (10^9 bytes a second)
	D2HGBps     float64 `json:"d2h_gbps"`      // device → pinned host, the median trial
	H2DBestGBps float64 `json:"h2d_best_gbps"` // the fastest trial
	D2HBestGBps float64 `json:"d2h_best_gbps"`
	// NominalGBps is the raw one-direction rate of the link NVML reports at its maximum
	// generation × width; H2DFractionOfNominal is H2DGBps over it (a healthy PCIe link copies
	// at about 0.8 of it; a link trained down reads a fraction of that).
	NominalGBps          float64 `json:"nominal_gbps"`
	H2DFractionOfNominal float64 `json:"h2d_fraction_of_nominal"`
	BufferBytes          uint64  `json:"buffer_bytes"`
	LoopCount            int     `json:"loop_count"`
	Trials               int     `json:"trials"`
	// Source says how the rates were had: measured through the CUDA driver, or the simulated
	// GPU's profile (simulated, no copy made).
	Source    string `json:"source"`
	Simulated bool   `json:"simulated,omitempty"`
}

// SlowestLink is the link of links with the lowest measured host→device rate (false when
// none was measured): a model across several GPUs wakes as slowly as its slowest, and a node's
// link is its slowest GPU's.
func SlowestLink(links []Link) (Link, bool) {
	var out Link
	for _, l := range links {
		if l.H2DGBps > 0 && (out.H2DGBps == 0 || l.H2DGBps < out.H2DGBps) {
			out = l
		}
	}
	return out, out.H2DGBps > 0
}

// Check is one threshold's verdict.
type Check struct {
	Name    string  `json:"name"`
	Model   string  `json:"model,omitempty"`
	Value   float64 `json:"value"`
	Op      string  `json:"op"` // "<=", ">=", "==", "within"
	Limit   float64 `json:"limit"`
	Verdict string  `json:"verdict"` // PASS, FAIL or NOT EVALUATED
	// Reason says why a check was not evaluated (its figure is absent);
	// the regression gate's comparison says what it judged whatever its
	// verdict ("judged 20 of 191 metrics; not judged: …"); a failed speed
	// ratio of a crowded machine says so (protocol.NoteCrowded).
	Reason string `json:"reason,omitempty"`
	// Required: the user set this threshold, so not evaluating it fails
	// the run.
	Required bool `json:"required,omitempty"`
	// Phase is the phase that judged it (the latest, for a check several
	// phases evaluate again); "" for a check of the whole run (the
	// regression gate, the memory sampler). What failed reads it: a check
	// of a phase that also recorded a failure follows from that failure.
	Phase string `json:"phase,omitempty"`
}

// NotEvaluated is the verdict of a threshold whose figure is absent.
const NotEvaluated = "NOT EVALUATED"

// Fails reports whether c fails the run: a FAIL, or a required threshold
// that could not be evaluated.
func (c Check) Fails() bool {
	return c.Verdict == "FAIL" || (c.Verdict == NotEvaluated && c.Required)
}

// String names metric, model, value and limit, e.g.
// "sleep.level1.successful_cycles (model A) = 3, limit == 5: FAIL".
func (c Check) String() string {
	m := ""
	if c.Model != "" {
		m = " (model " + c.Model + ")"
	}
	if c.Verdict == NotEvaluated {
		return fmt.Sprintf("%s%s, limit %s %.6g: %s (%s)", c.Name, m, c.Op, c.Limit, c.Verdict, c.Reason)
	}
	s := fmt.Sprintf("%s%s = %.6g, limit %s %.6g: %s", c.Name, m, c.Value, c.Op, c.Limit, c.Verdict)
	if c.Reason != "" { // what the verdict rests on (the gate's: what it judged)
		s += " (" + c.Reason + ")"
	}
	return s
}

// Failure is one thing that went wrong.
type Failure struct {
	Phase string `json:"phase"`
	Model string `json:"model,omitempty"`
	Step  string `json:"step,omitempty"`
	Error string `json:"error"`
}

// Where names where f happened: its phase, model and step, the empty ones
// left out, joined by sep ("sleep-level1 / A / wake" with " / ").
func (f Failure) Where(sep string) string {
	parts := make([]string, 0, 3)
	for _, p := range []string{f.Phase, f.Model, f.Step} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, sep)
}

// Setup is what the run knows before any server starts: the device, the
// memory source, the protocol's context and KV sizes, and whether it is
// simulated.
type Setup struct {
	GPU           string // e.g. "1 × NVIDIA L20"
	GPUPlacement  string // how the servers were put on that GPU (CUDA_VISIBLE_DEVICES)
	GPUFacts      *GPUFacts
	Runtime       string // until a server answers /version
	ContextTokens int
	KVGiB         float64
	Simulated     *Simulated
	MemorySource  string
	MemoryNote    string
	// Speculative are the labels of the models whose servers decode
	// speculatively (--speculative-config): a decode step may emit several
	// tokens per read of the weights.
	Speculative []string
	// Links are the link probe's measurements, one per GPU of the run
	// (taken before the first server starts); LinkNote says why there are
	// none.
	Links    []Link
	LinkNote string
}

// Raw is everything a run measured, before summarising.
type Raw struct {
	Labels        []string          // model labels in config order
	Names         map[string]string // label → model name
	GPU, Runtime  string
	GPUPlacement  string
	ContextTokens int
	KVGiB         float64
	Simulated     *Simulated
	GPUFacts      *GPUFacts
	MemorySource  string
	MemoryNote    string
	// Speculative are the labels of the models that decode speculatively
	// (Setup.Speculative).
	Speculative []string
	// Links are the link probe's measurements, one per GPU of the run; LinkNote says why
	// there are none (the probe off, no memory source, a probe that failed).
	Links    []Link
	LinkNote string
	// NotRun says why nothing was measured where nothing failed either (a
	// gpu-tag run on a machine without a GPU): the report's not_run_reason.
	NotRun string

	Restarts map[string][]Restart
	Cycles   map[string][]Cycle
	Planned  map[string]map[int]int // label → level → planned cycles
	// CyclesOff says, label → level → why, where a level's cycles were not
	// run because the server lacks the endpoints (level 0, KV release).
	CyclesOff map[string]map[int]string
	Perf      map[string][]PerfRun
	Handoffs  []Handoff
	Release   map[string][]float64 // label → percent released by each level-1 sleep
	// ReleasePerGPU is, on a run of several GPUs, label → each level-1
	// sleep's percent released on each GPU.
	ReleasePerGPU map[string][][]float64
	// Attribution says how each model's memory figures were attributed:
	// "process" (per-process figures of the memory source) or
	// "device-delta" (the device's change while only this model changed).
	Attribution map[string]string
	Windows     map[string]Window
	Phases      []string
	Checks      []Check
	Failures    []Failure
	Requests    Requests

	Events        []Event
	DeviceUsedGiB []float64 // every device sample
	// DeviceUsedGiBPerGPU is, on a run of several GPUs, every sample's used
	// memory on each GPU: a row per sample, a value per GPU.
	DeviceUsedGiBPerGPU [][]float64
	RSSPeak             map[string]uint64
	Weights             map[string]Weight // label → weight size, for the physical limits
	// RestartBaseline says what the starts were (fresh caches or not, as
	// measured); "" for the report's default sentence.
	RestartBaseline string
	// Gate is the regression gate's judgement (nil: no baseline).
	Gate     *Gate
	Started  time.Time
	Finished time.Time // zero: the report takes the time it is built

	References  map[string]Reference    // label → probe set answered before the first sleep
	Replays     map[string][]Replay     // label → every replay after a wake
	FirstSleeps map[string][]FirstSleep // label → each server process's first sleep
	Soak        []SoakCycle
	SoakPlanned int
	SoakLevel   int
	Traffic     *Traffic // the traffic phase; nil when it did not run
	// Kubernetes is the Kubernetes phase; nil when it did not run.
	Kubernetes *Kubernetes
	// Cost is each model's state costs (the state-cost phase; cost.go),
	// Fit the node's fit table; nil when it did not run.
	Cost map[string]Cost
	Fit  *Fit
	// Health is each model's engine-health windows (health.go), LostPrefix
	// its lost-prefix measurements; nil when none was taken.
	Health     map[string][]Health
	LostPrefix map[string][]LostPrefix
}

// NewRaw is an empty record of the labelled models, started now.
func NewRaw(labels []string, names map[string]string) Raw {
	return Raw{
		Labels: labels, Names: names, Started: time.Now(),
		Restarts: map[string][]Restart{}, Cycles: map[string][]Cycle{}, Planned: map[string]map[int]int{}, CyclesOff: map[string]map[int]string{},
		Perf: map[string][]PerfRun{}, Release: map[string][]float64{}, Windows: map[string]Window{},
		RSSPeak: map[string]uint64{}, Weights: map[string]Weight{}, Attribution: map[string]string{},
		ReleasePerGPU: map[string][][]float64{},
		References:    map[string]Reference{}, Replays: map[string][]Replay{}, FirstSleeps: map[string][]FirstSleep{},
	}
}

// Clone is a deep copy of r.
func (r Raw) Clone() Raw {
	c := r
	c.Restarts = cloneMap(r.Restarts)
	c.Cycles = cloneMap(r.Cycles)
	c.Perf = cloneMap(r.Perf)
	c.Release = cloneMap(r.Release)
	c.CyclesOff = make(map[string]map[int]string, len(r.CyclesOff))
	for k, v := range r.CyclesOff {
		c.CyclesOff[k] = maps.Clone(v)
	}
	c.Planned = make(map[string]map[int]int, len(r.Planned))
	for k, v := range r.Planned {
		c.Planned[k] = maps.Clone(v)
	}
	c.Windows = maps.Clone(r.Windows)
	c.RSSPeak = maps.Clone(r.RSSPeak)
	c.Weights = maps.Clone(r.Weights)
	c.Cost = maps.Clone(r.Cost) // each Cost's slices are never changed after it is recorded (Writers.Costs)
	if r.Fit != nil {
		f := *r.Fit
		c.Fit = &f
	}
	c.Attribution = maps.Clone(r.Attribution)
	c.ReleasePerGPU = cloneMap(r.ReleasePerGPU)
	c.DeviceUsedGiBPerGPU = slices.Clone(r.DeviceUsedGiBPerGPU)
	c.Names = maps.Clone(r.Names)
	c.Labels = slices.Clone(r.Labels)
	c.Speculative = slices.Clone(r.Speculative)
	c.Handoffs = slices.Clone(r.Handoffs)
	c.Phases = slices.Clone(r.Phases)
	c.Checks = slices.Clone(r.Checks)
	c.Failures = slices.Clone(r.Failures)
	c.DeviceUsedGiB = slices.Clone(r.DeviceUsedGiB)
	c.Events = slices.Clone(r.Events)
	cloneCorrectness(&c, r)
	c.Traffic = cloneTraffic(r.Traffic)
	if r.Gate != nil {
		g := *r.Gate
		g.Runs = slices.Clone(g.Runs)
		g.Rows = slices.Clone(g.Rows)
		c.Gate = &g
	}
	c.Kubernetes = cloneKubernetes(r.Kubernetes)
	c.Links = slices.Clone(r.Links)
	cloneHealth(&c, r)
	return c
}

func cloneMap[V any](m map[string][]V) map[string][]V {
	out := make(map[string][]V, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// DirectionKey is the report key of a handoff direction, e.g. "A→B".
func DirectionKey(from, to string) string { return from + "→" + to }

// Unix is t in Unix seconds.
func Unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// FromUnix is the UTC time of s Unix seconds, Unix's inverse (report.json's
// started and finished).
func FromUnix(s float64) time.Time {
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

// Recorder collects one run's Raw from concurrent phases and samplers.
type Recorder struct {
	mu  sync.Mutex // guards raw and collectors
	raw Raw
	// collectors are gathered at each call, under mu, before it
	// touches raw (Register).
	collectors []Collector
}

// New starts a record for the labelled models.
func New(labels []string, names map[string]string) *Recorder {
	return &Recorder{raw: NewRaw(labels, names)}
}

// lock takes r.mu and gathers what r's collectors learned since: every
// call sees the facts as of its start (Register).
func (r *Recorder) lock() func() {
	r.mu.Lock()
	r.gather()
	return r.mu.Unlock
}

// Raw returns a copy of the record: for what reads it after the
// Recorder may change (the outputs written at the end). A check that
// reads a few series reads them in place (Read).
func (r *Recorder) Raw() Raw {
	defer r.lock()()
	return r.raw.Clone()
}

// Read calls f with the record itself, under the Recorder's lock: what f
// reads is one consistent state and nothing is copied (a phase's checks
// read a model's few series of it). f must not change raw, keep any part
// of it after it returns, or call the Recorder (whose lock it holds).
func (r *Recorder) Read(f func(raw *Raw)) {
	defer r.lock()()
	f(&r.raw)
}

// SetSetup records what is known before any server starts.
func (r *Recorder) SetSetup(s Setup) {
	defer r.lock()()
	w := &r.raw
	w.GPU, w.GPUFacts, w.Runtime, w.ContextTokens, w.KVGiB = s.GPU, s.GPUFacts, s.Runtime, s.ContextTokens, s.KVGiB
	w.GPUPlacement = s.GPUPlacement
	w.Simulated, w.MemorySource, w.MemoryNote = s.Simulated, s.MemorySource, s.MemoryNote
	w.Speculative = slices.Clone(s.Speculative)
	w.Links, w.LinkNote = slices.Clone(s.Links), s.LinkNote
}

// SetNotRun records why the run measured nothing: its report is NOT RUN
// with reason, unless something failed.
func (r *Recorder) SetNotRun(reason string) {
	defer r.lock()()
	r.raw.NotRun = reason
}

// SetServerVersion records the runtime from the version a server reports
// and the CUDA driver version NVML reports ("" when unknown). A server that
// reports a vllmsim version is labelled simulated even when the run did not
// start it as vllmsim (a vllmsim binary named by path).
func (r *Recorder) SetServerVersion(version, cuda string) {
	defer r.lock()()
	r.setServerVersion(version, cuda)
}

// setServerVersion is SetServerVersion; r.mu is held.
func (r *Recorder) setServerVersion(version, cuda string) {
	if r.raw.Simulated == nil && strings.Contains(version, "vllmsim") {
		r.raw.Simulated = &Simulated{Profile: "unknown (set by the server's VLLMSIM_PROFILE)",
			Note: "simulated: the server reports version " + version}
	}
	r.raw.Runtime = RuntimeString(version, r.raw.Simulated != nil, cuda)
}

// RuntimeString is the report's runtime, e.g. "vLLM 0.31.0 / CUDA 13.0".
func RuntimeString(version string, simulated bool, cuda string) string {
	switch {
	case simulated && cuda == "":
		return "vLLM " + version + " (vllmsim) / simulated GPU"
	case simulated:
		return "vLLM " + version + " (vllmsim) / CUDA " + cuda
	case cuda == "":
		return "vLLM " + version
	}
	return "vLLM " + version + " / CUDA " + cuda
}

// Simulated reports whether the run is labelled simulated.
func (r *Recorder) Simulated() bool {
	defer r.lock()()
	return r.raw.Simulated != nil
}

// NoteMemory explains missing memory figures; the first note is kept.
func (r *Recorder) NoteMemory(note string) {
	defer r.lock()()
	if r.raw.MemoryNote == "" {
		r.raw.MemoryNote = note
	}
}

// AddMemoryNote adds a note on the memory figures (after any already there).
func (r *Recorder) AddMemoryNote(note string) {
	defer r.lock()()
	if r.raw.MemoryNote == "" {
		r.raw.MemoryNote = note
	} else if !strings.Contains(r.raw.MemoryNote, note) {
		r.raw.MemoryNote += "; " + note
	}
}

// BenchStartedPrefix begins the bench.txt line that holds the run's start
// time (RFC 3339), by which the regression gate orders a history of runs.
// It is not a benchfmt config line (those begin with a lower-case key), so
// benchstat ignores it: a config line that differs in every run would split
// any comparison of two runs into two tables.
const BenchStartedPrefix = "# wakebench run started "

// The bench.txt lines of the machine's load over each phase window
// (HostLoad), which package report writes and the regression gate reads:
// BenchmarkHost/window=<window> with its two units, no better= (shown,
// never gated).
const (
	HostBench      = "Host"
	HostWindowKey  = "window"
	UnitOthersCPU  = "%-others-cpu"
	UnitWaitPerRun = "wait/run"
)

// HostWindowName is the bench.txt name of window w's load line.
func HostWindowName(w string) BenchName { return NewBenchName(HostBench, HostWindowKey, w) }

// BenchName is a bench.txt benchmark's name (without "Benchmark") as
// fields: its base and its sub-name keys in order.
// "Serve/model=A/stage=baseline/conc=4" is base Serve with the keys model
// A, stage baseline and conc 4. A run's own result lines carry it as built
// (package report), so the regression gate and the page read its keys as
// fields; a name read from a file (a baseline's bench.txt) is split into
// it once, where the file is read (ParseBenchName), as benchstat reads
// its -col /key.
type BenchName struct {
	Base string
	Keys []NameKey
}

// NameKey is one key=value of a BenchName; a part without "=" (the
// "device" of Memory/device) is a Value with no Key.
type NameKey struct{ Key, Value string }

// NewBenchName is base with the keys kv, given as key, value pairs.
func NewBenchName(base string, kv ...string) BenchName {
	n := BenchName{Base: base}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Keys = append(n.Keys, NameKey{kv[i], kv[i+1]})
	}
	return n
}

// String is the name as bench.txt writes it.
func (n BenchName) String() string {
	var b strings.Builder
	b.WriteString(n.Base)
	for _, k := range n.Keys {
		b.WriteByte('/')
		if k.Key != "" {
			b.WriteString(k.Key + "=")
		}
		b.WriteString(k.Value)
	}
	return b.String()
}

// Sub is the name after its base ("model=A/level=1"), "" without keys.
func (n BenchName) Sub() string {
	return strings.TrimPrefix(strings.TrimPrefix(n.String(), n.Base), "/")
}

// Get is key's value, "" where the name has no such key.
func (n BenchName) Get(key string) string {
	for _, k := range n.Keys {
		if k.Key == key && key != "" {
			return k.Value
		}
	}
	return ""
}

// ParseBenchName splits a name as a bench file writes it into its
// fields: the base up to the first "/", then each "/key=value" (or a part
// without "="), so that its String is s again. Only a name read from a
// file is parsed: a run's own lines carry their fields.
func ParseBenchName(s string) BenchName {
	parts := strings.Split(s, "/")
	n := BenchName{Base: parts[0]}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			k, v = "", p
		}
		n.Keys = append(n.Keys, NameKey{k, v})
	}
	return n
}

// Gate is the regression gate's judgement of a run against its baseline
// runs (package gate decides; summary.md shows it).
type Gate struct {
	Baseline     string   // the setting, as given
	Runs         []string // the baseline runs, oldest first
	TolerancePct float64
	Alpha        float64
	Rows         []GateRow
	// Notes are what the gate did not use: the runs of a history past its
	// bound, a baseline file's cut last line.
	Notes []string `json:",omitempty"`
	// Error is why the gate judged nothing (stopped, a baseline it could
	// not read): the run FAILs, its check NOT EVALUATED.
	Error string `json:",omitempty"`
	// SimulatedRuns are the baseline runs whose bench.txt says they ran
	// on vllmsim (its simulated: line), to label beside this run's own.
	SimulatedRuns []string `json:",omitempty"`
	// Coverage is what the gate judged: of how many metrics (Rows) it
	// could flag a change, and why not of the others.
	Coverage GateCoverage
	// MinJudged is thresholds.regression_min_judged: a gate that judged
	// fewer metrics is NOT EVALUATED, and the run FAILs.
	MinJudged int
}

// GateCoverage is what a regression gate judged: Judged of its Metrics
// (compare.txt's rows), a metric judged where its rule could flag a
// change; the others grouped by why not, each with what would judge them.
type GateCoverage struct {
	Judged, Metrics int
	Unjudged        []GateUnjudged `json:",omitempty"`
}

// GateUnjudged is a group of metrics the gate did not judge.
type GateUnjudged struct {
	Reason  string // why, e.g. "fewer than 5 samples in a run"
	Remedy  string // what would judge them, e.g. "9 more baseline runs needed (…)"
	Metrics int
	// Worst is the worst change among them, e.g. "Sleep/model=A/level=2
	// sec/wake +1300 %": a change no rule judged is still named; "" where
	// none changed for the worse.
	Worst string `json:",omitempty"`
}

// String is the coverage in one line: "judged 20 of 191 metrics; not
// judged: 40 …: never gated; 96 …: 9 more baseline runs needed (…),
// worst Sleep/… +1300 %".
func (c GateCoverage) String() string {
	return fmt.Sprintf("judged %d of %d metrics", c.Judged, c.Metrics) + c.NotJudged()
}

// NotJudged is String's part after its count: "; not judged: " and the
// groups, or "" where every metric was judged.
func (c GateCoverage) NotJudged() string {
	if len(c.Unjudged) == 0 {
		return ""
	}
	parts := make([]string, len(c.Unjudged))
	for i, u := range c.Unjudged {
		parts[i] = u.String()
	}
	return "; not judged: " + strings.Join(parts, "; ")
}

// String is the group in words: "96 with fewer than 5 samples in a run: 9
// more baseline runs needed (…), worst Sleep/… +1300 %".
func (u GateUnjudged) String() string {
	s := fmt.Sprintf("%d %s: %s", u.Metrics, u.Reason, u.Remedy)
	if u.Worst != "" {
		s += "; worst change among them " + u.Worst
	}
	return s
}

// GateRow is one metric's verdict: the rule that decided it, the baseline
// runs it used, and the smallest worse change it flags (its power).
type GateRow struct {
	Metric, Unit, Rule string
	Runs               int
	Baseline, ThisRun  float64
	ChangePct          float64
	MinChange          float64 // in the row's Unit (a ratio for a "… ratio to wave-mates" tail); 0 with Gated false where the rule can flag no change (Why says so)
	MinChangePct       float64
	Regression, Gated  bool
	Why                string   // why not gated, or what the rule cannot see
	ChangePoints       []string // in the baseline's history, e.g. "+12.0 % at runs/7/bench.txt"
}

// PhaseRan lists a phase in the report's phases, once.
func (r *Recorder) PhaseRan(name string) {
	defer r.lock()()
	if !slices.Contains(r.raw.Phases, name) {
		r.raw.Phases = append(r.raw.Phases, name)
	}
}

// WindowName is a phase window's name: the labels the phase ran over,
// joined, then "-" and the phase ("A-after-wake", "AB-switch"), as
// protocol's Env.Begin records it.
func WindowName(phase string, labels ...string) string { return strings.Join(labels, "") + "-" + phase }

// Window records a phase window, widened by pad on both sides. A phase
// run again replaces its window.
func (r *Recorder) Window(name string, start, end time.Time, pad time.Duration, host *HostLoad) {
	defer r.lock()()
	r.raw.Windows[name] = Window{Start: Unix(start.Add(-pad)), End: Unix(end.Add(pad)), Host: host}
}

// PlanCycles adds n planned cycles at level to label's count.
func (r *Recorder) PlanCycles(label string, level, n int) {
	defer r.lock()()
	if r.raw.Planned[label] == nil {
		r.raw.Planned[label] = map[int]int{}
	}
	r.raw.Planned[label][level] += n
}

// CyclesOff records that label's cycles at level were not run, and why
// (its server lacks the endpoints).
func (r *Recorder) CyclesOff(label string, level int, why string) {
	defer r.lock()()
	if r.raw.CyclesOff[label] == nil {
		r.raw.CyclesOff[label] = map[int]string{}
	}
	r.raw.CyclesOff[label][level] = why
}

// AddChecks records threshold verdicts. A check of the same name and model
// replaces the earlier one: evaluating a phase's checks again (a retry, a
// second call) records them once, with the latest value.
func (r *Recorder) AddChecks(cs ...Check) {
	defer r.lock()()
	for _, c := range cs {
		i := slices.IndexFunc(r.raw.Checks, func(o Check) bool { return o.Name == c.Name && o.Model == c.Model })
		if i >= 0 {
			r.raw.Checks[i] = c
		} else {
			r.raw.Checks = append(r.raw.Checks, c)
		}
	}
}

// Fail records a failure, once: the same failure recorded again is kept once.
func (r *Recorder) Fail(f Failure) {
	defer r.lock()()
	if !slices.Contains(r.raw.Failures, f) {
		r.raw.Failures = append(r.raw.Failures, f)
	}
}

// Failed reports whether a failure of phase is recorded.
func (r *Recorder) Failed(phase string) bool {
	defer r.lock()()
	return slices.ContainsFunc(r.raw.Failures, func(f Failure) bool { return f.Phase == phase })
}

// Stopped is the cause of a run stopped from outside (a signal, go test's
// -timeout): a step it interrupted failed because of the stop, not
// because of the model or the server.
type Stopped struct{ Reason string }

func (s Stopped) Error() string { return s.Reason }

// FailedFor reports whether a failure of phase naming model is recorded.
func (r *Recorder) FailedFor(phase, model string) bool {
	defer r.lock()()
	return slices.ContainsFunc(r.raw.Failures, func(f Failure) bool { return f.Phase == phase && f.Model == model })
}

// Finish records what the run's end knows: every device memory sample in
// GiB, each model's peak host RSS, and the end time.
func (r *Recorder) Finish(deviceUsedGiB []float64, rssPeak map[string]uint64, at time.Time) {
	defer r.lock()()
	r.raw.DeviceUsedGiB = append(r.raw.DeviceUsedGiB, deviceUsedGiB...)
	maps.Copy(r.raw.RSSPeak, rssPeak)
	r.raw.Finished = at
}

// Weight is label's weight size as recorded, and whether one is.
func (r *Recorder) Weight(label string) (Weight, bool) {
	defer r.lock()()
	w, ok := r.raw.Weights[label]
	return w, ok
}

// Evaluate compares value with limit by op: "<=", ">=", "==", or "within"
// (a change in percent no further than limit from zero either way).
func Evaluate(name, model string, value float64, op string, limit float64) Check {
	var ok bool
	switch op {
	case "<=":
		ok = value <= limit
	case ">=":
		ok = value >= limit
	case "==":
		ok = value == limit
	case "within":
		ok = value >= -limit && value <= limit
	default:
		panic("record.Evaluate: unknown op " + op)
	}
	c := Check{Name: name, Model: model, Value: value, Op: op, Limit: limit, Verdict: "PASS"}
	if !ok {
		c.Verdict = "FAIL"
	}
	return c
}
