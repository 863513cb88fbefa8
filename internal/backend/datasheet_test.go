package backend

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/gpu"
)

// datasheet is what NVIDIA's product pages give for GPUs wakebench runs on,
// by the name NVML reports: the host link (PCIe generation × width) and the
// device memory bandwidth in GB/s. The gpu-tag test holds NVML's figures
// to them, so a factor-2 error in the bus width or clock arithmetic fails.
var datasheet = map[string]struct {
	pcieGen, pcieWidth int
	memGBps            float64
}{
	"NVIDIA H200":           {5, 16, 4800},
	"NVIDIA H200 NVL":       {5, 16, 4800},
	"NVIDIA H100 80GB HBM3": {5, 16, 3350},
	"NVIDIA H100 NVL":       {5, 16, 3900},
	"NVIDIA H100 PCIe":      {5, 16, 2000},
	"NVIDIA A100-SXM4-80GB": {4, 16, 2039},
	"NVIDIA A100-SXM4-40GB": {4, 16, 1555},
	"NVIDIA A100 80GB PCIe": {4, 16, 1935},
	"NVIDIA L40S":           {4, 16, 864},
	"NVIDIA L40":            {4, 16, 864},
	"NVIDIA L20":            {4, 16, 864},
	"NVIDIA L4":             {4, 16, 300},
	"NVIDIA A10":            {4, 16, 600},
}

// checkDatasheet holds facts to the datasheet within 10 % (memory clocks
// are quoted rounded); false when the product is not in the table.
func checkDatasheet(t assert.TestingT, f gpu.DeviceFacts) bool {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	d, ok := datasheet[f.Name]
	if !ok {
		return false
	}
	assert.Equal(t, d.pcieGen, f.MaxPCIeGen, "%s: maximum PCIe generation", f.Name)
	assert.Equal(t, d.pcieWidth, f.MaxPCIeWidth, "%s: maximum PCIe width", f.Name)
	assert.InEpsilon(t, gpu.PCIeGBps(d.pcieGen, d.pcieWidth), f.PCIeLimitGBps(), 0.01, "%s: PCIe GB/s", f.Name)
	assert.InEpsilon(t, d.memGBps, f.MemoryGBps(), 0.10, "%s: memory GB/s (%d-bit × %d MHz × 2)", f.Name, f.MemBusWidth, f.MaxMemClock)
	return true
}

// TestDatasheetCatchesAFactorOfTwo: the L20 as the simulated GPU and NVML
// describe it matches; half its bus width does not.
func TestDatasheetCatchesAFactorOfTwo(t *testing.T) {
	l20 := gpu.DeviceFacts{Name: "NVIDIA L20", MaxPCIeGen: 4, MaxPCIeWidth: 16, MemBusWidth: 384, MaxMemClock: 9001}
	assert.True(t, checkDatasheet(t, l20))
	half := l20
	half.MemBusWidth = 192
	var inner failures
	checkDatasheet(&inner, half)
	assert.Len(t, inner, 1, "a memory bandwidth off by 2× fails, and nothing else does")
	assert.False(t, checkDatasheet(t, gpu.DeviceFacts{Name: "Some Future GPU"}))
}

// failures records what a check would have reported.
type failures []string

func (f *failures) Errorf(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }
