package backend

import (
	"fmt"
	"strconv"
	"strings"
)

// CUDAEnv is the environment that puts a CUDA process (a vLLM server, a
// test's allocator) on the GPUs of these NVML indices: NVML numbers devices
// in PCI bus order, which is CUDA's order under CUDA_DEVICE_ORDER=PCI_BUS_ID
// (its default, FASTEST_FIRST, is not). Indices, never GPU-… UUIDs: vLLM
// before 0.24 reads each CUDA_VISIBLE_DEVICES entry with int()
// (vllm/platforms/interface.py, device_id_to_physical_device_id) and a
// UUID crashes it at start: "ValueError: invalid literal for int() with
// base 10: 'GPU-…'" (vllm-project/vllm#13815, #20939).
func CUDAEnv(nvmlIndices ...int) []string {
	ids := make([]string, len(nvmlIndices))
	for i, n := range nvmlIndices {
		ids[i] = strconv.Itoa(n)
	}
	return []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + strings.Join(ids, ",")}
}

// deviceRef resolves which GPU gpu_index names on this runner. Without a
// CUDA_VISIBLE_DEVICES of the runner's it is NVML index gpu_index. With
// one, it is entry gpu_index of that list: a GPU UUID is used as it is; an
// index is one only NVML's order can be trusted for, so it needs
// CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's default order, fastest first, is
// not NVML's). how says which, for the report.
func deviceRef(gpuIndex int, visible, order string) (ref DeviceRef, how string, err error) {
	if strings.TrimSpace(visible) == "" {
		return DeviceRef{Index: gpuIndex}, fmt.Sprintf("gpu_index %d (NVML index)", gpuIndex), nil
	}
	entries := strings.Split(visible, ",")
	if gpuIndex < 0 || gpuIndex >= len(entries) {
		return ref, "", fmt.Errorf("gpu_index %d: the runner's CUDA_VISIBLE_DEVICES=%s lists %d GPU(s)", gpuIndex, visible, len(entries))
	}
	e := strings.TrimSpace(entries[gpuIndex])
	how = fmt.Sprintf("entry %d of the runner's CUDA_VISIBLE_DEVICES=%s", gpuIndex, visible)
	switch {
	case strings.HasPrefix(e, "GPU-"):
		return DeviceRef{UUID: e}, how, nil
	case strings.HasPrefix(e, "MIG-"):
		return ref, "", fmt.Errorf("CUDA_VISIBLE_DEVICES entry %q is a MIG instance: wakebench samples whole GPUs; name the GPU", e)
	}
	i, err := strconv.Atoi(e)
	if err != nil || i < 0 {
		return ref, "", fmt.Errorf("CUDA_VISIBLE_DEVICES entry %q: want a GPU index or a GPU-… UUID", e)
	}
	if order != "PCI_BUS_ID" {
		return ref, "", fmt.Errorf("CUDA_VISIBLE_DEVICES=%s names GPUs by CUDA index, whose default order (FASTEST_FIRST) is not NVML's: set CUDA_DEVICE_ORDER=PCI_BUS_ID or name the GPUs by UUID (nvidia-smi -L)", visible)
	}
	return DeviceRef{Index: i}, how, nil
}
