package backend

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
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

// TestServersRunOnTheWatchedGPU: with NVML, every server gets
// CUDA_VISIBLE_DEVICES=<the watched GPU's UUID>, also when the runner's own
// CUDA_VISIBLE_DEVICES names it; without NVML the index is pinned to NVML's
// order; the report says which.
func TestServersRunOnTheWatchedGPU(t *testing.T) {
	cfg := config.Default()
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
	assert.Contains(t, b.ServerEnv(cfg.Models[0]), "CUDA_VISIBLE_DEVICES=GPU-1234")
	assert.Equal(t, "CUDA_VISIBLE_DEVICES=GPU-1234: NVML index 2, entry 1 of the runner's CUDA_VISIBLE_DEVICES=GPU-9999,GPU-1234", b.Setup.GPUPlacement)

	cfg.Memory, cfg.GPUIndex = "none", 3
	b, err = open(t.Context(), cfg, t.TempDir(), env(nil), nil)
	require.NoError(t, err)
	e := b.ServerEnv(cfg.Models[0])
	assert.Contains(t, e, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	assert.Contains(t, e, "CUDA_VISIBLE_DEVICES=3")
	assert.Contains(t, b.Setup.GPUPlacement, "no NVML to check it")

	_, err = open(t.Context(), cfg, t.TempDir(), env(map[string]string{"CUDA_VISIBLE_DEVICES": "0,1"}), nil)
	assert.ErrorContains(t, err, "config gpu_index: gpu_index 3: the runner's CUDA_VISIBLE_DEVICES=0,1 lists 2 GPU(s)")
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

	cfg := config.Default()
	cfg.Command, cfg.Memory, cfg.GPUs = "/bin/true", "nvml", 2
	require.NoError(t, cfg.Validate())
	b, err := open(t.Context(), cfg, t.TempDir(), func(string) string { return "" }, func() nvml.Interface { return f.lib })
	require.NoError(t, err)
	assert.Equal(t, "2 × NVIDIA L20", b.Setup.GPU)
	assert.Contains(t, b.ServerEnv(cfg.Models[0]), "CUDA_VISIBLE_DEVICES=GPU-1234,GPU-5678")
	assert.Contains(t, b.Setup.GPUPlacement, "NVML index 0, gpu_index 0")
	assert.Contains(t, b.Setup.GPUPlacement, "NVML index 1, gpu_index 1")
	r, err := b.Source.Read(t.Context())
	require.NoError(t, err)
	require.Len(t, r.Devices, 2)
	assert.Equal(t, r.Devices[0].Used+r.Devices[1].Used, r.Used)
	require.NoError(t, b.Close())
	assert.Equal(t, 2, f.shutdowns, "one NVML shutdown per device opened")
}
