// Package fleet runs the model servers of one run on one GPU: start, stop,
// sleep, wake (vLLM's level-2 sequence included), probe, serve, and
// activate one model while the others sleep. It keeps each server's state
// (running, asleep and at which level, its processes and peak RSS), counts
// every inference request it sends, and measures the model's GPU memory
// around a sleep. It knows nothing of phases or thresholds.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/vllm"
)

// ErrGarbage means a model answered with the text of uninitialised weights.
var ErrGarbage = errors.New("garbage output (uninitialised weights: was reload_weights skipped after a level-2 wake?)")

// Options are what the fleet needs besides the config.
type Options struct {
	Command string                      // the server program
	Env     func(config.Model) []string // each server's environment; nil: vLLM's own (vllm.ServerEnv)
	Sampler *gpu.Sampler                // nil: no memory measured
	CUDA    string                      // CUDA driver version for the runtime string, "" when unknown
}

// model is the fleet's view of one model's server.
type model struct {
	cfg     config.Model
	port    int
	srv     *server.Server
	client  *vllm.Client
	pids    []int
	asleep  bool
	level   int // level of the current sleep
	rssPeak uint64
	// exitReported: an error naming this server's exit was returned, so
	// the phase that met the crash has reported it.
	exitReported bool
	compile      string // the last start's compile state (vllm.CompileState)
	logFrom      int64  // where the last start's part of the server log begins
	// Device-delta attribution, for a memory source that lists none of the
	// server's processes: each GPU's used bytes just before the server was
	// spawned (every other model asleep; nil when not read), and the
	// model's awake footprint read from them after the start, in all and
	// per GPU (nil when unknown).
	deviceBeforeGPU []uint64
	footprint       float64 // GiB
	footprintGPU    []float64
	// awakeGiB is the model's memory before its last measured sleep (or
	// its footprint after its start): what a wake must find free.
	awakeGiB float64
	// reference is the probe set's answers before the first sleep (nil:
	// not taken yet); sleeps counts this process's sleeps.
	reference []vllm.Generation
	sleeps    int
}

// Fleet is the servers of one run.
type Fleet struct {
	*servers
	rec *record.Recorder // where this view's measurements go
}

// servers is the state every view of a fleet shares.
type servers struct {
	cfg config.Config
	opt Options

	mu     sync.Mutex // guards models' state, pidOf and changes
	models map[string]*model
	order  []string
	pidOf  map[int]string
	exits  []exit // every server exit the fleet did not cause, in the order noticed
	// changes counts state changes of any model (started, stopped, asleep,
	// awake): a device-delta measurement uses a device read only while
	// no other model has changed state since its sleep.
	changes uint64
}

// exit is a server that exited without being stopped.
type exit struct {
	label string
	srv   *server.Server
	err   error
}

// New is a fleet of cfg's models, none started; measurements go to rec.
func New(cfg config.Config, opt Options, rec *record.Recorder) *Fleet {
	if opt.Env == nil {
		opt.Env = func(config.Model) []string { return vllm.ServerEnv(cfg.APIKey) }
	}
	s := &servers{cfg: cfg, opt: opt, models: map[string]*model{}, pidOf: map[int]string{}}
	for _, m := range cfg.Models {
		s.order = append(s.order, m.Label)
		s.models[m.Label] = &model{cfg: m, port: m.Port}
	}
	return &Fleet{servers: s, rec: rec}
}

// Recording is the same servers, with measurements (requests, events,
// releases, weights) going to rec instead: benchmarks drive the servers
// without touching the run's record.
func (f *Fleet) Recording(rec *record.Recorder) *Fleet {
	return &Fleet{servers: f.servers, rec: rec}
}

// Labels are the model labels in config order.
func (f *Fleet) Labels() []string { return slices.Clone(f.order) }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (f *Fleet) model(label string) (*model, error) {
	m, ok := f.models[label]
	if !ok {
		return nil, fmt.Errorf("no model labelled %q in the config", label)
	}
	return m, nil
}

// timeout runs fn under a deadline and under the server's liveness: if the
// server process exits, fn's context ends and the exit is the error.
func (f *Fleet) timeout(ctx context.Context, m *model, d time.Duration, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if m.srv == nil {
		return fmt.Errorf("server %s is not running", m.cfg.Label)
	}
	err := m.srv.Alive(ctx, fn)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v (raise timeouts in the config if that is expected): %w", d, err)
	}
	return f.explain(m, err)
}

// Explain puts label's server exit in front of an error it caused.
func (f *Fleet) Explain(label string, err error) error {
	m, merr := f.model(label)
	if merr != nil {
		return err
	}
	return f.explain(m, err)
}

// explain puts a server's exit in front of an error it caused: a crash
// shows to the client as a reset or a cut stream a moment before the exit.
// An error of a stopped run (context canceled) is its own cause: it does
// not wait for an exit. An exit it names counts as reported (Activate).
func (f *Fleet) explain(m *model, err error) error {
	if err == nil || m.srv == nil || errors.Is(err, context.Canceled) {
		return err
	}
	select {
	case <-m.srv.Done():
	case <-time.After(300 * time.Millisecond):
		return err
	}
	f.mu.Lock()
	m.exitReported = true
	f.mu.Unlock()
	exit := m.srv.ExitErr()
	if errors.Is(err, exit) || strings.Contains(err.Error(), exit.Error()) {
		return err
	}
	return fmt.Errorf("%w (the client saw: %v)", exit, err)
}

// Start spawns the model's server, waits for /health and checks
// /v1/models. It returns spawn → ready (the first /health 200). A start
// that fails is stopped: nothing of it runs on beside the next model.
// Started does the rest of a start's bookkeeping, after its first token.
func (f *Fleet) Start(ctx context.Context, label string) (ready time.Duration, err error) {
	m, err := f.model(label)
	if err != nil {
		return 0, err
	}
	if m.srv != nil {
		return 0, fmt.Errorf("server %s already running", label)
	}
	if m.port == 0 {
		if m.port, err = server.FreePort(f.cfg.Host); err != nil {
			return 0, err
		}
	}
	p := f.cfg.Protocol
	logPath := f.logPath(label)
	var logFrom int64 // this start's part of the log, appended to over starts
	if st, err := os.Stat(logPath); err == nil {
		logFrom = st.Size()
	}
	spec := server.Spec{
		Label: label, Path: f.opt.Command,
		Args: vllm.ServeArgs(vllm.ServeOptions{Model: m.cfg.Name, Host: f.cfg.Host, Port: m.port, MaxModelLen: p.ContextTokens,
			KVCacheBytes: f.cfg.KVBytes(), GPUMemoryUtilization: m.cfg.GPUMemoryUtilization, LoRA: loras(m.cfg.LoRAModules), Extra: m.cfg.ExtraArgs}),
		Env:     f.opt.Env(m.cfg),
		LogPath: logPath,
	}
	m.deviceBeforeGPU, m.footprintGPU = nil, nil
	if smp := f.opt.Sampler; smp != nil {
		// Every other model is asleep (MakeRoom): what the device holds now
		// is all but this model, for device-delta attribution.
		if d, err := smp.SampleNow(ctx); err == nil {
			m.deviceBeforeGPU = usedPerGPU(d)
		}
	}
	srv, err := server.Start(spec)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	m.srv, m.asleep, m.level, m.pids, m.exitReported, m.sleeps = srv, false, 0, []int{srv.PID()}, false, 0
	f.pidOf[srv.PID()] = label
	f.changes++
	f.mu.Unlock()
	defer func() {
		// A start that failed must not run on beside the next model's.
		if err != nil {
			if serr := f.Stop(label); serr != nil {
				err = errors.Join(err, fmt.Errorf("stopping it: %w", serr))
			}
		}
	}()
	m.client = vllm.New("http://"+net.JoinHostPort(f.cfg.Host, strconv.Itoa(m.port)), vllm.WithAPIKey(f.cfg.APIKey))
	var readyAt time.Time
	err = f.timeout(ctx, m, seconds(f.cfg.Timeouts.StartS), func(ctx context.Context) error {
		t, err := m.client.WaitReady(ctx, time.Duration(f.cfg.Timeouts.PollMS*float64(time.Millisecond)))
		readyAt = t
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("start %s (%s): %w; server log: %s", label, m.cfg.Name, err, spec.LogPath)
	}
	ready = readyAt.Sub(srv.Spawned)
	err = f.timeout(ctx, m, seconds(f.cfg.Timeouts.RequestS), func(ctx context.Context) error {
		ids, err := m.client.Models(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(ids, m.cfg.Name) {
			return fmt.Errorf("/v1/models lists %v, not %q", ids, m.cfg.Name)
		}
		for _, a := range slices.Sorted(maps.Keys(m.cfg.LoRAModules)) {
			if !slices.Contains(ids, a) {
				return fmt.Errorf("/v1/models lists %v, not the LoRA adapter %q (lora_modules): was it loaded?", ids, a)
			}
		}
		return nil
	})
	if err != nil {
		return ready, fmt.Errorf("start %s: %w", label, err)
	}
	f.mu.Lock()
	m.logFrom = logFrom
	f.mu.Unlock()
	return ready, nil
}

// Started is a start's bookkeeping, done after the start's first token so
// that no restart interval includes it: the server's processes (a /proc
// scan), what its log says of the start (weight size, compile state), its
// version (GET /version) and its footprint (MeasureFootprint).
func (f *Fleet) Started(ctx context.Context, label string) error {
	m, err := f.model(label)
	if err != nil {
		return err
	}
	if m.srv == nil {
		return fmt.Errorf("server %s is not running", label)
	}
	f.refreshPIDs(m)
	f.mu.Lock()
	from := m.logFrom
	f.mu.Unlock()
	f.readStartLog(m, f.logPath(label), from)
	err = f.timeout(ctx, m, seconds(f.cfg.Timeouts.RequestS), func(ctx context.Context) error {
		if v, err := m.client.Version(ctx); err == nil { // a server without /version: the report says unknown
			f.rec.SetServerVersion(v, f.opt.CUDA)
		}
		return nil
	})
	if err != nil { // the server exited, or the run was stopped
		return fmt.Errorf("start %s: %w", label, err)
	}
	return f.MeasureFootprint(ctx, label)
}

// Spawned is when label's running server was spawned (zero when none runs).
func (f *Fleet) Spawned(label string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.models[label]; m != nil && m.srv != nil {
		return m.srv.Spawned
	}
	return time.Time{}
}

// PID is the process-group leader of label's running server, 0 when none runs.
func (f *Fleet) PID(label string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.models[label]; m != nil && m.srv != nil {
		return m.srv.PID()
	}
	return 0
}

// readStartLog reads what the server logged since it was spawned: its
// weight size ("Model loading took X GiB", for the physical limits) and
// whether it compiled its graphs or loaded them from the compile cache.
func (f *Fleet) readStartLog(m *model, path string, from int64) {
	b, err := readFrom(path, from)
	if err != nil {
		return
	}
	if gib, line, ok := vllm.WeightGiB(b); ok {
		f.rec.SetWeight(m.cfg.Label, record.Weight{GiB: gib, Source: "server log: " + line})
	}
	f.mu.Lock()
	m.compile = vllm.CompileState(b)
	f.mu.Unlock()
}

// StartCompile says whether label's last start compiled its graphs
// (vllm.Compiled) or loaded them from the compile cache
// (vllm.LoadedFromCache); "" when its log says neither.
func (f *Fleet) StartCompile(label string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.models[label]; m != nil {
		return m.compile
	}
	return ""
}

// Stop ends the model's server (SIGTERM, SIGKILL after timeouts.stop_s);
// nothing of its process group survives.
func (f *Fleet) Stop(label string) error {
	m, err := f.model(label)
	if err != nil {
		return err
	}
	f.noticeExit(m)
	f.mu.Lock()
	srv := m.srv
	f.mu.Unlock()
	if srv == nil {
		return nil
	}
	err = srv.Stop(seconds(f.cfg.Timeouts.StopS))
	f.mu.Lock()
	m.rssPeak = max(m.rssPeak, srv.PeakRSS())
	m.srv, m.asleep, m.level = nil, false, 0
	f.changes++
	f.mu.Unlock()
	return err
}

// noticeExit adds m's server to the exits if it has exited on its own
// (once per server process).
func (f *Fleet) noticeExit(m *model) {
	f.mu.Lock()
	defer f.mu.Unlock()
	srv := m.srv
	if srv == nil || srv.ExitErr() == nil || slices.ContainsFunc(f.exits, func(e exit) bool { return e.srv == srv }) {
		return
	}
	f.exits = append(f.exits, exit{label: m.cfg.Label, srv: srv, err: srv.ExitErr()})
}

// ExitMark is a mark in the list of server exits, for Exits.
func (f *Fleet) ExitMark() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.exits)
}

// Exits are the servers that exited on their own (a crash, an OOM kill)
// since mark, by model label, each with its exit status and log tail:
// those already replaced by a new start and those lying dead now.
func (f *Fleet) Exits(mark int) (labels []string, errs []error) {
	for _, l := range f.order {
		f.noticeExit(f.models[l])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.exits[min(mark, len(f.exits)):] {
		labels, errs = append(labels, e.label), append(errs, e.err)
	}
	return labels, errs
}

// StopAll stops every server now: for a deadline that cannot wait for the
// phases to end. Safe beside a phase in flight.
func (f *Fleet) StopAll() error {
	var errs []error
	for _, l := range f.order {
		if err := f.Stop(l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CloseIdle closes the clients' idle connections.
func (f *Fleet) CloseIdle() {
	for _, m := range f.models {
		if m.client != nil {
			m.client.CloseIdle()
		}
	}
}

// Probe sends one short streaming request and checks its output; it counts
// as an executed request.
func (f *Fleet) Probe(ctx context.Context, label string) (*vllm.Stream, error) {
	m, err := f.model(label)
	if err != nil {
		return nil, err
	}
	s, err := f.Stream(ctx, label, vllm.CompletionRequest{Model: m.cfg.Name, Prompt: f.cfg.Protocol.Prompt,
		MaxTokens: f.cfg.Protocol.ProbeMaxTokens, IgnoreEOS: true})
	if err != nil {
		return s, fmt.Errorf("probe %s: %w", label, err)
	}
	return s, nil
}

// Stream sends one streaming request to label's server (its model name
// filled in when empty) and checks its output; it counts as an executed
// request. A model the fleet believes asleep gets none.
func (f *Fleet) Stream(ctx context.Context, label string, r vllm.CompletionRequest) (*vllm.Stream, error) {
	return f.stream(ctx, label, r, false)
}

// StreamAbortable is Stream for a request the caller will have the server
// abort (a sleep in pause mode abort while it decodes): if the server ends
// it with finish_reason abort, it is counted as aborted by design, not as
// a failure. The error is Stream's all the same.
func (f *Fleet) StreamAbortable(ctx context.Context, label string, r vllm.CompletionRequest) (*vllm.Stream, error) {
	return f.stream(ctx, label, r, true)
}

func (f *Fleet) stream(ctx context.Context, label string, r vllm.CompletionRequest, abortable bool) (*vllm.Stream, error) {
	m, err := f.model(label)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	asleep := m.asleep
	f.mu.Unlock()
	if asleep {
		return nil, fmt.Errorf("%s: the harness believes it is asleep; refusing to send inference", label)
	}
	if r.Model == "" {
		r.Model = m.cfg.Name
	}
	var s *vllm.Stream
	err = f.timeout(ctx, m, seconds(f.cfg.Timeouts.RequestS), func(ctx context.Context) error {
		var err error
		s, err = m.client.Complete(ctx, r)
		if err == nil {
			err = checkOutput(s)
		}
		return err
	})
	if abortable && s != nil && s.FinishReason == "abort" {
		f.rec.RequestAbortedByDesign()
	} else {
		f.rec.Request(err == nil)
	}
	return s, err
}

// SleepMode puts label to sleep at level in a pause mode (vllm.SleepAbort,
// SleepWait, SleepKeep) while requests may be in flight, and confirms it.
// It returns when /sleep was sent and its duration.
func (f *Fleet) SleepMode(ctx context.Context, label string, level int, mode string) (time.Time, time.Duration, error) {
	return f.sleepMode(ctx, label, level, mode)
}

// plan is the protocol's serving load on m at concurrency c: fixed-length
// outputs (ignore_eos), each checked for garbage.
func (f *Fleet) plan(m *model, c, rounds int) load.Plan {
	p := f.cfg.Protocol
	return load.Plan{Concurrency: c, Rounds: rounds, RequestsPerRound: p.RequestsPerRound,
		Request:  vllm.CompletionRequest{Model: m.cfg.Name, Prompt: p.Prompt, MaxTokens: p.MaxTokens, IgnoreEOS: true},
		Timeout:  seconds(f.cfg.Timeouts.RequestS),
		Validate: checkOutput}
}

// Serve runs rounds × protocol.requests_per_round requests at concurrency
// c on an awake label and counts each request sent. The error is the
// server's (it died, or the whole plan overran); failed requests are in
// the result.
func (f *Fleet) Serve(ctx context.Context, label string, c, rounds int) (load.Result, error) {
	m, err := f.model(label)
	if err != nil {
		return load.Result{}, err
	}
	if m.asleep || m.srv == nil {
		return load.Result{}, fmt.Errorf("model %s is not awake; refusing to send inference (a request to a sleeping vLLM hangs)", label)
	}
	plan := f.plan(m, c, rounds)
	var res load.Result
	err = f.timeout(ctx, m, time.Duration(plan.Planned()+1)*plan.Timeout, func(ctx context.Context) error {
		res = load.Run(ctx, m.client, plan)
		return nil
	})
	for _, q := range res.Requests {
		if !q.Sent.IsZero() || q.Err == nil {
			f.rec.Request(q.Err == nil)
		}
	}
	return res, err
}

// Sleep puts the model to sleep and confirms it with /is_sleeping. It
// returns the duration of the /sleep call.
func (f *Fleet) Sleep(ctx context.Context, label string, level int) (time.Duration, error) {
	_, d, err := f.sleep(ctx, label, level)
	return d, err
}

// sleep is Sleep, also returning when /sleep was sent.
func (f *Fleet) sleep(ctx context.Context, label string, level int) (sent time.Time, d time.Duration, err error) {
	return f.sleepMode(ctx, label, level, "")
}

// sleepMode is sleep in a pause mode ("": the server's default).
func (f *Fleet) sleepMode(ctx context.Context, label string, level int, mode string) (sent time.Time, d time.Duration, err error) {
	m, err := f.model(label)
	if err != nil {
		return sent, 0, err
	}
	if err := f.ensureReference(ctx, m); err != nil {
		return sent, 0, fmt.Errorf("sleep %s level %d: %w", label, level, err)
	}
	err = f.timeout(ctx, m, seconds(f.cfg.Timeouts.SleepS), func(ctx context.Context) error {
		sent = time.Now()
		if err := m.client.SleepMode(ctx, level, mode); err != nil {
			return err
		}
		d = time.Since(sent)
		asleep, err := m.client.IsSleeping(ctx)
		if err != nil {
			return err
		}
		if !asleep {
			return fmt.Errorf("/sleep?level=%d answered 200 but /is_sleeping is false", level)
		}
		return nil
	})
	if err != nil {
		return sent, d, fmt.Errorf("sleep %s level %d: %w", label, level, err)
	}
	f.mu.Lock()
	m.asleep, m.level = true, level
	m.sleeps++
	f.changes++
	first := m.sleeps == 1
	f.mu.Unlock()
	if first {
		f.rec.AddFirstSleep(label, record.FirstSleep{Level: level, SleepS: d.Seconds()})
	}
	f.rec.AddEvent(record.Event{Time: sent, Label: label, Kind: fmt.Sprintf("sleep L%d", level)})
	return sent, d, nil
}

// MeasureFootprint reads the device once a started model is up (after its
// first token, outside any measured interval) and settles how its memory
// is attributed: per process where the memory source lists its processes,
// else by the device's change since just before its spawn ("device-delta":
// only one model changes state at a time). A restart phase calls it after
// its probe; Activate after a start.
func (f *Fleet) MeasureFootprint(ctx context.Context, label string) error {
	m, err := f.model(label)
	if err != nil || f.opt.Sampler == nil || m.srv == nil {
		return err
	}
	f.refreshPIDs(m)
	s, err := f.opt.Sampler.SampleNow(ctx)
	if err != nil {
		return err
	}
	if gib, found := f.modelGiB(m, s); found {
		f.mu.Lock()
		m.awakeGiB = gib
		f.mu.Unlock()
		f.rec.SetAttribution(label, "process")
		return nil
	}
	if before := m.deviceBeforeGPU; before != nil && s.Used >= sum(before) {
		now := usedPerGPU(s)
		perGPU := make([]float64, 0, len(now))
		for i := range min(len(now), len(before)) {
			perGPU = append(perGPU, max(0, float64(now[i])-float64(before[i]))/record.GiB)
		}
		f.mu.Lock()
		m.footprint, m.footprintGPU = float64(s.Used-sum(before))/record.GiB, perGPU
		m.awakeGiB = m.footprint
		f.mu.Unlock()
		f.rec.SetAttribution(label, "device-delta")
	}
	return nil
}

// MeasuredSleep is a sleep with the model's GPU memory read just before it
// (Sleep) and once asleep (Finish): the reads (a process scan, a device
// read) stay outside the measured interval, which starts at Sent.
type MeasuredSleep struct {
	Sent time.Time     // /sleep sent
	Took time.Duration // /sleep sent → answered
	// Held is the harness's own read that must follow the sleep at once,
	// before any other model changes state (device-delta mode: the
	// device's memory), 0 otherwise: an interval from Sent that runs on
	// past the sleep leaves it out.
	Held  time.Duration
	f     *Fleet
	m     *model
	level int
	// before is the model's memory just before the sleep; found says
	// whether the source listed any of its processes (read says it read).
	before      float64
	found, read bool
	// Device-delta mode (the source lists none of its processes): each
	// GPU's used bytes before and once asleep, read at once after the
	// sleep (before another model changes state: a handoff's wake) and
	// again by Finish if no model has changed state since (changes): a
	// release the device shows only after /sleep answered is counted.
	delta                          bool
	deviceBeforeGPU, deviceLeftGPU []uint64
	changes                        uint64 // the fleet's changes after this sleep
	// beforeGPU is the model's memory on each GPU before (process mode).
	beforeGPU []float64
	// ResidualPerGPU is the memory left asleep on each GPU, set by Finish
	// when the run has more than one GPU.
	ResidualPerGPU []float64
	// ReleasedGiB is what the sleep released of the model's memory, set by
	// Finish (NaN when unknown).
	ReleasedGiB float64
}

// StartMeasuredSleep reads label's GPU memory (when a memory source is set)
// and puts it to sleep at level. Finish completes the measurement.
func (f *Fleet) StartMeasuredSleep(ctx context.Context, label string, level int) (*MeasuredSleep, error) {
	m, err := f.model(label)
	if err != nil {
		return nil, err
	}
	ms := &MeasuredSleep{f: f, m: m, level: level, ReleasedGiB: math.NaN()}
	// The reference answers come before the memory read: the read and
	// the sleep belong together.
	if err := f.ensureReference(ctx, m); err != nil {
		return nil, fmt.Errorf("sleep %s level %d: %w", label, level, err)
	}
	smp := f.opt.Sampler
	if smp != nil {
		f.refreshPIDs(m)
		s, err := smp.SampleNow(ctx)
		if err != nil {
			return nil, err
		}
		ms.before, ms.found = f.modelGiB(m, s)
		ms.beforeGPU, ms.deviceBeforeGPU = f.modelGiBPerGPU(m, s), usedPerGPU(s)
		ms.read = true
		f.mu.Lock()
		ms.delta = !ms.found && m.footprintGPU != nil
		if ms.found {
			m.awakeGiB = ms.before
		}
		f.mu.Unlock()
	}
	ms.Sent, ms.Took, err = f.sleep(ctx, label, level)
	if err == nil && ms.delta {
		f.mu.Lock()
		ms.changes = f.changes
		f.mu.Unlock()
		r0 := time.Now()
		s, serr := smp.SampleNow(ctx)
		ms.Held = time.Since(r0)
		if serr != nil {
			return ms, serr
		}
		ms.deviceLeftGPU = usedPerGPU(s)
	}
	return ms, err
}

// Finish reads the model's memory asleep, records the share released by a
// level-1 sleep, and returns the memory left asleep in GiB (NaN when memory
// is not sampled or the source lists none of the model's processes; the
// record's memory note says why).
func (ms *MeasuredSleep) Finish(ctx context.Context) (float64, error) {
	f, m := ms.f, ms.m
	if !ms.read {
		return math.NaN(), nil
	}
	if ms.delta {
		f.mu.Lock()
		quiet := f.changes == ms.changes
		f.mu.Unlock()
		if quiet { // only this sleep changed the device since: read it again, later
			s, err := f.opt.Sampler.SampleNow(ctx)
			if err != nil {
				return math.NaN(), err
			}
			ms.deviceLeftGPU = usedPerGPU(s)
		}
		return ms.finishDelta(), nil
	}
	s, err := f.opt.Sampler.SampleNow(ctx)
	if err != nil {
		return math.NaN(), err
	}
	asleep, foundAsleep := f.modelGiB(m, s)
	if !ms.found || !foundAsleep {
		f.mu.Lock()
		pids := slices.Clone(m.pids)
		f.mu.Unlock()
		f.rec.NoteMemory(fmt.Sprintf("the %s memory source listed none of model %s's processes %v (NVML in another PID namespace?): residual and release need per-process figures and are absent", f.cfg.Memory, m.cfg.Label, pids))
		return math.NaN(), nil
	}
	ms.ReleasedGiB = max(0, ms.before-asleep)
	if ms.level == 1 {
		if pct := gpu.ReleasePercent(ms.before, asleep); !math.IsNaN(pct) {
			f.rec.AddRelease(m.cfg.Label, pct)
		}
	}
	ms.perGPU(ms.beforeGPU, f.modelGiBPerGPU(m, s))
	return asleep, nil
}

// perGPU records, on a run of several GPUs, the model's memory left asleep
// on each and (level 1) the share each released.
func (ms *MeasuredSleep) perGPU(before, asleep []float64) {
	if len(before) < 2 || len(before) != len(asleep) {
		return
	}
	ms.ResidualPerGPU = asleep
	if ms.level == 1 {
		pcts := make([]float64, len(before))
		for i := range before {
			pcts[i] = gpu.ReleasePercent(before[i], asleep[i])
		}
		ms.f.rec.AddReleasePerGPU(ms.m.cfg.Label, pcts)
	}
}

// finishDelta attributes by the device's change: released is what the
// device gave back over the sleep, the residual the awake footprint less it.
func (ms *MeasuredSleep) finishDelta() float64 {
	f, m := ms.f, ms.m
	f.mu.Lock()
	footprint, footGPU := m.footprint, m.footprintGPU // replaced whole at each start, never changed in place
	f.mu.Unlock()
	var released float64
	if before, left := sum(ms.deviceBeforeGPU), sum(ms.deviceLeftGPU); before > left {
		released = float64(before-left) / record.GiB
	}
	residual := max(0, footprint-released)
	ms.ReleasedGiB = released
	if n := len(footGPU); n > 1 && len(ms.deviceBeforeGPU) == n && len(ms.deviceLeftGPU) == n {
		left := make([]float64, n)
		for i := range n {
			rel := max(0, float64(ms.deviceBeforeGPU[i])-float64(ms.deviceLeftGPU[i])) / record.GiB
			left[i] = max(0, footGPU[i]-rel)
		}
		ms.perGPU(footGPU, left)
	}
	if ms.level == 1 {
		if pct := gpu.ReleasePercent(footprint, residual); !math.IsNaN(pct) {
			f.rec.AddRelease(m.cfg.Label, pct)
		}
	}
	return residual
}

// Wake wakes the model with vLLM's sequence for the level it sleeps at
// (vllm.Client.Wake) and confirms it with /is_sleeping. It returns the time
// from the first wake request to the last step's answer.
func (f *Fleet) Wake(ctx context.Context, label string) (time.Duration, error) {
	_, d, err := f.WakeAt(ctx, label)
	return d, err
}

// WakeAt is Wake, also returning when the first wake request was sent: the
// wake's answer is sent + d, before the /is_sleeping confirmation.
func (f *Fleet) WakeAt(ctx context.Context, label string) (sent time.Time, d time.Duration, err error) {
	m, err := f.model(label)
	if err != nil {
		return sent, 0, err
	}
	level := m.level
	step := "wake_up"
	err = f.timeout(ctx, m, seconds(f.cfg.Timeouts.WakeS), func(ctx context.Context) error {
		sent = time.Now()
		failed, err := m.client.Wake(ctx, level)
		if err != nil {
			step = failed
			return err
		}
		d = time.Since(sent)
		step = "is_sleeping"
		asleep, err := m.client.IsSleeping(ctx)
		if err != nil {
			return err
		}
		if asleep {
			return errors.New("wake answered 200 but /is_sleeping is still true")
		}
		return nil
	})
	if err != nil {
		return sent, d, fmt.Errorf("wake %s from level %d: %s: %w", label, level, step, err)
	}
	f.mu.Lock()
	m.asleep, m.level = false, 0
	f.changes++
	f.mu.Unlock()
	// The timeline's △ is the wake request sent, as its ▲ is /sleep sent.
	f.rec.AddEvent(record.Event{Time: sent, Label: label, Kind: "wake"})
	return sent, d, nil
}

// Running reports whether the model's server is up.
func (f *Fleet) Running(label string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.models[label]
	return m != nil && m.srv != nil && m.srv.ExitErr() == nil
}

// Slept reports whether label's running server process has slept since
// it started (false when none runs): a process that never slept is the
// one a baseline "before any sleep" measures.
func (f *Fleet) Slept(label string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.models[label]
	return m != nil && m.srv != nil && m.sleeps > 0
}

// Asleep reports whether the fleet put the model to sleep and has not woken it.
func (f *Fleet) Asleep(label string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.models[label]
	return m != nil && m.asleep
}

// Awake lists the models whose servers run and are awake.
func (f *Fleet) Awake() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.order {
		m := f.models[l]
		if m.srv != nil && !m.asleep {
			out = append(out, l)
		}
	}
	return out
}

// MakeRoom puts every other awake model to sleep (level 1) so label can
// start or wake: models share the GPU, and vLLM must not sleep or wake one
// instance while another is starting. These sleeps are not measured.
func (f *Fleet) MakeRoom(ctx context.Context, label string) error {
	for _, o := range f.order {
		if o == label || !f.Running(o) || f.Asleep(o) {
			continue
		}
		if _, err := f.Sleep(ctx, o, 1); err != nil {
			return fmt.Errorf("make room for %s: %w", label, err)
		}
	}
	return nil
}

// Activate makes label the awake model: its server running (started if
// needed, after the others are asleep), every other model asleep, label
// awake. A server that has died is an error (its exit and log tail) unless
// an earlier error already named that exit: then it is started afresh, so
// one crash is reported once, by the phase that met it.
func (f *Fleet) Activate(ctx context.Context, label string) error {
	m, err := f.model(label)
	if err != nil {
		return err
	}
	if m.srv != nil {
		if exit := m.srv.ExitErr(); exit != nil {
			f.mu.Lock()
			reported := m.exitReported
			f.mu.Unlock()
			_ = f.Stop(label) // it has exited: the error is its exit
			if !reported {
				return exit
			}
			// The phase that met the crash reported it; this one starts
			// the server afresh rather than failing on it a second time.
		}
	}
	if err := f.MakeRoom(ctx, label); err != nil {
		return err
	}
	if m.srv == nil {
		if _, err := f.Start(ctx, label); err != nil {
			return err
		}
		return f.Started(ctx, label)
	}
	if m.asleep {
		if _, err := f.Wake(ctx, label); err != nil {
			return err
		}
	}
	return nil
}

// Metrics scrapes label's /metrics.
func (f *Fleet) Metrics(ctx context.Context, label string) (vllm.Metrics, error) {
	m, err := f.model(label)
	if err != nil {
		return nil, err
	}
	var out vllm.Metrics
	err = f.timeout(ctx, m, 10*time.Second, func(ctx context.Context) error {
		text, err := m.client.Metrics(ctx)
		if err != nil {
			return err
		}
		out, err = vllm.ParseMetrics(text)
		return err
	})
	return out, err
}

// LabelOf is the model owning a process, "" if none.
func (f *Fleet) LabelOf(pid int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pidOf[pid]
}

// SampleRSS reads the host RSS of every running server's process group.
func (f *Fleet) SampleRSS() []record.RSSSample {
	var got []record.RSSSample
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.order {
		m := f.models[l]
		if m.srv == nil {
			continue
		}
		if b, err := m.srv.RSS(); err == nil {
			m.rssPeak = max(m.rssPeak, b)
			got = append(got, record.RSSSample{Time: time.Now(), Label: l, Bytes: b})
		}
	}
	return got
}

// RSSPeaks is each model's peak host RSS so far.
func (f *Fleet) RSSPeaks() map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]uint64, len(f.models))
	for l, m := range f.models {
		out[l] = m.rssPeak
	}
	return out
}

// modelGiB is the GPU memory of the model's processes in a sample; false
// when the source lists none of them (NVML in another PID namespace, or no
// per-process support).
func (f *Fleet) modelGiB(m *model, s gpu.Sample) (float64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	found := false
	for _, p := range m.pids {
		_, ok := s.Procs[p]
		found = found || ok
	}
	return float64(gpu.ProcsUsed(s.Reading, m.pids)) / record.GiB, found
}

// modelGiBPerGPU is modelGiB on each GPU of the sample.
func (f *Fleet) modelGiBPerGPU(m *model, s gpu.Sample) []float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []float64
	for _, d := range s.PerDevice() {
		out = append(out, float64(gpu.ProcsUsed(d, m.pids))/record.GiB)
	}
	return out
}

// sum adds byte counts.
func sum(xs []uint64) uint64 {
	var n uint64
	for _, x := range xs {
		n += x
	}
	return n
}

// usedPerGPU is each GPU's used bytes in a sample (their sum is its Used).
func usedPerGPU(s gpu.Sample) []uint64 {
	var out []uint64
	for _, d := range s.PerDevice() {
		out = append(out, d.Used)
	}
	return out
}

// refreshPIDs re-reads the processes of the model's server group (vLLM
// starts its engine core as a child) for memory attribution and samples.csv.
func (f *Fleet) refreshPIDs(m *model) {
	if m.srv == nil {
		return
	}
	pids, err := m.srv.PIDs()
	if err != nil || len(pids) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m.pids = pids
	for _, p := range pids {
		f.pidOf[p] = m.cfg.Label
	}
}

// loras are a model's adapters for its command line, in name order.
func loras(mods map[string]string) []vllm.LoRA {
	var out []vllm.LoRA
	for _, n := range slices.Sorted(maps.Keys(mods)) {
		out = append(out, vllm.LoRA{Name: n, Path: mods[n]})
	}
	return out
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
