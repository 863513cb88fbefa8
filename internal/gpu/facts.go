package gpu

// DeviceFacts are what the report says about the GPU and its driver.
type DeviceFacts struct {
	Name          string
	UUID          string
	TotalBytes    uint64
	DriverVersion string // e.g. 580.65.06
	CUDAVersion   string // CUDA driver API version, e.g. 13.0
	PCIeGen       int    // current link generation (0 when unknown); idle links train down
	PCIeWidth     int    // current link width (lanes)
	MaxPCIeGen    int    // the link's maximum generation (device and system)
	MaxPCIeWidth  int    // the link's maximum width
	MemBusWidth   int    // device memory bus width, bits
	MaxMemClock   int    // maximum memory clock, MHz
	Simulated     bool   // the facts of vllmsim's simulated GPU, not of hardware
}

// FactSource is a Source that also knows the device's fixed facts.
type FactSource interface {
	Source
	Facts() DeviceFacts
}

// PCIeLimitGBps is the host↔device link's raw one-direction bandwidth at its
// maximum generation and width (the current ones when those are unknown).
func (f DeviceFacts) PCIeLimitGBps() float64 {
	if f.MaxPCIeGen > 0 && f.MaxPCIeWidth > 0 {
		return PCIeGBps(f.MaxPCIeGen, f.MaxPCIeWidth)
	}
	return PCIeGBps(f.PCIeGen, f.PCIeWidth)
}

// MemoryGBps is the device memory's peak bandwidth, bus width × memory
// clock × 2 (NVML reports half the transfer rate for HBM and GDDR alike),
// 0 when either is unknown.
func (f DeviceFacts) MemoryGBps() float64 {
	return float64(f.MemBusWidth) / 8 * float64(f.MaxMemClock) * 2 / 1e3
}

// PCIeGBps is the raw one-direction bandwidth of a PCIe link in GB/s
// (after line coding), 0 for an unknown generation.
func PCIeGBps(gen, width int) float64 {
	perLane := map[int]float64{1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}[gen]
	return perLane * float64(width)
}
