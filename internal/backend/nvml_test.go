package backend

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/gpu"
)

const gib = 1 << 30

// fakeNVML is a mock L20 whose used memory and process list follow a script.
type fakeNVML struct {
	lib       *mock.Interface
	dev       *mock.Device
	used      uint64
	procs     []nvml.ProcessInfo
	hasV2     bool
	mig       bool   // MIG mode enabled
	total     uint64 // device memory
	shutdowns int
}

func newFake() *fakeNVML {
	f := &fakeNVML{hasV2: true, total: 48 * gib}
	f.dev = &mock.Device{
		GetNameFunc:  func() (string, nvml.Return) { return "NVIDIA L20", nvml.SUCCESS },
		GetUUIDFunc:  func() (string, nvml.Return) { return "GPU-1234", nvml.SUCCESS },
		GetIndexFunc: func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		GetMigModeFunc: func() (int, int, nvml.Return) {
			if f.mig {
				return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
			}
			return 0, 0, nvml.ERROR_NOT_SUPPORTED // an L20 has no MIG
		},
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: f.total, Reserved: gib / 2, Used: f.used, Free: f.total - f.used - gib/2}, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: f.total, Used: f.used + gib/2}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return f.procs, nvml.SUCCESS },
		// An idle link trains down: gen 1 now, gen 4 at most.
		GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { return 16, nvml.SUCCESS },
		GetMaxPcieLinkGenerationFunc:  func() (int, nvml.Return) { return 4, nvml.SUCCESS },
		GetMaxPcieLinkWidthFunc:       func() (int, nvml.Return) { return 16, nvml.SUCCESS },
		GetMemoryBusWidthFunc:         func() (uint32, nvml.Return) { return 384, nvml.SUCCESS },
		GetMaxClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			if c != nvml.CLOCK_MEM {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return 9001, nvml.SUCCESS
		},
	}
	f.lib = &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { f.shutdowns++; return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return f.dev, nvml.SUCCESS },
		DeviceGetHandleByUUIDFunc: func(u string) (nvml.Device, nvml.Return) {
			if u != "GPU-1234" {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return f.dev, nvml.SUCCESS
		},
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "580.65.06", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 13000, nvml.SUCCESS },
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
				if s == "nvmlDeviceGetMemoryInfo_v2" && f.hasV2 {
					return nil
				}
				return errors.New("undefined symbol " + s)
			}}
		},
	}
	return f
}

func TestNVMLFacts(t *testing.T) {
	f := newFake()
	s, err := OpenNVML(f.lib, 0)
	require.NoError(t, err)
	assert.Equal(t, gpu.DeviceFacts{Name: "NVIDIA L20", UUID: "GPU-1234", TotalBytes: 48 * gib, DriverVersion: "580.65.06",
		CUDAVersion: "13.0", PCIeGen: 1, PCIeWidth: 16, MaxPCIeGen: 4, MaxPCIeWidth: 16, MemBusWidth: 384, MaxMemClock: 9001}, s.Facts())
	assert.InDelta(t, 31.5, s.Facts().PCIeLimitGBps(), 0.01, "the maximum link, not the idle one")
	assert.InDelta(t, 864.1, s.Facts().MemoryGBps(), 0.01, "L20: 384 bit × 9001 MHz × 2 = 864 GB/s")
	assert.InDelta(t, 4, gpu.DeviceFacts{PCIeGen: 1, PCIeWidth: 16}.PCIeLimitGBps(), 0.01, "the current link when the maximum is unknown")
	assert.Zero(t, gpu.DeviceFacts{MemBusWidth: 384}.MemoryGBps())
	name, err := s.Describe()
	require.NoError(t, err)
	assert.Equal(t, "NVIDIA L20", name)
	require.NoError(t, s.Close())
	assert.Equal(t, 1, f.shutdowns)
	assert.Equal(t, "12.4", CUDAVersion(12040))
	assert.InDelta(t, 31.5, gpu.PCIeGBps(4, 16), 0.01)
	assert.Zero(t, gpu.PCIeGBps(0, 16))
}

// TestNVMLScriptedSleep scripts a model's memory through a level-1 sleep:
// the readings give the residual and the share released, as the harness
// computes them.
func TestNVMLScriptedSleep(t *testing.T) {
	f := newFake()
	s, err := OpenNVML(f.lib, 0)
	require.NoError(t, err)
	const pid = 4242
	awake, asleep := uint64(31.5*gib), uint64(0.5830078125*gib)
	other := nvml.ProcessInfo{Pid: 77, UsedGpuMemory: uint64(1.02734375 * gib)}

	f.used = awake + other.UsedGpuMemory
	f.procs = []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: awake}, other}
	before, err := s.Read(t.Context())
	require.NoError(t, err)
	assert.Equal(t, f.used+gib/2, before.Used, "v2: reserved counts as used, as in v1")
	assert.Equal(t, uint64(48*gib), before.Total)

	f.used = asleep + other.UsedGpuMemory
	f.procs = []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: asleep}, other, {Pid: 9, UsedGpuMemory: math.MaxUint64}}
	after, err := s.Read(t.Context())
	require.NoError(t, err)
	assert.NotContains(t, after.Procs, 9, "VALUE_NOT_AVAILABLE is left out, not counted as 16 EiB")

	b, a := float64(gpu.ProcsUsed(before, []int{pid}))/gib, float64(gpu.ProcsUsed(after, []int{pid}))/gib
	assert.InDelta(t, 0.5830078125, a, 1e-12, "residual GiB")
	assert.InDelta(t, 98.149, gpu.ReleasePercent(b, a), 0.001, "share released")
}

func TestNVMLFallsBackToV1(t *testing.T) {
	f := newFake()
	f.hasV2 = false
	f.used = 10 * gib
	s, err := OpenNVML(f.lib, 0)
	require.NoError(t, err)
	r, err := s.Read(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(10*gib+gib/2), r.Used)
	assert.Empty(t, f.dev.GetMemoryInfo_v2Calls(), "the v2 call is never made where the library lacks it")
}

// TestNVMLV2RefusedWhileSampling: a driver that stops answering the v2
// memory call mid-run is met by the sampler and by Facts at once; both fall
// back to v1 (run with -race: the fallback flag is shared between them).
func TestNVMLV2RefusedWhileSampling(t *testing.T) {
	f := newFake()
	f.used = 10 * gib
	s, err := OpenNVML(f.lib, 0)
	require.NoError(t, err)
	f.dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED }
	var wg sync.WaitGroup
	reads := make([]gpu.Reading, 4)
	errs := make([]error, len(reads))
	for i := range reads {
		wg.Go(func() { reads[i], errs[i] = s.Read(t.Context()) })
	}
	wg.Go(func() { s.Facts() })
	wg.Wait()
	for i := range reads {
		require.NoError(t, errs[i])
		assert.Equal(t, uint64(10*gib+gib/2), reads[i].Used, "the v1 figure")
	}
	assert.Equal(t, uint64(48*gib), s.Facts().TotalBytes)
	n := len(f.dev.GetMemoryInfo_v2Calls())
	_, err = s.Read(t.Context())
	require.NoError(t, err)
	assert.Len(t, f.dev.GetMemoryInfo_v2Calls(), n, "once refused, the v2 call is not made again")
}

func TestNVMLProcessesNotSupported(t *testing.T) {
	f := newFake()
	f.dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	s, err := OpenNVML(f.lib, 0)
	require.NoError(t, err)
	r, err := s.Read(t.Context())
	require.NoError(t, err, "device memory still reads")
	assert.Empty(t, r.Procs)
}

func TestNVMLErrors(t *testing.T) {
	f := newFake()
	f.lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	_, err := OpenNVML(f.lib, 0)
	assert.ErrorContains(t, err, "NVML init: ERROR_LIBRARY_NOT_FOUND")
	assert.ErrorContains(t, err, `set memory to "none" or "sim"`)
	assert.Empty(t, f.lib.DeviceGetCountCalls(), "nothing is called after a failed Init")

	f = newFake()
	_, err = OpenNVML(f.lib, 3)
	assert.ErrorContains(t, err, "gpu_index 3 out of range: 1 device(s)")
	assert.Equal(t, 1, f.shutdowns, "a failed open shuts NVML down again")

	f = newFake()
	f.dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_GPU_IS_LOST }
	_, err = OpenNVML(f.lib, 0)
	assert.ErrorContains(t, err, "NVML memory info v2: ERROR_GPU_IS_LOST")
}

// TestRealNVMLWithoutDriver: on a machine without the NVIDIA library, Init
// fails cleanly (and nothing else is called, which would kill the process).
func TestRealNVMLWithoutDriver(t *testing.T) {
	s, err := OpenNVML(nvml.New(), 0)
	if err == nil {
		s.Close()
		t.Skip("an NVIDIA driver is present: the gpu-tag tests cover this machine")
	}
	assert.ErrorContains(t, err, "NVML init")
}
