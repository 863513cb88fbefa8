//go:build gpu

package backend

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/testmain"
)

// These tests need a real NVIDIA GPU: go test -tags gpu ./internal/backend.
// WAKEBENCH_GPU_INDEX picks the device (default 0) as a run's gpu_index
// does: entry gpu_index of the runner's CUDA_VISIBLE_DEVICES when it sets
// one, else NVML index gpu_index.

func openReal(t *testing.T) *NVMLSource {
	t.Helper()
	if why := config.NoGPUHardware(os.Getenv); why != "" {
		t.Skip(why)
	}
	release, err := testmain.LockGPU() // not while the root package's protocol runs
	require.NoError(t, err)
	t.Cleanup(release)
	if err := ProbeNVML(nvml.New()); errors.Is(err, ErrNoNVML) {
		// -tags gpu asks for the hardware: without it this fails, as the
		// root package's run does, unless -short skips hardware tests.
		if testing.Short() {
			t.Skipf("-short: needs an NVIDIA GPU and its driver: %v", err)
		}
		t.Fatalf("-tags gpu needs an NVIDIA GPU and its driver, and this machine has none: %v; install the driver, or run go test -short -tags gpu to skip the hardware tests", err)
	}
	idx, _ := strconv.Atoi(os.Getenv("WAKEBENCH_GPU_INDEX"))
	ref, how, err := deviceRef(idx, os.Getenv("CUDA_VISIBLE_DEVICES"), os.Getenv("CUDA_DEVICE_ORDER"))
	require.NoError(t, err)
	s, err := OpenNVMLDevice(nvml.New(), ref)
	require.NoError(t, err, "%s", how)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRealDeviceFacts(t *testing.T) {
	s := openReal(t)
	f := s.Facts()
	t.Logf("NVML facts: %+v", f)
	assert.NotEmpty(t, f.Name)
	assert.NotEmpty(t, f.UUID)
	assert.Greater(t, f.TotalBytes, uint64(1<<30))
	assert.NotEmpty(t, f.CUDAVersion)
	assert.NotEmpty(t, f.DriverVersion)
	// The physical limits' inputs (logged, to compare with the datasheet);
	// any datacenter GPU is above these floors.
	t.Logf("PCIe limit %.1f GB/s (max gen %d x%d, now gen %d x%d), memory %.0f GB/s (%d bit × %d MHz × 2)",
		f.PCIeLimitGBps(), f.MaxPCIeGen, f.MaxPCIeWidth, f.PCIeGen, f.PCIeWidth, f.MemoryGBps(), f.MemBusWidth, f.MaxMemClock)
	if !checkDatasheet(t, f) {
		// Not in the table: only what any datacenter GPU exceeds. Add it
		// to datasheet (datasheet_test.go) from the product page.
		t.Logf("%q is not in the datasheet table: only the floors are checked", f.Name)
		assert.Greater(t, f.PCIeLimitGBps(), 7.0, "at least PCIe gen 3 x8")
		assert.Greater(t, f.MemoryGBps(), 200.0, "device memory bandwidth")
	}
	r, err := s.Read(t.Context())
	require.NoError(t, err)
	assert.LessOrEqual(t, r.Used, r.Total)
	assert.Equal(t, f.TotalBytes, r.Total)
	t.Logf("used %.3f GiB of %.3f GiB, %d compute processes, v2 memory call: %v", float64(r.Used)/(1<<30), float64(r.Total)/(1<<30), len(r.Procs), s.useV2())
}

// allocator is a PyTorch process that holds GiB on the GPU until told to
// free it (like a level-2 sleep), then exits.
const allocator = `
import sys, torch
x = torch.empty(int(sys.argv[1]) << 30, dtype=torch.uint8, device="cuda")
x.fill_(1); torch.cuda.synchronize()
print("allocated", flush=True)
sys.stdin.readline()
del x; torch.cuda.empty_cache(); torch.cuda.synchronize()
print("freed", flush=True)
sys.stdin.readline()
`

// TestNVMLSeesMemoryMove: the sampler sees a process take GPU memory and
// give it back, per process and on the device: what residual and release
// figures rest on.
func TestNVMLSeesMemoryMove(t *testing.T) {
	if err := exec.Command("python3", "-c", "import torch; assert torch.cuda.is_available()").Run(); err != nil {
		t.Skip("needs python3 with CUDA PyTorch to allocate GPU memory: ", err)
	}
	s := openReal(t)
	base, err := s.Read(t.Context())
	require.NoError(t, err)

	const gib = 4
	cmd := exec.CommandContext(t.Context(), "python3", "-c", allocator, strconv.Itoa(gib))
	cmd.Env = append(os.Environ(), CUDAEnv(s.Index())...) // on the device s reads, not CUDA's device 0
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	expect := func(word string) {
		t.Helper()
		require.True(t, lines.Scan(), "allocator ended before %q", word)
		require.Equal(t, word, lines.Text())
	}
	pid := cmd.Process.Pid

	expect("allocated")
	var held gpu.Reading
	require.Eventually(t, func() bool {
		held, err = s.Read(t.Context())
		return err == nil && held.Procs[pid] >= gib<<30
	}, 10*time.Second, 50*time.Millisecond, "NVML lists the process with its memory")
	t.Logf("allocated: process %.3f GiB, device %.3f → %.3f GiB", float64(held.Procs[pid])/(1<<30), float64(base.Used)/(1<<30), float64(held.Used)/(1<<30))
	assert.GreaterOrEqual(t, held.Used-base.Used, uint64(gib<<30), "device used grows by the allocation")

	io.WriteString(stdin, "free\n")
	expect("freed")
	var freed gpu.Reading
	require.Eventually(t, func() bool {
		freed, err = s.Read(t.Context())
		return err == nil && freed.Procs[pid] < 1<<30
	}, 10*time.Second, 50*time.Millisecond, "freed memory leaves the process")
	residual := float64(freed.Procs[pid]) / (1 << 30)
	release := gpu.ReleasePercent(float64(held.Procs[pid])/(1<<30), residual)
	t.Logf("freed: process residual %.3f GiB (CUDA context), released %.2f %%, device %.3f GiB", residual, release, float64(freed.Used)/(1<<30))
	assert.Greater(t, release, 75.0)

	io.WriteString(stdin, "exit\n")
	require.NoError(t, cmd.Wait())
	require.Eventually(t, func() bool {
		r, err := s.Read(t.Context())
		_, listed := r.Procs[pid]
		return err == nil && !listed
	}, 10*time.Second, 50*time.Millisecond, "an exited process holds nothing")
}

// TestSamplerRate: the background sampler keeps its rate against the real device.
func TestSamplerRate(t *testing.T) {
	s := openReal(t)
	smp := gpu.NewSampler(s, 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	smp.Run(ctx)
	n := len(smp.Samples())
	errs, last := smp.Errors()
	t.Logf("%d samples in 1 s at 50 Hz, %d errors (last: %v)", n, errs, last)
	assert.GreaterOrEqual(t, n, 40)
	assert.Zero(t, errs)
}

// TestRealEnergyCounter: on Volta and newer the energy counter moves while
// the board draws power (an idle board draws tens of watts); before Volta
// it says unavailable, not 0.
func TestRealEnergyCounter(t *testing.T) {
	s := openReal(t)
	e0, err := s.Energy(t.Context())
	if errors.Is(err, gpu.ErrNoEnergy) {
		t.Skipf("%s has no energy counter: %v", s.Facts().Name, err)
	}
	require.NoError(t, err)
	time.Sleep(2 * time.Second)
	e1, err := s.Energy(t.Context())
	require.NoError(t, err)
	w, err := s.AveragePower(t.Context())
	require.NoError(t, err)
	t.Logf("%s: %.1f J over 2 s (%.1f W from the counter), NVML average power %.1f W", s.Facts().Name, e1[0]-e0[0], (e1[0]-e0[0])/2, w[0])
	assert.Greater(t, e1[0]-e0[0], 2*5.0, "at least 5 W for 2 s")
	assert.Positive(t, w[0])
}

// TestRealLinkProbe: the link probe on the GPU NVML opened, through the CUDA driver at its PCI
// address: both directions measured, against the nominal link NVML reports. Any PCIe GPU of
// the last decade copies pinned memory at more than 5 GB/s; a rate above 1.2 × the nominal
// link is not PCIe (NVLink-C2C on a Grace Hopper) and is logged, not failed.
func TestRealLinkProbe(t *testing.T) {
	s := openReal(t)
	b := &Backend{Source: s}
	links, note := b.ProbeLinks(t.Context(), 64)
	require.Empty(t, note)
	require.Len(t, links, 1)
	l := links[0]
	t.Logf("link probe: %s: host→device %.2f GB/s (best %.2f), device→host %.2f GB/s (best %.2f), nominal %.2f GB/s (PCIe gen %d x%d), host→device %.2f of nominal; %s",
		l.GPU, l.H2DGBps, l.H2DBestGBps, l.D2HGBps, l.D2HBestGBps, l.NominalGBps, s.Facts().MaxPCIeGen, s.Facts().MaxPCIeWidth, l.H2DFractionOfNominal, l.Source)
	assert.False(t, l.Simulated)
	assert.Greater(t, l.H2DGBps, 5.0)
	assert.Greater(t, l.D2HGBps, 5.0)
	assert.Equal(t, 3, l.Trials)
	// Host→device and device→host of one PCIe link are within a factor of two of each other
	// (a much slower direction is a link or IOMMU problem, not a rate).
	assert.InDelta(t, 1, l.H2DGBps/l.D2HGBps, 0.5, "host→device over device→host")
	if l.H2DFractionOfNominal > 1.2 {
		t.Logf("host→device above the nominal PCIe link: this GPU's host link is not PCIe")
	}
}
