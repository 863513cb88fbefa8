package backend

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/wakebench/wakebench/internal/cuda"
	"github.com/wakebench/wakebench/internal/linkprobe"
	"github.com/wakebench/wakebench/internal/record"
)

// measureFunc measures the link of the GPU at PCI address bus with a buffer of bytes, and says
// which CUDA device it was.
type measureFunc func(ctx context.Context, bus string, bytes uint64) (linkprobe.Result, string, error)

// ProbeLinks measures the host↔device link of every GPU of the run, once, before any server
// (package linkprobe), with a buffer of mib MiB: NVML's GPUs through the CUDA driver, the
// simulated GPU from its profile's copy rates (labelled simulated: no copy is made). It returns
// why there is nothing where nothing was measured; a GPU whose probe failed is left out, with
// the reason in the note, and the run goes on.
func (b *Backend) ProbeLinks(ctx context.Context, mib int) ([]record.Link, string) {
	if mib <= 0 {
		return nil, "link probe off (protocol.link_probe_mib 0)"
	}
	var devs []devSource
	switch s := b.Source.(type) { // the several GPUs' sources first: they are devSources too
	case nil:
		return nil, "no link probe: memory source none"
	case multiSource:
		devs = s.devs
	case nvmlMulti:
		devs = s.devs
	case devSource:
		devs = []devSource{s}
	default:
		return nil, fmt.Sprintf("no link probe: memory source %T", s)
	}
	measure := b.measure
	if measure == nil {
		measure = measureCUDA
	}
	var links []record.Link
	var failed []string
	for i, d := range devs {
		f := d.Facts()
		l := record.Link{NominalGBps: f.PCIeLimitGBps()}
		switch d := d.(type) {
		case *SimSource:
			dev, err := d.device()
			if err != nil || dev.PinnedH2DGBps <= 0 {
				failed = append(failed, fmt.Sprintf("GPU %d: the simulated device models no copy rate", i))
				continue
			}
			l.GPU, l.Simulated = fmt.Sprintf("simulated GPU %d (%s)", i, dev.Name), true
			l.H2DGBps, l.D2HGBps, l.H2DBestGBps, l.D2HBestGBps = dev.PinnedH2DGBps, dev.PinnedD2HGBps, dev.PinnedH2DGBps, dev.PinnedD2HGBps
			l.Source = "simulated: the vllmsim profile's pinned copy rates (what its sleeps and wakes copy at); no copy was made"
		case *NVMLSource:
			bus, err := d.BusID()
			if err != nil {
				failed = append(failed, fmt.Sprintf("NVML index %d: %v", d.Index(), err))
				continue
			}
			res, where, err := measure(ctx, bus, uint64(mib)<<20)
			if err != nil {
				failed = append(failed, fmt.Sprintf("NVML index %d (PCI %s): %v", d.Index(), bus, err))
				continue
			}
			l.GPU = fmt.Sprintf("NVML index %d, %s, PCI %s", d.Index(), f.UUID, bus)
			l.H2DGBps, l.D2HGBps, l.H2DBestGBps, l.D2HBestGBps = res.H2DGBps, res.D2HGBps, res.H2DBestGBps, res.D2HBestGBps
			l.BufferBytes, l.LoopCount, l.Trials = res.Bytes, res.LoopCount, res.Trials
			l.Source = fmt.Sprintf("measured: pinned copies through the CUDA driver on %s, %d × %d MiB a trial, the median of %d trials (nvbandwidth's host_to_device_memcpy_ce and device_to_host_memcpy_ce)",
				where, res.LoopCount, res.Bytes>>20, res.Trials)
		default:
			failed = append(failed, fmt.Sprintf("GPU %d: memory source %T cannot be probed", i, d))
			continue
		}
		if l.NominalGBps > 0 {
			l.H2DFractionOfNominal = l.H2DGBps / l.NominalGBps
		}
		links = append(links, l)
	}
	if len(failed) > 0 {
		return links, "link probe failed: " + strings.Join(failed, "; ")
	}
	return links, ""
}

// measureCUDA probes the GPU at bus through the CUDA driver: the ordinal the driver gives it
// among what CUDA_VISIBLE_DEVICES leaves this process, its primary context, a pinned host
// buffer and a device buffer of bytes, freed (and the context released) before it returns.
func measureCUDA(ctx context.Context, bus string, bytes uint64) (linkprobe.Result, string, error) {
	ord, err := cuda.Ordinal(bus)
	if err != nil {
		return linkprobe.Result{}, "", err
	}
	d, err := cuda.Open(ord)
	if err != nil {
		return linkprobe.Result{}, "", err
	}
	defer d.Close()
	where := fmt.Sprintf("CUDA device %d (%s, CUDA driver API %s)", ord, d.Name, cuda.DriverVersion(d.Driver))
	h, err := d.AllocHost(bytes)
	if err != nil {
		return linkprobe.Result{}, where, err
	}
	defer d.FreeHost(h)
	p, err := d.Alloc(bytes)
	if err != nil {
		return linkprobe.Result{}, where, err
	}
	defer d.Free(p)
	res, err := linkprobe.Measure(ctx, cudaLink{d, h, p}, linkprobe.Options{Bytes: bytes})
	return res, where, err
}

// cudaLink copies one buffer each way, timed on the device's thread.
type cudaLink struct {
	d *cuda.Device
	h *cuda.Host
	p cuda.Ptr
}

func (c cudaLink) HtoD(n int) (time.Duration, error) {
	return c.d.TimeCopies(cuda.HostToDevice, c.p, c.h, c.h.Size(), n)
}
func (c cudaLink) DtoH(n int) (time.Duration, error) {
	return c.d.TimeCopies(cuda.DeviceToHost, c.p, c.h, c.h.Size(), n)
}

// BusID is the GPU's PCI address as NVML reports it (domain:bus:device.0).
func (s *NVMLSource) BusID() (string, error) {
	info, ret := s.dev.GetPciInfo()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("NVML PCI info: %s", nvml.ErrorString(ret))
	}
	return fmt.Sprintf("%04x:%02x:%02x.0", info.Domain, info.Bus, info.Device), nil
}
