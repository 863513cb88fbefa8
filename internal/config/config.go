// Package config is wakebench's suite configuration: the models, the protocol
// counts, thresholds, backends and output directory. It loads from the JSON
// file named by WAKEBENCH_CONFIG, applies WAKEBENCH_* environment overrides
// and validates everything before any server starts.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
)

// EnvFile names the environment variable holding the config file path.
const EnvFile = "WAKEBENCH_CONFIG"

// Config is the whole suite configuration. JSON keys are the documented names.
type Config struct {
	// Command is the server program: "vllmsim" (built from this module), "vllm",
	// or a path. It is started as `COMMAND serve MODEL …`.
	Command string `json:"command"`
	// Memory is the GPU memory source: "nvml" (the real device), "sim"
	// (vllmsim's simulated GPU) or "none".
	Memory string `json:"memory"`
	// GPUIndex is the NVML index of the GPU the servers share.
	GPUIndex int `json:"gpu_index"`
	// GPUs is how many GPUs the run uses, from gpu_index on: more than one
	// for models that span GPUs (--tensor-parallel-size). Every server sees
	// all of them; every one is sampled.
	GPUs int `json:"gpus"`
	// Host is the address servers bind to and are reached at; loopback unless set.
	Host string `json:"host"`
	// APIKey, if set, is given to every server (as VLLM_API_KEY, never on the
	// command line) and sent by the client; it never appears in any output.
	APIKey string `json:"api_key"`
	// Sim configures vllmsim when Command is vllmsim.
	Sim        Sim        `json:"sim"`
	Models     []Model    `json:"models"`
	Protocol   Protocol   `json:"protocol"`
	Timeouts   Timeouts   `json:"timeouts"`
	Thresholds Thresholds `json:"thresholds"`
	Traffic    Traffic    `json:"traffic"`
	Kubernetes Kubernetes `json:"kubernetes"`
	Fleet      Fleet      `json:"fleet"` // the fleet run (TestFleet; fleet.go)
	// OutDir receives report.json, bench.txt, samples.csv and the server logs.
	OutDir string `json:"out_dir"`
	// Baseline is the runs to gate regressions against
	// (WAKEBENCH_BASELINE): previous runs' bench.txt files or directories of
	// runs, comma- or colon-separated; empty: no gate.
	Baseline string `json:"baseline"`
	// FreshCaches gives each model's initial start empty compile caches
	// (VLLM_CACHE_ROOT, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR,
	// CUDA_CACHE_PATH) that its warm starts reuse, so restart_initial is a
	// first start on any runner; false leaves the runner's own caches.
	FreshCaches bool `json:"fresh_caches"`

	// Env is added to every server's environment (after wakebench's own
	// settings, so it overrides them), e.g. a vLLM environment variable.
	Env map[string]string `json:"env"`
	// Variants, two or more, make the run a variant run (docs/variants.md):
	// the protocol runs once per variant in each of protocol.variant_blocks
	// blocks on the same GPU, and every figure of every variant is
	// compared with the first's, block by block.
	Variants []Variant `json:"variants"`

	// UserThresholds are the thresholds keys the config file or the
	// environment set (not left at their defaults): a threshold the user
	// set that cannot be evaluated fails the run.
	UserThresholds []string `json:"-"`
}

// Sim is the simulator's profile and time scale.
type Sim struct {
	Profile   string  `json:"profile"`
	TimeScale float64 `json:"time_scale"`
	// HostScale is the share of a level-1 sleep's modelled pinned host
	// backup that vllmsim really allocates (VLLMSIM_HOST_SCALE): 1 holds the
	// weight bytes in host memory as vLLM does; less keeps a large
	// profile's run within a small machine, and the host figures are then
	// that much smaller (the report's simulated note says so).
	HostScale float64 `json:"host_scale"`
	// Era is the vLLM release line whose API vllmsim speaks
	// (VLLMSIM_ERA, docs/vllm-api.md §1): "a" (≤ 0.11), "b" (0.17 to
	// 0.30), "c" (0.31), "d" (0.32 and 0.33, the newest) or "proposed" (d
	// with what open vLLM PRs propose); "" is vllmsim's default, d.
	Era string `json:"era"`
	// Device is where vllmsim's device memory lives (VLLMSIM_DEVICE): "" or "sim", the
	// simulated GPU; "cuda", real-device mode: weights, KV cache and residual allocated on
	// the real GPU the run measures (memory "nvml"), sleeps and wakes copying them for real
	// (docs/vllmsim.md "Real-device mode").
	Device string `json:"device"`
}

// SimDevices are the values of sim.device.
var SimDevices = []string{"", "sim", "cuda"}

// SimEras are vllmsim's eras (package vllmsim's, which config may not import).
var SimEras = []string{"a", "b", "c", "d", "proposed"}

// SimProfiles are vllmsim's built-in profiles (package vllmsim's
// ProfileNames, which config may not import: TestSimProfilesAreVllmsims
// keeps the two lists the same), for sim.profile and
// fleet.local_nodes[].profile.
var SimProfiles = []string{"a100", "demo", "h100", "h100-pcie-gen3x8", "l20", "tiny"}

// MaxSimTimeScale bounds sim.time_scale as vllmsim bounds
// VLLMSIM_TIME_SCALE: a thousand times slower than the profile.
const MaxSimTimeScale = 1000

// Model is one server.
type Model struct {
	Label string `json:"label"` // A, B, … : report key, log and benchmark name
	Name  string `json:"name"`  // model name or path given to `serve`
	Port  int    `json:"port"`  // 0 picks a free port
	// GPUMemoryUtilization is the per-instance share of GPU memory vLLM checks
	// as free at start-up.
	GPUMemoryUtilization float64  `json:"gpu_memory_utilization"`
	ExtraArgs            []string `json:"extra_args"`
	// SimFaults are vllmsim faults to inject into this model's server
	// (VLLMSIM_FAULTS syntax, e.g. "wake-fail=2"); vllmsim only.
	SimFaults string `json:"sim_faults"`
	// LoRAModules are LoRA adapters served beside the model, name → path
	// (--enable-lora --lora-modules name=path …); each gets a correctness
	// probe of its own.
	LoRAModules map[string]string `json:"lora_modules"`
	// Thresholds override the global thresholds for this model, by key
	// (e.g. {"max_residual_gib": 2}).
	Thresholds map[string]float64 `json:"thresholds"`
}

// Protocol holds the counts of the measurement protocol (DESIGN.md).
type Protocol struct {
	RestartWarm   int `json:"restart_warm"`    // warm starts after the initial one
	SleepL1Cycles int `json:"sleep_l1_cycles"` // level-1 sleep/wake cycles per model
	SleepL2Cycles int `json:"sleep_l2_cycles"` // level-2 sleep/wake cycles per model
	// SleepL0Cycles: level-0 cycles per model (the scheduler paused,
	// nothing freed; vLLM with /pause only). KVReleaseCycles: KV-only
	// release cycles (pause, /release_kv_cache_memory, wake_up?tags=kv_cache;
	// vLLM PR #44890). 0 turns a cycle off.
	SleepL0Cycles   int `json:"sleep_l0_cycles"`
	KVReleaseCycles int `json:"kv_release_cycles"`
	// PoisonDiscardedPages: with correctness replays on, servers run with
	// VLLM_POISON_DISCARDED_PAGES=1, so a level-2 wake that skipped its
	// reload answers garbage the oracle cannot miss. vLLM then fills every
	// discarded page on wake (the KV cache at each wake: kv_gib at the
	// GPU's memory bandwidth, milliseconds), inside the wake figures.
	PoisonDiscardedPages bool    `json:"poison_discarded_pages"`
	Concurrency          []int   `json:"concurrency"`        // serving concurrencies
	Rounds               int     `json:"rounds"`             // rounds per concurrency
	RequestsPerRound     int     `json:"requests_per_round"` // requests per round
	Handoffs             int     `json:"handoffs"`           // switch handoffs after the initial activation
	SwitchLevel          int     `json:"switch_level"`       // the level a handoff puts the outgoing model to sleep at (1 or 2)
	ContextTokens        int     `json:"context_tokens"`     // --max-model-len
	KVGiB                float64 `json:"kv_gib"`             // --kv-cache-memory-bytes, in GiB
	MaxTokens            int     `json:"max_tokens"`         // output tokens per request (ignore_eos)
	ProbeMaxTokens       int     `json:"probe_max_tokens"`   // output tokens of a first-token probe
	Prompt               string  `json:"prompt"`
	SettleS              float64 `json:"settle_s"`     // hold after a sleep and after a wake, for memory to settle
	WindowPadS           float64 `json:"window_pad_s"` // phase windows are widened by this much on each side
	SampleHz             float64 `json:"sample_hz"`    // GPU memory sampling rate
	// LinkProbeMiB is the link probe's buffer (package linkprobe: pinned host↔device copies
	// of it, once per run before the first server); 0 turns the probe off.
	LinkProbeMiB int `json:"link_probe_mib"`
	// The correctness oracle: a fixed probe set generated greedily before
	// each model's first sleep and replayed after every wake.
	CorrectnessMaxTokens int     `json:"correctness_max_tokens"` // tokens per probe; 0 turns the oracle off
	CorrectnessLogprobs  int     `json:"correctness_logprobs"`   // top-k logprobs per token (vLLM allows up to 20); 0: ids only
	LogprobTolerance     float64 `json:"logprob_tolerance"`      // nats a replayed token's logprob may differ by
	// SoakCycles > 0 runs the soak phase: that many handoffs rotating over
	// every model (three or more), sleeping at SoakLevel.
	SoakCycles int `json:"soak_cycles"`
	SoakLevel  int `json:"soak_level"`
	// EngineTolerancePercent: the server's own account of a sleep (its log
	// lines, its metric) disagrees with the harness's when they differ by
	// more than this (and by more than 10 ms or 0.1 GiB).
	EngineTolerancePercent float64 `json:"engine_tolerance_percent"`
	// OptIn names the phases that run only when named here (package
	// phases: a Phase marked OptIn); each name once. Which names exist is
	// the phase list's to say (phases.CheckOptIn), not the config's.
	OptIn []string `json:"opt_in"`
	// CostDwellS is how long the state-cost phase holds each state (awake
	// idle, asleep at level 1 and 2, KV released, stopped) to measure the
	// GPU power held from the energy counter; 0 turns the phase off.
	CostDwellS float64 `json:"cost_dwell_s"`
	// HealthRequests is the engine-health burst: that many requests of
	// HealthMaxTokens each, one at a time, to the model and then to each
	// of its LoRA adapters, before the first sleep and after each kind of
	// wake, their figures from the server's own /metrics (docs/metrics.md,
	// "Engine health"); 0 turns the windows off.
	HealthRequests  int `json:"health_requests"`
	HealthMaxTokens int `json:"health_max_tokens"`
	// LostPrefixTokens is the lost-prefix probe's prompt in tokens (at
	// most half of ContextTokens: LostPrefixLen): sent twice warm before a
	// sleep and again as the first request after the wake, at each level
	// (the after-wake phases); 0 turns it off.
	LostPrefixTokens int `json:"lost_prefix_tokens"`
	// VariantBlocks is how many blocks a variant run (variants) runs,
	// each every variant once; VariantOrder their order within a block
	// (VariantOrders), drawn from VariantSeed when "random".
	VariantBlocks int    `json:"variant_blocks"`
	VariantOrder  string `json:"variant_order"`
	VariantSeed   int    `json:"variant_seed"`
	// VariantGate: a variant worse than the reference fails the variant
	// run (an upgrade's gate); false shows every variant's worse and
	// better figures without failing on them (an options study, where a
	// cost such as host memory is the point).
	VariantGate bool `json:"variant_gate"`
	// VariantFocus, set, is the figures the question of a variant run is
	// about, stated before it runs: each "NAME" or "NAME UNIT", NAME a
	// path.Match pattern over bench.txt's names without "Benchmark"
	// ("Sleep/*/* sec/wake"). The paired verdict's multiple-comparison
	// family is then those figures alone, and only they can fail the run;
	// the rest are judged in a family of their own and shown. Empty: every
	// figure is one family, and any can fail it.
	VariantFocus []string `json:"variant_focus"`
	// VariantBlockFigure is a block's figure of each metric, from the
	// samples its run wrote (VariantBlockFigures): "median", or "best":
	// for a time or a rate the fastest time or the highest rate (the
	// better= direction's extreme), which CPU contention moves least.
	VariantBlockFigure string `json:"variant_block_figure"`
}

// InVariantFocus reports whether the figure name (bench.txt's, without
// "Benchmark") in unit is in protocol.variant_focus; every figure is when
// the focus is empty.
func (p Protocol) InVariantFocus(name, unit string) bool {
	if len(p.VariantFocus) == 0 {
		return true
	}
	for _, f := range p.VariantFocus {
		pat, u, _ := strings.Cut(f, " ")
		if ok, _ := path.Match(pat, name); ok && (u == "" || u == unit) {
			return true
		}
	}
	return false
}

// LostPrefixLen is the lost-prefix probe's prompt length in tokens:
// lost_prefix_tokens, at most half of context_tokens (the rest holds the
// probe's output); 0 when off.
func (p Protocol) LostPrefixLen() int { return min(p.LostPrefixTokens, p.ContextTokens/2) }

// Traffic is the traffic phase: open-loop arrivals for every model through
// a wake-on-demand router, the same arrivals with every model awake (the
// ideal), and sleeps with requests in flight.
type Traffic struct {
	DurationS  float64            `json:"duration_s"` // arrivals span this long; 0 with no trace: no traffic run
	Rate       float64            `json:"rate"`       // requests per second of each model not in rates
	Rates      map[string]float64 `json:"rates"`      // label → requests per second
	Arrivals   string             `json:"arrivals"`   // constant, poisson or gamma
	Burstiness float64            `json:"burstiness"` // gamma shape (1 = Poisson, < 1 burstier)
	Seed       int                `json:"seed"`
	// WarmupRequests: each model's first requests are sent but not counted.
	WarmupRequests int             `json:"warmup_requests"`
	Workload       TrafficWorkload `json:"workload"`
	// Trace, when set, replaces the arrivals: a CSV file of
	// t_s,model,prompt_tokens,output_tokens (model: a label).
	Trace      string `json:"trace"`
	SleepLevel int    `json:"sleep_level"` // level the router puts an idle model to sleep at
	// MinDwellS keeps a woken model awake at least this long, taking its
	// own requests, before the router switches away (0: switch at once).
	MinDwellS float64 `json:"min_dwell_s"`
	// MaxQueue bounds the requests waiting in the router for a wake; one
	// more is shed: not sent, counted apart from failures and gated by
	// thresholds.max_shed_requests.
	MaxQueue int `json:"max_queue"`
	// MaxInFlight bounds the requests in flight at once in either run (the
	// router's and the ideal one), as a client's connection pool would:
	// an arrival beyond it waits for one to end, the wait in its latency.
	// Each holds a connection, an open file; unbounded, a high rate ran
	// the harness out of files and failed requests in both runs alike.
	MaxInFlight int `json:"max_in_flight"`
	SLO         SLO `json:"slo"`
	// Ideal runs the same arrivals again with every model awake where the
	// GPU holds them all: the cost of sharing is the goodput ratio.
	Ideal bool `json:"ideal"`
	// InFlightRequests requests decode while the model is put to sleep in
	// each of InFlightModes (vLLM's pause modes abort, wait, keep); 0: off.
	InFlightRequests int      `json:"in_flight_requests"`
	InFlightModes    []string `json:"in_flight_modes"`
}

// Kubernetes is the Kubernetes phase (TestKubernetes): the models as Pods
// on a real control plane sharing one GPU through a DRA ResourceClaim. Off
// while control_plane is "".
type Kubernetes struct {
	// ControlPlane is "local" (a control plane and a node agent started
	// here on 127.0.0.1; make k8s) or "kubeconfig" (an existing cluster).
	ControlPlane string `json:"control_plane"`
	// BinDir holds etcd, kube-apiserver, kube-scheduler and
	// kube-controller-manager for "local" (default: $WAKEBENCH_K8S_BIN).
	BinDir string `json:"bin_dir"`
	// Kubeconfig is the cluster's kubeconfig for "kubeconfig" ("":
	// $KUBECONFIG, then ~/.kube/config).
	Kubeconfig string `json:"kubeconfig"`
	Namespace  string `json:"namespace"`
	// Image is the Pods' container image; the local node agent runs the
	// configured command (vllmsim or vllm) in its place.
	Image string `json:"image"`
	// DeviceClass is the DeviceClass the claims request: the NVIDIA DRA
	// driver's gpu.nvidia.com on a cluster; the local phase creates its own.
	DeviceClass string `json:"device_class"`
	// HostNetwork runs the Pods on the node's network (always, locally):
	// the harness reaches each Pod at its IP and port.
	HostNetwork bool `json:"host_network"`
	// Port is the Pods' container port when not on the host network.
	Port     int `json:"port"`
	Handoffs int `json:"handoffs"` // handoffs across Pods, alternating
	// SleepLevel is the level Pods are put to sleep at (1 or 2).
	SleepLevel int `json:"sleep_level"`
	// TimeoutS bounds each wait: scheduling, start, Ready, routable.
	TimeoutS float64 `json:"timeout_s"`
	// RefuseWaitS is how long an unschedulable verdict is waited for in the
	// capacity accounting (the Pod that should be refused).
	RefuseWaitS float64 `json:"refuse_wait_s"`
}

// On says whether the Kubernetes phase runs.
func (k Kubernetes) On() bool { return k.ControlPlane != "" }

// TrafficWorkload is the requests' lengths: fixed, uniform (between the
// min_ and the plain keys) or dataset (a JSONL file), with a prefix every
// prompt shares.
type TrafficWorkload struct {
	Kind               string `json:"kind"`
	PromptTokens       int    `json:"prompt_tokens"`
	OutputTokens       int    `json:"output_tokens"`
	MinPromptTokens    int    `json:"min_prompt_tokens"`
	MinOutputTokens    int    `json:"min_output_tokens"`
	Dataset            string `json:"dataset"`
	SharedPrefixTokens int    `json:"shared_prefix_tokens"`
}

// SLO is a per-request service-level objective, in seconds (0: not set).
type SLO struct {
	TTFTS float64 `json:"ttft_s"`
	TPOTS float64 `json:"tpot_s"`
	E2ES  float64 `json:"e2e_s"`
}

// RateOf is the traffic rate of the model labelled l.
func (t Traffic) RateOf(l string) float64 {
	if r, ok := t.Rates[l]; ok {
		return r
	}
	return t.Rate
}

// Timeouts bound every blocking step, in seconds.
type Timeouts struct {
	StartS   float64 `json:"start_s"`   // spawn → /health 200
	RequestS float64 `json:"request_s"` // one inference request
	SleepS   float64 `json:"sleep_s"`   // one /sleep call
	WakeS    float64 `json:"wake_s"`    // one wake call (each of the level-2 steps)
	StopS    float64 `json:"stop_s"`    // SIGTERM → SIGKILL grace
	PollMS   float64 `json:"poll_ms"`   // readiness poll interval
}

// Thresholds are the PASS/FAIL limits. A zero limit is off.
type Thresholds struct {
	MaxFailedRequests   int     `json:"max_failed_requests"`
	MinL1ReleasePercent float64 `json:"min_l1_release_percent"` // median, per model
	MaxResidualGiB      float64 `json:"max_residual_gib"`       // median, per model and level
	// MaxResidualGiBPerGPU: for a model across GPUs, the median over its
	// cycles of the residual on the GPU that kept the most (vllm#32714:
	// 16 GB a GPU asleep at TP 4 on 0.14/0.15 against 1.14 GB on 0.13).
	MaxResidualGiBPerGPU   float64 `json:"max_residual_gib_per_gpu"`
	MaxL1WakeToFirstTokenS float64 `json:"max_l1_wake_to_first_token_s"` // p95
	MaxL2WakeToFirstTokenS float64 `json:"max_l2_wake_to_first_token_s"` // p95
	MaxL0WakeToFirstTokenS float64 `json:"max_l0_wake_to_first_token_s"` // p95: a level-0 pause's wake
	MaxKVWakeToFirstTokenS float64 `json:"max_kv_wake_to_first_token_s"` // p95: wake_up?tags=kv_cache after a KV-only release
	MinAfterWakeTPSRatio   float64 `json:"min_after_wake_tps_ratio"`     // after-wake / baseline median tok/s, per concurrency (each after-wake level)
	// Engine health after each kind of wake against before the first
	// sleep, each feature the model's configuration turns on: speculative
	// acceptance, prefix-cache hit rate and decode rate as ratios (after /
	// before); each adapter's hit rate as a change (after − before, either
	// way: an adapter whose requests hit the base model's blocks is no
	// longer applied).
	MinSpecAcceptanceRatio float64 `json:"min_spec_acceptance_ratio"`
	MinPrefixHitRatio      float64 `json:"min_prefix_hit_ratio"`
	MinDecodeRateRatio     float64 `json:"min_decode_rate_ratio"`
	MaxAdapterHitChange    float64 `json:"max_adapter_hit_change"`
	// MaxLostPrefixS: the lost-prefix probe's first request after a wake
	// may take at most this much longer to its first token than warm, per
	// level.
	MaxLostPrefixS         float64 `json:"max_lost_prefix_s"`
	MaxSwitchToFirstTokenS float64 `json:"max_switch_to_first_token_s"` // p95, per direction
	// MaxResidualGrowthMiBPerCycle: a model's residual memory may grow by
	// at most this much per soak cycle (the fitted slope).
	MaxResidualGrowthMiBPerCycle float64 `json:"max_residual_growth_mib_per_cycle"`
	// The traffic phase: goodput with the models sharing the GPU against
	// goodput with all awake (the ideal), and the p99 arrival → first
	// token of the requests that found their model asleep.
	MinTrafficGoodputRatio  float64 `json:"min_traffic_goodput_ratio"`
	MaxAsleepFirstTokenP99S float64 `json:"max_asleep_first_token_p99_s"`
	// MaxShedRequests: requests the router shed with its queue full
	// (traffic.max_queue), not sent: not failures, gated here.
	MaxShedRequests int `json:"max_shed_requests"`
	// MinHostHeadroomGiB: before every level-1 sleep, the host memory the
	// runner may use (package hostmem: the cgroup's headroom, else
	// MemAvailable) must cover the model's pinned weight backup plus this
	// much, else the sleep is not sent (0: off).
	MinHostHeadroomGiB float64 `json:"min_host_headroom_gib"`
	// MaxSleepingPowerW: the GPU power a model holds asleep (each level,
	// over protocol.cost_dwell_s, from the energy counter), per model: the
	// device's power with it asleep less with it stopped, the other
	// models as they were (package statecost's checks).
	MaxSleepingPowerW float64 `json:"max_sleeping_power_w"`
	// MaxPodSwitchRoutableS: the Kubernetes phase's handoffs across Pods,
	// begun → the woken Pod ready in its EndpointSlice, p95 per direction.
	MaxPodSwitchRoutableS float64 `json:"max_pod_switch_routable_s"`
	// RegressionPercent: against the baseline, a metric worse by more than
	// this (and significantly so, at RegressionAlpha, a significance level
	// in (0, 1)) fails the run.
	RegressionPercent float64 `json:"regression_percent"`
	RegressionAlpha   float64 `json:"regression_alpha"`
	// RegressionMinJudged: against the baseline, the fewest metrics the
	// gate must judge (its rule able to flag a change: package gate's
	// Coverage); judging fewer, the comparison is NOT EVALUATED and the run
	// FAILs. 0 accepts a gate that judged nothing.
	RegressionMinJudged int `json:"regression_min_judged"`
}

// DefaultPrompt is about 26 tokens, like the reference run's prompt.
const DefaultPrompt = "Explain why a model server that sleeps between requests can share one GPU with another model."

// Default is the reference run's protocol (testdata/l20-reference-report.json)
// on the build's backends: vllmsim's tiny profile and simulated GPU, or with
// the gpu tag real vLLM, NVML and the reference run's models.
func Default() Config {
	c := base()
	backendDefaults(&c)
	return c
}

// base is Default without a backend or models.
func base() Config {
	return Config{
		Host: "127.0.0.1",
		Sim:  Sim{Profile: "tiny", TimeScale: 1, HostScale: 1},
		Protocol: Protocol{
			RestartWarm: 2, SleepL1Cycles: 5, SleepL2Cycles: 3, SleepL0Cycles: 3, KVReleaseCycles: 3, PoisonDiscardedPages: true,
			Concurrency: []int{1, 4}, Rounds: 2, RequestsPerRound: 8,
			Handoffs: 19, ContextTokens: 4096, KVGiB: 4, MaxTokens: 128, ProbeMaxTokens: 8,
			Prompt: DefaultPrompt, SettleS: 0.1, WindowPadS: 2, SampleHz: 20, LinkProbeMiB: 64,
			CorrectnessMaxTokens: 16, CorrectnessLogprobs: 5, LogprobTolerance: 0.05,
			SoakLevel: 1, SwitchLevel: 1, EngineTolerancePercent: 10, CostDwellS: 1,
			HealthRequests: 4, HealthMaxTokens: 32, LostPrefixTokens: 2048,
			VariantBlocks: 4, VariantOrder: "random", VariantSeed: 1, VariantGate: true, VariantBlockFigure: "median",
		},
		Timeouts: Timeouts{StartS: 600, RequestS: 300, SleepS: 300, WakeS: 300, StopS: 10, PollMS: 5},
		Thresholds: Thresholds{
			MaxFailedRequests: 0, MinL1ReleasePercent: 80, MaxResidualGiB: 4, MaxResidualGiBPerGPU: 2, MinAfterWakeTPSRatio: 0.95,
			MaxResidualGrowthMiBPerCycle: 1, RegressionPercent: 10, RegressionAlpha: 0.05, RegressionMinJudged: 1,
			MinTrafficGoodputRatio: 0.5, MaxAsleepFirstTokenP99S: 60, MinHostHeadroomGiB: 1,
			MinSpecAcceptanceRatio: 0.8, MinPrefixHitRatio: 0.8, MinDecodeRateRatio: 0.8, MaxAdapterHitChange: 0.1, MaxLostPrefixS: 10,
		},
		Traffic: Traffic{DurationS: 6, Rate: 2, Arrivals: "poisson", Burstiness: 1, Seed: 1, WarmupRequests: 1,
			Workload:   TrafficWorkload{Kind: "fixed", PromptTokens: 64, OutputTokens: 32},
			SleepLevel: 1, MaxQueue: 256, MaxInFlight: 1024, SLO: SLO{TTFTS: 10, TPOTS: 0.5, E2ES: 60}, Ideal: true,
			InFlightRequests: 4, InFlightModes: []string{"abort", "wait", "keep"}},
		Kubernetes: Kubernetes{Namespace: "wakebench", Image: "vllm/vllm-openai:latest", DeviceClass: "gpu.nvidia.com",
			Port: 8000, Handoffs: 4, SleepLevel: 1, TimeoutS: 120, RefuseWaitS: 10},
		OutDir:      "out",
		FreshCaches: true,
		GPUs:        1,
	}
}

// Load reads the config: defaults, then the file named by WAKEBENCH_CONFIG
// (if set), then WAKEBENCH_* overrides; then validates it.
func Load(getenv func(string) string) (Config, error) {
	cfg := Default()
	var file []byte
	if path := getenv(EnvFile); path != "" {
		b, err := readConfigFile(path)
		if err != nil {
			return withOutDir(cfg, nil, getenv), fmt.Errorf("config: %s=%s: %w", EnvFile, path, err)
		}
		file = b
		if err := Decode(b, &cfg); err != nil {
			return withOutDir(cfg, file, getenv), fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := applyEnv(&cfg, getenv); err != nil {
		return withOutDir(cfg, file, getenv), fmt.Errorf("config: %w", err)
	}
	t := reflect.TypeOf(Thresholds{})
	for i := range t.NumField() {
		k := jsonKey(t.Field(i))
		if getenv(EnvName("thresholds", k)) != "" && !slices.Contains(cfg.UserThresholds, k) {
			cfg.UserThresholds = append(cfg.UserThresholds, k)
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if name := getenv(EnvVariant); name != "" { // one block of a variant run: the variant's settings
		v, err := cfg.ForVariant(name)
		if err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		cfg = v
	}
	return cfg, nil
}

// withOutDir is cfg, from a config that could not be loaded, with the
// out_dir its user asked for, so the run's FAIL report lands where they
// look: WAKEBENCH_OUT_DIR when set, else the file's "out_dir" when that
// much of it reads (the rest may be wrong), else cfg's. The baseline is
// taken the same way (WAKEBENCH_BASELINE, else the file's "baseline"):
// the report's claim of out_dir leaves the baseline's files alone.
func withOutDir(cfg Config, file []byte, getenv func(string) string) Config {
	var f struct {
		OutDir   json.RawMessage `json:"out_dir"`
		Baseline json.RawMessage `json:"baseline"`
	}
	fileOK := json.Unmarshal(file, &f) == nil
	for _, k := range []struct {
		key string
		raw json.RawMessage
		to  *string
	}{{"out_dir", f.OutDir, &cfg.OutDir}, {"baseline", f.Baseline, &cfg.Baseline}} {
		var d string
		switch {
		case getenv(EnvName(k.key)) != "":
			*k.to = getenv(EnvName(k.key))
		case fileOK && json.Unmarshal(k.raw, &d) == nil && d != "":
			*k.to = d
		}
	}
	return cfg
}

// Decode parses JSON strictly over cfg: unknown keys and wrong types are
// errors naming the key. Keys present replace the defaults; a "models" list
// replaces the default models whole.
func Decode(b []byte, cfg *Config) error {
	obj, errs := checkJSON(b)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if _, ok := obj["models"]; ok {
		cfg.Models = nil
	}
	if t, ok := obj["thresholds"].(map[string]any); ok {
		for k := range t {
			if !slices.Contains(cfg.UserThresholds, k) {
				cfg.UserThresholds = append(cfg.UserThresholds, k)
			}
		}
		slices.Sort(cfg.UserThresholds)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return fmt.Errorf("not a valid config: %w", err) // checkJSON should have named it
	}
	return nil
}

var labelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// underLast is s with its last "-" an "_".
func underLast(s string) string {
	i := strings.LastIndexByte(s, '-')
	return s[:i] + "_" + s[i+1:]
}

// procsLikeRE is a label's end that benchfmt reads as go test's
// -GOMAXPROCS suffix of a benchmark name (benchfmt.Name.Parts).
var procsLikeRE = regexp.MustCompile(`-[0-9]+$`)

// Validate checks every value; the error names the key and what to change,
// one line per problem, section by section in this order.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	c.validateServers(bad)
	c.validateModels(bad)
	c.validateProtocol(bad)
	c.validateTraffic(bad)
	c.validateKubernetes(bad)
	c.Fleet.validate(bad)
	c.validateTimeouts(bad)
	c.validateThresholds(bad)
	c.validateAPIKey(bad)
	c.validateRegressionGate(bad)
	c.validateVariants(bad)
	c.validateFleetTime(bad)
	if c.OutDir == "" {
		bad("out_dir", "empty: name a directory for the report")
	}
	return errors.Join(errs...)
}

// badFunc reports one problem: the key and what to change.
type badFunc = func(key, format string, a ...any)

// validateServers checks how the servers run: the program, the address,
// the GPUs and memory source they share, the simulator.
func (c Config) validateServers(bad badFunc) {
	if c.Host == "" {
		bad("host", `empty: use "127.0.0.1" (loopback) or the address to bind`)
	}
	if c.Command == "" {
		bad("command", `empty: set "vllmsim", "vllm" or a path`)
	}
	switch c.Memory {
	case "nvml", "sim", "none":
	default:
		bad("memory", `%q: want "nvml", "sim" or "none"`, c.Memory)
	}
	if c.GPUs < 1 || c.GPUs > 64 {
		bad("gpus", "%d: want the number of GPUs the run uses, 1 to 64", c.GPUs)
	}
	for i, m := range c.Models {
		if tp, ok := TensorParallel(m.ExtraArgs); ok && tp > c.GPUs {
			bad(fmt.Sprintf("models[%d].extra_args", i), "--tensor-parallel-size %d needs %d GPUs, but gpus is %d: set gpus to %d", tp, tp, c.GPUs, tp)
		}
	}
	if c.GPUIndex < 0 {
		bad("gpu_index", "%d: want an NVML device index (0 for the first GPU)", c.GPUIndex)
	}
	if c.Memory == "sim" && c.Command != "vllmsim" {
		bad("memory", `"sim" reads vllmsim's simulated GPU, but command is %q: use "none"`, c.Command)
	}
	if c.Command == "vllmsim" && !slices.Contains(SimProfiles, c.Sim.Profile) {
		bad("sim.profile", "%q: not a vllmsim profile (want one of %s)", c.Sim.Profile, strings.Join(SimProfiles, ", "))
	}
	if !(c.Sim.TimeScale > 0 && c.Sim.TimeScale <= MaxSimTimeScale) {
		bad("sim.time_scale", "%v: want a factor in (0, %d] on every modelled duration (vllmsim's VLLMSIM_TIME_SCALE bound)", c.Sim.TimeScale, MaxSimTimeScale)
	}
	if c.Sim.Era != "" && !slices.Contains(SimEras, c.Sim.Era) {
		bad("sim.era", "%q: want a (vLLM ≤ 0.11), b (0.17 to 0.30), c (0.31), d (0.32 and 0.33, the newest) or proposed (open PRs)", c.Sim.Era)
	}
	if !slices.Contains(SimDevices, c.Sim.Device) {
		bad("sim.device", "%q: want sim (the simulated GPU, the default) or cuda (vllmsim's memory and copies on the real GPU)", c.Sim.Device)
	}
	if c.Sim.Device == "cuda" && (c.Command != "vllmsim" || c.Memory != "nvml") {
		bad("sim.device", `"cuda" puts vllmsim's memory on the real GPU NVML measures: want command "vllmsim" and memory "nvml" (have %q, %q)`, c.Command, c.Memory)
	}
	if c.Sim.Device == "cuda" && c.Sim.HostScale != 1 {
		bad("sim.host_scale", `%v with sim.device "cuda": real-device mode pins the real weights' bytes; leave host_scale at 1`, c.Sim.HostScale)
	}
	if c.Sim.Device == "cuda" {
		for i, m := range c.Models {
			if tp, ok := TensorParallel(m.ExtraArgs); ok && tp > 1 {
				bad(fmt.Sprintf("models[%d].extra_args", i), `--tensor-parallel-size %d with sim.device "cuda": real-device mode runs a server on one GPU (a rank process per GPU is simulated only)`, tp)
			}
		}
	}
	if !(c.Sim.HostScale > 0 && c.Sim.HostScale <= 1) {
		bad("sim.host_scale", "%v: must be in (0, 1]: the share of a level-1 sleep's pinned host backup vllmsim really allocates", c.Sim.HostScale)
	}
}

// validateModels checks the models list: present, labels and ports unique,
// and each model's own keys.
func (c Config) validateModels(bad badFunc) {
	if len(c.Models) == 0 {
		bad("models", "empty: list the models to serve in the file named by %s (see docs/gpu.md)", EnvFile)
	}
	labels, ports := map[string]bool{}, map[int]string{}
	for i, m := range c.Models {
		key := fmt.Sprintf("models[%d]", i)
		if !labelRE.MatchString(m.Label) {
			bad(key+".label", "%q: use letters, digits, - or _ (e.g. \"A\")", m.Label)
		} else if procsLikeRE.MatchString(m.Label) {
			bad(key+".label", "%q ends in - and digits, which bench.txt's readers (benchstat, the regression gate) take for go test's GOMAXPROCS suffix of a name that ends in it (BenchmarkMemory/model=<label>): end it otherwise (e.g. %q)", m.Label, underLast(m.Label))
		} else if labels[m.Label] {
			bad(key+".label", "%q used twice: labels must be unique", m.Label)
		}
		labels[m.Label] = true
		if strings.TrimSpace(m.Name) == "" {
			bad(key+".name", "missing: the model name or path to serve")
		}
		if m.Port < 0 || m.Port > 65535 {
			bad(key+".port", "%d: want 1-65535, or 0 for a free port", m.Port)
		} else if m.Port != 0 {
			if other, ok := ports[m.Port]; ok {
				bad(key+".port", "%d already used by model %s", m.Port, other)
			}
			ports[m.Port] = m.Label
		}
		c.validateModel(bad, key, m)
	}
}

// validateModel checks one model's threshold overrides, faults, extra
// arguments, LoRA adapters and memory share; key is its "models[i]".
func (c Config) validateModel(bad badFunc, key string, m Model) {
	for _, k := range slices.Sorted(maps.Keys(m.Thresholds)) {
		x := m.Thresholds[k]
		switch _, ok := thresholdField(k); {
		case !ok:
			bad(key+".thresholds", "unknown threshold %q (keys as in thresholds)", k)
		case slices.Contains(globalThresholds, k):
			bad(key+".thresholds."+k, "applies to the whole run, not to one model: set it in thresholds")
		default:
			checkThreshold(bad, key+".thresholds."+k, k, x)
		}
	}
	if m.SimFaults != "" && c.Command != "vllmsim" {
		bad(key+".sim_faults", "faults are injected by vllmsim only, but command is %q", c.Command)
	}
	for _, a := range m.ExtraArgs {
		if strings.HasPrefix(a, "--api-key") || strings.HasPrefix(a, "--api_key") {
			bad(key+".extra_args", "pass the key as api_key (it would show in logs as an argument)")
		}
		if sleepModeOff(a) {
			bad(key+".extra_args", "%q turns sleep mode off, and sleep mode is what the suite measures (it passes --enable-sleep-mode itself): remove it", a)
		}
	}
	for _, n := range m.Adapters() {
		switch {
		case !labelRE.MatchString(n):
			bad(key+".lora_modules", "adapter name %q: use letters, digits, - or _", n)
		case n == m.Name:
			bad(key+".lora_modules", "adapter name %q is the model's own name: requests could not tell them apart", n)
		case strings.TrimSpace(m.LoRAModules[n]) == "":
			bad(key+".lora_modules."+n, "empty path: the adapter's directory or Hugging Face id")
		}
	}
	if !(m.GPUMemoryUtilization > 0 && m.GPUMemoryUtilization <= 1) {
		bad(key+".gpu_memory_utilization", "%v: want a share in (0, 1]", m.GPUMemoryUtilization)
	}
}

// validateProtocol checks the protocol's counts, lengths and rates.
func (c Config) validateProtocol(bad badFunc) {
	p := c.Protocol
	// Upper bounds keep a typo (HANDOFFS=1000000000) from running until a
	// timeout: each is far beyond any useful run.
	within := func(key string, v, lo, hi int) {
		switch {
		case v < lo:
			bad("protocol."+key, "%d: must be at least %d", v, lo)
		case v > hi:
			bad("protocol."+key, "%d: at most %d (a run that long is a typo; split it)", v, hi)
		}
	}
	within("restart_warm", p.RestartWarm, 0, 100)
	within("sleep_l1_cycles", p.SleepL1Cycles, 1, MaxCycles)
	within("sleep_l2_cycles", p.SleepL2Cycles, 1, MaxCycles)
	within("sleep_l0_cycles", p.SleepL0Cycles, 0, MaxCycles)
	within("kv_release_cycles", p.KVReleaseCycles, 0, MaxCycles)
	within("rounds", p.Rounds, 1, 1000)
	within("requests_per_round", p.RequestsPerRound, 1, 100_000)
	within("handoffs", p.Handoffs, 1, MaxCycles)
	within("max_tokens", p.MaxTokens, 2, 1<<20) // TPOT needs two tokens
	within("probe_max_tokens", p.ProbeMaxTokens, 1, 1<<20)
	within("correctness_max_tokens", p.CorrectnessMaxTokens, 0, 4096)
	within("correctness_logprobs", p.CorrectnessLogprobs, 0, 20) // vLLM's default --max-logprobs
	within("soak_cycles", p.SoakCycles, 0, MaxCycles)
	for i, name := range p.OptIn {
		if name == "" || slices.Index(p.OptIn, name) != i {
			bad(fmt.Sprintf("protocol.opt_in[%d]", i), "%q: want each opt-in phase's name once (docs/protocol.md)", name)
		}
	}
	within("health_requests", p.HealthRequests, 0, 1000)
	if p.HealthRequests > 0 {
		within("health_max_tokens", p.HealthMaxTokens, 2, 1<<20) // a decode time needs two tokens
	}
	if p.LostPrefixTokens != 0 && (p.LostPrefixTokens < 32 || p.LostPrefixTokens > MaxContextTokens) {
		bad("protocol.lost_prefix_tokens", "%d: want 0 (off) or at least 32 tokens (two KV blocks), at most %d (the probe takes at most half of context_tokens)", p.LostPrefixTokens, MaxContextTokens)
	}
	if p.SoakLevel != 1 && p.SoakLevel != 2 {
		bad("protocol.soak_level", "%d: want 1 or 2", p.SoakLevel)
	}
	if p.SwitchLevel != 1 && p.SwitchLevel != 2 {
		bad("protocol.switch_level", "%d: want 1 or 2", p.SwitchLevel)
	}
	if p.SoakCycles > 0 && len(c.Models) < 3 {
		bad("protocol.soak_cycles", "%d: the soak rotates over at least 3 models, the config has %d: add models or set soak_cycles 0", p.SoakCycles, len(c.Models))
	}
	if !(p.LogprobTolerance >= 0) || math.IsInf(p.LogprobTolerance, 0) {
		bad("protocol.logprob_tolerance", "%v: want nats ≥ 0 (0: exact)", p.LogprobTolerance)
	}
	if !(p.EngineTolerancePercent >= 0) || math.IsInf(p.EngineTolerancePercent, 0) {
		bad("protocol.engine_tolerance_percent", "%v: want a percent ≥ 0", p.EngineTolerancePercent)
	}
	if len(p.Concurrency) == 0 {
		bad("protocol.concurrency", "empty: list at least one concurrency, e.g. [1, 4]")
	}
	for i, cc := range p.Concurrency {
		key := fmt.Sprintf("protocol.concurrency[%d]", i)
		switch {
		case cc < 1:
			bad(key, "%d: must be at least 1", cc)
		case cc > p.RequestsPerRound && p.RequestsPerRound >= 1:
			bad(key, "%d exceeds requests_per_round %d: a round never has more than %d requests in flight; raise requests_per_round to at least %d or lower the concurrency", cc, p.RequestsPerRound, p.RequestsPerRound, cc)
		}
	}
	if p.ContextTokens < p.MaxTokens+1 {
		bad("protocol.context_tokens", "%d: must exceed max_tokens (%d) plus the prompt", p.ContextTokens, p.MaxTokens)
	} else if p.ContextTokens > MaxContextTokens {
		bad("protocol.context_tokens", "%d: at most %d tokens (the longest context windows are about 10 M; beyond this a request's memory estimate overflows)", p.ContextTokens, MaxContextTokens)
	}
	if !(p.KVGiB > 0) {
		bad("protocol.kv_gib", "%v: must be > 0", p.KVGiB)
	} else if p.KVGiB > MaxKVGiB {
		bad("protocol.kv_gib", "%v: at most %d GiB (no GPU holds 1 TiB; --kv-cache-memory-bytes is per GPU)", p.KVGiB, MaxKVGiB)
	}
	if strings.TrimSpace(p.Prompt) == "" {
		bad("protocol.prompt", "empty")
	}
	minDwell, why := MinSimCostDwellS, "the phase's own readings take milliseconds"
	if c.Memory == "nvml" {
		minDwell, why = MinCostDwellS, "NVML's energy counter moves with its power reading, about every 100 ms: a shorter dwell measures its steps, not the power"
	}
	if !(p.CostDwellS == 0 || p.CostDwellS >= minDwell && p.CostDwellS <= 3600) {
		bad("protocol.cost_dwell_s", "%v: want 0 (the state-cost phase off) or seconds in [%g, 3600] (%s)", p.CostDwellS, minDwell, why)
	}
	for _, kv := range []struct {
		k string
		v float64
	}{{"settle_s", p.SettleS}, {"window_pad_s", p.WindowPadS}} {
		if !(kv.v >= 0 && kv.v <= 3600) {
			bad("protocol."+kv.k, "%v: want seconds in [0, 3600]", kv.v)
		}
	}
	if p.SettleS == 0 && p.SleepL0Cycles > 0 {
		// Each level-0 cycle (and the /pause–/resume check after them)
		// sends a request to the paused model and wakes it once the server
		// has taken it (its response headers), waiting for the request to
		// be written, then at most settle_s for the headers
		// (protocol's holdProbe): with 0 the wake can reach the server
		// before it holds the request.
		bad("protocol.settle_s", "0 with sleep_l0_cycles %d: a level-0 cycle sends a request while paused and wakes the model once the server has taken it, waiting at most settle_s for that, so with 0 the wake can reach the server before the request it should hold; want settle_s > 0 (e.g. 0.1), or sleep_l0_cycles 0", p.SleepL0Cycles)
	}
	if !(p.SampleHz > 0 && p.SampleHz <= 1000) {
		bad("protocol.sample_hz", "%v: want 0 < Hz ≤ 1000", p.SampleHz)
	}
	if p.LinkProbeMiB < 0 || p.LinkProbeMiB > MaxLinkProbeMiB {
		bad("protocol.link_probe_mib", "%d: want 0 (no link probe) or MiB in [1, %d] (nvbandwidth's default is 64)", p.LinkProbeMiB, MaxLinkProbeMiB)
	}
}

// MaxLinkProbeMiB bounds protocol.link_probe_mib: pinned host memory and device memory of
// that size are held while the probe runs.
const MaxLinkProbeMiB = 4096

// MaxTimeoutS bounds every timeouts.* key and the other waits in seconds
// (kubernetes.timeout_s, traffic.min_dwell_s …): a day, as MaxSpanS. A
// step that takes longer is hung; and the bound keeps seconds ×
// time.Second far inside a time.Duration (±292 years), which 1e300 or
// +Inf would overflow to a negative wait (-2562047h47m…).
const MaxTimeoutS = 24 * 3600

// MinPollMS and MaxPollMS bound timeouts.poll_ms, the readiness poll
// interval: below a millisecond the poll is a busy loop (and under a
// nanosecond the interval is 0, which time.NewTicker panics on); above a
// minute a server ready in seconds is seen a minute late.
const (
	MinPollMS = 1
	MaxPollMS = 60_000
)

// validateTimeouts checks that every timeout is positive, finite and at
// most MaxTimeoutS, and the poll interval within [MinPollMS, MaxPollMS].
func (c Config) validateTimeouts(bad badFunc) {
	t := c.Timeouts
	for _, kv := range []struct {
		k string
		v float64
	}{{"start_s", t.StartS}, {"request_s", t.RequestS}, {"sleep_s", t.SleepS}, {"wake_s", t.WakeS}, {"stop_s", t.StopS}} {
		if !(kv.v > 0 && kv.v <= MaxTimeoutS) {
			bad("timeouts."+kv.k, "%v: want seconds in (0, %d] (at most a day)", kv.v, MaxTimeoutS)
		}
	}
	if !(t.PollMS >= MinPollMS && t.PollMS <= MaxPollMS) {
		bad("timeouts.poll_ms", "%v: want a readiness poll interval in [%d, %d] ms", t.PollMS, MinPollMS, MaxPollMS)
	}
}

// validateThresholds checks every PASS/FAIL limit but the regression
// gate's (validateRegressionGate).
func (c Config) validateThresholds(bad badFunc) {
	tv := reflect.ValueOf(c.Thresholds)
	for i := range tv.NumField() {
		k := jsonKey(tv.Type().Field(i))
		f := tv.Field(i)
		x := 0.0
		if f.Kind() == reflect.Int {
			x = float64(f.Int())
		} else {
			x = f.Float()
		}
		if !strings.HasPrefix(k, "regression_") {
			checkThreshold(bad, "thresholds."+k, k, x)
		}
	}
}

// validateAPIKey checks that the key can go in an Authorization header.
func (c Config) validateAPIKey(bad badFunc) {
	if strings.ContainsFunc(c.APIKey, unicode.IsControl) || strings.TrimSpace(c.APIKey) != c.APIKey {
		bad("api_key", "holds a control character or surrounding space (a newline from a secrets file?): it would break the Authorization header")
	}
}

// validateRegressionGate checks the regression gate: its limit, its
// significance level and the baseline it compares against.
func (c Config) validateRegressionGate(bad badFunc) {
	switch rp := c.Thresholds.RegressionPercent; {
	case !(rp >= 0):
		bad("thresholds.regression_percent", "%v: must not be negative", rp)
	case math.IsInf(rp, 0):
		bad("thresholds.regression_percent", "%v: want a finite percent ≥ 0", rp)
	}
	if !(c.Thresholds.RegressionAlpha > 0 && c.Thresholds.RegressionAlpha < 1) {
		bad("thresholds.regression_alpha", "%v: want a significance level in (0, 1), e.g. 0.05", c.Thresholds.RegressionAlpha)
	}
	if n := c.Thresholds.RegressionMinJudged; n < 0 {
		bad("thresholds.regression_min_judged", "%v: want the fewest metrics the gate must judge, ≥ 0 (0 accepts a gate that judged nothing)", n)
	}
	checkBaseline(bad, c.Baseline, c.OutDir)
}

// MaxKVGiB bounds protocol.kv_gib, the KV cache of each GPU
// (--kv-cache-memory-bytes): no GPU holds 1 TiB (the largest hold under
// 300 GiB), and the byte count must fit KVBytes' uint64.
const MaxKVGiB = 1024

// MaxContextTokens bounds protocol.context_tokens (--max-model-len):
// 16 Mi tokens, beyond the longest context windows (about 10 M); it keeps
// RequestBytes' estimate of a request that long from overflowing.
const MaxContextTokens = 1 << 24

// MinCostDwellS is the shortest protocol.cost_dwell_s on a real GPU
// (memory "nvml"). The state-cost phase takes each state's power from
// NVML's total-energy counter, in mJ and moved with the driver's power
// reading, about every 100 ms: a 1 s dwell spans about ten updates, so
// one update more or less within it moves power_w by about a tenth, while
// a dwell of a microsecond sees the counter move by nothing or by a whole
// update (0 W, or kilowatts). MinSimCostDwellS is the shortest elsewhere:
// the simulated counter is integrated exactly when read, but the phase's
// own readings (memory, energy, host memory) take milliseconds, and a
// tenth of a second keeps them a small part of the dwell.
const (
	MinCostDwellS    = 1
	MinSimCostDwellS = 0.1
)

// MaxInFlight bounds traffic.max_in_flight: far more connections than one
// GPU's servers can batch (vLLM's default max_num_seqs is 256 to 1024).
const MaxInFlight = 65536

// MaxCycles bounds the sleep cycles and handoffs of a run.
const MaxCycles = 10_000

// globalThresholds apply to the whole run, so a model cannot override them.
var globalThresholds = []string{"max_switch_to_first_token_s", "regression_percent", "regression_alpha", "regression_min_judged", "min_traffic_goodput_ratio", "max_pod_switch_routable_s", "max_shed_requests"}

// checkThreshold reports a threshold value that cannot mean what its key
// says: negative (0 turns a limit off; a negative one would pass or turn
// off silently), NaN, a fraction of memory above 100 %, or a failure count
// that is not whole.
func checkThreshold(bad badFunc, key, name string, x float64) {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		bad(key, "%v: want a number", x)
	case x < 0:
		bad(key, "%v: must not be negative (0 turns the limit off)", x)
	case name == "min_l1_release_percent" && x > 100:
		bad(key, "%v: a percent of the model's memory, at most 100", x)
	case name == "min_host_headroom_gib" && x > MaxHostHeadroomGiB:
		bad(key, "%v: at most %d GiB (64 TiB: more than any one host holds, so every level-1 sleep would be refused)", x, MaxHostHeadroomGiB)
	case name == "max_adapter_hit_change" && x > 1:
		bad(key, "%v: a change of a hit rate (a share of prompt tokens), at most 1", x)
	case (name == "max_failed_requests" || name == "max_shed_requests") && x != math.Trunc(x):
		bad(key, "%v: a number of requests, want a whole number", x)
	}
}

// MaxHostHeadroomGiB bounds thresholds.min_host_headroom_gib: 64 TiB.
// The largest single hosts hold tens of TiB (an 8-socket server, 32 TiB);
// a headroom beyond every host's memory refuses every level-1 sleep, and
// only once the servers have started.
const MaxHostHeadroomGiB = 64 << 10

// Adapters are m's LoRA adapter names, sorted.
func (m Model) Adapters() []string { return slices.Sorted(maps.Keys(m.LoRAModules)) }

// Speculative reports whether m's server decodes speculatively: its
// extra_args give --speculative-config (or its alias -sc, vLLM's parser;
// an underscore spelling too, which vLLM's argparse accepts).
func (m Model) Speculative() bool {
	return slices.ContainsFunc(m.ExtraArgs, func(a string) bool {
		name, _, _ := strings.Cut(a, "=")
		return strings.ReplaceAll(name, "_", "-") == "--speculative-config" || name == "-sc"
	})
}

// sleepModeOff reports whether the server argument a turns vLLM's sleep
// mode off: --no-enable-sleep-mode, or --enable-sleep-mode=false (0, no,
// off), in either spelling vLLM's argparse accepts (- or _ in the name).
func sleepModeOff(a string) bool {
	on, set := boolArg(a, "--enable-sleep-mode")
	return set && !on
}

// boolArg reads one server argument a as the boolean flag (its --name):
// set where a is the flag, the flag with a value or its --no- form, in
// either spelling vLLM's argparse accepts (- or _ in the name); on unless
// the --no- form or a false value (false, 0, no, off, f, n).
func boolArg(a, flag string) (on, set bool) {
	name, value, hasValue := strings.Cut(a, "=")
	switch strings.ReplaceAll(name, "_", "-") {
	case "--no-" + strings.TrimPrefix(flag, "--"):
		return false, true
	case flag:
		return !hasValue || !slices.Contains([]string{"false", "0", "no", "off", "f", "n"}, strings.ToLower(strings.TrimSpace(value))), true
	}
	return false, false
}

// PrefixCaching reports whether m's server caches prefixes: vLLM V1's
// default, unless extra_args turn it off (--no-enable-prefix-caching).
func (m Model) PrefixCaching() bool {
	on := true
	for _, a := range m.ExtraArgs {
		switch strings.ReplaceAll(a, "_", "-") {
		case "--no-enable-prefix-caching":
			on = false
		case "--enable-prefix-caching":
			on = true
		}
	}
	return on
}

// KVBytes is protocol.kv_gib in bytes, as the plain integer vLLM accepts.
func (c Config) KVBytes() uint64 { return uint64(c.Protocol.KVGiB * (1 << 30)) }

// ModelNames are the model labels in config order and each label's model name.
func (c Config) ModelNames() (labels []string, names map[string]string) {
	names = make(map[string]string, len(c.Models))
	for _, m := range c.Models {
		labels, names[m.Label] = append(labels, m.Label), m.Name
	}
	return labels, names
}

// Model returns the model with label l.
func (c Config) Model(l string) (Model, bool) {
	for _, m := range c.Models {
		if m.Label == l {
			return m, true
		}
	}
	return Model{}, false
}

// ThresholdsFor is the thresholds for the model labelled l: the global ones
// with the model's overrides applied.
func (c Config) ThresholdsFor(l string) Thresholds {
	t := c.Thresholds
	m, _ := c.Model(l)
	v := reflect.ValueOf(&t).Elem()
	for k, x := range m.Thresholds {
		if i, ok := thresholdField(k); ok {
			f := v.Field(i)
			if f.Kind() == reflect.Int {
				f.SetInt(int64(x))
			} else {
				f.SetFloat(x)
			}
		}
	}
	return t
}

// TensorParallel is the --tensor-parallel-size (or -tp) in a model's extra
// arguments, false when it has none.
func TensorParallel(args []string) (int, bool) {
	for i, a := range args {
		for _, flag := range []string{"--tensor-parallel-size", "-tp"} {
			v, ok := "", false
			switch {
			case a == flag && i+1 < len(args):
				v, ok = args[i+1], true
			case strings.HasPrefix(a, flag+"="):
				v, ok = strings.TrimPrefix(a, flag+"="), true
			}
			if ok {
				n, err := strconv.Atoi(v)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// BoolFlag is a boolean `vllm serve` flag in a model's extra arguments
// as boolArg reads each: "--flag" or "--flag=true" on, "--no-flag" or
// "--flag=false" off; the last one given wins; false when absent.
func BoolFlag(args []string, flag string) bool {
	on := false
	for _, a := range args {
		if v, set := boolArg(a, flag); set {
			on = v
		}
	}
	return on
}

// ThresholdSetByUser reports whether the threshold key of the model labelled
// l was set by the user (the file, the environment or the model's own
// thresholds), not left at its default.
func (c Config) ThresholdSetByUser(l, key string) bool {
	if m, ok := c.Model(l); ok {
		if _, ok := m.Thresholds[key]; ok {
			return true
		}
	}
	return slices.Contains(c.UserThresholds, key)
}

// jsonKey is the JSON key of a struct field: its json tag's name ("-" for
// a field JSON skips, "" for one without a name).
func jsonKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return k
}

// thresholdField is the index of the Thresholds field with JSON key k.
func thresholdField(k string) (int, bool) {
	t := reflect.TypeOf(Thresholds{})
	for i := range t.NumField() {
		if jsonKey(t.Field(i)) == k {
			return i, true
		}
	}
	return 0, false
}

// validateKubernetes checks the Kubernetes phase's keys.
func (c Config) validateKubernetes(bad func(key, format string, a ...any)) {
	k := c.Kubernetes
	switch k.ControlPlane {
	case "", "local", "kubeconfig":
	default:
		bad("kubernetes.control_plane", "%q: want \"local\" (make k8s), \"kubeconfig\" (an existing cluster) or \"\" (off)", k.ControlPlane)
	}
	if !k.On() {
		return
	}
	if len(c.Models) != 2 {
		bad("kubernetes", "the Kubernetes phase runs two models on one claim, not %d: list two models", len(c.Models))
	}
	if k.Namespace == "" {
		bad("kubernetes.namespace", "empty")
	} else {
		checkName(bad, "kubernetes.namespace", k.Namespace, "a namespace", validation.IsDNS1123Label)
	}
	if k.ControlPlane == "kubeconfig" && k.Kubeconfig != "" {
		checkFile(bad, "kubernetes.kubeconfig", k.Kubeconfig, `the cluster's kubeconfig; "" uses $KUBECONFIG, then ~/.kube/config`)
	}
	if k.ControlPlane == "local" && k.BinDir != "" {
		checkDir(bad, "kubernetes.bin_dir", k.BinDir, "the directory holding etcd, kube-apiserver, kube-scheduler and kube-controller-manager")
	}
	if k.DeviceClass == "" {
		bad("kubernetes.device_class", "empty")
	}
	if k.Handoffs < 2 || k.Handoffs > 10000 {
		bad("kubernetes.handoffs", "%d: want 2 (one each way) to 10 000", k.Handoffs)
	}
	if k.SleepLevel != 1 && k.SleepLevel != 2 {
		bad("kubernetes.sleep_level", "%d: want 1 or 2", k.SleepLevel)
	}
	if !(k.TimeoutS > 0) || !(k.RefuseWaitS > 0) {
		bad("kubernetes.timeout_s/refuse_wait_s", "must be > 0")
	}
	for _, kv := range []struct {
		k string
		v float64
	}{{"timeout_s", k.TimeoutS}, {"refuse_wait_s", k.RefuseWaitS}} {
		if kv.v > MaxTimeoutS {
			bad("kubernetes."+kv.k, "%v: want seconds in (0, %d] (at most a day)", kv.v, MaxTimeoutS)
		}
	}
	if !k.HostNetwork && k.ControlPlane == "kubeconfig" && (k.Port < 1 || k.Port > 65535) {
		bad("kubernetes.port", "%d: want 1–65535", k.Port)
	}
}

// MaxArrivals bounds the requests one traffic phase plans: each is held in
// memory with its prompt, its result and its line of requests.jsonl
// (about 2 KiB together), and the ideal run sends them all again.
const MaxArrivals = 250_000

// MaxPlanBytes bounds the memory a traffic phase's requests take with
// their results (RequestBytes each): 1 GiB of this 24 GiB machine class.
const MaxPlanBytes = 1 << 30

// MaxSpanS bounds when a traffic phase's last request may arrive: a day,
// as traffic.duration_s.
const MaxSpanS = 24 * 3600

// RequestBytes estimates the memory one planned request takes with its
// results: its prompt (about 7 bytes a token: a word and a space, in its
// own string), and per run it is sent in (the router's, and the ideal's)
// its result with every inter-token gap (16 bytes a token, in two
// slices). Measured: a 4000-token prompt costs about 24.6 KB.
func RequestBytes(promptTokens, outputTokens int, ideal bool) int64 {
	runs := int64(1)
	if ideal {
		runs = 2
	}
	return 256 + 7*int64(promptTokens) + runs*(200+16*int64(outputTokens))
}

// validateTraffic checks the traffic phase's keys.
func (c Config) validateTraffic(bad func(key, format string, a ...any)) {
	tr := c.Traffic
	num := func(key string, v float64) bool {
		if !(v >= 0) || math.IsInf(v, 0) {
			bad("traffic."+key, "%v: want a number ≥ 0", v)
			return false
		}
		return true
	}
	if num("duration_s", tr.DurationS) && tr.DurationS > 24*3600 {
		bad("traffic.duration_s", "%v: at most a day", tr.DurationS)
	}
	num("rate", tr.Rate)
	if num("min_dwell_s", tr.MinDwellS) && tr.MinDwellS > MaxTimeoutS {
		bad("traffic.min_dwell_s", "%v: want seconds in [0, %d] (at most a day)", tr.MinDwellS, MaxTimeoutS)
	}
	for _, l := range slices.Sorted(maps.Keys(tr.Rates)) {
		if _, ok := c.Model(l); !ok {
			labels, _ := c.ModelNames()
			bad("traffic.rates", "%q is not a model label (labels: %v)", l, labels)
		}
		num("rates."+l, tr.Rates[l])
	}
	switch tr.Arrivals {
	case "constant", "poisson", "gamma":
	default:
		bad("traffic.arrivals", `%q: want "constant", "poisson" or "gamma"`, tr.Arrivals)
	}
	if tr.Arrivals == "gamma" && !(tr.Burstiness > 0 && !math.IsInf(tr.Burstiness, 0)) {
		bad("traffic.burstiness", "%v: want a gamma shape > 0 (1 is Poisson, below 1 burstier)", tr.Burstiness)
	}
	if tr.WarmupRequests < 0 || tr.InFlightRequests < 0 || tr.InFlightRequests > 1024 {
		bad("traffic.warmup_requests/in_flight_requests", "must be ≥ 0 (in_flight_requests at most 1024)")
	}
	w := tr.Workload
	switch w.Kind {
	case "fixed":
		if w.PromptTokens < 1 || w.OutputTokens < 1 {
			bad("traffic.workload", "fixed lengths need prompt_tokens and output_tokens ≥ 1")
		}
	case "uniform":
		if w.MinPromptTokens < 1 || w.MinPromptTokens > w.PromptTokens || w.MinOutputTokens < 1 || w.MinOutputTokens > w.OutputTokens {
			bad("traffic.workload", "uniform lengths need 1 ≤ min_prompt_tokens ≤ prompt_tokens and 1 ≤ min_output_tokens ≤ output_tokens")
		}
	case "dataset":
		checkFile(bad, "traffic.workload.dataset", w.Dataset, `a JSONL file: {"prompt", "output_tokens"} or ShareGPT conversations per line`)
	default:
		bad("traffic.workload.kind", `%q: want "fixed", "uniform" or "dataset"`, w.Kind)
	}
	if w.Kind == "dataset" && w.SharedPrefixTokens >= c.Protocol.ContextTokens {
		bad("traffic.workload.shared_prefix_tokens", "%d: every dataset prompt starts with it, so it must stay below protocol.context_tokens (%d)", w.SharedPrefixTokens, c.Protocol.ContextTokens)
	}
	if n := w.PromptTokens + w.SharedPrefixTokens + w.OutputTokens; w.SharedPrefixTokens < 0 || n > c.Protocol.ContextTokens && w.Kind != "dataset" {
		bad("traffic.workload", "prompt_tokens + shared_prefix_tokens + output_tokens (%d) must fit protocol.context_tokens (%d): the server would refuse the prompt or cut the output short", n, c.Protocol.ContextTokens)
	}
	if tr.Trace == "" && tr.DurationS > 0 {
		total := 0.0
		for _, m := range c.Models {
			total += float64(tr.WarmupRequests) + math.Round(tr.RateOf(m.Label)*tr.DurationS)
		}
		bytes := total * float64(RequestBytes(w.PromptTokens+w.SharedPrefixTokens, w.OutputTokens, tr.Ideal))
		switch {
		case total > MaxArrivals:
			bad("traffic.rate/rates/duration_s/warmup_requests", "%.4g requests planned (rate × duration_s + warmup_requests, every model): at most %d in one run, each held in memory with its result", total, MaxArrivals)
		case bytes > MaxPlanBytes && w.Kind != "dataset":
			bad("traffic.rate/rates/duration_s/warmup_requests", "%.4g requests of %d prompt and %d output tokens hold about %.1f GiB with their results: at most %d GiB in one run; plan fewer or shorter requests",
				total, w.PromptTokens+w.SharedPrefixTokens, w.OutputTokens, bytes/(1<<30), MaxPlanBytes>>30)
		}
	}
	if tr.Trace != "" {
		checkFile(bad, "traffic.trace", tr.Trace, "a CSV file of t_s,model,prompt_tokens,output_tokens")
	}
	if tr.MaxQueue < 1 || tr.MaxQueue > MaxArrivals {
		bad("traffic.max_queue", "%d: want 1 to %d requests waiting in the router for a wake (one more is shed: not sent, gated by thresholds.max_shed_requests)", tr.MaxQueue, MaxArrivals)
	}
	if tr.MaxInFlight < 1 || tr.MaxInFlight > MaxInFlight {
		bad("traffic.max_in_flight", "%d: want 1 to %d requests in flight at once (each holds a connection, an open file; an arrival beyond waits for one to end)", tr.MaxInFlight, MaxInFlight)
	}
	if tr.SleepLevel != 1 && tr.SleepLevel != 2 {
		bad("traffic.sleep_level", "%d: want 1 or 2", tr.SleepLevel)
	}
	num("slo.ttft_s", tr.SLO.TTFTS)
	num("slo.tpot_s", tr.SLO.TPOTS)
	num("slo.e2e_s", tr.SLO.E2ES)
	for i, m := range tr.InFlightModes {
		if m != "abort" && m != "wait" && m != "keep" {
			bad(fmt.Sprintf("traffic.in_flight_modes[%d]", i), `%q: want "abort", "wait" or "keep" (vLLM's pause modes)`, m)
		}
		if slices.Index(tr.InFlightModes, m) < i {
			bad(fmt.Sprintf("traffic.in_flight_modes[%d]", i), "%q twice: each mode is one sleep, list it once", m)
		}
	}
	if tr.InFlightRequests > 0 && len(tr.InFlightModes) == 0 {
		bad("traffic.in_flight_modes", `empty beside in_flight_requests %d: list the modes to sleep in ("abort", "wait", "keep"), or set in_flight_requests to 0`, tr.InFlightRequests)
	}
}
