// Package gpu samples device memory in the background over a small Source
// interface, and names the device facts (and the energy counter, see
// EnergySource) a source may know. It knows no
// source: NVML and the simulated GPU live in package backend.
package gpu

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Reading is one look at the device (or, over several GPUs, at all of
// them: Used, Total and Procs summed, Devices each GPU's own).
type Reading struct {
	Used, Total uint64
	Procs       map[int]uint64 // per-process device memory, by pid
	Devices     []Reading      // per GPU, in the run's order; nil for one GPU
}

// PerDevice is r's readings per GPU: Devices, or r itself for one GPU.
func (r Reading) PerDevice() []Reading {
	if len(r.Devices) > 0 {
		return r.Devices
	}
	return []Reading{r}
}

// Merge sums per-GPU readings into one, keeping each in Devices.
func Merge(devs []Reading) Reading {
	if len(devs) == 1 {
		return devs[0]
	}
	out := Reading{Procs: map[int]uint64{}, Devices: devs}
	for _, d := range devs {
		out.Used += d.Used
		out.Total += d.Total
		for pid, b := range d.Procs {
			out.Procs[pid] += b
		}
	}
	return out
}

// Source reads device memory.
type Source interface {
	// Describe names the device, e.g. "NVIDIA L20 (simulated)".
	Describe() (string, error)
	Read(ctx context.Context) (Reading, error)
}

// Sample is a timestamped Reading.
type Sample struct {
	Time time.Time
	Reading
}

// MaxKept bounds the samples a Sampler keeps in memory: 100,000 (about 83
// minutes at 20 Hz, some tens of MiB). Past it, the older half is thinned
// by two, each pair kept as its sample of larger device use, so the peak
// stays exact and the recent samples keep full resolution; a soak of days
// stays bounded. Every sample still goes to OnSample's function (the run's
// samples.csv).
const MaxKept = 100_000

// Sampler reads a Source at a fixed interval and keeps its samples (every
// one, up to MaxKept).
type Sampler struct {
	src      Source
	interval time.Duration
	limit    int // samples kept before the older half is thinned (MaxKept)

	// mu guards everything below; cond waits on new samples and the stop.
	mu       sync.Mutex
	cond     *sync.Cond
	samples  []Sample
	thinned  int // samples dropped by thinning
	errs     int
	lastErr  error
	firstErr error
	stopped  bool
	sink     func(Sample)
}

// OnSample sets a function called with every sample as it is taken, in
// order (e.g. to stream samples to disk). Set it before Run.
func (s *Sampler) OnSample(f func(Sample)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sink = f
}

// NewSampler samples src every interval once Run is called.
func NewSampler(src Source, interval time.Duration) *Sampler {
	s := &Sampler{src: src, interval: interval, limit: MaxKept}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Run samples until ctx ends. Ticks are on a fixed schedule (a slow read
// does not shift later ones); read errors are counted, not fatal.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	defer func() {
		s.mu.Lock()
		s.stopped = true
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	for {
		_, _ = s.sampleOnce(ctx) // errors are counted in Errors
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) sampleOnce(ctx context.Context) (Sample, error) {
	r, err := s.src.Read(ctx)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		if s.firstErr == nil {
			s.firstErr = err
		}
		s.lastErr = err
		return Sample{}, err
	}
	x := Sample{Time: now, Reading: r}
	// A sample taken now (SampleNow) may race a tick; keep the list sorted.
	i, _ := slices.BinarySearchFunc(s.samples, now, func(x Sample, t time.Time) int { return x.Time.Compare(t) })
	s.samples = slices.Insert(s.samples, i, x)
	if len(s.samples) > s.limit {
		s.thin()
	}
	s.cond.Broadcast()
	if s.sink != nil {
		s.sink(x)
	}
	return x, nil
}

// thin halves the older half of the samples, the first one aside (the
// run's start stays where it was): of each pair, the one with the larger
// device use stays (the earlier on a tie). Called with mu held.
func (s *Sampler) thin() {
	half := len(s.samples) / 2
	kept := s.samples[:1]
	for i := 1; i+1 < half; i += 2 {
		a, b := s.samples[i], s.samples[i+1]
		if b.Used > a.Used {
			a = b
		}
		kept = append(kept, a)
	}
	if (half-1)%2 == 1 {
		kept = append(kept, s.samples[half-1])
	}
	n := len(s.samples)
	kept = append(kept, s.samples[half:]...)
	clear(s.samples[len(kept):n]) // let the dropped readings' maps go
	s.thinned += n - len(kept)
	s.samples = kept
}

// Thinned is how many samples were dropped to stay within MaxKept (0 for
// a run of fewer samples): the kept ones are no longer every sample.
func (s *Sampler) Thinned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thinned
}

// SampleNow reads the source at once, records the sample and returns it:
// for the moments a measurement needs (just before and after a sleep).
func (s *Sampler) SampleNow(ctx context.Context) (Sample, error) {
	x, err := s.sampleOnce(ctx)
	if err != nil {
		return x, fmt.Errorf("read GPU memory: %w", err)
	}
	return x, nil
}

// Source is the source s reads (fixed at NewSampler): its energy counter,
// where it has one, is read through EnergyOf.
func (s *Sampler) Source() Source { return s.src }

// Samples returns a copy of the samples kept so far: every sample, or past
// MaxKept the thinned ones (Thinned says how many were dropped).
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// Errors is how many reads failed, and the last failure.
func (s *Sampler) Errors() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs, s.lastErr
}

// FirstError is the first failed read's error, nil if none failed.
func (s *Sampler) FirstError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstErr
}

// After waits for the first sample taken at or after t.
func (s *Sampler) After(ctx context.Context, t time.Time) (Sample, error) {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if i, ok := slices.BinarySearchFunc(s.samples, t, func(x Sample, t time.Time) int { return x.Time.Compare(t) }); ok || i < len(s.samples) {
			return s.samples[i], nil
		}
		if s.stopped {
			return Sample{}, fmt.Errorf("gpu sampler stopped before a sample at %s", t.Format(time.RFC3339Nano))
		}
		if err := ctx.Err(); err != nil {
			return Sample{}, fmt.Errorf("wait for a GPU sample: %w (last read error: %v)", err, s.lastErr)
		}
		s.cond.Wait()
	}
}

// Before returns the last sample taken at or before t.
func (s *Sampler) Before(t time.Time) (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := slices.BinarySearchFunc(s.samples, t, func(x Sample, t time.Time) int { return x.Time.Compare(t) })
	if ok {
		return s.samples[i], true
	}
	if i == 0 {
		return Sample{}, false
	}
	return s.samples[i-1], true
}

// ProcsUsed sums the device memory of pids in a reading.
func ProcsUsed(r Reading, pids []int) uint64 {
	var u uint64
	for _, p := range pids {
		u += r.Procs[p]
	}
	return u
}

// ReleasePercent is the share of memory a sleep released: 100 × (before −
// asleep) / before, NaN when before is not positive.
func ReleasePercent(before, asleep float64) float64 {
	if !(before > 0) {
		return math.NaN()
	}
	return (before - asleep) / before * 100
}
