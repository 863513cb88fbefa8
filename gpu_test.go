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
	// The link probe ran before the first server, through the CUDA driver, on every GPU of the
	// run; its rates are the physical limits' floor.
	if h.Config().Protocol.LinkProbeMiB > 0 {
		require.NotEmpty(t, raw.Links, "link probe: %s", raw.LinkNote)
		require.Empty(t, raw.LinkNote)
		for _, l := range raw.Links {
			t.Logf("link probe: %s: host→device %.2f GB/s, device→host %.2f GB/s, nominal %.2f GB/s (%.2f of it)", l.GPU, l.H2DGBps, l.D2HGBps, l.NominalGBps, l.H2DFractionOfNominal)
			assert.False(t, l.Simulated)
			assert.Positive(t, l.H2DGBps)
			assert.Positive(t, l.D2HGBps)
		}
	}
	// vllmsim in real-device mode: each server's memory is attributed, by NVML's per-process
	// list where it shows the server's PID, else (a container without the host's PID
	// namespace) by the device's deltas; which one is logged.
	if h.Config().Sim.Device == "cuda" {
		for _, l := range h.Labels() {
			t.Logf("model %s's memory attributed by %s", l, raw.Attribution[l])
			assert.Contains(t, []string{"process", "device-delta"}, raw.Attribution[l], "model %s's memory attributed", l)
		}
	}
}
