// Package simtest starts the servers of a test on vllmsim: a pool of the
// default config's tiny models (changed as the test needs) on a private
// simulated GPU, each server with its model's sim_faults, stopped when
// the test ends. For the tests of the packages above pool.
package simtest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
)

// Pool is a pool of config.SimDefault's models changed by mod (nil: as
// they are), its memory source the simulated GPU wrapped by wrap (nil: as
// it is), with its record and the config it runs.
func Pool(t *testing.T, wrap func(gpu.Source) gpu.Source, mod func(*config.Config)) (*pool.Pool, *record.Recorder, config.Config) {
	t.Helper()
	return PoolWith(t, wrap, mod, nil)
}

// Env is Pool with the phases' environment on it (no observer): what a
// test of a phase runs.
func Env(t *testing.T, wrap func(gpu.Source) gpu.Source, mod func(*config.Config)) (*pool.Pool, *record.Recorder, *protocol.Env) {
	t.Helper()
	f, rec, cfg := Pool(t, wrap, mod)
	return f, rec, protocol.NewEnv(cfg, f, rec, nil)
}

// PoolWith is Pool with the pool's options changed by opt (nil: as
// they are): a host root with a short host, a host-memory reader.
func PoolWith(t *testing.T, wrap func(gpu.Source) gpu.Source, mod func(*config.Config), opt func(*pool.Options)) (*pool.Pool, *record.Recorder, config.Config) {
	t.Helper()
	bin, err := backend.BuildSim(t.Context())
	require.NoError(t, err)
	dir := t.TempDir()
	cfg := config.SimDefault()
	cfg.OutDir = t.TempDir()
	cfg.Timeouts.StartS, cfg.Timeouts.RequestS = 20, 10
	// A level-1 sleep's pinned backup really allocated at 1/20: tests run
	// many servers at once, and page-faulting 0.5 GiB takes longer than
	// the tiny profile's modelled sleep (a test that measures host memory
	// sets its own scale).
	cfg.Sim.HostScale = 0.05
	if mod != nil {
		mod(&cfg)
	}
	require.NoError(t, cfg.Validate())
	var src gpu.Source = backend.NewSimSource(filepath.Join(dir, "gpu"))
	if wrap != nil {
		src = wrap(src)
	}
	smp := gpu.NewSampler(src, time.Hour)
	rec := record.New(cfg.ModelNames())
	env := append(backend.SimEnv("tiny", "1", dir, false), backend.SimHostScaleEnv(cfg.Sim.HostScale)) // server.Start adds it to this process's environment
	if cfg.Sim.Era != "" {
		env = append(env, backend.SimEraEnv(cfg.Sim.Era))
	}
	o := pool.Options{Command: bin, Sampler: smp, Env: func(m config.Model) []string {
		return append(slices.Clone(env), backend.SimFaultsEnv(m.SimFaults))
	}}
	if opt != nil {
		opt(&o)
	}
	f := protocol.Observed(pool.New(cfg, o), rec)
	t.Cleanup(func() { f.StopAll(); f.Procs().CloseIdle() })
	return f, rec, cfg
}

// SlowReads is a memory source whose every read takes Delay more, as an
// NVML read beside a whole-host process scan can: tests show a measured
// interval leaves the harness's reads out.
type SlowReads struct {
	gpu.Source
	Delay time.Duration
	Log   *ReadLog // when each read began and ended (nil: not kept)
}

// Read reads the source after Delay.
func (s SlowReads) Read(ctx context.Context) (gpu.Reading, error) {
	start := time.Now()
	r, err := gpu.Late{Source: s.Source, Delay: s.Delay}.Read(ctx)
	if s.Log != nil {
		s.Log.add(Span{Start: start, End: time.Now()})
	}
	return r, err
}

// Span is one read, from its call to its return.
type Span struct{ Start, End time.Time }

// Overlaps says whether the span shares more than an endpoint with the
// interval from → to.
func (s Span) Overlaps(from, to time.Time) bool { return s.Start.Before(to) && s.End.After(from) }

// ReadLog keeps the spans of a SlowReads's reads, so a test orders the
// harness's reads against a measured interval instead of bounding the
// interval by the clock (which a busy machine stretches).
type ReadLog struct {
	mu    sync.Mutex // guards spans
	spans []Span
}

func (l *ReadLog) add(s Span) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spans = append(l.spans, s)
}

// Since is every read that began at or after t, in the order they ended.
func (l *ReadLog) Since(t time.Time) []Span {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Span
	for _, s := range l.spans {
		if !s.Start.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

// NoProcs is a memory source that lists no processes, as NVML does for a
// server in another PID namespace (a Pod, MPS): memory is then attributed
// by the device's changes.
type NoProcs struct{ gpu.Source }

// Read reads the source and drops its processes.
func (s NoProcs) Read(ctx context.Context) (gpu.Reading, error) {
	r, err := s.Source.Read(ctx)
	r.Procs = map[int]uint64{}
	return r, err
}

// ConstPower is a memory source whose energy counter draws Watts
// constantly since Origin, each read taking Delay first (a slow NVML
// call): the energy over any interval is exactly Watts × its length.
type ConstPower struct {
	gpu.Source
	Watts  float64
	Delay  time.Duration
	Origin time.Time
}

// Energy is Watts × the time since Origin, read after Delay.
func (c ConstPower) Energy(context.Context) ([]float64, error) {
	time.Sleep(c.Delay)
	return []float64{c.Watts * time.Since(c.Origin).Seconds()}, nil
}

// NoEnergy is src without its energy counter (only gpu.Source's methods),
// as NVML on a board before Volta: energy figures are then absent.
func NoEnergy(src gpu.Source) gpu.Source { return plain{src} }

type plain struct{ gpu.Source }

// ReadsLate is a server's sim_faults answering every read-only endpoint
// the harness verifies with (/is_sleeping, /is_paused, /metrics,
// /version) seconds late, as a busy API server or a proxy would: the
// server's own operations are as fast as ever.
func ReadsLate(seconds float64) string {
	d := seconds
	return fmt.Sprintf("delay=/is_sleeping:%g,delay=/is_paused:%g,delay=/metrics:%g,delay=/version:%g", d, d, d, d)
}

// LoadObserver is a phase observer that reads every phase window's host
// load as others taking OthersCPUPct of the machine's CPU (a crowded or a
// quiet machine, for a test of what a phase says of it) and does nothing
// else.
type LoadObserver struct{ OthersCPUPct float64 }

// ObservePhase does nothing.
func (LoadObserver) ObservePhase(context.Context, string, string, []string) {}

// ObserveSoakCycle does nothing.
func (LoadObserver) ObserveSoakCycle(record.SoakCycle) {}

// HostLoad reads OthersCPUPct at the phase's end.
func (o LoadObserver) HostLoad() func() *record.HostLoad {
	return func() *record.HostLoad { return &record.HostLoad{OthersCPUPct: o.OthersCPUPct} }
}
