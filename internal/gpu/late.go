package gpu

import (
	"context"
	"time"
)

// Late is a memory source whose every memory read answers Delay later, as
// an NVML read beside a whole-host process scan can: the whole-run figure
// test's hook (harness.Hooks.ReadDelay) and the interval tests use it to
// show a measured interval leaves the harness's reads out. The energy
// counter, where the source has one, is read as it is, not late.
type Late struct {
	Source
	Delay time.Duration
}

// Read reads the source after Delay (or until ctx ends).
func (l Late) Read(ctx context.Context) (Reading, error) {
	t := time.NewTimer(l.Delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return Reading{}, ctx.Err()
	case <-t.C:
	}
	return l.Source.Read(ctx)
}

// Energy is the source's energy counter (EnergyOf), not delayed.
func (l Late) Energy(ctx context.Context) ([]float64, error) { return EnergyOf(ctx, l.Source) }
