// Package report builds and writes a run's outputs from its record
// (package record): the reference report (report.json, the shape of
// testdata/l20-reference-report.json plus extra keys), the
// benchstat-compatible bench.txt, summary.md, samples.csv and timeline.svg.
// It measures and judges nothing itself.
package report

import (
	"encoding/json"

	"github.com/wakebench/wakebench/internal/record"

	"github.com/wakebench/wakebench/internal/stats"
)

// Report is report.json. Keys up to Windows are the reference report's;
// the rest are wakebench's additions.
type Report struct {
	Status           string                   `json:"status"`
	Runtime          string                   `json:"runtime"`
	GPU              string                   `json:"gpu"`
	ContextTokens    int                      `json:"context_tokens"`
	KVGiB            float64                  `json:"kv_gib"`
	Models           map[string]*Model        `json:"models"`
	Requests         record.Requests          `json:"requests"`
	PercentileMethod string                   `json:"percentile_method"`
	RestartBaseline  RestartBaseline          `json:"restart_baseline"` // a string in the reference: see Widened
	DRA              DRA                      `json:"dra"`              // a string in the reference: see Widened
	Switch           Switch                   `json:"switch"`
	Memory           Memory                   `json:"memory"`
	Windows          map[string]record.Window `json:"windows"`

	Simulated *record.Simulated `json:"simulated,omitempty"`
	GPUFacts  *record.GPUFacts  `json:"gpu_facts,omitempty"` // from NVML
	// LinkProbe is each GPU's host↔device link as the run measured it before its first server
	// (beside gpu_facts' nominal pcie_gbps); LinkNote says why there is none.
	LinkProbe []record.Link `json:"link_probe,omitempty"`
	LinkNote  string        `json:"link_note,omitempty"`
	// GPUPlacement is how every server was put on the GPU measured
	// (CUDA_DEVICE_ORDER and CUDA_VISIBLE_DEVICES, the GPU's UUID, where gpu_index came from).
	GPUPlacement string   `json:"gpu_placement,omitempty"`
	Phases       []string `json:"phases"` // phases that ran, in order
	// NotRunReason says why a NOT RUN run measured nothing, where the
	// harness knows (no GPU under -tags gpu); absent otherwise.
	NotRunReason string           `json:"not_run_reason,omitempty"`
	Checks       []record.Check   `json:"checks"`   // every threshold with its verdict
	Failures     []record.Failure `json:"failures"` // what went wrong, where
	Started      float64          `json:"started"`  // Unix seconds
	Finished     float64          `json:"finished"`
	// Soak is the soak phase (absent when it did not run).
	Soak *Soak `json:"soak,omitempty"`
	// Traffic is the traffic phase (absent when it did not run).
	Traffic *Traffic `json:"traffic,omitempty"`
	// Gate is the regression gate's judgement (absent without a baseline).
	Gate *record.Gate `json:"gate,omitempty"`
	// Fit is the node's fit table (the state-cost phase; absent when it
	// did not run or a figure it needs is unknown).
	Fit *Fit `json:"fit,omitempty"`
}

// Model is one model's figures.
type Model struct {
	Name           string                 `json:"name"`
	RestartInitial stats.Summary          `json:"restart_initial"`
	RestartWarm    stats.Summary          `json:"restart_warm"`
	Sleep          map[string]*SleepLevel `json:"sleep"`
	Performance    []Perf                 `json:"performance"`

	// RestartReady is spawn → /health 200 (restart_* run on to the first token).
	RestartReadyInitial stats.Summary `json:"restart_ready_initial"`
	RestartReadyWarm    stats.Summary `json:"restart_ready_warm"`
	PhysicalLimits      *Limits       `json:"physical_limits,omitempty"`
	// FirstSleep is each server process's first sleep against the steady state.
	FirstSleep *FirstSleep `json:"first_sleep,omitempty"`
	// Correctness is the oracle's probe set and what its replays found.
	Correctness *Correctness `json:"correctness,omitempty"`
	// Cost is the state-cost phase's figures (absent when it did not run).
	Cost *Cost `json:"cost,omitempty"`
	// Health is the engine-health windows, before the first sleep and
	// after each kind of wake; LostPrefix the lost-prefix probe by level
	// (health.go; absent when not taken).
	Health     []Health               `json:"health,omitempty"`
	LostPrefix map[string]*LostPrefix `json:"lost_prefix,omitempty"`
}

// SleepLevel is the figures of one sleep level's cycles.
type SleepLevel struct {
	SuccessfulCycles int           `json:"successful_cycles"`
	SleepS           stats.Summary `json:"sleep_s"`
	WakeAPIS         stats.Summary `json:"wake_api_s"`
	ToFirstTokenS    stats.Summary `json:"to_first_token_s"`
	ResidualGiB      stats.Summary `json:"residual_gib"`
	PlannedCycles    int           `json:"planned_cycles"`
	// ResidualGiBPerGPU is residual_gib on each GPU, for models spanning several.
	ResidualGiBPerGPU []stats.Summary `json:"residual_gib_per_gpu,omitempty"`
	// The first successful cycle apart from the rest (wake_s: the wake API time).
	FirstCycle  *FirstCycle `json:"first_cycle,omitempty"`
	SteadyState *Steady     `json:"steady_state,omitempty"`
	// Engine is the server's own account of the cycles.
	Engine *EngineFigures `json:"engine,omitempty"`
	// Level 0 and the KV-only release ("0", "kv"): the model's GPU memory
	// before the pause less once asleep; /release_kv_cache_memory sent →
	// answered; a request sent while paused, sent → first token, and wake
	// sent → that first token; why the cycles were off.
	FreedGiB      *stats.Summary `json:"freed_gib,omitempty"`
	ReleaseS      *stats.Summary `json:"release_s,omitempty"`
	HeldS         *stats.Summary `json:"held_request_s,omitempty"`
	HeldPastWakeS *stats.Summary `json:"held_request_past_wake_s,omitempty"`
	Off           string         `json:"off,omitempty"`
}

// Perf is one stage × concurrency of serving.
type Perf struct {
	Stage             string        `json:"stage"`
	Concurrency       int           `json:"concurrency"`
	Rounds            int           `json:"rounds"`
	Planned           int           `json:"planned"`
	Success           int           `json:"success"`
	RoundsPassed      int           `json:"rounds_passed"`
	OutputTPS         stats.Summary `json:"output_tps"`
	TTFTS             stats.Summary `json:"ttft_s"`
	TPOTS             stats.Summary `json:"tpot_s"`
	PromptTokenCounts []int         `json:"prompt_token_counts"`
}

// Switch is the switching phase.
type Switch struct {
	InitialActivation int `json:"initial_activation"`
	Handoffs          int `json:"handoffs"`
	// SleepLevel is the level each handoff put the outgoing model to sleep
	// at (protocol.switch_level); 0 when no handoff was counted.
	SleepLevel int                   `json:"sleep_level"`
	Success    int                   `json:"success"`
	Directions map[string]*Direction `json:"directions"`
	// EnergyNote says why the handoffs have no energy (no counter); "" when they have.
	EnergyNote string `json:"energy_note,omitempty"`
}

// Direction is one handoff direction, e.g. "A→B".
type Direction struct {
	N             int           `json:"n"`
	ToFirstTokenS stats.Summary `json:"to_first_token_s"`
	SleepS        stats.Summary `json:"sleep_s"`
	WakeS         stats.Summary `json:"wake_s"`
	// EnergyJ is each handoff's GPU energy, /sleep sent → first token
	// (n 0 without a counter: Switch.EnergyNote says why).
	EnergyJ     stats.Summary `json:"energy_j"`
	FirstCycle  *FirstCycle   `json:"first_cycle,omitempty"`
	SteadyState *Steady       `json:"steady_state,omitempty"`
	// Engine is the servers' own account: the sleep of the model handing
	// over, the wake of the one taking over.
	Engine *EngineFigures `json:"engine,omitempty"`
}

// Memory is the memory figures.
type Memory struct {
	PhysicalPeakGiB   stats.Summary            `json:"physical_peak_gib"`
	RSSPeakGiB        map[string]float64       `json:"rss_peak_gib"`
	L1ReleaseFraction map[string]stats.Summary `json:"l1_release_fraction"`
	// Per GPU, on a run of several: the device peak, and each model's
	// level-1 release.
	PhysicalPeakGiBPerGPU   []stats.Summary            `json:"physical_peak_gib_per_gpu,omitempty"`
	L1ReleaseFractionPerGPU map[string][]stats.Summary `json:"l1_release_fraction_per_gpu,omitempty"`
	// Attribution per model: "process" or "device-delta" (see record.Raw).
	Attribution map[string]string `json:"attribution,omitempty"`
	Source      string            `json:"source"`         // where GPU memory came from
	Note        string            `json:"note,omitempty"` // why figures are missing, if they are
}

// Limits are a model's physical-limit figures: level-1 wake against the
// host→device link, TPOT at concurrency 1 against device memory bandwidth,
// each with where its inputs came from. A fraction is limit / measured: 1
// would be at the physical limit. Absent figures are 0 here, with Note saying
// why, and null in report.json (MarshalJSON).
type Limits struct {
	WeightGiB    float64 `json:"weight_gib"`
	WeightSource string  `json:"weight_source"`

	// PCIeGBps is the host→device rate the wake's floor is taken at: the link probe's
	// measured rate where the run has one (PCIeBasis "measured"; "simulated" for the simulated
	// GPU's profile rate), else NVML's nominal link ("nominal"); PCIeNominalGBps is the nominal one either way, and LinkFractionOfNominal the
	// measured over it (a link trained down reads low).
	PCIeGBps              float64 `json:"pcie_gbps"`
	PCIeBasis             string  `json:"pcie_basis,omitempty"`
	PCIeNominalGBps       float64 `json:"pcie_nominal_gbps,omitempty"`
	LinkFractionOfNominal float64 `json:"link_h2d_fraction_of_nominal,omitempty"`
	PCIeSource            string  `json:"pcie_source"`
	L1WakeFloorS          float64 `json:"l1_wake_floor_s"` // weight bytes / PCIeGBps (× time scale when simulated)
	L1WakeS               float64 `json:"l1_wake_s"`       // median level-1 wake API time
	// L1WakeFractionOfFloor is l1_wake_floor_s / l1_wake_s: the floor at
	// PCIeGBps, the link probe's measured rate where there is one (named
	// l1_wake_fraction_of_pcie_limit until issue 50, which report.json
	// still writes, deprecated, for one release); L1WakeFractionOfNominal
	// is the same wake against the nominal PCIe link's floor (weight bytes
	// / PCIeNominalGBps).
	L1WakeFractionOfFloor   float64 `json:"l1_wake_fraction_of_floor"`
	L1WakeFractionOfNominal float64 `json:"l1_wake_fraction_of_nominal_pcie"`
	// The level-1 sleep against the link probe's device→host rate (absent without a probe):
	// weight bytes / D2HGBps, over the median level-1 sleep_s (which holds the sleep's fixed
	// costs, and in its first cycle the pinned buffer's allocation, beside the copy).
	D2HGBps               float64 `json:"d2h_gbps,omitempty"`
	L1SleepFloorS         float64 `json:"l1_sleep_floor_s,omitempty"`
	L1SleepS              float64 `json:"l1_sleep_s,omitempty"`
	L1SleepFractionOfLink float64 `json:"l1_sleep_fraction_of_link,omitempty"`

	HBMGBps           float64 `json:"hbm_gbps"`
	HBMSource         string  `json:"hbm_source"`
	TPOTFloorS        float64 `json:"tpot_floor_s"` // weight bytes / memory bandwidth (× time scale when simulated)
	TPOTC1S           float64 `json:"tpot_c1_s"`    // median baseline TPOT at concurrency 1
	TPOTFractionOfHBM float64 `json:"tpot_c1_fraction_of_hbm_limit"`
	Note              string  `json:"note,omitempty"`

	// wakeMeasured and tpotMeasured say that L1WakeS and TPOTC1S were
	// measured: MarshalJSON writes them even when 0 (a TPOT of tokens
	// that came in one chunk), null only when not measured.
	wakeMeasured, tpotMeasured bool
}

// MarshalJSON writes Limits with every absent figure null, not 0 (issue
// 50: a reader and the gate could not tell "0 s" from "none"): a figure
// derived from the weights and a rate is 0 only when an input is unknown;
// the two measured times are null only when not measured (a TPOT of
// tokens that came in one chunk is a measured 0). The omitempty ones are
// left out, as before; null reads back as 0.
func (l Limits) MarshalJSON() ([]byte, error) {
	known := func(x float64) *float64 {
		if x == 0 {
			return nil
		}
		return &x
	}
	measured := func(x float64, ok bool) *float64 {
		if !ok {
			return known(x)
		}
		return &x
	}
	return json.Marshal(struct {
		WeightGiB    *float64 `json:"weight_gib"`
		WeightSource string   `json:"weight_source"`
		PCIeGBps     *float64 `json:"pcie_gbps"`
		plainPCIe
		L1WakeFloorS            *float64 `json:"l1_wake_floor_s"`
		L1WakeS                 *float64 `json:"l1_wake_s"`
		L1WakeFractionOfFloor   *float64 `json:"l1_wake_fraction_of_floor"`
		L1WakeFractionOfNominal *float64 `json:"l1_wake_fraction_of_nominal_pcie"`
		DeprecatedPCIeLimit     *float64 `json:"l1_wake_fraction_of_pcie_limit"` // l1_wake_fraction_of_floor's old name, until the release after issue 50
		plainSleep
		HBMGBps           *float64 `json:"hbm_gbps"`
		HBMSource         string   `json:"hbm_source"`
		TPOTFloorS        *float64 `json:"tpot_floor_s"`
		TPOTC1S           *float64 `json:"tpot_c1_s"`
		TPOTFractionOfHBM *float64 `json:"tpot_c1_fraction_of_hbm_limit"`
		Note              string   `json:"note,omitempty"`
	}{
		known(l.WeightGiB), l.WeightSource, known(l.PCIeGBps),
		plainPCIe{l.PCIeBasis, l.PCIeNominalGBps, l.LinkFractionOfNominal, l.PCIeSource},
		known(l.L1WakeFloorS), measured(l.L1WakeS, l.wakeMeasured), known(l.L1WakeFractionOfFloor), known(l.L1WakeFractionOfNominal), known(l.L1WakeFractionOfFloor),
		plainSleep{l.D2HGBps, l.L1SleepFloorS, l.L1SleepS, l.L1SleepFractionOfLink},
		known(l.HBMGBps), l.HBMSource, known(l.TPOTFloorS), measured(l.TPOTC1S, l.tpotMeasured), known(l.TPOTFractionOfHBM), l.Note,
	})
}

// plainPCIe and plainSleep are Limits' fields that MarshalJSON writes as
// they are, in Limits' order.
type plainPCIe struct {
	PCIeBasis             string  `json:"pcie_basis,omitempty"`
	PCIeNominalGBps       float64 `json:"pcie_nominal_gbps,omitempty"`
	LinkFractionOfNominal float64 `json:"link_h2d_fraction_of_nominal,omitempty"`
	PCIeSource            string  `json:"pcie_source"`
}

type plainSleep struct {
	D2HGBps               float64 `json:"d2h_gbps,omitempty"`
	L1SleepFloorS         float64 `json:"l1_sleep_floor_s,omitempty"`
	L1SleepS              float64 `json:"l1_sleep_s,omitempty"`
	L1SleepFractionOfLink float64 `json:"l1_sleep_fraction_of_link,omitempty"`
}

// DataKeyed are the report's objects whose keys are data (model labels,
// directions, window names), not field names: shape.Diff compares them by
// shape when a run's labels differ from the reference's.
var DataKeyed = []string{"models", "switch.directions", "windows", "memory.rss_peak_gib", "memory.l1_release_fraction"}
