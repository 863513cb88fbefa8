package backend

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/vllm"
	"github.com/wakebench/wakebench/internal/vllmsim"
)

func TestDeviceRef(t *testing.T) {
	for _, tt := range []struct {
		index          int
		visible, order string
		want           DeviceRef
		err            string
	}{
		{index: 1, want: DeviceRef{Index: 1}},
		{index: 1, visible: "GPU-aaa,GPU-bbb", want: DeviceRef{UUID: "GPU-bbb"}},
		{index: 0, visible: "3,1", order: "PCI_BUS_ID", want: DeviceRef{Index: 3}},
		{index: 0, visible: "3,1", err: "set CUDA_DEVICE_ORDER=PCI_BUS_ID or name the GPUs by UUID"},
		{index: 2, visible: "0,1", order: "PCI_BUS_ID", err: "lists 2 GPU(s)"},
		{index: 0, visible: "MIG-xyz", err: "is a MIG instance"},
		{index: 0, visible: "nvidia0", order: "PCI_BUS_ID", err: "want a GPU index or a GPU-… UUID"},
	} {
		ref, _, err := deviceRef(tt.index, tt.visible, tt.order)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, "%+v", tt)
			continue
		}
		require.NoError(t, err, "%+v", tt)
		assert.Equal(t, tt.want, ref, "%+v", tt)
	}
}

// TestServersRunOnTheWatchedGPU: with NVML, every server gets the watched
// GPU by NVML index in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID
// CUDA_VISIBLE_DEVICES=<index>), also when the runner's own
// CUDA_VISIBLE_DEVICES names it by UUID, which vLLM before 0.24 cannot
// parse; the report keeps the UUID. Without NVML an index is passed on, and
// a UUID, which only NVML could turn into an index, is refused.
func TestServersRunOnTheWatchedGPU(t *testing.T) {
	cfg := sampleConfig()
	cfg.Command, cfg.Memory = "/bin/true", "nvml"
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	f := newFake()
	_, err := open(t.Context(), cfg, t.TempDir(), env(map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-9999,GPU-1234"}), func() nvml.Interface { return f.lib })
	require.Error(t, err, "gpu_index 0 is GPU-9999, which NVML does not have")
	assert.ErrorContains(t, err, "device GPU-9999")

	cfg.GPUIndex = 1
	b, err := open(t.Context(), cfg, t.TempDir(), env(map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-9999,GPU-1234"}), func() nvml.Interface { return f.lib })
	require.NoError(t, err)
	defer b.Close()
	e := b.ServerEnv(cfg.Models[0])
	assert.Contains(t, e, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	assert.Contains(t, e, "CUDA_VISIBLE_DEVICES=2", "GPU-1234 is NVML index 2")
	assert.NotContains(t, e, "CUDA_VISIBLE_DEVICES=GPU-1234", "vLLM before 0.24 crashes on a UUID")
	assert.Equal(t, "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2: GPU-1234, NVML index 2, entry 1 of the runner's CUDA_VISIBLE_DEVICES=GPU-9999,GPU-1234", b.Setup.GPUPlacement)

	cfg.Memory, cfg.GPUIndex = "none", 3
	b, err = open(t.Context(), cfg, t.TempDir(), env(nil), nil)
	require.NoError(t, err)
	e = b.ServerEnv(cfg.Models[0])
	assert.Contains(t, e, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	assert.Contains(t, e, "CUDA_VISIBLE_DEVICES=3")
	assert.Contains(t, b.Setup.GPUPlacement, "no NVML to check it")

	_, err = open(t.Context(), cfg, t.TempDir(), env(map[string]string{"CUDA_VISIBLE_DEVICES": "0,1"}), nil)
	assert.ErrorContains(t, err, "config gpu_index: gpu_index 3: the runner's CUDA_VISIBLE_DEVICES=0,1 lists 2 GPU(s)")
	cfg.GPUIndex = 0
	_, err = open(t.Context(), cfg, t.TempDir(), env(map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-1234"}), nil)
	assert.ErrorContains(t, err, `names GPU-1234 by UUID: vLLM before 0.24 cannot parse a UUID there (vllm#13815) and without NVML wakebench cannot turn it into an index; set memory "nvml"`)
}

// TestMIGRefused: a GPU in MIG mode is refused whether the runner names it
// by index or by UUID (its servers would run on a MIG instance while NVML
// reads the whole GPU), as is a MIG instance named in CUDA_VISIBLE_DEVICES.
func TestMIGRefused(t *testing.T) {
	cfg := sampleConfig()
	cfg.Command, cfg.Memory = "/bin/true", "nvml"
	for _, visible := range []string{"", "GPU-1234", "0"} {
		f := newFake()
		f.mig = true
		vars := map[string]string{"CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
		_, err := open(t.Context(), cfg, t.TempDir(), func(k string) string { return vars[k] }, func() nvml.Interface { return f.lib })
		assert.ErrorContains(t, err, "has MIG mode enabled", "CUDA_VISIBLE_DEVICES=%q", visible)
		assert.Equal(t, 1, f.shutdowns, "NVML is shut down again")
	}
	f := newFake()
	_, err := open(t.Context(), cfg, t.TempDir(), func(k string) string {
		return map[string]string{"CUDA_VISIBLE_DEVICES": "MIG-4b1e2f7a-0000-5555-aaaa-123456789abc"}[k]
	}, func() nvml.Interface { return f.lib })
	assert.ErrorContains(t, err, "is a MIG instance")
}

// TestPre024VLLMStartsOnTheHarnessEnv: a vLLM before 0.24 (vllmsim reading
// CUDA_VISIBLE_DEVICES with int(), as those releases did) starts with the
// environment the harness gives its servers when the runner names the GPU
// by UUID; the UUID itself, what the harness handed servers before, ends
// that start with vLLM's ValueError (vllm#13815).
func TestPre024VLLMStartsOnTheHarnessEnv(t *testing.T) {
	sim, err := BuildSim(t.Context())
	require.NoError(t, err)
	cfg := sampleConfig()
	cfg.Command, cfg.Memory, cfg.GPUIndex = sim, "nvml", 1
	f := newFake()
	runner := map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-9999,GPU-1234"}
	b, err := open(t.Context(), cfg, t.TempDir(), func(k string) string { return runner[k] }, func() nvml.Interface { return f.lib })
	require.NoError(t, err)
	defer b.Close()
	dir := t.TempDir()
	m := cfg.Models[0]
	pre024 := append(b.ServerEnv(m), vllmsim.EnvDeviceIDs+"=int", vllmsim.EnvTimeScale+"=0",
		simgpu.EnvDir+"="+filepath.Join(dir, "gpu"), vllmsim.EnvCacheDir+"="+filepath.Join(dir, "cache"))

	started, stderr := startServer(t, sim, m, pre024)
	assert.True(t, started, "a pre-0.24 vLLM starts on the harness's environment; stderr: %s", stderr)

	uuid := append(slices.Clone(pre024), "CUDA_VISIBLE_DEVICES=GPU-1234")
	started, stderr = startServer(t, sim, m, uuid)
	assert.False(t, started, "a pre-0.24 vLLM cannot start on a UUID")
	assert.Contains(t, stderr, "ValueError: invalid literal for int() with base 10: 'GPU-1234'")
}

// startServer runs `sim serve` for m as the harness's server package does
// (the test's environment, then env) until it says its start is complete or
// exits; it reports which, with its stderr.
func startServer(t *testing.T, sim string, m config.Model, env []string) (started bool, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sim, vllm.ServeArgs(vllm.ServeOptions{Model: m.Name, Host: "127.0.0.1", Port: 0,
		MaxModelLen: 4096, KVCacheBytes: 1 << 30, GPUMemoryUtilization: m.GPUMemoryUtilization})...)
	cmd.Env = append(os.Environ(), env...)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "Application startup complete.") {
			started = true
			break
		}
	}
	_ = cmd.Process.Kill()
	_, _ = io.Copy(io.Discard, out)
	_ = cmd.Wait()
	return started, errBuf.String()
}

// TestTwoGPUs: gpus 2 opens both, sums their memory (each kept per GPU),
// and puts every server on both.
func TestTwoGPUs(t *testing.T) {
	f := newFake()
	second := newFake().dev // a device of its own, reading its own (empty) memory
	second.GetUUIDFunc = func() (string, nvml.Return) { return "GPU-5678", nvml.SUCCESS }
	devs := []nvml.Device{f.dev, second}
	f.lib.DeviceGetCountFunc = func() (int, nvml.Return) { return 2, nvml.SUCCESS }
	f.lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) { return devs[i], nvml.SUCCESS }
	f.used = 5 << 30

	cfg := sampleConfig()
	cfg.Command, cfg.Memory, cfg.GPUs = "/bin/true", "nvml", 2
	require.NoError(t, cfg.Validate())
	b, err := open(t.Context(), cfg, t.TempDir(), func(string) string { return "" }, func() nvml.Interface { return f.lib })
	require.NoError(t, err)
	assert.Equal(t, "2 × NVIDIA L20", b.Setup.GPU)
	assert.Contains(t, b.ServerEnv(cfg.Models[0]), "CUDA_VISIBLE_DEVICES=0,1")
	assert.Contains(t, b.Setup.GPUPlacement, "GPU-1234, NVML index 0, gpu_index 0")
	assert.Contains(t, b.Setup.GPUPlacement, "GPU-5678, NVML index 1, gpu_index 1")
	r, err := b.Source.Read(t.Context())
	require.NoError(t, err)
	require.Len(t, r.Devices, 2)
	assert.Equal(t, r.Devices[0].Used+r.Devices[1].Used, r.Used)
	require.NoError(t, b.Close())
	assert.Equal(t, 2, f.shutdowns, "one NVML shutdown per device opened")
}
