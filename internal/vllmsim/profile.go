package vllmsim

import (
	"fmt"
	"github.com/wakebench/wakebench/internal/simgpu"
	"maps"
	"slices"
	"strings"
)

// GiB is 2^30 bytes.
const GiB = 1 << 30

// GPU is the physical model of the device and its host link. Rates are in
// decimal GB/s and TFLOP/s, as datasheets give them; durations in seconds.
type GPU struct {
	Name        string  `json:"name"`
	MemoryGiB   float64 `json:"memory_gib"`   // total device memory
	ReservedGiB float64 `json:"reserved_gib"` // driver-reserved, counts as used
	HBMGBps     float64 `json:"hbm_gbps"`     // device memory bandwidth (decode reads every weight once per step)
	// Effective pinned-memory PCIe copy rates, device→host (level-1 sleep)
	// and host→device (level-1 wake).
	PCIeD2HGBps float64 `json:"pcie_d2h_gbps"`
	PCIeH2DGBps float64 `json:"pcie_h2d_gbps"`
	// PinAllocGBps is the rate at which the host allocates and pins the
	// buffer the first level-1 sleep copies the weights into (0: free).
	PinAllocGBps float64 `json:"pin_alloc_gbps"`
	// ReleaseGBps is the rate at which a level-2 sleep unmaps and releases
	// the weight pool without copying it.
	ReleaseGBps float64 `json:"release_gbps"`
	// LoadGBps is the rate at which the host reads and prepares checkpoint
	// weights (start-up load and level-2 reload_weights).
	LoadGBps float64 `json:"load_gbps"`
	// LayerLaunchS is the per-layer kernel-launch and scheduling cost of one engine step.
	LayerLaunchS float64 `json:"layer_launch_s"`
	// Effective compute rates for prefill and for the per-sequence part of decode, by dtype.
	PrefillTFLOPS map[string]float64 `json:"prefill_tflops"`
	DecodeTFLOPS  map[string]float64 `json:"decode_tflops"`
	// Fixed CPU-side costs of the sleep-mode calls (allocator bookkeeping, RPC).
	SleepFixedS  float64 `json:"sleep_fixed_s"`
	WakeFixedS   float64 `json:"wake_fixed_s"`
	ReloadFixedS float64 `json:"reload_fixed_s"`
	// What NVML reports of the device's links, for wakebench's physical
	// limits: PCIe generation × width, memory bus width × memory clock.
	PCIeGen         int `json:"pcie_gen"`
	PCIeWidth       int `json:"pcie_width"`
	MemBusWidthBits int `json:"mem_bus_width_bits"`
	MemClockMHz     int `json:"mem_clock_mhz"`
}

// Device is the simulated device of this GPU as the simulated GPU
// directory holds it, with the link facts NVML would report: the one
// description both vllmsim and wakebench's backend create it from.
func (g GPU) Device() simgpu.Device {
	return simgpu.Device{Name: g.Name, TotalBytes: uint64(g.MemoryGiB * GiB), ReservedBytes: uint64(g.ReservedGiB * GiB),
		PCIeGen: g.PCIeGen, PCIeWidth: g.PCIeWidth, MemBusWidthBits: g.MemBusWidthBits, MemClockMHz: g.MemClockMHz,
		PinnedH2DGBps: g.PCIeH2DGBps, PinnedD2HGBps: g.PCIeD2HGBps}
}

// Model is the physical model of one served model.
type Model struct {
	Name        string  `json:"name"`
	ParamsB     float64 `json:"params_b"` // parameters, billions (2·P FLOPs per token)
	Dtype       string  `json:"dtype"`    // "bf16" or "fp8": picks the compute rate
	Layers      int     `json:"layers"`
	WeightGiB   float64 `json:"weight_gib"`   // weight pool: offloaded (L1) or discarded (L2)
	ResidualGiB float64 `json:"residual_gib"` // CUDA context, graphs, non-pool memory: stays while asleep
	// Start-up costs besides reading the weights (process, imports, profiling,
	// torch.compile and CUDA-graph capture); warm starts reuse the compile cache.
	StartInitialS float64 `json:"start_initial_s"`
	StartWarmS    float64 `json:"start_warm_s"`
	// SpecAcceptance is the share of draft tokens the model accepts under
	// --speculative-config (0: DefaultSpecAcceptance). A simulated figure:
	// real acceptance depends on the draft method and the prompts.
	SpecAcceptance float64 `json:"spec_acceptance"`
}

// DefaultSpecAcceptance is a model's draft acceptance where its profile
// sets none (simulated).
const DefaultSpecAcceptance = 0.7

// specAcceptance is m's draft acceptance, DefaultSpecAcceptance unless set.
func (m Model) specAcceptance() float64 {
	if m.SpecAcceptance > 0 {
		return min(m.SpecAcceptance, 1) // a share: more than every draft token cannot be accepted
	}
	return DefaultSpecAcceptance
}

// Profile is a GPU with the models it can serve.
type Profile struct {
	Name   string           `json:"name"`
	Source string           `json:"source"` // where the numbers come from
	GPU    GPU              `json:"gpu"`
	Models map[string]Model `json:"models"`
}

// Model returns the profile's model called name.
func (p Profile) Model(name string) (Model, error) {
	m, ok := p.Models[name]
	if !ok {
		return Model{}, fmt.Errorf("profile %q has no model %q (it has: %s)", p.Name, name,
			strings.Join(slices.Sorted(maps.Keys(p.Models)), ", "))
	}
	return m, nil
}

// LookupProfile returns the built-in profile called name.
func LookupProfile(name string) (Profile, error) {
	p, ok := profiles()[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown vllmsim profile %q (known: %s)", name, strings.Join(ProfileNames(), ", "))
	}
	return p, nil
}

// ProfileNames lists the built-in profiles.
func ProfileNames() []string { return slices.Sorted(maps.Keys(profiles())) }

// l20 is an NVIDIA L20 (48 GB GDDR6, 864 GB/s, PCIe Gen4 x16) calibrated on
// the reference run in testdata/l20-reference-report.json. docs/vllmsim.md
// ("The l20 profile") derives every number.
func l20GPU() GPU {
	return GPU{
		Name:        "NVIDIA L20",
		MemoryGiB:   44.52, // 47.8 GB usable, as NVML reports an L20
		ReservedGiB: 0.45,
		HBMGBps:     864, // datasheet
		PCIeD2HGBps: 22.1,
		PCIeH2DGBps: 16.55,
		// The reference's first level-1 sleep of A took 18.47 s against a
		// 1.34 s median: 17.13 s more for 27 GiB (28.99 GB).
		PinAllocGBps:  1.692,
		ReleaseGBps:   51.6,
		LoadGBps:      2.014,
		LayerLaunchS:  59.5e-6,
		PrefillTFLOPS: map[string]float64{"fp8": 50, "bf16": 17},
		DecodeTFLOPS:  map[string]float64{"fp8": 54.7, "bf16": 34.2},
		SleepFixedS:   0.025,
		WakeFixedS:    0.005,
		ReloadFixedS:  0.395,
		// NVML on an L20: PCIe Gen4 x16; 384-bit GDDR6 at 9001 MHz (18 Gb/s per pin): 864 GB/s.
		PCIeGen: 4, PCIeWidth: 16, MemBusWidthBits: 384, MemClockMHz: 9001,
	}
}

func profiles() map[string]Profile {
	l20 := l20GPU()
	return map[string]Profile{
		"l20": {
			Name:   "l20",
			Source: "fitted to the L20 reference run (vLLM 0.31.0); see docs/vllmsim.md 'The l20 profile'",
			GPU:    l20,
			Models: map[string]Model{
				"Qwen3.8-27B-FP8": {Name: "Qwen3.8-27B-FP8", ParamsB: 27, Dtype: "fp8", Layers: 64,
					WeightGiB: 27.0, ResidualGiB: 0.5830078125, StartInitialS: 204.7, StartWarmS: 41.14},
				"Qwen3-1.7B": {Name: "Qwen3-1.7B", ParamsB: 1.7, Dtype: "bf16", Layers: 28,
					WeightGiB: 3.28, ResidualGiB: 1.02734375, StartInitialS: 82.3, StartWarmS: 34.29},
			},
		},
		"demo": {
			Name:   "demo",
			Source: "the l20 GPU with two smaller bf16 models; start-up from the vLLM sleep-mode blog (Qwen3-0.6B cold start 37.6 s)",
			GPU:    l20,
			Models: map[string]Model{
				"Qwen3-4B": {Name: "Qwen3-4B", ParamsB: 4.0, Dtype: "bf16", Layers: 36,
					WeightGiB: 7.5, ResidualGiB: 0.9, StartInitialS: 70, StartWarmS: 35},
				"Qwen3-0.6B": {Name: "Qwen3-0.6B", ParamsB: 0.6, Dtype: "bf16", Layers: 28,
					WeightGiB: 1.1, ResidualGiB: 0.75, StartInitialS: 37.6, StartWarmS: 25},
			},
		},
		"tiny": {
			Name:   "tiny",
			Source: "fictional small GPU and models sized for fast tests; not a real device",
			GPU: GPU{
				Name: "Tiny Sim GPU", MemoryGiB: 16, ReservedGiB: 0.25, HBMGBps: 1000,
				PCIeD2HGBps: 25, PCIeH2DGBps: 25, PinAllocGBps: 10, ReleaseGBps: 50, LoadGBps: 4,
				LayerLaunchS:  100e-6,
				PrefillTFLOPS: map[string]float64{"fp8": 20, "bf16": 10},
				DecodeTFLOPS:  map[string]float64{"fp8": 20, "bf16": 10},
				SleepFixedS:   0.005, WakeFixedS: 0.005, ReloadFixedS: 0.02,
				PCIeGen: 4, PCIeWidth: 16, MemBusWidthBits: 4096, MemClockMHz: 977, // ≈ 1000 GB/s
			},
			Models: map[string]Model{
				"tiny-a": {Name: "tiny-a", ParamsB: 0.5, Dtype: "bf16", Layers: 4,
					WeightGiB: 0.5, ResidualGiB: 0.25, StartInitialS: 0.4, StartWarmS: 0.15},
				"tiny-b": {Name: "tiny-b", ParamsB: 0.25, Dtype: "bf16", Layers: 4,
					WeightGiB: 0.25, ResidualGiB: 0.2, StartInitialS: 0.3, StartWarmS: 0.1},
				"tiny-c": {Name: "tiny-c", ParamsB: 0.3, Dtype: "bf16", Layers: 4,
					WeightGiB: 0.3, ResidualGiB: 0.2, StartInitialS: 0.3, StartWarmS: 0.1},
			},
		},
		// Fleet kinds (docs/fleet.md). Datasheet numbers are cited where
		// used; the rest is derived from the l20's calibration, as said.
		// Each serves the demo profile's models, so one config runs on
		// every kind.
		"h100":             {Name: "h100", Source: "NVIDIA H100 SXM5 80GB datasheet (3.35 TB/s HBM3, PCIe Gen5 x16, 989/1979 TFLOPS bf16/fp8 dense); copy and compute rates scaled from the l20 calibration (docs/vllmsim.md)", GPU: h100GPU(5, 16), Models: demoModels()},
		"a100":             {Name: "a100", Source: "NVIDIA A100 SXM4 80GB datasheet (2039 GB/s HBM2e, PCIe Gen4 x16, 312 TFLOPS bf16 dense, no fp8); copy and compute rates scaled from the l20 calibration (docs/vllmsim.md)", GPU: a100GPU(), Models: demoModels()},
		"h100-pcie-gen3x8": {Name: "h100-pcie-gen3x8", Source: "the h100 profile with its host link trained down to PCIe Gen3 x8 (a degraded fleet node): copies at Gen3 x8's rates while NVML's maximum link still says Gen5 x16", GPU: h100GPU(3, 8), Models: demoModels()},
	}
}

// demoModels are the demo profile's models, served by the fleet kinds.
func demoModels() map[string]Model {
	return map[string]Model{
		"Qwen3-4B": {Name: "Qwen3-4B", ParamsB: 4.0, Dtype: "bf16", Layers: 36,
			WeightGiB: 7.5, ResidualGiB: 0.9, StartInitialS: 70, StartWarmS: 35},
		"Qwen3-0.6B": {Name: "Qwen3-0.6B", ParamsB: 0.6, Dtype: "bf16", Layers: 28,
			WeightGiB: 1.1, ResidualGiB: 0.75, StartInitialS: 37.6, StartWarmS: 25},
	}
}

// l20 fractions of its link's raw rate (PCIe Gen4 x16: 31.5 GB/s one
// way) that its pinned copies reached in the reference run: 22.1/31.5
// device→host, 16.55/31.5 host→device. Other kinds' copy rates are these
// fractions of their own link: an assumption (no run measured them), which
// keeps every kind at the same fraction of its PCIe limit.
const (
	l20D2HFraction = 22.1 / 31.504
	l20H2DFraction = 16.55 / 31.504
)

// linkRates are the pinned copy rates, device→host and host→device, of a
// link of generation gen and width lanes at the l20's fractions.
func linkRates(gen, width int) (d2h, h2d float64) {
	raw := map[int]float64{3: 0.985, 4: 1.969, 5: 3.938}[gen] * float64(width) // GB/s per lane after line coding, as gpu.PCIeGBps
	return raw * l20D2HFraction, raw * l20H2DFraction
}

// h100GPU is an NVIDIA H100 SXM5 80GB whose host link runs at PCIe gen ×
// width (Gen5 x16 when healthy). NVML's maximum link stays Gen5 x16: a
// link trained down under load is still one whose slot and device support
// Gen5 x16, so the run's physical limit (gpu.DeviceFacts.PCIeLimitGBps) is
// Gen5 x16's and a slow link shows as a low fraction of it.
func h100GPU(gen, width int) GPU {
	g := l20GPU() // host-side rates (pinning, release, checkpoint load, fixed costs): the same hosts
	g.Name = "NVIDIA H100 80GB HBM3"
	g.MemoryGiB = 79.65 // 81559 MiB, as NVML reports an H100 80GB HBM3
	g.HBMGBps = 3350    // datasheet (SXM5)
	g.PCIeD2HGBps, g.PCIeH2DGBps = linkRates(gen, width)
	// Compute: the l20's effective rates × the datasheets' dense tensor
	// ratio (H100 989 / L20 119.5 TFLOPS bf16; 1979 / 239 fp8: both 8.28).
	const r = 989.0 / 119.5
	g.PrefillTFLOPS = map[string]float64{"fp8": 50 * r, "bf16": 17 * r}
	g.DecodeTFLOPS = map[string]float64{"fp8": 54.7 * r, "bf16": 34.2 * r}
	// NVML on an H100 SXM5: 5120-bit HBM3 at 2619 MHz: 3352 GB/s.
	g.PCIeGen, g.PCIeWidth, g.MemBusWidthBits, g.MemClockMHz = 5, 16, 5120, 2619
	return g
}

// a100GPU is an NVIDIA A100 SXM4 80GB: PCIe Gen4 x16 like the L20, so
// the l20's copy rates.
func a100GPU() GPU {
	g := l20GPU()
	g.Name = "NVIDIA A100-SXM4-80GB"
	g.MemoryGiB = 79.25 // 81920 MiB less what NVML reports reserved on an 80GB A100 (~0.75 GiB)
	g.HBMGBps = 2039    // datasheet (SXM4 80GB)
	g.PCIeD2HGBps, g.PCIeH2DGBps = linkRates(4, 16)
	// The l20's effective rates × 312 / 119.5 (dense bf16). The A100 has
	// no fp8 tensor cores: vLLM runs fp8 checkpoints as weight-only fp8
	// (Marlin) at bf16 compute, so fp8 gets the bf16 rate.
	const r = 312.0 / 119.5
	g.PrefillTFLOPS = map[string]float64{"fp8": 17 * r, "bf16": 17 * r}
	g.DecodeTFLOPS = map[string]float64{"fp8": 34.2 * r, "bf16": 34.2 * r}
	// NVML on an A100 SXM4 80GB: 5120-bit HBM2e at 1593 MHz: 2039 GB/s.
	g.PCIeGen, g.PCIeWidth, g.MemBusWidthBits, g.MemClockMHz = 4, 16, 5120, 1593
	return g
}
