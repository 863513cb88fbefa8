package vllmsim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/gpu"
)

// The fleet kinds: each copies at the same fraction of its own PCIe
// limit as the l20 did, except the degraded H100, whose maximum link is
// still Gen5 x16 (its physical limit) but which copies at Gen3 x8's rate.
func TestFleetProfilesCopyAtTheirLinksFraction(t *testing.T) {
	frac := func(name string) float64 {
		p, err := LookupProfile(name)
		require.NoError(t, err)
		d := p.GPU.Device()
		limit := gpu.PCIeGBps(d.PCIeGen, d.PCIeWidth)
		assert.InDelta(t, p.GPU.HBMGBps, float64(d.MemBusWidthBits)/8*float64(d.MemClockMHz)*2/1e3, 0.01*p.GPU.HBMGBps, "%s: NVML's bus × clock is the datasheet's bandwidth", name)
		require.Contains(t, p.Models, "Qwen3-4B", "every fleet kind serves the demo models")
		return p.GPU.PCIeH2DGBps / limit
	}
	l20 := frac("demo") // the l20 GPU
	assert.InDelta(t, l20, frac("h100"), 0.01)
	assert.InDelta(t, l20, frac("a100"), 0.01)
	assert.InDelta(t, l20/8, frac("h100-pcie-gen3x8"), 0.01, "Gen3 x8 is an eighth of Gen5 x16")
	h, _ := LookupProfile("h100")
	d, _ := LookupProfile("h100-pcie-gen3x8")
	assert.Equal(t, h.GPU.Name, d.GPU.Name, "the degraded node is of the same kind")
	assert.Equal(t, h.GPU.HBMGBps, d.GPU.HBMGBps)
}
