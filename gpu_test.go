//go:build gpu

package wakebench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUFacts (gpu tag): with NVML as the memory source the report names
// the real device, its driver's CUDA version and PCIe link.
func TestGPUFacts(t *testing.T) {
	h, _ := begin(t, "gpu-facts")
	if h.Config().Memory != "nvml" {
		t.Skipf("memory source is %q, not nvml", h.Config().Memory)
	}
	raw := h.Raw()
	require.NotNil(t, raw.GPUFacts)
	assert.True(t, strings.HasPrefix(raw.GPU, "1 × "), raw.GPU)
	assert.NotEmpty(t, raw.GPUFacts.CUDAVersion)
	assert.Positive(t, raw.GPUFacts.MemoryGiB)
	assert.Positive(t, raw.GPUFacts.PCIeGBps, "PCIe generation and width")
}
