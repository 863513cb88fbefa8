package gpu

import (
	"context"
	"errors"
	"fmt"
)

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

// ErrNoEnergy is a source that cannot read its device's energy counter
// (NVML before Volta, a driver that does not support it, no memory
// source): the figure is unavailable, never 0.
var ErrNoEnergy = errors.New("GPU energy counter not available")

// EnergySource is a Source that also reads the device's energy counter.
// Energy over an interval is the difference of two readings; the counter's
// origin (driver load, device creation) is arbitrary.
type EnergySource interface {
	Source
	// Energy is each GPU's total energy consumption in joules, in the
	// run's order (one entry for one GPU); an error wrapping ErrNoEnergy
	// where the device has no counter.
	Energy(ctx context.Context) ([]float64, error)
}

// PowerSource is a Source that also reads the device's power draw as the
// driver averages it.
type PowerSource interface {
	Source
	// AveragePower is each GPU's power draw in watts, as the driver
	// averages it: over one second on Ampere and newer
	// (nvmlDeviceGetPowerUsage), far too coarse for a wake of a fraction
	// of a second; take energy over an interval from EnergySource instead.
	// An error wrapping ErrNoEnergy where the device cannot say.
	AveragePower(ctx context.Context) ([]float64, error)
}

// EnergyOf is src's energy counter: each GPU's joules, or an error wrapping
// ErrNoEnergy when src has none (nil, or a source without the interface).
func EnergyOf(ctx context.Context, src Source) ([]float64, error) {
	es, ok := src.(EnergySource)
	if !ok {
		return nil, fmt.Errorf("%w: the memory source has no energy counter", ErrNoEnergy)
	}
	return es.Energy(ctx)
}
