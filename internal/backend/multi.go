package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wakebench/wakebench/internal/gpu"
)

// devSource is one GPU of a run: NVML's, or vllmsim's simulated one.
type devSource interface {
	gpu.Source
	Facts() gpu.DeviceFacts
}

// multiSource reads every GPU of a run whose models span several (tensor
// parallel): the reading is their sum, with each GPU's in Devices.
type multiSource struct {
	devs []devSource
}

// Describe names the GPUs: "NVIDIA H200" when all are the same product.
func (m multiSource) Describe() (string, error) {
	var names []string
	for _, d := range m.devs {
		n, err := d.Describe()
		if err != nil {
			return "", err
		}
		if len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	return strings.Join(names, " + "), nil
}

// Facts are the first GPU's (the facts of a run are one GPU's).
func (m multiSource) Facts() gpu.DeviceFacts { return m.devs[0].Facts() }

// Index is the first GPU's NVML index (0 for a simulated one).
func (m multiSource) Index() int {
	if n, ok := m.devs[0].(interface{ Index() int }); ok {
		return n.Index()
	}
	return 0
}

func (m multiSource) Read(ctx context.Context) (gpu.Reading, error) {
	devs := make([]gpu.Reading, len(m.devs))
	for i, d := range m.devs {
		r, err := d.Read(ctx)
		if err != nil {
			return gpu.Reading{}, fmt.Errorf("GPU %d of %d: %w", i+1, len(m.devs), err)
		}
		devs[i] = r
	}
	return gpu.Merge(devs), nil
}

// Close shuts NVML down once per device opened.
func (m multiSource) Close() error {
	var errs []error
	for _, d := range m.devs {
		if c, ok := d.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Energy is every GPU's energy counter, in the run's order; unavailable
// (gpu.ErrNoEnergy) when any GPU's is.
func (m multiSource) Energy(ctx context.Context) ([]float64, error) {
	return m.each(ctx, func(d devSource, ctx context.Context) ([]float64, error) {
		if e, ok := d.(gpu.EnergySource); ok {
			return e.Energy(ctx)
		}
		return nil, gpu.ErrNoEnergy
	})
}

// describe names d for an error.
func describe(d devSource) string {
	if n, err := d.Describe(); err == nil {
		return n
	}
	return "a GPU"
}

// nvmlMulti is a multiSource over NVML devices, which also average their
// power (simulated GPUs do not).
type nvmlMulti struct{ multiSource }

// AveragePower is every GPU's one-second average power, in the run's order.
func (m nvmlMulti) AveragePower(ctx context.Context) ([]float64, error) {
	return m.each(ctx, func(d devSource, ctx context.Context) ([]float64, error) {
		p, ok := d.(gpu.PowerSource)
		if !ok {
			return nil, fmt.Errorf("%s: no average power reading: %w", describe(d), gpu.ErrNoEnergy)
		}
		return p.AveragePower(ctx)
	})
}

func (m multiSource) each(ctx context.Context, f func(devSource, context.Context) ([]float64, error)) ([]float64, error) {
	var out []float64
	for i, d := range m.devs {
		v, err := f(d, ctx)
		if err != nil {
			return nil, fmt.Errorf("GPU %d of %d: %w", i+1, len(m.devs), err)
		}
		out = append(out, v...)
	}
	return out, nil
}
