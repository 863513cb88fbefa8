// Package simgpu is the simulated GPU that vllmsim processes and wakebench's
// memory sampler share: a directory holding the device description and one
// file per process with the device memory that process holds, and the
// device's simulated energy counter (one power file per process, see
// Meter and Energy). Files are
// replaced atomically, so a reader never sees a half-written state, and a
// process that dies frees its memory, as on a real GPU.
package simgpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvDir names the environment variable that points vllmsim at the device directory.
const EnvDir = "VLLMSIM_GPU_DIR"

const deviceFile = "device.json"

// Device describes the simulated GPU.
type Device struct {
	Name       string `json:"name"`
	TotalBytes uint64 `json:"total_bytes"`
	// ReservedBytes is memory the driver keeps for itself; it counts as used
	// (NVML's v1 "used" includes it too).
	ReservedBytes uint64 `json:"reserved_bytes"`
	// What NVML would say of the links (0 when not modelled): the maximum
	// PCIe generation and width, the memory bus width and maximum memory clock.
	PCIeGen         int `json:"pcie_gen,omitempty"`
	PCIeWidth       int `json:"pcie_width,omitempty"`
	MemBusWidthBits int `json:"mem_bus_width_bits,omitempty"`
	MemClockMHz     int `json:"mem_clock_mhz,omitempty"`
	// The pinned copy rates of the device's host link in GB/s, host→device and device→host
	// (0 when not modelled): what vllmsim's wakes and sleeps copy at, and what a link probe
	// of this device reads.
	PinnedH2DGBps float64 `json:"pinned_h2d_gbps,omitempty"`
	PinnedD2HGBps float64 `json:"pinned_d2h_gbps,omitempty"`
	// Power is the device's simulated power model (nil: none; Create
	// fills in DefaultPower for a device it knows). Energy integrates it.
	Power *Power `json:"power,omitempty"`
}

// Process is the memory one simulated server holds on the device.
type Process struct {
	PID       int    `json:"pid"`
	Model     string `json:"model"`
	UsedBytes uint64 `json:"used_bytes"`
}

// Create makes dir (if needed) and writes the device description into it;
// the device's energy counter (Energy) starts now, with the board's idle
// power. A device without a power model gets DefaultPower's for its name.
func Create(dir string, d Device) error { return create(dir, d, time.Now()) }

func create(dir string, d Device, now time.Time) error {
	if d.TotalBytes == 0 {
		return errors.New("simgpu: device total memory is zero")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("simgpu: create %s: %w", dir, err)
	}
	if d.Power == nil {
		if p, ok := DefaultPower(d.Name); ok {
			d.Power = &p
		}
	}
	var board Power
	if d.Power != nil {
		board = *d.Power
	}
	if err := startBoard(dir, board, now); err != nil {
		return fmt.Errorf("simgpu: start the energy counter: %w", err)
	}
	return writeJSON(filepath.Join(dir, deviceFile), d)
}

// ReadDevice reads the device description from dir.
func ReadDevice(dir string) (Device, error) {
	var d Device
	b, err := os.ReadFile(filepath.Join(dir, deviceFile))
	if err != nil {
		return d, fmt.Errorf("simgpu: read device: %w", err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("simgpu: parse %s: %w", deviceFile, err)
	}
	return d, nil
}

// Publish records the memory held by the calling process's server.
func Publish(dir string, p Process) error {
	return writeJSON(procPath(dir, p.PID), p)
}

// Remove deletes the process's entry (its memory is freed).
func Remove(dir string, pid int) error {
	err := os.Remove(procPath(dir, pid))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// pidFile is one per-process file of the device directory,
// <prefix><pid>.json.
type pidFile struct {
	pid  int
	name string
}

// pidFiles lists dir's <prefix><pid>.json files (a name whose pid does
// not parse is not one).
func pidFiles(dir, prefix string) ([]pidFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []pidFile
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ".json") {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, prefix), ".json")); err == nil {
			out = append(out, pidFile{pid, name})
		}
	}
	return out, nil
}

// Processes lists the live processes holding device memory, skipping (and
// cleaning up) entries whose process no longer exists.
func Processes(dir string) ([]Process, error) {
	files, err := pidFiles(dir, "proc-")
	if err != nil {
		return nil, fmt.Errorf("simgpu: %w", err)
	}
	var out []Process
	for _, f := range files {
		pid, name := f.pid, f.name
		if !alive(pid) {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed between ReadDir and ReadFile
		}
		if err != nil {
			return nil, fmt.Errorf("simgpu: read %s: %w", name, err)
		}
		var p Process
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("simgpu: parse %s: %w", name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Used returns the device's used memory: reserved plus every live process.
func Used(d Device, procs []Process) uint64 {
	u := d.ReservedBytes
	for _, p := range procs {
		u += p.UsedBytes
	}
	return u
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func procPath(dir string, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("proc-%d.json", pid))
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("simgpu: write %s: %w", filepath.Base(path), err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("simgpu: write %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("simgpu: write %s: %w", filepath.Base(path), err)
	}
	return nil
}
