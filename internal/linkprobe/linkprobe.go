// Package linkprobe measures a GPU's host↔device link as nvbandwidth's
// host_to_device_memcpy_ce and device_to_host_memcpy_ce tests do: pinned copies, the median of
// trials.
//
// One pinned host buffer is copied to and from device memory by the copy engines, loopCount
// copies a trial (github.com/NVIDIA/nvbandwidth README at 04bf2869: --bufferSize 64 MiB,
// --loopCount 16, "repeated 3 times, and the median bandwidth ... is reported"). Unlike nvbandwidth it
// times on the host around synchronous copies (no spin kernel or CUDA events, which need a
// kernel launch); at 64 MiB a copy's launch is well under 1 % of it on any PCIe link. A
// run measures its GPU once, before its first server: the rate its wakes and sleeps can
// reach, beside the rate NVML's link generation and width promise.
package linkprobe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakebench/wakebench/internal/stats"
)

// Copier copies one buffer of Options.Bytes between pinned host memory and device memory:
// count copies back to back, returning the time from the first one's issue to the last one's
// return.
type Copier interface {
	HtoD(count int) (time.Duration, error)
	DtoH(count int) (time.Duration, error)
}

// Options size the probe. Zero fields take nvbandwidth's defaults.
type Options struct {
	Bytes     uint64 // the buffer, default 64 MiB
	LoopCount int    // copies a trial, default 16
	Trials    int    // default 3
}

// Defaults, nvbandwidth's.
const (
	DefaultBytes     = 64 << 20
	DefaultLoopCount = 16
	DefaultTrials    = 3
)

func (o Options) withDefaults() Options {
	if o.Bytes == 0 {
		o.Bytes = DefaultBytes
	}
	if o.LoopCount <= 0 {
		o.LoopCount = DefaultLoopCount
	}
	if o.Trials <= 0 {
		o.Trials = DefaultTrials
	}
	return o
}

// Result is one probe: each direction's median and best trial in GB/s (10^9 bytes a second).
type Result struct {
	Bytes         uint64    `json:"buffer_bytes"`
	LoopCount     int       `json:"loop_count"`
	Trials        int       `json:"trials"`
	H2DGBps       float64   `json:"h2d_gbps"`
	D2HGBps       float64   `json:"d2h_gbps"`
	H2DBestGBps   float64   `json:"h2d_best_gbps"`
	D2HBestGBps   float64   `json:"d2h_best_gbps"`
	H2DTrialsGBps []float64 `json:"h2d_trials_gbps"`
	D2HTrialsGBps []float64 `json:"d2h_trials_gbps"`
}

// Measure runs the probe: a warm-up copy each way, then Trials trials of LoopCount copies
// host→device, then the same device→host.
func Measure(ctx context.Context, c Copier, o Options) (Result, error) {
	o = o.withDefaults()
	r := Result{Bytes: o.Bytes, LoopCount: o.LoopCount, Trials: o.Trials}
	if _, err := c.HtoD(1); err != nil {
		return r, fmt.Errorf("link probe warm-up, host to device: %w", err)
	}
	if _, err := c.DtoH(1); err != nil {
		return r, fmt.Errorf("link probe warm-up, device to host: %w", err)
	}
	var err error
	if r.H2DTrialsGBps, err = trials(ctx, c.HtoD, o); err != nil {
		return r, fmt.Errorf("link probe, host to device: %w", err)
	}
	if r.D2HTrialsGBps, err = trials(ctx, c.DtoH, o); err != nil {
		return r, fmt.Errorf("link probe, device to host: %w", err)
	}
	// Trials ≥ 1 rates, none NaN (each a positive time's): Summarize cannot fail here.
	h, _ := stats.Summarize(r.H2DTrialsGBps)
	d, _ := stats.Summarize(r.D2HTrialsGBps)
	r.H2DGBps, r.H2DBestGBps = h.Median, h.Max
	r.D2HGBps, r.D2HBestGBps = d.Median, d.Max
	return r, nil
}

// trials times o.Trials runs of o.LoopCount copies; each one's rate in GB/s.
func trials(ctx context.Context, copies func(int) (time.Duration, error), o Options) ([]float64, error) {
	out := make([]float64, 0, o.Trials)
	for range o.Trials {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := copies(o.LoopCount)
		if err != nil {
			return nil, err
		}
		if d <= 0 {
			return nil, errors.New("a trial took no time: the clock did not advance")
		}
		out = append(out, float64(o.Bytes)*float64(o.LoopCount)/d.Seconds()/1e9)
	}
	return out, nil
}
