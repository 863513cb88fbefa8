// Package protocol drives the wakebench protocol against running servers:
// it owns the server processes, the GPU memory sampler, the host RSS
// sampler and the record of every measurement, and implements each phase
// (restart, serving, sleep cycles, switching) as a method that measures and
// records. The go test suite calls the phases and asserts thresholds.
package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/vllm"
	"github.com/wakebench/wakebench/internal/vllmsim"
)

// Logf prints a progress line.
type Logf func(format string, args ...any)

// model is the harness's view of one model's server.
type model struct {
	cfg     config.Model
	port    int
	srv     *server.Server
	client  *vllm.Client
	pids    []int
	asleep  bool
	level   int // level of the current sleep
	rssPeak uint64
}

// Harness owns servers, samplers and the record of one run.
type Harness struct {
	cfg     config.Config
	Rec     *report.Recorder
	sampler *gpu.Sampler
	nvml    *gpu.NVMLSource // when memory is "nvml"
	cuda    string          // CUDA driver version from NVML, for the runtime string
	metrics *metricsLog
	samples *samplesLog
	cmdPath string
	env     []string
	tmp     string // private directory: simulated GPU, compile cache, built vllmsim

	stopBG context.CancelFunc
	bg     sync.WaitGroup

	mu     sync.Mutex
	models map[string]*model
	order  []string
	pidOf  map[int]string
}

// Setup prepares a run: output directory, server program (vllmsim is built
// from this module), simulated GPU, samplers. Nothing is started yet.
func Setup(ctx context.Context, cfg config.Config) (*Harness, error) {
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("out_dir %s: %w", cfg.OutDir, err)
	}
	tmp, err := os.MkdirTemp("", "wakebench-")
	if err != nil {
		return nil, err
	}
	h := &Harness{cfg: cfg, tmp: tmp, models: map[string]*model{}, pidOf: map[int]string{}}
	fail := func(err error) (*Harness, error) {
		if h.nvml != nil {
			h.nvml.Close()
		}
		os.RemoveAll(tmp)
		return nil, err
	}
	names := map[string]string{}
	for _, m := range cfg.Models {
		h.order = append(h.order, m.Label)
		names[m.Label] = m.Name
		h.models[m.Label] = &model{cfg: m, port: m.Port}
	}
	h.Rec = report.NewRecorder(h.order, names)

	h.env = server.Env(cfg.APIKey)
	var src gpu.Source
	switch cfg.Command {
	case "vllmsim":
		h.cmdPath = filepath.Join(tmp, "vllmsim")
		build := exec.CommandContext(ctx, "go", "build", "-o", h.cmdPath, "github.com/wakebench/wakebench/cmd/vllmsim")
		if out, err := build.CombinedOutput(); err != nil {
			return fail(fmt.Errorf("build vllmsim: %v\n%s", err, out))
		}
		prof, err := vllmsim.LookupProfile(cfg.Sim.Profile)
		if err != nil {
			return fail(fmt.Errorf("config sim.profile: %w", err))
		}
		h.env = append(h.env,
			vllmsim.EnvProfile+"="+cfg.Sim.Profile,
			vllmsim.EnvTimeScale+"="+strconv.FormatFloat(cfg.Sim.TimeScale, 'g', -1, 64),
			vllmsim.EnvCacheDir+"="+filepath.Join(tmp, "compile-cache"))
		h.Rec.Update(func(r *report.Raw) {
			r.Simulated = &report.Simulated{Profile: cfg.Sim.Profile, TimeScale: cfg.Sim.TimeScale,
				Note: "simulated: servers are vllmsim and GPU memory is modelled (" + prof.Source + "); times are wall-clock at this time scale"}
		})
		if cfg.Memory == "sim" {
			dir := filepath.Join(tmp, "gpu")
			g := prof.GPU
			if err := simgpu.Create(dir, simgpu.Device{Name: g.Name, TotalBytes: uint64(g.MemoryGiB * vllmsim.GiB), ReservedBytes: uint64(g.ReservedGiB * vllmsim.GiB),
				PCIeGen: g.PCIeGen, PCIeWidth: g.PCIeWidth, MemBusWidthBits: g.MemBusWidthBits, MemClockMHz: g.MemClockMHz}); err != nil {
				return fail(err)
			}
			h.env = append(h.env, simgpu.EnvDir+"="+dir)
			src = gpu.NewSimSource(dir)
		}
	default:
		p, err := exec.LookPath(cfg.Command)
		if err != nil {
			return fail(fmt.Errorf("config command %q: %w (install vLLM or set command to a path)", cfg.Command, err))
		}
		h.cmdPath = p
	}

	gpuName, note := "unknown GPU (memory source none)", ""
	var facts *report.GPUFacts
	switch cfg.Memory {
	case "nvml":
		ns, err := gpu.OpenNVML(nvml.New(), cfg.GPUIndex)
		if err != nil {
			return fail(fmt.Errorf("config memory \"nvml\": %w", err))
		}
		h.nvml, src = ns, ns
		h.cuda = ns.Facts().CUDAVersion
	case "none":
		note = "memory source none: no GPU memory was sampled, so residual, release and peak figures are absent (n = 0)"
	}
	if fs, ok := src.(gpu.FactSource); ok {
		f := fs.Facts()
		facts = &report.GPUFacts{Name: f.Name, UUID: f.UUID, MemoryGiB: float64(f.TotalBytes) / report.GiB,
			DriverVersion: f.DriverVersion, CUDAVersion: f.CUDAVersion, PCIeGen: f.PCIeGen, PCIeWidth: f.PCIeWidth,
			MaxPCIeGen: f.MaxPCIeGen, MaxPCIeWidth: f.MaxPCIeWidth, PCIeGBps: f.PCIeLimitGBps(),
			MemBusWidthBits: f.MemBusWidth, MaxMemClockMHz: f.MaxMemClock, MemoryGBps: f.MemoryGBps(), Simulated: f.Simulated}
	}
	if src != nil {
		d, err := src.Describe()
		if err != nil {
			return fail(err)
		}
		gpuName = "1 × " + d
		h.sampler = gpu.NewSampler(src, time.Duration(float64(time.Second)/cfg.Protocol.SampleHz))
	}
	h.Rec.Update(func(r *report.Raw) {
		r.GPU, r.GPUFacts, r.ContextTokens, r.KVGiB = gpuName, facts, cfg.Protocol.ContextTokens, cfg.Protocol.KVGiB
		r.MemorySource, r.MemoryNote = cfg.Memory, note
		r.Runtime = "unknown (no server reached)"
	})
	ml, err := openMetricsLog(filepath.Join(cfg.OutDir, "metrics.jsonl"))
	if err != nil {
		return fail(err)
	}
	h.metrics = ml
	if h.samples, err = openSamplesLog(filepath.Join(cfg.OutDir, "samples.csv")); err != nil {
		ml.Close()
		return fail(err)
	}
	if h.sampler != nil {
		h.sampler.OnSample(func(s gpu.Sample) {
			// Resolve labels first: never hold h.mu and the log's lock together.
			labels := make(map[int]string, len(s.Procs))
			for pid := range s.Procs {
				labels[pid] = h.labelOf(pid)
			}
			h.samples.gpu(s, func(pid int) string { return labels[pid] })
		})
	}

	bgCtx, cancel := context.WithCancel(context.Background())
	h.stopBG = cancel
	if h.sampler != nil {
		h.bg.Go(func() { h.sampler.Run(bgCtx) })
	}
	h.bg.Go(func() { every(bgCtx, 250*time.Millisecond, h.sampleRSS) })
	// A write error here shows again at Close.
	h.bg.Go(func() { every(bgCtx, time.Second, func() { _ = h.samples.flush() }) })
	return h, nil
}

// labelOf is the model owning a process, "" if none.
func (h *Harness) labelOf(pid int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pidOf[pid]
}

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

// Config is the run's configuration.
func (h *Harness) Config() config.Config { return h.cfg }

// Labels are the model labels in config order.
func (h *Harness) Labels() []string { return h.order }

// sampleRSS records the host RSS of every running server's process group.
func (h *Harness) sampleRSS() {
	var got []report.RSSSample
	h.mu.Lock()
	for _, l := range h.order {
		m := h.models[l]
		if m.srv == nil {
			continue
		}
		if b, err := m.srv.RSS(); err == nil {
			m.rssPeak = max(m.rssPeak, b)
			got = append(got, report.RSSSample{Time: time.Now(), Label: l, Bytes: b})
		}
	}
	h.mu.Unlock()
	for _, r := range got { // outside h.mu: never hold it and the log's lock together
		h.samples.rss(r)
	}
}

// Close stops every server (SIGTERM, then SIGKILL after timeouts.stop_s),
// stops the samplers, completes samples.csv and metrics.jsonl and writes
// report.json and bench.txt (atomically).
// testFailures are added to the report's failures (and make it FAIL).
// It returns the report and the first error met while writing.
func (h *Harness) Close(testFailures []report.Failure) (report.Report, error) {
	var errs []error
	if err := h.StopAll(); err != nil {
		errs = append(errs, err)
	}
	h.stopBG()
	h.bg.Wait()
	defer os.RemoveAll(h.tmp)
	for _, c := range []io.Closer{h.metrics, h.samples} {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range h.models {
		if m.client != nil {
			m.client.CloseIdle()
		}
	}
	if h.nvml != nil {
		if err := h.nvml.Close(); err != nil {
			errs = append(errs, err)
		}
	}

	var samples []gpu.Sample
	if h.sampler != nil {
		samples = h.sampler.Samples()
	}
	h.mu.Lock()
	h.Rec.Update(func(r *report.Raw) {
		for _, s := range samples {
			r.DeviceUsedGiB = append(r.DeviceUsedGiB, float64(s.Used)/report.GiB)
		}
		for l, m := range h.models {
			r.RSSPeak[l] = m.rssPeak
		}
		r.Failures = append(r.Failures, testFailures...)
	})
	h.mu.Unlock()

	raw := h.Rec.Raw()
	rep := report.Build(raw)
	out := h.cfg.OutDir
	write := func(name string, f func(io.Writer) error) {
		if err := report.WriteFile(filepath.Join(out, name), f); err != nil {
			errs = append(errs, err)
		}
	}
	write("bench.txt", func(w io.Writer) error { return report.WriteBench(w, raw) })
	write("summary.md", func(w io.Writer) error { return report.WriteSummary(w, rep) })
	if len(samples) > 0 {
		title := "wakebench: GPU memory, " + raw.GPU
		if raw.Simulated != nil {
			title += fmt.Sprintf(" — vllmsim profile %s, time scale %g", raw.Simulated.Profile, raw.Simulated.TimeScale)
		}
		write("timeline.svg", func(w io.Writer) error {
			return report.WriteTimelineSVG(w, report.Timeline{Samples: samples, LabelOf: h.labelOf, Names: raw.Names,
				Windows: raw.Windows, Pad: seconds(h.cfg.Protocol.WindowPadS), Events: raw.Events, Title: title})
		})
	}
	write("report.json", func(w io.Writer) error { return report.WriteJSON(w, rep) })
	return rep, errors.Join(errs...)
}

// StopAll stops every server now (SIGTERM, SIGKILL after timeouts.stop_s):
// for a deadline that cannot wait for the phases to end. Safe beside Close.
func (h *Harness) StopAll() error {
	var errs []error
	for _, l := range h.order {
		if err := h.stop(l, seconds(h.cfg.Timeouts.StopS)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Fail records a failure and returns it as an error naming phase, model and step.
func (h *Harness) Fail(phase, label, step string, err error) error {
	h.Rec.Fail(report.Failure{Phase: phase, Model: label, Step: step, Error: err.Error()})
	return fmt.Errorf("%s %s: %s: %w", phase, label, step, err)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// modelGiB is the GPU memory of the model's processes in a sample; false
// when the source lists none of them (NVML in another PID namespace, or no
// per-process support).
func (h *Harness) modelGiB(m *model, s gpu.Sample) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	found := false
	for _, p := range m.pids {
		_, ok := s.Procs[p]
		found = found || ok
	}
	return float64(gpu.ProcsUsed(s.Reading, m.pids)) / report.GiB, found
}

// refreshPIDs re-reads the processes of the model's server group (vLLM
// starts its engine core as a child) for memory attribution and samples.csv.
func (h *Harness) refreshPIDs(m *model) {
	if m.srv == nil {
		return
	}
	pids, err := m.srv.PIDs()
	if err != nil || len(pids) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m.pids = pids
	for _, p := range pids {
		h.pidOf[p] = m.cfg.Label
	}
}

// checkOutput fails a response whose text is garbage.
func checkOutput(s *vllm.Stream) error {
	if garbage(s.Text) {
		return fmt.Errorf("%w: %.40q", ErrGarbage, s.Text)
	}
	return nil
}

// garbage reports whether text is what vLLM emits from uninitialised weights
// (a level-2 wake without reload_weights): one character repeated, e.g. "!!!!".
func garbage(text string) bool {
	t := strings.Join(strings.Fields(text), "")
	if len([]rune(t)) < 4 {
		return false
	}
	r := []rune(t)
	for _, c := range r[1:] {
		if c != r[0] {
			return false
		}
	}
	return true
}

var nan = math.NaN()
