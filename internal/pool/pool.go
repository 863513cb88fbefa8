// Package pool runs the model servers of one run on one GPU: start, stop,
// sleep, wake (vLLM's level-2 sequence included), probe, serve, and
// activate one model while the others sleep. It keeps each server's state
// (running, asleep and at which level, its processes and peak RSS); it
// tells an Observer of each request it sent and keeps what else its calls
// learned that a run reports (sleep and wake marks, first sleeps,
// weights, the version, references) for the run's record to gather
// (Collect); it never holds the record. It knows nothing of phases or thresholds.
//
// Its concerns, a file and a type each, reached from a Pool:
//   - pool.go, sleep.go, transition.go: Pool, the servers' lifecycle and
//     their transitions (Do with an Op: sleep, wake, pause, resume, KV
//     release);
//   - requests.go: Requests, the probes, streams and serving rounds;
//   - procs.go: Procs, the servers' processes (PIDs, RSS, exits, host
//     memory);
//   - memory.go, cost.go: Memory, the models' GPU memory around starts and
//     sleeps, returned to the caller, which records it, and the GPU's
//     energy counter;
//   - engine.go: Engine, the servers' own account (log lines, /metrics);
//   - oracle.go: Oracle, the correctness reference and its replays.
package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/vllm"
)

// ErrGarbage means a model answered with the text of uninitialised weights.
var ErrGarbage = errors.New("garbage output (uninitialised weights: was reload_weights skipped after a level-2 wake?)")

// Options are what the pool needs besides the config.
type Options struct {
	Command string                      // the server program
	Env     func(config.Model) []string // each server's environment; nil: vLLM's own (vllm.ServerEnv)
	Sampler *gpu.Sampler                // nil: no memory measured
	CUDA    string                      // CUDA driver version for the runtime string, "" when unknown
	// HostRoot is the file-system root host memory is read under
	// (hostmem.Read; "": "/"), and HostMemory reads a server's process
	// tree (nil: server.ProcessMemory): tests give a short host and slow
	// or scaled readers (hostcheck.go, cost.go).
	HostRoot   string
	HostMemory func(pids ...int) (server.HostMemory, error)
	// ReadDelay makes every process scan, process-tree memory read and
	// server-log parse of the harness's own take this much longer: the
	// whole-run figure test's hook (harness.Hooks), which shows that no
	// figure counts these reads unless its row in docs/metrics.md says so.
	// The memory source is slowed where it is made (gpu.Late).
	ReadDelay time.Duration
	// FreePort picks a free port for a model whose config names none (nil:
	// server.FreePort); tests give one taken to see a start try again.
	FreePort func(host string) (int, error)
	// Watchdog kills every server's group and seen descendants if the
	// harness dies without stopping them (nil: none; the run's owns one).
	Watchdog *server.Watchdog
}

// Observer is told of every inference request a view of the pool sent,
// as it is answered: the run's request accounting. The run says where the
// counts go (protocol.Observed, which the harness wires to the run's
// record); what else the calls learn they keep (Collect). A nil function
// is not called.
type Observer struct {
	Request         func(ok bool) // a request sent: answered (ok) or failed
	AbortedByDesign func()        // a request the caller had the server abort (StreamAbortable)
}

func (o Observer) request(ok bool) {
	if o.Request != nil {
		o.Request(ok)
	}
}

func (o Observer) abortedByDesign() {
	if o.AbortedByDesign != nil {
		o.AbortedByDesign()
	}
}

// model is the pool's view of one model's server. cfg is fixed; every
// other field is guarded by servers.mu.
type model struct {
	cfg    config.Model
	srv    *server.Server
	client *vllm.Client
	pids   []int
	asleep bool
	level  int // level of the current sleep
	// slept is what the current sleep, pause or release put to sleep
	// (vLLM's tags): a wake that answers "sleeping" names it where the
	// server exports no resource state.
	slept   []string
	rssPeak uint64
	// exitReported: an error naming this server's exit was returned, so
	// the phase that met the crash has reported it.
	exitReported bool
	compile      string // the last start's compile state (vllm.CompileState)
	logFrom      int64  // where the last start's part of the server log begins
	// reference is the probe set's answers before the first sleep (nil:
	// not taken yet); sleeps counts this process's sleeps.
	reference []vllm.Generation
	sleeps    int
	// pinnedBy is the server that made its pinned host backup with a
	// level-1 sleep and holds it still (vLLM keeps the buffer for the
	// process's life: pinned by cumem.py, cached by PyTorch's host allocator: pytorch/pytorch#275; unless VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY
	// frees it after each wake); nil: none held.
	pinnedBy *server.Server
	// weight is the weight size its latest start logged (nil: none yet);
	// graph the CUDA graphs' memory its capture took (nil: not logged).
	weight, graph *record.Weight
	// startHung is, once a start of the model timed out, the error every
	// later Start returns at once (nil: none timed out).
	startHung error
	// toVerify is the transition sent to this server whose caller has
	// not verified it yet (nil: none): the next one verifies it first.
	toVerify *Transition
	// last is the last transition sent to this server (nil: none since
	// its start): the next one, or the server's stop, ends its log window
	// (Transition.Engine).
	last *Transition
	// opErrors is, by operation, the server's count of its failed
	// sleep-mode operations (vllm:rl_sleep_mode_operations_total
	// {status="error"}) at its last verification (nil: none yet, a fresh
	// process's zeros); opErrorsStale: a call failed since, which the
	// server may have counted, so the next verification reads the count
	// anew and judges nothing.
	opErrors      map[string]float64
	opErrorsStale bool
}

// Pool is the servers of one run, seen through one Observer and one log of
// what its calls learned (Collect): Observed gives another view of the
// same servers.
type Pool struct {
	s     *servers
	obs   Observer // told of this view's requests
	facts *facts   // what this view's calls learned, until collected
}

// servers is the state every view of a pool shares.
//
// One caller changes a model's state at a time (a phase, the router);
// StopAll, the samplers (Procs) and the harness's /metrics scrapes may run
// beside it, so every read and write of a guarded field holds mu, and no
// call to a server or the memory source does.
type servers struct {
	cfg    config.Config     // fixed after New
	opt    Options           // fixed after New
	models map[string]*model // fixed after New (the map; not the models' fields)
	order  []string          // fixed after New
	mem    *memories         // the models' GPU memory state, under its own lock

	// mu guards every model's fields but cfg (port, srv, client, pids,
	// asleep, level, slept, rssPeak, exitReported, compile, logFrom, reference,
	// sleeps, pinnedBy, weight, startHung, toVerify, last, opErrors, opErrorsStale), pidOf, exits, stopping,
	// changes and unverified. Never held with memories.mu.
	mu    sync.Mutex
	pidOf map[int]string
	exits []exit // every server exit the pool did not cause, in the order noticed
	// stopping are the servers Stop is stopping: their exit is the pool's
	// doing, not a crash (a phase's end may look while StopAll runs).
	stopping map[*server.Server]bool
	// changes counts state changes of any model (started, stopped, asleep,
	// awake): a device-delta measurement uses a device read only while
	// no other model has changed state since its sleep.
	changes uint64
	// unverified is, label → why, each sleep-mode verification after a
	// sleep or wake that could not be made (its /metrics unreadable).
	unverified map[string][]string
}

// exit is a server that exited without being stopped.
type exit struct {
	label string
	srv   *server.Server
	err   error
}

// New is a pool of cfg's models, none started, told to no Observer
// (Observed gives the view a run records).
func New(cfg config.Config, opt Options) *Pool {
	if opt.Env == nil {
		opt.Env = func(config.Model) []string { return vllm.ServerEnv(cfg.APIKey) }
	}
	s := &servers{cfg: cfg, opt: opt, models: map[string]*model{}, pidOf: map[int]string{}, stopping: map[*server.Server]bool{},
		mem: &memories{by: map[string]*memState{}}}
	for _, m := range cfg.Models {
		s.order = append(s.order, m.Label)
		s.models[m.Label] = &model{cfg: m}
		s.mem.by[m.Label] = &memState{}
	}
	return &Pool{s: s, facts: &facts{}}
}

// Observed is the same servers, with their requests told to obs and what
// their calls learn kept in a log of its own (Collect): benchmarks drive
// the servers without touching the run's record.
func (f *Pool) Observed(obs Observer) *Pool {
	return &Pool{s: f.s, obs: obs, facts: &facts{}}
}

// Labels are the model labels in config order.
func (f *Pool) Labels() []string { return slices.Clone(f.s.order) }

// Procs is the servers' processes: PIDs, RSS, exits.
func (f *Pool) Procs() Procs { return Procs{s: f.s} }

// Memory measures the models' GPU memory around starts and sleeps, and
// what else the state-cost phase reads of the GPU (cost.go).
func (f *Pool) Memory() Memory { return Memory{f: f} }

// Requests sends the servers inference requests, each told to this
// view's Observer.
func (f *Pool) Requests() Requests { return Requests{f: f} }

// Engine reads the servers' own account: their logs and /metrics.
func (f *Pool) Engine() Engine { return Engine{s: f.s} }

// Oracle is the correctness reference (kept in this view's log) and its
// replays (returned).
func (f *Pool) Oracle() Oracle { return Oracle{f: f} }

// late waits Options.ReadDelay (the test hook; 0 by default) before one
// of the harness's own reads.
func (s *servers) late() {
	if s.opt.ReadDelay > 0 {
		time.Sleep(s.opt.ReadDelay)
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// sleepCtx waits d (at once when d ≤ 0) or until ctx ends, then its cause.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

func (s *servers) model(label string) (*model, error) {
	m, ok := s.models[label]
	if !ok {
		return nil, fmt.Errorf("no model labelled %q in the config", label)
	}
	return m, nil
}

// server is m's running server and its client (nil when none runs).
func (s *servers) server(m *model) (*server.Server, *vllm.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.srv, m.client
}

// timeout runs fn with m's client under a deadline and under the server's
// liveness: if the server process exits, fn's context ends and the exit is
// the error.
func (s *servers) timeout(ctx context.Context, m *model, d time.Duration, fn func(context.Context, *vllm.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	srv, c := s.server(m)
	if srv == nil {
		return fmt.Errorf("server %s is not running", m.cfg.Label)
	}
	err := srv.Alive(ctx, func(ctx context.Context) error { return fn(ctx, c) })
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v (raise timeouts in the config if that is expected): %w", d, err)
	}
	return s.explain(m, err)
}

// explain puts a server's exit in front of an error it caused: a crash
// shows to the client as a reset or a cut stream a moment before the exit.
// An error of a stopped run (context canceled, or the run's stop as its
// cause) is its own cause: it does not wait for an exit. An exit it names counts as reported (Activate).
func (s *servers) explain(m *model, err error) error {
	srv, _ := s.server(m)
	if err == nil || srv == nil || errors.Is(err, context.Canceled) || errors.As(err, new(record.Stopped)) {
		return err
	}
	select {
	case <-srv.Done():
	case <-time.After(exitWait(err)):
		return err
	}
	s.mu.Lock()
	m.exitReported = true
	s.mu.Unlock()
	exit := srv.ExitErr()
	if errors.Is(err, exit) || strings.Contains(err.Error(), exit.Error()) {
		return err
	}
	return fmt.Errorf("%w (the client saw: %v)", exit, err)
}

// exitWait is how long explain waits for a server's exit after err: a
// connection that broke (a stream cut short, a reset, a refused dial) is
// what a dying server leaves, and the exit follows it at once, but a
// loaded machine may reap the process late (a CI run under make stress
// named the cut stream alone after 300 ms); any other error (an HTTP
// answer, a timeout) comes from a server still there, so the wait is
// short.
func exitWait(err error) time.Duration {
	for _, broken := range []error{io.ErrUnexpectedEOF, io.EOF, syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.EPIPE} {
		if errors.Is(err, broken) {
			return 3 * time.Second
		}
	}
	return 300 * time.Millisecond
}

// Start spawns the model's server, waits for /health and checks
// /v1/models. It returns spawn → ready (the first /health 200). A start
// that fails is stopped: nothing of it runs on beside the next model.
// Started does the rest of a start's bookkeeping, after its first token.
//
// Only a server the run started is measured or sent anything: a port the
// config names that another process listens on is refused before the
// spawn, and at the first /health 200 the socket listening on the port
// must be the new server's (its process tree's), else the start fails
// naming the process that answered. A start that timed out is not tried
// again: every later Start of the model fails at once naming it.
func (f *Pool) Start(ctx context.Context, label string) (ready time.Duration, err error) {
	m, err := f.s.model(label)
	if err != nil {
		return 0, err
	}
	f.s.mu.Lock()
	hung := m.startHung
	f.s.mu.Unlock()
	if hung != nil {
		return 0, hung
	}
	for try := 1; ; try++ {
		var picked bool
		ready, picked, err = f.startOnce(ctx, label)
		// A port picked free here and taken by another process before the
		// server bound it (a test package running beside this one): the
		// server failed at once, as vLLM does, naming the address, or
		// another process answered on it; another port, at most three
		// tries.
		inUse := err != nil && (strings.Contains(err.Error(), "address already in use") || errors.Is(err, server.ErrNotOwned))
		if inUse && !picked {
			return ready, f.s.portInUse(label, err)
		}
		if err == nil || !picked || try == 3 || !inUse {
			f.s.noteHung(ctx, m, err)
			return ready, err
		}
	}
}

// errStartTimeout marks a start whose server never answered /health
// within timeouts.start_s.
var errStartTimeout = errors.New("never became ready")

// noteHung remembers a start of m that timed out (err), so that no later
// phase spawns the model and waits timeouts.start_s again; a start the
// run stopped (its context ended) is not the server's doing.
func (s *servers) noteHung(ctx context.Context, m *model, err error) {
	if err == nil || ctx.Err() != nil || !errors.Is(err, errStartTimeout) {
		return
	}
	label := m.cfg.Label
	hung := fmt.Errorf("start %s: model %s's server never became ready (timeouts.start_s %g s) at an earlier start, so it is not started again: see %s",
		label, label, s.cfg.Timeouts.StartS, s.logPath(label))
	s.mu.Lock()
	m.startHung = hung
	s.mu.Unlock()
}

// portInUse is the error of a start that found its configured port
// taken: it names the port and the config key that set it.
func (s *servers) portInUse(label string, err error) error {
	for i, m := range s.cfg.Models {
		if m.Label == label {
			return fmt.Errorf("port %d, config models[%d].port, is already in use by another process: %w", m.Port, i, err)
		}
	}
	return err
}

// portTaken is nil when nothing listens on host:port now, else an error
// naming the process that does where /proc can say (server.PortHolder).
// It binds the port for a moment instead of connecting to it: nothing
// reaches the other process.
func portTaken(host string, port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err == nil {
		return ln.Close()
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil // not this check's to judge: the server says (a host not local, a port below 1024)
	}
	who := server.PortHolder(host, port)
	if who == "" {
		who = "a process /proc does not name"
	}
	return fmt.Errorf("%v: %s listens there; the run's server was not started, so nothing was sent to it", err, who)
}

// owned checks, at the first /health 200, that the socket answering on
// the port is srv's (server.Listens): a process that bound the port
// between the check before the spawn and the server's own bind (vLLM binds
// late, after importing torch) answered instead. Where /proc cannot say,
// the server still running is taken as enough, and its log says so.
func owned(srv *server.Server, host string, port int) error {
	err := srv.Listens(host, port)
	if err == nil || !errors.Is(err, server.ErrCannotTell) {
		return err
	}
	if exit := srv.ExitErr(); exit != nil {
		return fmt.Errorf("/health answered on port %d, but this run's server had exited: another process answered: %w", port, exit)
	}
	srv.Note("port %d: which process answers /health could not be checked (%v); the server runs, so it is taken as ready", port, err)
	return nil
}

// startOnce is one try of Start; picked reports that the port was picked
// free for it (the model's config names none).
func (f *Pool) startOnce(ctx context.Context, label string) (ready time.Duration, picked bool, err error) {
	m, err := f.s.model(label)
	if err != nil {
		return 0, false, err
	}
	f.s.mu.Lock()
	running, port := m.srv != nil, m.cfg.Port
	f.s.mu.Unlock()
	picked = port == 0
	if running {
		return 0, picked, fmt.Errorf("server %s already running", label)
	}
	if port != 0 {
		if err := portTaken(f.s.cfg.Host, port); err != nil {
			return 0, picked, err
		}
	}
	if port == 0 {
		// A fresh free port at every start: the one this model's last
		// server freed when it stopped (a restart, the state-cost phase's
		// stopped state) may meanwhile be another process's, as a test
		// package running beside this one once made it.
		free := f.s.opt.FreePort
		if free == nil {
			free = server.FreePort
		}
		if port, err = free(f.s.cfg.Host); err != nil {
			return 0, picked, err
		}
	}
	cfg, p := f.s.cfg, f.s.cfg.Protocol
	logPath := f.s.logPath(label)
	var logFrom int64 // this start's part of the log, appended to over starts
	if st, err := os.Stat(logPath); err == nil {
		logFrom = st.Size()
	}
	spec := server.Spec{
		Label: label, Path: f.s.opt.Command,
		Args: vllm.ServeArgs(vllm.ServeOptions{Model: m.cfg.Name, Host: cfg.Host, Port: port, MaxModelLen: p.ContextTokens,
			KVCacheBytes: cfg.KVBytes(), GPUMemoryUtilization: m.cfg.GPUMemoryUtilization, LoRA: loras(m.cfg.LoRAModules), Extra: m.cfg.ExtraArgs}),
		Env:      f.s.opt.Env(m.cfg),
		LogPath:  logPath,
		Watchdog: f.s.opt.Watchdog,
	}
	// Every other model is asleep (MakeRoom): what the device holds now
	// is all but this model, for device-delta attribution.
	f.Memory().beforeSpawn(ctx, label)
	srv, err := server.Start(spec)
	if err != nil {
		return 0, picked, err
	}
	client := vllm.New("http://"+net.JoinHostPort(cfg.Host, strconv.Itoa(port)), vllm.WithAPIKey(cfg.APIKey))
	f.s.mu.Lock()
	m.srv, m.client = srv, client
	m.asleep, m.level, m.pids, m.exitReported, m.sleeps = false, 0, []int{srv.PID()}, false, 0
	m.toVerify, m.opErrors, m.opErrorsStale = nil, nil, false
	m.last.closeLog(logFrom) // a stop ended it already, unless the start replaced a server that exited
	m.last = nil
	f.s.pidOf[srv.PID()] = label
	f.s.changes++
	f.s.mu.Unlock()
	defer func() {
		// A start that failed must not run on beside the next model's.
		if err != nil {
			if serr := f.Stop(label); serr != nil {
				err = errors.Join(err, fmt.Errorf("stopping it: %w", serr))
			}
		}
	}()
	var readyAt time.Time
	err = f.s.timeout(ctx, m, seconds(cfg.Timeouts.StartS), func(ctx context.Context, c *vllm.Client) error {
		t, err := c.WaitReady(ctx, time.Duration(cfg.Timeouts.PollMS*float64(time.Millisecond)))
		readyAt = t
		return err
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", errStartTimeout, err)
		}
		return 0, picked, fmt.Errorf("start %s (%s): %w; server log: %s", label, m.cfg.Name, err, spec.LogPath)
	}
	ready = readyAt.Sub(srv.Spawned)
	if err = owned(srv, cfg.Host, port); err != nil {
		return 0, picked, fmt.Errorf("start %s: /health answered on port %d, but not from this run's server: %w", label, port, err)
	}
	if err = f.s.timeout(ctx, m, seconds(cfg.Timeouts.RequestS), func(ctx context.Context, c *vllm.Client) error {
		return checkModels(ctx, c, m.cfg)
	}); err != nil {
		return ready, picked, fmt.Errorf("start %s: %w", label, err)
	}
	f.s.mu.Lock()
	m.logFrom = logFrom
	f.s.mu.Unlock()
	return ready, picked, nil
}

// checkModels checks that /v1/models lists the model and its adapters.
func checkModels(ctx context.Context, c *vllm.Client, mc config.Model) error {
	ids, err := c.Models(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(ids, mc.Name) {
		return fmt.Errorf("/v1/models lists %v, not %q", ids, mc.Name)
	}
	for _, a := range mc.Adapters() {
		if !slices.Contains(ids, a) {
			return fmt.Errorf("/v1/models lists %v, not the LoRA adapter %q (lora_modules): was it loaded?", ids, a)
		}
	}
	return nil
}

// Started is a start's bookkeeping, done after the start's first token so
// that no restart interval includes it: the server's processes (a /proc
// scan), what its log says of the start (weight size, compile state), its
// version (GET /version) and its footprint (Memory; Memory.Attribution
// says how it was measured).
func (f *Pool) Started(ctx context.Context, label string) error {
	m, err := f.s.model(label)
	if err != nil {
		return err
	}
	if srv, _ := f.s.server(m); srv == nil {
		return fmt.Errorf("server %s is not running", label)
	}
	f.s.refreshPIDs(m)
	f.s.mu.Lock()
	from := m.logFrom
	f.s.mu.Unlock()
	f.s.late()
	if sl, err := startLog(f.s.logPath(label), from); err == nil {
		if sl.weight != nil {
			f.facts.weight(label, *sl.weight)
		}
		f.s.mu.Lock()
		m.compile, m.graph = sl.compile, sl.graph // a start that logged no capture (--enforce-eager) has no graph pool
		if sl.weight != nil {
			m.weight = sl.weight
		}
		f.s.mu.Unlock()
	}
	err = f.s.timeout(ctx, m, seconds(f.s.cfg.Timeouts.RequestS), func(ctx context.Context, c *vllm.Client) error {
		if v, err := c.Version(ctx); err == nil { // a server without /version: the report says unknown
			f.facts.version(v, f.s.opt.CUDA)
		}
		return nil
	})
	if err != nil { // the server exited, or the run was stopped
		return fmt.Errorf("start %s: %w", label, err)
	}
	return f.Memory().footprint(ctx, label)
}

// Stop ends the model's server (SIGTERM, SIGKILL after timeouts.stop_s);
// nothing of its process group survives.
func (f *Pool) Stop(label string) error {
	m, err := f.s.model(label)
	if err != nil {
		return err
	}
	f.s.noticeExit(m)
	f.s.mu.Lock()
	srv := m.srv
	if srv != nil {
		f.s.stopping[srv] = true
	}
	f.s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err = srv.Stop(seconds(f.s.cfg.Timeouts.StopS))
	logSize := f.s.logSize(label)
	f.s.mu.Lock()
	delete(f.s.stopping, srv)
	m.rssPeak = max(m.rssPeak, srv.PeakRSS())
	if m.srv == srv { // not a server started since by another caller
		m.srv, m.asleep, m.level, m.toVerify = nil, false, 0, nil
		m.last.closeLog(logSize)
		m.last = nil
	}
	f.s.changes++
	f.s.mu.Unlock()
	return err
}

// StopAll stops every server now: for a deadline that cannot wait for the
// phases to end. Safe beside a phase in flight (whose steps then fail, or
// start a server again that the next StopAll stops).
func (f *Pool) StopAll() error {
	var errs []error
	for _, l := range f.s.order {
		if err := f.Stop(l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// noticeExit adds m's server to the exits if it has exited on its own
// (once per server process).
func (s *servers) noticeExit(m *model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv := m.srv
	if srv == nil || s.stopping[srv] || srv.ExitErr() == nil || slices.ContainsFunc(s.exits, func(e exit) bool { return e.srv == srv }) {
		return
	}
	s.exits = append(s.exits, exit{label: m.cfg.Label, srv: srv, err: srv.ExitErr()})
}

// refreshPIDs re-reads the processes of the model's server group (vLLM
// starts its engine core as a child) for memory attribution and samples.csv.
func (s *servers) refreshPIDs(m *model) {
	srv, _ := s.server(m)
	if srv == nil {
		return
	}
	s.late()
	pids, err := srv.PIDs()
	if err != nil || len(pids) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m.pids = pids
	for _, p := range pids {
		s.pidOf[p] = m.cfg.Label
	}
}

// pids are m's processes as last read.
func (s *servers) pids(m *model) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(m.pids)
}

// loras are a model's adapters for its command line, in name order.
func loras(mods map[string]string) []vllm.LoRA {
	var out []vllm.LoRA
	for _, n := range slices.Sorted(maps.Keys(mods)) {
		out = append(out, vllm.LoRA{Name: n, Path: mods[n]})
	}
	return out
}
