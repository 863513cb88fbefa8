package backend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/simgpu"
)

// SimSource reads vllmsim's simulated GPU directory. The device itself
// (name, total, reserved) is fixed once created and is read once; the
// processes are read at every sample.
type SimSource struct {
	dir    string
	mu     sync.Mutex
	dev    simgpu.Device
	loaded bool
}

// NewSimSource reads the simulated GPU in dir.
func NewSimSource(dir string) *SimSource { return &SimSource{dir: dir} }

// device is the device, read at the first call that finds it.
func (s *SimSource) device() (simgpu.Device, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded {
		d, err := simgpu.ReadDevice(s.dir)
		if err != nil {
			return d, err
		}
		s.dev, s.loaded = d, true
	}
	return s.dev, nil
}

// Describe names the simulated device.
func (s *SimSource) Describe() (string, error) {
	d, err := s.device()
	if err != nil {
		return "", err
	}
	return d.Name + " (simulated)", nil
}

// Facts are the simulated device's, as NVML would report them.
func (s *SimSource) Facts() gpu.DeviceFacts {
	d, err := s.device()
	if err != nil {
		return gpu.DeviceFacts{Simulated: true}
	}
	return gpu.DeviceFacts{Name: d.Name + " (simulated)", TotalBytes: d.TotalBytes, Simulated: true,
		PCIeGen: d.PCIeGen, PCIeWidth: d.PCIeWidth, MaxPCIeGen: d.PCIeGen, MaxPCIeWidth: d.PCIeWidth,
		MemBusWidth: d.MemBusWidthBits, MaxMemClock: d.MemClockMHz}
}

// Read returns the device's used and total memory and every live process's share.
func (s *SimSource) Read(context.Context) (gpu.Reading, error) {
	d, err := s.device()
	if err != nil {
		return gpu.Reading{}, err
	}
	procs, err := simgpu.Processes(s.dir)
	if err != nil {
		return gpu.Reading{}, err
	}
	r := gpu.Reading{Used: simgpu.Used(d, procs), Total: d.TotalBytes, Procs: make(map[int]uint64, len(procs))}
	for _, p := range procs {
		r.Procs[p.PID] += p.UsedBytes
	}
	return r, nil
}

// Energy is the simulated device's energy counter (simgpu.Energy: the
// board's idle power and each server's power state integrated over wall
// time), gpu.ErrNoEnergy when the device has no power model.
func (s *SimSource) Energy(context.Context) ([]float64, error) {
	d, err := s.device()
	if err != nil {
		return nil, err
	}
	if d.Power == nil {
		return nil, fmt.Errorf("simulated %s: no power model: %w", d.Name, gpu.ErrNoEnergy)
	}
	j, err := simgpu.Energy(s.dir, time.Now())
	if err != nil {
		return nil, err
	}
	return []float64{j}, nil
}
