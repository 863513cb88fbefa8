package backend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/wakebench/wakebench/internal/gpu"
)

// NVMLSource reads one device through NVML (github.com/NVIDIA/go-nvml).
//
// go-nvml binds NVML lazily: calling anything but Init before a successful
// Init kills the process (an unresolved symbol, not a Go panic), so every
// call here happens only after OpenNVML's Init succeeded, and the optional
// v2 memory call only where the library has its symbol.
type NVMLSource struct {
	lib   nvml.Interface
	dev   nvml.Device
	index int

	// mu guards memV2: memory() clears it when the driver refuses the v2
	// call, and memory() runs on the sampler's goroutine and on Facts'
	// caller's at once.
	mu    sync.Mutex
	memV2 bool // the v2 memory call is there and not refused yet

	once  sync.Once
	facts gpu.DeviceFacts
}

// DeviceRef names the GPU to open: by UUID when set, else by NVML index.
type DeviceRef struct {
	Index int
	UUID  string
}

// OpenNVML initialises NVML on lib (nvml.New() on real hardware, a mock in
// tests) and opens the device at index.
func OpenNVML(lib nvml.Interface, index int) (*NVMLSource, error) {
	return OpenNVMLDevice(lib, DeviceRef{Index: index})
}

// OpenNVMLDevice initialises NVML on lib and opens the device ref names.
func OpenNVMLDevice(lib nvml.Interface, ref DeviceRef) (*NVMLSource, error) {
	index := ref.Index
	if ret := lib.Init(); ret != nvml.SUCCESS {
		hint := ""
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			hint = ": libnvidia-ml.so.1 not found (no NVIDIA driver here?); set memory to \"none\" or \"sim\""
		}
		return nil, fmt.Errorf("NVML init: %s%s", nvml.ErrorString(ret), hint)
	}
	s := &NVMLSource{lib: lib, index: index}
	fail := func(what string, ret nvml.Return) (*NVMLSource, error) {
		lib.Shutdown()
		return nil, fmt.Errorf("NVML %s: %s", what, nvml.ErrorString(ret))
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fail("device count", ret)
	}
	if ref.UUID != "" {
		if s.dev, ret = lib.DeviceGetHandleByUUID(ref.UUID); ret != nvml.SUCCESS {
			return fail("device "+ref.UUID, ret)
		}
		if s.index, ret = s.dev.GetIndex(); ret != nvml.SUCCESS {
			return fail("index of device "+ref.UUID, ret)
		}
	} else {
		if index < 0 || index >= n {
			lib.Shutdown()
			return nil, fmt.Errorf("NVML: gpu_index %d out of range: %d device(s)", index, n)
		}
		if s.dev, ret = lib.DeviceGetHandleByIndex(index); ret != nvml.SUCCESS {
			return fail(fmt.Sprintf("device %d", index), ret)
		}
	}
	// A GPU in MIG mode runs CUDA processes on its MIG instances, while
	// this source reads the whole GPU: every figure would be the GPU's.
	if cur, _, ret := s.dev.GetMigMode(); ret == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE {
		lib.Shutdown()
		return nil, fmt.Errorf("NVML device %d has MIG mode enabled: its servers would run on a MIG instance while NVML reads the whole GPU's memory; use a GPU without MIG (nvidia-smi -i %d -mig 0)", s.index, s.index)
	}
	s.memV2 = lib.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	if _, err := s.memory(); err != nil {
		lib.Shutdown()
		return nil, err
	}
	return s, nil
}

// ErrNoNVML is the NVIDIA management library missing: a machine without an
// NVIDIA GPU driver.
var ErrNoNVML = errors.New("libnvidia-ml.so.1 not found (no NVIDIA driver here?)")

// ProbeNVML initialises NVML on lib (nvml.New() on real hardware) and shuts
// it down again: nil where NVML works, an error wrapping ErrNoNVML where
// the library is missing, another error where it is there but fails.
func ProbeNVML(lib nvml.Interface) error {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
		lib.Shutdown()
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("NVML init: %w", ErrNoNVML)
	default:
		return fmt.Errorf("NVML init: %s", nvml.ErrorString(ret))
	}
}

// ProbeSystemNVML is ProbeNVML on this machine's NVML library.
func ProbeSystemNVML() error { return ProbeNVML(nvml.New()) }

// Close shuts NVML down (each successful Init needs one Shutdown).
func (s *NVMLSource) Close() error {
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", nvml.ErrorString(ret))
	}
	return nil
}

// Describe is the device name, e.g. "NVIDIA L20".
func (s *NVMLSource) Describe() (string, error) { return s.Facts().Name, nil }

// Facts reads the device's fixed facts once; a fact NVML does not support stays empty.
func (s *NVMLSource) Facts() gpu.DeviceFacts {
	s.once.Do(func() {
		f := &s.facts
		if v, ret := s.dev.GetName(); ret == nvml.SUCCESS {
			f.Name = v
		} else {
			f.Name = fmt.Sprintf("GPU %d", s.index)
		}
		if v, ret := s.dev.GetUUID(); ret == nvml.SUCCESS {
			f.UUID = v
		}
		if m, err := s.memory(); err == nil {
			f.TotalBytes = m.total
		}
		if v, ret := s.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
			f.DriverVersion = v
		}
		if v, ret := s.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
			f.CUDAVersion = CUDAVersion(v)
		}
		if v, ret := s.dev.GetCurrPcieLinkGeneration(); ret == nvml.SUCCESS {
			f.PCIeGen = v
		}
		if v, ret := s.dev.GetCurrPcieLinkWidth(); ret == nvml.SUCCESS {
			f.PCIeWidth = v
		}
		if v, ret := s.dev.GetMaxPcieLinkGeneration(); ret == nvml.SUCCESS {
			f.MaxPCIeGen = v
		}
		if v, ret := s.dev.GetMaxPcieLinkWidth(); ret == nvml.SUCCESS {
			f.MaxPCIeWidth = v
		}
		if v, ret := s.dev.GetMemoryBusWidth(); ret == nvml.SUCCESS {
			f.MemBusWidth = int(v)
		}
		if v, ret := s.dev.GetMaxClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
			f.MaxMemClock = int(v)
		}
	})
	return s.facts
}

// CUDAVersion formats NVML's CUDA driver version (13000 → "13.0").
func CUDAVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

type mem struct{ used, total uint64 }

// useV2 says whether to try the v2 memory call.
func (s *NVMLSource) useV2() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.memV2
}

func (s *NVMLSource) memory() (mem, error) {
	if s.useV2() {
		m, ret := s.dev.GetMemoryInfo_v2()
		if ret == nvml.SUCCESS {
			// v2 separates driver-reserved memory from Used; count it as
			// used, as v1 does, so both give the same device figure.
			return mem{used: m.Used + m.Reserved, total: m.Total}, nil
		}
		if ret != nvml.ERROR_NOT_SUPPORTED && ret != nvml.ERROR_FUNCTION_NOT_FOUND {
			return mem{}, fmt.Errorf("NVML memory info v2: %s", nvml.ErrorString(ret))
		}
		s.mu.Lock()
		s.memV2 = false
		s.mu.Unlock()
	}
	m, ret := s.dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return mem{}, fmt.Errorf("NVML memory info: %s", nvml.ErrorString(ret))
	}
	return mem{used: m.Used, total: m.Total}, nil
}

// Read returns device memory and the compute processes' memory. Processes
// whose memory NVML cannot report (VALUE_NOT_AVAILABLE) are left out; when
// NVML does not support the process list at all, Procs is empty.
func (s *NVMLSource) Read(context.Context) (gpu.Reading, error) {
	m, err := s.memory()
	if err != nil {
		return gpu.Reading{}, err
	}
	r := gpu.Reading{Used: m.used, Total: m.total, Procs: map[int]uint64{}}
	procs, ret := s.dev.GetComputeRunningProcesses()
	switch ret {
	case nvml.SUCCESS:
		for _, p := range procs {
			if p.UsedGpuMemory == math.MaxUint64 {
				continue
			}
			r.Procs[int(p.Pid)] += p.UsedGpuMemory
		}
	case nvml.ERROR_NOT_SUPPORTED:
	default:
		return gpu.Reading{}, fmt.Errorf("NVML compute processes: %s", nvml.ErrorString(ret))
	}
	return r, nil
}

// Index is the device's NVML index.
func (s *NVMLSource) Index() int { return s.index }

// Energy is the device's total energy consumption since the driver was last
// loaded, in joules (nvmlDeviceGetTotalEnergyConsumption, millijoules;
// Volta and newer, nvml.h). A device that does not support it gives an
// error wrapping gpu.ErrNoEnergy: the figure is unavailable, not 0.
func (s *NVMLSource) Energy(context.Context) ([]float64, error) {
	mj, ret := s.dev.GetTotalEnergyConsumption()
	return s.milli("total energy", mj, ret)
}

// AveragePower is the device's power draw in watts as NVML averages it
// (nvmlDeviceGetPowerUsage, milliwatts): on Ampere (except GA100) and newer
// the average over the last second (nvml.h), too coarse for a wake of a
// fraction of a second; measure those from Energy's differences.
func (s *NVMLSource) AveragePower(context.Context) ([]float64, error) {
	mw, ret := s.dev.GetPowerUsage()
	return s.milli("power usage", uint64(mw), ret)
}

// milli is an NVML reading in thousandths (mJ, mW) as the device's figure
// in units; a device without the counter gives an error wrapping
// gpu.ErrNoEnergy (the figure is unavailable, not 0).
func (s *NVMLSource) milli(what string, v uint64, ret nvml.Return) ([]float64, error) {
	switch ret {
	case nvml.SUCCESS:
		return []float64{float64(v) / 1e3}, nil
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return nil, fmt.Errorf("NVML device %d %s: %s: %w", s.index, what, nvml.ErrorString(ret), gpu.ErrNoEnergy)
	}
	return nil, fmt.Errorf("NVML device %d %s: %s", s.index, what, nvml.ErrorString(ret))
}
