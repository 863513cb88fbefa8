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
		PCIeGen: g.PCIeGen, PCIeWidth: g.PCIeWidth, MemBusWidthBits: g.MemBusWidthBits, MemClockMHz: g.MemClockMHz}
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
	}
}
