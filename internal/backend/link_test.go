package backend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/cuda"
	"github.com/wakebench/wakebench/internal/linkprobe"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/vllmsim"
)

// The simulated GPU's probe is its profile's copy rates, labelled simulated: the degraded
// H100's link reads Gen3 x8's rates against NVML's Gen5 x16.
func TestProbeLinksSim(t *testing.T) {
	for _, tc := range []struct {
		profile string
		ratio   float64
	}{{"h100", 16.55 / 31.504}, {"h100-pcie-gen3x8", 16.55 / 31.504 * (0.985 * 8) / (3.938 * 16)}} {
		t.Run(tc.profile, func(t *testing.T) {
			cfg := config.SimDefault()
			cfg.Sim.Profile = tc.profile
			b, err := Open(t.Context(), cfg, t.TempDir())
			require.NoError(t, err)
			defer b.Close()
			links, note := b.ProbeLinks(t.Context(), 64)
			require.Empty(t, note)
			require.Len(t, links, 1)
			l := links[0]
			p, _ := vllmsim.LookupProfile(tc.profile)
			assert.True(t, l.Simulated)
			assert.Equal(t, p.GPU.PCIeH2DGBps, l.H2DGBps)
			assert.Equal(t, p.GPU.PCIeD2HGBps, l.D2HGBps)
			assert.InDelta(t, 3.938*16, l.NominalGBps, 1e-9, "NVML's maximum link: Gen5 x16 either way")
			assert.InDelta(t, tc.ratio, l.H2DFractionOfNominal, 1e-9)
			assert.Contains(t, l.Source, "simulated")
		})
	}
	b, err := Open(t.Context(), config.SimDefault(), t.TempDir())
	require.NoError(t, err)
	links, note := b.ProbeLinks(t.Context(), 0)
	assert.Nil(t, links)
	assert.Equal(t, "link probe off (protocol.link_probe_mib 0)", note)
}

// On NVML's GPU the probe is measured through the CUDA driver at the GPU's PCI address, with
// the configured buffer; one that fails leaves its reason and the run goes on.
func TestProbeLinksNVML(t *testing.T) {
	f := newFake()
	f.dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		return nvml.PciInfo{Domain: 0, Bus: 0x3b, Device: 0}, nvml.SUCCESS
	}
	cfg := sampleConfig()
	cfg.Command, cfg.Memory = "/bin/true", "nvml"
	b, err := open(t.Context(), cfg, t.TempDir(), func(string) string { return "" }, func() nvml.Interface { return f.lib })
	require.NoError(t, err)
	defer b.Close()
	var gotBus string
	var gotBytes uint64
	b.measure = func(_ context.Context, bus string, bytes uint64) (linkprobe.Result, string, error) {
		gotBus, gotBytes = bus, bytes
		return linkprobe.Result{Bytes: bytes, LoopCount: 16, Trials: 3, H2DGBps: 25.2, D2HGBps: 26.1, H2DBestGBps: 25.3, D2HBestGBps: 26.2}, "CUDA device 0 (NVIDIA L20, CUDA driver API 13.0)", nil
	}
	links, note := b.ProbeLinks(t.Context(), 32)
	require.Empty(t, note)
	require.Len(t, links, 1)
	assert.Equal(t, "0000:3b:00.0", gotBus)
	assert.Equal(t, uint64(32<<20), gotBytes)
	l := links[0]
	assert.Equal(t, record.Link{GPU: "NVML index 0, GPU-1234, PCI 0000:3b:00.0", H2DGBps: 25.2, D2HGBps: 26.1, H2DBestGBps: 25.3, D2HBestGBps: 26.2,
		NominalGBps: 1.969 * 16, H2DFractionOfNominal: l.H2DFractionOfNominal, BufferBytes: 32 << 20, LoopCount: 16, Trials: 3, Source: l.Source}, l)
	assert.InDelta(t, 25.2/(1.969*16), l.H2DFractionOfNominal, 1e-12)
	assert.Contains(t, l.Source, "measured: pinned copies through the CUDA driver on CUDA device 0 (NVIDIA L20")
	assert.Contains(t, l.Source, "16 × 32 MiB a trial, the median of 3 trials")

	b.measure = func(context.Context, string, uint64) (linkprobe.Result, string, error) {
		return linkprobe.Result{}, "", errors.Join(cuda.ErrNoDriver)
	}
	links, note = b.ProbeLinks(t.Context(), 32)
	assert.Empty(t, links)
	assert.Contains(t, note, "link probe failed: NVML index 0 (PCI 0000:3b:00.0): the CUDA driver library libcuda.so.1 cannot be loaded: install the NVIDIA driver")
}

// Without the driver the real probe says what to install (this machine's case; a GPU
// machine runs the gpu-tag test instead).
func TestMeasureCUDAWithoutDriver(t *testing.T) {
	if _, err := cuda.Ordinal("0000:00:00.0"); !errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("this machine has a CUDA driver (%v): TestRealLinkProbe (-tags gpu) measures it", err)
	}
	_, _, err := measureCUDA(t.Context(), "0000:3b:00.0", 1<<20)
	require.ErrorIs(t, err, cuda.ErrNoDriver)
}

// Real-device mode places vllmsim as vLLM is placed, on the GPU NVML measures, tells it so,
// and runs a vllmsim built elsewhere when WAKEBENCH_VLLMSIM names one.
func TestRealDeviceBackend(t *testing.T) {
	f := newFake()
	cfg := config.SimDefault()
	cfg.Memory, cfg.Sim.Device = "nvml", "cuda"
	require.NoError(t, cfg.Validate())
	bin := filepath.Join(t.TempDir(), "vllmsim")
	require.NoError(t, writeExecutable(bin))
	b, err := open(t.Context(), cfg, t.TempDir(), func(k string) string { return map[string]string{EnvSimBinary: bin}[k] }, func() nvml.Interface { return f.lib })
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, bin, b.Command)
	e := b.ServerEnv(cfg.Models[0])
	assert.Contains(t, e, "VLLMSIM_DEVICE=cuda")
	assert.Contains(t, e, "CUDA_VISIBLE_DEVICES=0")
	assert.Contains(t, e, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	require.NotNil(t, b.Setup.Simulated)
	assert.True(t, b.Setup.Simulated.RealDevice)
	assert.Contains(t, b.Setup.Simulated.Note, "real-device mode")

	_, err = open(t.Context(), cfg, t.TempDir(), func(k string) string { return map[string]string{EnvSimBinary: "/nonexistent/vllmsim"}[k] }, func() nvml.Interface { return f.lib })
	assert.ErrorContains(t, err, "WAKEBENCH_VLLMSIM: stat /nonexistent/vllmsim")
}

// writeExecutable writes a program that does nothing, standing in for a built vllmsim.
func writeExecutable(path string) error {
	return os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755)
}
