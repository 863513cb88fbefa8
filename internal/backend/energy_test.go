package backend

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/simgpu"
)

var (
	_ gpu.EnergySource = (*NVMLSource)(nil)
	_ gpu.PowerSource  = (*NVMLSource)(nil)
	_ gpu.EnergySource = multiSource{}
	_ gpu.PowerSource  = nvmlMulti{}
	_ gpu.EnergySource = (*SimSource)(nil)
)

// TestNVMLEnergy: the counter is read in millijoules and given in joules;
// the energy of an interval is the difference of two readings.
func TestNVMLEnergy(t *testing.T) {
	f := newFake()
	mj := uint64(1_000_000_123) // ~1 MJ since the driver loaded
	f.dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return mj, nvml.SUCCESS }
	f.dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 61_250, nvml.SUCCESS }
	s, err := OpenNVML(f.lib, 0)
	require.NoError(t, err)
	before, err := gpu.EnergyOf(t.Context(), s)
	require.NoError(t, err)
	mj += 57_500 // a wake: 57.5 J
	after, err := s.Energy(t.Context())
	require.NoError(t, err)
	require.Len(t, after, 1)
	assert.InDelta(t, 1_000_000.123, before[0], 1e-6)
	assert.InDelta(t, 57.5, after[0]-before[0], 1e-6)
	w, err := s.AveragePower(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []float64{61.25}, w, "milliwatts to watts")
}

// TestNVMLEnergyNotSupported: a device without the counter (before Volta)
// says the figure is unavailable; it never reads as 0 J.
func TestNVMLEnergyNotSupported(t *testing.T) {
	f := newFake()
	f.dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	f.dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	s, err := OpenNVML(f.lib, 0)
	require.NoError(t, err)
	j, err := s.Energy(t.Context())
	assert.ErrorIs(t, err, gpu.ErrNoEnergy)
	assert.ErrorContains(t, err, "ERROR_NOT_SUPPORTED")
	assert.Nil(t, j)
	_, err = s.AveragePower(t.Context())
	assert.ErrorIs(t, err, gpu.ErrNoEnergy)

	f.dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	_, err = s.Energy(t.Context())
	assert.ErrorContains(t, err, "ERROR_GPU_IS_LOST")
	assert.NotErrorIs(t, err, gpu.ErrNoEnergy, "a lost GPU is a failure, not a missing counter")

	_, err = gpu.EnergyOf(t.Context(), nil)
	assert.ErrorIs(t, err, gpu.ErrNoEnergy, "no memory source: no counter")
}

// TestTwoGPUsEnergy: over two GPUs, each GPU's counter in the run's order;
// one without a counter makes the whole figure unavailable.
func TestTwoGPUsEnergy(t *testing.T) {
	a, b := newFake(), newFake()
	a.dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 5_000, nvml.SUCCESS }
	b.dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 7_000, nvml.SUCCESS }
	sa, err := OpenNVML(a.lib, 0)
	require.NoError(t, err)
	sb, err := OpenNVML(b.lib, 0)
	require.NoError(t, err)
	m := multiSource{devs: []devSource{sa, sb}}
	j, err := m.Energy(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []float64{5, 7}, j)
	b.dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	_, err = m.Energy(t.Context())
	assert.ErrorIs(t, err, gpu.ErrNoEnergy)
	assert.ErrorContains(t, err, "GPU 2 of 2")
}

// TestSimSourceEnergy: the backend reads the simulated device's counter; a
// server that draws more makes it run faster.
func TestSimSourceEnergy(t *testing.T) {
	dir := t.TempDir()
	p := simgpu.Power{BoardIdleW: 0, ContextW: 1000}
	require.NoError(t, simgpu.Create(dir, simgpu.Device{Name: "G", TotalBytes: 1 << 30, Power: &p}))
	src := NewSimSource(dir)
	m, err := simgpu.NewMeter(dir, os.Getpid(), "m", time.Now())
	require.NoError(t, err)
	e0, err := src.Energy(t.Context())
	require.NoError(t, err)
	require.NoError(t, m.SetState(p, simgpu.Asleep, time.Now()))
	time.Sleep(50 * time.Millisecond)
	e1, err := src.Energy(t.Context())
	require.NoError(t, err)
	assert.Greater(t, e1[0]-e0[0], 1000*0.05*0.9, "1 kW for 50 ms is at least 45 J")

	dir = t.TempDir()
	require.NoError(t, simgpu.Create(dir, simgpu.Device{Name: "unknown", TotalBytes: 1 << 30}))
	_, err = NewSimSource(dir).Energy(t.Context())
	assert.ErrorIs(t, err, gpu.ErrNoEnergy, "a device without a power model has no counter")
}

// TestSimMultiSource: a run of two simulated GPUs reads both, each GPU's
// memory apart and summed, each GPU's energy counter; it does not claim
// NVML's one-second average power, which a simulated GPU has not.
func TestSimMultiSource(t *testing.T) {
	var devs []devSource
	for i := range 2 {
		dir := t.TempDir()
		p := simgpu.Power{BoardIdleW: 10, ContextW: 20}
		require.NoError(t, simgpu.Create(dir, simgpu.Device{Name: "G", TotalBytes: 8 << 30, Power: &p}))
		require.NoError(t, simgpu.Publish(dir, simgpu.Process{PID: os.Getpid(), Model: "m", UsedBytes: uint64(i+1) << 30}))
		devs = append(devs, NewSimSource(dir))
	}
	m := multiSource{devs: devs}
	r, err := m.Read(t.Context())
	require.NoError(t, err)
	require.Len(t, r.Devices, 2)
	assert.Equal(t, uint64(1<<30), r.Devices[0].Procs[os.Getpid()])
	assert.Equal(t, uint64(2<<30), r.Devices[1].Procs[os.Getpid()])
	assert.Equal(t, uint64(3<<30), r.Procs[os.Getpid()], "the process's memory over both GPUs")
	j, err := m.Energy(t.Context())
	require.NoError(t, err)
	assert.Len(t, j, 2, "a counter per GPU")
}

// TestSimBackendOfTwoGPUs: a vllmsim run with gpus 2 gets a simulated GPU
// per GPU, both named to the servers in VLLMSIM_GPU_DIR, read together; it
// claims no NVML one-second average power.
func TestSimBackendOfTwoGPUs(t *testing.T) {
	cfg := config.SimDefault()
	cfg.GPUs = 2
	dir := t.TempDir()
	b, err := open(t.Context(), cfg, dir, func(string) string { return "" }, nil)
	require.NoError(t, err)
	defer b.Close()
	var gpuDir string
	for _, e := range b.NodeEnv() {
		if v, ok := strings.CutPrefix(e, simgpu.EnvDir+"="); ok {
			gpuDir = v
		}
	}
	dirs := filepath.SplitList(gpuDir)
	require.Len(t, dirs, 2, "a simulated GPU per GPU of the run: %q", gpuDir)
	for _, d := range dirs {
		_, err := simgpu.ReadDevice(d)
		assert.NoError(t, err, d)
	}
	r, err := b.Source.Read(t.Context())
	require.NoError(t, err)
	assert.Len(t, r.Devices, 2, "both read")
	_, power := b.Source.(gpu.PowerSource)
	assert.False(t, power, "no average power from simulated GPUs")
	_, energy := b.Source.(gpu.EnergySource)
	assert.True(t, energy, "each simulated GPU's energy counter")
}
