// Package harness assembles one run: it opens the backend (server program
// and memory source), starts the GPU memory and host RSS samplers, creates
// the pool, the record and the phases' environment (protocol.Env: the
// phases run on it, phases.List's steps through On), streams samples.csv and
// metrics.jsonl while the run goes, and at Close stops every server and
// writes every output. TestMain owns one Run.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/hostload"
	"github.com/wakebench/wakebench/internal/phases"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/traffic"
)

// Run is one run of the protocol: the environment its phases run on (the
// servers, the record), its samplers and output files.
type Run struct {
	cfg     config.Config
	env     *protocol.Env
	traffic *traffic.Phase // the protocol's traffic phase (its own package), with its plan
	be      *backend.Backend
	pool    *pool.Pool
	rec     *record.Recorder
	sampler *gpu.Sampler
	metrics *metricsLog
	samples *samplesLog
	soak    *soakLog // soak.csv, from the first soak cycle on
	tmp     string   // private directory: simulated GPU, compile cache
	lock    *outLock // out_dir's lock, from Open until Write has written every output
	// watchdog kills the servers' groups and descendants if this process
	// dies without stopping them (server.Watchdog); closed after their stop.
	watchdog *server.Watchdog

	stopBG   context.CancelFunc
	bg       sync.WaitGroup
	stopOnce sync.Once
	stopErrs []error // outputs that could not be completed while stopping, reported by Write
	exitErrs []error // servers or NVML that did not stop cleanly (recorded at once)
	summary  string  // summary.md as Write wrote it ("" before, or where it could not)
}

// Summary is summary.md as Write wrote it: what the run prints last; ""
// before Write, or where Write could not write it.
func (r *Run) Summary() string { return r.summary }

// Open prepares a run: output directory, backend, samplers and output
// streams. It locks out_dir (LockFile: a run that holds it already makes
// Open fail with *OutDirBusy before anything there is removed or written),
// claims it (an earlier run's outputs are removed) and
// writes a provisional FAIL report that Close replaces, so a run killed
// outright still leaves a report saying it did not finish. No server is
// started yet.
func Open(ctx context.Context, cfg config.Config) (*Run, error) { return OpenWith(ctx, cfg, Hooks{}) }

// OpenWith is Open with the test hooks hooks.
func OpenWith(ctx context.Context, cfg config.Config, hooks Hooks) (*Run, error) {
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("out_dir %s: %w", cfg.OutDir, err)
	}
	lock, err := lockOutDir(cfg.OutDir)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "wakebench-")
	if err != nil {
		lock.release()
		return nil, err
	}
	r := &Run{cfg: cfg, tmp: tmp, lock: lock}
	fail := func(err error) (*Run, error) {
		defer lock.release()
		if r.metrics != nil {
			r.metrics.Close()
		}
		if r.samples != nil {
			r.samples.Close()
		}
		if r.be != nil {
			r.be.Close()
		}
		r.watchdog.Close()
		os.RemoveAll(tmp)
		return nil, err
	}
	if r.be, err = backend.Open(ctx, cfg, tmp); err != nil {
		return fail(err)
	}
	r.rec = record.New(cfg.ModelNames())
	setup := r.be.Setup
	for _, m := range cfg.Models {
		if m.Speculative() {
			setup.Speculative = append(setup.Speculative, m.Label)
		}
	}
	// Before the first server and the samplers: the probe's copies are the GPU's only traffic.
	setup.Links, setup.LinkNote = r.be.ProbeLinks(ctx, cfg.Protocol.LinkProbeMiB)
	r.rec.SetSetup(setup)
	if err := claim(cfg); err != nil {
		return fail(err)
	}
	if err := provisional(cfg.OutDir, r.rec.Raw()); err != nil {
		return fail(err)
	}
	if r.be.Source != nil && hooks.ReadDelay > 0 {
		r.be.Source = gpu.Late{Source: r.be.Source, Delay: hooks.ReadDelay}
	}
	if r.be.Source != nil {
		r.sampler = gpu.NewSampler(r.be.Source, time.Duration(float64(time.Second)/cfg.Protocol.SampleHz))
	}
	// Once, before the first server: no server's start waits for it.
	if r.watchdog, err = server.StartWatchdog(); err != nil {
		return fail(err)
	}
	r.pool = protocol.Observed(pool.New(cfg, pool.Options{Command: r.be.Command, Env: r.be.ServerEnv, Sampler: r.sampler, CUDA: r.be.CUDA, ReadDelay: hooks.ReadDelay, Watchdog: r.watchdog}), r.rec)
	r.env = protocol.NewEnv(cfg, r.pool, r.rec, r)
	r.traffic = traffic.New(r.env, r.rec.Writers().Traffic)

	if r.metrics, err = openMetricsLog(filepath.Join(cfg.OutDir, "metrics.jsonl")); err != nil {
		return fail(err)
	}
	if r.samples, err = openSamplesLog(filepath.Join(cfg.OutDir, "samples.csv"), r.rec.Simulated); err != nil {
		return fail(err)
	}
	r.soak = &soakLog{path: filepath.Join(cfg.OutDir, "soak.csv")}
	if r.sampler != nil {
		r.sampler.OnSample(func(s gpu.Sample) {
			// Resolve labels first: never hold the pool's lock and the log's together.
			labels := make(map[int]string, len(s.Procs))
			for pid := range s.Procs {
				labels[pid] = r.pool.Procs().LabelOf(pid)
			}
			r.samples.gpu(s, func(pid int) string { return labels[pid] })
		})
	}

	bgCtx, cancel := context.WithCancel(context.Background())
	r.stopBG = cancel
	if r.sampler != nil {
		r.bg.Go(func() { r.sampler.Run(bgCtx) })
	}
	r.bg.Go(func() {
		every(bgCtx, 250*time.Millisecond, func() {
			for _, s := range r.pool.Procs().SampleRSS() {
				r.samples.rss(s)
			}
		})
	})
	// A write error here shows again at Close.
	r.bg.Go(func() { every(bgCtx, time.Second, r.samples.flush) })
	return r, nil
}

// On is what the phases' steps run on (phases.List's Steps).
func (r *Run) On() phases.On {
	return phases.On{Env: r.env, Traffic: r.traffic, Writers: r.rec.Writers()}
}

// Env is the phases' environment: for the soak, which is not a phase of
// the list (protocol.Soak).
func (r *Run) Env() *protocol.Env { return r.env }

// Steps are the benchmark steps on the run's servers, each recording into
// a scratch record of the run's models: a benchmark's measurements never
// reach the run's report.
func (r *Run) Steps() protocol.Steps {
	return protocol.NewSteps(r.env, func() protocol.Recording { return record.New(r.cfg.ModelNames()) })
}

// Config is the run's configuration.
func (r *Run) Config() config.Config { return r.cfg }

// Labels are the model labels in config order.
func (r *Run) Labels() []string { return r.pool.Labels() }

// Raw is a copy of what the run has recorded so far.
func (r *Run) Raw() record.Raw { return r.rec.Raw() }

// Failures are the failures recorded so far: a copy of them alone, read
// in place (not a copy of the whole record, as Raw).
func (r *Run) Failures() []record.Failure {
	var out []record.Failure
	r.rec.Read(func(raw *record.Raw) { out = slices.Clone(raw.Failures) })
	return out
}

// Failed reports whether a failure of phase is recorded.
func (r *Run) Failed(phase string) bool { return r.rec.Failed(phase) }

// UseTrafficPlan makes plan the traffic phase's requests (traffic.NewPlan,
// before any server started) instead of planning them when it runs.
func (r *Run) UseTrafficPlan(plan traffic.Plan) { r.traffic.UseTrafficPlan(plan) }

// TrafficPlan is the traffic phase's requests as planned before the run
// (nil: planned when the phase runs).
func (r *Run) TrafficPlan() *traffic.Plan { return r.traffic.TrafficPlan() }

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// ObservePhase scrapes /metrics of every running model among labels into
// metrics.jsonl, before and after each phase (protocol.Observer).
func (r *Run) ObservePhase(ctx context.Context, phase, when string, labels []string) {
	for _, l := range labels {
		if !r.pool.Running(l) {
			continue
		}
		s := scrape{UnixS: record.Unix(time.Now()), Model: l, Phase: phase, When: when, Simulated: r.rec.Simulated()}
		m, err := r.pool.Engine().Metrics(ctx, l)
		if err != nil {
			s.Error = err.Error()
		} else {
			s.Metrics, s.SleepState = m, m.SleepState()
			if v, ok := m.KVCacheUsage(); ok {
				s.KVCacheUsage = &v
			}
		}
		r.metrics.write(s)
	}
}

// ObserveSoakCycle writes a soak cycle's row to soak.csv as it is recorded
// (protocol.Observer): a run killed at cycle 60 keeps the rows before it.
func (r *Run) ObserveSoakCycle(c record.SoakCycle) { r.soak.cycle(c, r.rec.Simulated()) }

// HostLoad reads the load of this process's tree over a phase
// (protocol.Observer), for its window.
func (r *Run) HostLoad() (end func() *record.HostLoad) { return hostload.Window() }

// StopAll stops every server now (SIGTERM, SIGKILL after timeouts.stop_s):
// for a deadline that cannot wait for the phases to end. Safe beside Close.
func (r *Run) StopAll() error { return r.pool.StopAll() }

// Close stops every server (SIGTERM, then SIGKILL after timeouts.stop_s),
// stops the samplers, completes samples.csv and metrics.jsonl and writes
// bench.txt, timeline.svg, then summary.md and report.json (atomically,
// replacing the provisional ones Open wrote), which name any output that
// could not be written.
// testFailures are added to the report's failures (and make it FAIL).
// It returns the report and the first error met while writing.
func (r *Run) Close(testFailures []record.Failure) (report.Report, error) {
	r.Stop()
	return r.Write(testFailures)
}

// Stop is Close's first half: every server, sampler and stream is stopped
// and closed, so the caller can check that nothing is left running (goleak)
// and say so in the report that Write writes. Safe to call twice.
func (r *Run) Stop() {
	r.stopOnce.Do(func() {
		// A server that needed SIGKILL, or NVML that would not shut down:
		// nothing is left running, but the run did not end cleanly.
		if err := r.pool.StopAll(); err != nil {
			r.rec.Fail(record.Failure{Phase: "stop", Error: err.Error()})
			r.exitErrs = append(r.exitErrs, err)
		}
		// Every server has stopped: the watchdog has nothing left to guard.
		if err := r.watchdog.Close(); err != nil {
			r.rec.Fail(record.Failure{Phase: "stop", Error: err.Error()})
			r.exitErrs = append(r.exitErrs, err)
		}
		r.stopBG()
		r.bg.Wait()
		for _, c := range []io.Closer{r.metrics, r.samples, r.soak} {
			if err := c.Close(); err != nil {
				r.stopErrs = append(r.stopErrs, err)
			}
		}
		r.pool.Procs().CloseIdle()
		if err := r.be.Close(); err != nil {
			r.rec.Fail(record.Failure{Phase: "stop", Error: err.Error()})
			r.exitErrs = append(r.exitErrs, err)
		}
	})
}

// Write is Close's second half: after Stop, it writes bench.txt,
// timeline.svg, summary.md and report.json with failures added.
func (r *Run) Write(testFailures []record.Failure) (report.Report, error) {
	r.Stop()
	defer r.lock.release() // last: every output is written
	defer os.RemoveAll(r.tmp)
	errs := slices.Clone(r.stopErrs)

	var samples []gpu.Sample
	if r.sampler != nil {
		samples = r.sampler.Samples()
		// A failed read (a GPU lost mid-run, a driver error) leaves a gap:
		// the peak and the figures cover only the samples that were read.
		n, last := r.sampler.Errors()
		if n > 0 {
			r.rec.AddMemoryNote(fmt.Sprintf("%d of %d GPU memory reads failed (first: %v; last: %v): the peak and every memory figure cover only the %d samples read",
				n, n+len(samples), r.sampler.FirstError(), last, len(samples)))
		}
		if th := r.sampler.Thinned(); th > 0 {
			r.rec.AddMemoryNote(fmt.Sprintf("the run took %d GPU memory samples; past %d the older ones were thinned, each pair kept as its larger, so physical_peak_gib and timeline.svg cover %d of them (the device's total peak exactly, a run of several GPUs' per-GPU peaks not always); samples.csv has every one",
				th+len(samples), gpu.MaxKept, len(samples)))
		}
		r.rec.AddChecks(record.Evaluate("memory.sampler_errors", "", float64(n), "==", 0))
	}
	r.rec.AddChecks(offPhaseChecks(r.cfg)...)
	unverified := r.pool.Unverified()
	for _, l := range r.pool.Labels() {
		if why := unverified[l]; len(why) > 0 {
			r.rec.AddChecks(unverifiedCheck(l, why))
		}
	}
	used := make([]float64, len(samples))
	var perGPU [][]float64 // a row per sample, on runs of several GPUs
	for i, s := range samples {
		used[i] = float64(s.Used) / record.GiB
		if len(s.Devices) > 1 {
			row := make([]float64, len(s.Devices))
			for g, d := range s.Devices {
				row[g] = float64(d.Used) / record.GiB
			}
			perGPU = append(perGPU, row)
		}
	}
	if perGPU != nil {
		r.rec.Writers().DevicePerGPU.Set(perGPU)
	}
	for _, f := range testFailures {
		r.rec.Fail(f)
	}
	initial := map[string]string{}
	r.rec.Read(func(raw *record.Raw) {
		for l, rs := range raw.Restarts {
			for _, x := range rs {
				if !x.Warm {
					initial[l] = x.Compile
				}
			}
		}
	})
	r.rec.Writers().RestartBaseline.Set(r.be.RestartBaseline(r.pool.Labels(), initial))
	r.rec.Finish(used, r.pool.Procs().RSSPeaks(), time.Now())

	raw := r.rec.Raw()
	write := func(name string, f func(io.Writer) error) {
		if err := report.WriteFile(filepath.Join(r.cfg.OutDir, name), f); err != nil {
			errs = append(errs, err)
		}
	}
	results := report.BenchResults(raw) // bench.txt's lines, built once: the page draws the same
	write("bench.txt", func(w io.Writer) error { return report.WriteBenchResults(w, raw.Started, results) })
	// soak.csv was streamed as the cycles ran (soakLog).
	if raw.Traffic != nil {
		write("requests.jsonl", func(w io.Writer) error { return report.WriteRequestsJSONL(w, raw) })
	}
	var timeline []byte // for report.html
	if len(samples) > 0 {
		title := "wakebench: GPU memory, " + raw.GPU
		if raw.Simulated != nil {
			title += fmt.Sprintf(" — vllmsim profile %s, time scale %g", raw.Simulated.Profile, raw.Simulated.TimeScale)
		}
		var svg bytes.Buffer
		err := report.WriteTimelineSVG(&svg, report.Timeline{Samples: samples, LabelOf: r.pool.Procs().LabelOf, Names: raw.Names,
			Windows: raw.Windows, Pad: time.Duration(r.cfg.Protocol.WindowPadS * float64(time.Second)), Events: raw.Events, Title: title,
			Queue: trafficQueue(raw)})
		if err != nil {
			errs = append(errs, fmt.Errorf("write timeline.svg: %w", err))
		} else {
			timeline = svg.Bytes()
			write("timeline.svg", func(w io.Writer) error { _, err := w.Write(timeline); return err })
		}
	}
	// The report comes last and says what could not be written before it
	// (in the record, and in the one copy of it the outputs are written
	// from).
	for _, err := range errs {
		r.rec.Fail(record.Failure{Phase: "outputs", Error: err.Error()})
	}
	if len(errs) > 0 { // the failures as the record holds them, into the copy
		r.rec.Read(func(x *record.Raw) { raw.Failures = slices.Clone(x.Failures) })
	}
	rep, md, err := writeReport(r.cfg.OutDir, raw, timeline, results)
	r.summary = md
	if err != nil {
		errs = append(errs, err)
		rep.Status = "FAIL"
	}
	return rep, errors.Join(append(errs, r.exitErrs...)...)
}

// trafficQueue is the traffic phase's router queue, if it ran.
func trafficQueue(raw record.Raw) []record.QueueDepth {
	if raw.Traffic == nil {
		return nil
	}
	return raw.Traffic.Depth
}
