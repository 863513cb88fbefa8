package vllmsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakebench/wakebench/internal/simgpu"
)

// server is one simulated `vllm serve` process after start-up.
type server struct {
	args    Args
	phys    Physics
	clock   clock
	dev     *device
	eng     *engine
	m       *metrics
	log     *log.Logger
	devMode bool
	created int64
	reqID   atomic.Uint64
	load    atomic.Int64 // completions in flight (--enable-server-load-tracking)
	faults  *Faults
	stamp   bool           // VLLMSIM_STAMP
	exit    func(code int) // os.Exit after cleaning up; injected crashes use it

	opMu sync.Mutex // one sleep/wake/rpc at a time, as vLLM's engine core serialises them
	// lateMu guards late and closed: the late-release fault's pending
	// publish of the device state, and that the server has shut down (no
	// publish after its process entry is removed).
	lateMu sync.Mutex
	late   *time.Timer
	closed bool

	era            era         // VLLMSIM_ERA: which vLLM's sleep API the server speaks
	backend        string      // --sleep-mode-backend ("" = cumem)
	releaseHostMem bool        // VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY: log the pinned host release after a level-1 wake
	poisonPages    bool        // VLLM_POISON_DISCARDED_PAGES: discarded pages are 0xFF after a wake
	power          *power      // the server's draw on the simulated GPU's energy counter
	host           *hostMemory // real host memory of the sleeps' backups (VLLMSIM_HOST_SCALE)

	mu             sync.Mutex // guards the fields below
	level          int        // level (1, 2) of the current memory sleep, 0 when no sleep holds memory
	weightsAsleep  bool
	kvAsleep       bool
	paused         bool // the scheduler is paused (level 0, /pause, any sleep, until the wake that resumes it)
	pauseDone      bool // that pause has completed: no request left in the scheduler
	pausedKeep     bool // that pause froze the requests in flight (mode keep): complete at once, its requests recomputed after the wake
	weightsUnknown bool // a failed memory RPC left the weights' state unknown (until restart)
	kvUnknown      bool // … the KV cache's
	backendUsed    bool // the sleep-mode backend was created (its log line written)
	weightsValid   bool
	woken          bool         // woken at least once: the after-wake faults apply
	sleeps         int          // sleeps at level ≥ 1 so far (fault leak-per-cycle)
	pinned         bool         // the pinned host buffer for level-1 offload is allocated
	legacy         legacyRecord // what released vLLM last recorded on vllm:engine_sleep_state
	commMapped     bool         // the residual beyond the CUDA context (NCCL, fault tp-residual) is allocated
	// The sleep options' state (sleepopts.go): the graph pool backed up
	// and off the device, the NCCL memory suspended (both under mu).
	graphOffloaded, commSuspended bool
}

// metricsHandler serves /metrics, or what fault metrics-broken answers
// instead.
func (s *server) metricsHandler() http.Handler {
	switch s.faults.MetricsBroken {
	case "500":
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "Internal Server Error (injected fault metrics-broken)", http.StatusInternalServerError)
		})
	case "garbage":
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("<html><body>{{ injected fault metrics-broken: not Prometheus text\n"))
		})
	}
	return s.m.handler()
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": s.era.version()})
	})
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("GET /v1/models", s.auth(s.handleModels))
	// GET /load: {"server_load": N}, the requests in flight, counted only
	// with --enable-server-load-tracking (PR #13950, merged 2025-02;
	// vllm/entrypoints/openai/api_server.py get_server_load_metrics).
	mux.HandleFunc("GET /load", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int64{"server_load": s.load.Load()})
	})
	mux.HandleFunc("POST /v1/completions", s.auth(s.handleCompletions))
	if s.devMode {
		sm := sleepMode{s}
		mux.HandleFunc("POST /sleep", sm.handleSleep)
		mux.HandleFunc("POST /wake_up", sm.handleWake)
		mux.HandleFunc("GET /is_sleeping", sm.handleIsSleeping)
		mux.HandleFunc("POST /collective_rpc", s.handleRPC)
		mux.HandleFunc("POST /reset_prefix_cache", sm.handleResetPrefixCache)
		// The RLHF router's pause endpoints predate pause modes (an
		// older router had /pause with wait_for_inflight_requests only;
		// docs/vllm-api.md §5): era b has them; the KV-only release came
		// with PR #44890 (era c, merged 2026-09-17/18, v0.31.0).
		if s.era != eraA {
			mux.HandleFunc("POST /pause", sm.handlePause)
			mux.HandleFunc("POST /resume", sm.handleResume)
			mux.HandleFunc("GET /is_paused", sm.handleIsPaused)
		}
		if s.era.since(eraC) {
			mux.HandleFunc("POST /release_kv_cache_memory", sm.handleReleaseKV)
			// The RLHF router's (vllm/entrypoints/serve/rlhf/api_router.py;
			// the release that added them was not read: the newest here).
			mux.HandleFunc("GET /get_world_size", s.handleWorldSize)
			mux.HandleFunc("POST /abort_requests", s.handleAbortRequests)
		}
	}
	return s.delayed(mux)
}

// delayed answers the paths of the fault delay=PATH:S S seconds late (the
// wait ends with the request).
func (s *server) delayed(h http.Handler) http.Handler {
	if len(s.faults.Delays) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := s.faults.Delays[r.URL.Path]; ok {
			t := time.NewTimer(time.Duration(d * float64(time.Second)))
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		h.ServeHTTP(w, r)
	})
}

// auth guards /v1 with --api-key, as vLLM does (dev endpoints stay open).
func (s *server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.args.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.args.APIKey {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
			return
		}
		h(w, r)
	}
}

// inject carries out a fault's action on the request r answered by w; it
// reports whether the request is over (answered, ended, or the process gone).
func (s *server) inject(w http.ResponseWriter, r *http.Request, a faultAction) (over bool) {
	if a.logLine != "" {
		s.log.Print(a.logLine)
	}
	switch a.kind {
	case crash:
		s.exit(a.code)
		return true
	case answer:
		writeError(w, a.code, a.errType, a.message)
		return true
	case endStream:
		return true
	case errorEvent:
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "injected fault error-event", "type": "InternalServerError", "param": nil, "code": 500}})
		_, _ = fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
		return true
	case stall:
		select {
		case <-r.Context().Done():
			return true
		case <-time.After(a.stallFor):
		}
	case hang:
		<-r.Context().Done()
		return true
	}
	return false
}

// writeError writes vLLM's (v0.10.1+) error body.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": status}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *server) handleModels(w http.ResponseWriter, r *http.Request) {
	names := s.args.ServedNames
	if len(names) == 0 {
		names = []string{s.args.Model}
	}
	var data []map[string]any
	for _, n := range names {
		data = append(data, map[string]any{"id": n, "object": "model", "created": s.created, "owned_by": "vllm",
			"root": s.args.Model, "parent": nil, "max_model_len": s.args.MaxModelLen})
	}
	for _, l := range s.args.LoRAModules { // vLLM lists each adapter with the base model as parent
		parent := l.Base
		if parent == "" {
			parent = names[0]
		}
		data = append(data, map[string]any{"id": l.Name, "object": "model", "created": s.created, "owned_by": "vllm",
			"root": l.Path, "parent": parent, "max_model_len": s.args.MaxModelLen})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

type completionRequest struct {
	Model       string   `json:"model"`
	Prompt      any      `json:"prompt"`
	MaxTokens   *int     `json:"max_tokens"`
	MinTokens   int      `json:"min_tokens"`
	IgnoreEOS   bool     `json:"ignore_eos"`
	Temperature *float64 `json:"temperature"`
	Stream      bool     `json:"stream"`
	// Logprobs asks for the top-k logprobs of every generated token
	// (non-streamed answers only in vllmsim).
	Logprobs               *int `json:"logprobs"`
	ReturnTokenIDs         bool `json:"return_token_ids"`
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`
	StreamOptions          *struct {
		IncludeUsage         *bool `json:"include_usage"`
		ContinuousUsageStats bool  `json:"continuous_usage_stats"`
	} `json:"stream_options"`
}

// resolve is the base model or LoRA adapter a request's model names:
// adapter is "" for the base model; ok is false for a name not served.
func (s *server) resolve(n string) (adapter string, ok bool) {
	if n == s.args.Model && len(s.args.ServedNames) == 0 {
		return "", true
	}
	if slices.Contains(s.args.ServedNames, n) {
		return "", true
	}
	if _, ok := s.args.Adapter(n); ok {
		return n, true
	}
	return "", false
}

// maxLogprobs is vLLM's default --max-logprobs.
const maxLogprobs = 20

func (s *server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", "JSON decode error: "+err.Error())
		return
	}
	nth := s.faults.nextCompletion()
	s.mu.Lock()
	asleep := s.weightsAsleep || s.kvAsleep
	s.mu.Unlock()
	if s.inject(w, r, s.faults.beforeCompletion(nth, asleep)) {
		return
	}
	c, ok := s.checkCompletion(w, &req)
	if !ok {
		return
	}
	c.nth = nth
	c.id = fmt.Sprintf("cmpl-%016x", s.reqID.Add(1))
	if s.args.EnableServerLoadTracking { // load_aware_call: counted until the answer is written
		s.load.Add(1)
		defer s.load.Add(-1)
	}
	c.sq = &seq{ctx: r.Context(), id: c.id, prompt: c.prompt, adapter: s.engineAdapter(c.adapter), promptTokens: c.promptTokens, maxTokens: c.maxTokens, stopAt: c.stopAt, gen: s.generator(c.prompt, c.adapter)}
	s.eng.submit(c.sq)
	c.name = s.args.ServedName()
	if !req.Stream {
		s.answerCompletion(w, c)
		return
	}
	s.streamCompletion(w, r, c)
}

// handleWorldSize is GET /get_world_size?include_dp=: {"world_size": N},
// the tensor × pipeline parallel size (× data parallel with include_dp,
// the default); vllmsim has neither pipeline nor data parallelism.
func (s *server) handleWorldSize(w http.ResponseWriter, r *http.Request) {
	if _, ok := boolParam(w, r, "include_dp", true); !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"world_size": s.args.TensorParallelSize})
}

// handleAbortRequests is POST /abort_requests {"request_ids": [...]}: the
// requests named, or every one in flight when none are, end with
// finish_reason "abort". vLLM's answer body was not read (its tokens-only
// variant answers an empty 200): vllmsim answers an empty 200.
func (s *server) handleAbortRequests(w http.ResponseWriter, r *http.Request) {
	var body struct {
		RequestIDs []string `json:"request_ids"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "BadRequestError", "JSON decode error: "+err.Error())
			return
		}
	}
	n := s.eng.abort(body.RequestIDs)
	s.log.Printf("Aborted %d request(s)", n)
	w.WriteHeader(http.StatusOK)
}

// completion is one accepted completion request on its way through the engine.
type completion struct {
	req                             *completionRequest
	prompt, adapter                 string
	promptTokens, maxTokens, stopAt int
	nth                             int    // the request's number, for the faults (from 1)
	sq                              *seq   // the sequence the engine generates
	id, name                        string // the answer's id and model name
}

// checkCompletion validates a completion request as vLLM does and plans its
// lengths; it answers the error and returns false when vLLM would refuse it.
func (s *server) checkCompletion(w http.ResponseWriter, req *completionRequest) (*completion, bool) {
	adapter, served := s.resolve(req.Model)
	if !served {
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return nil, false
	}
	prompt, ok := req.Prompt.(string)
	if !ok {
		writeError(w, http.StatusBadRequest, "BadRequestError", "1 validation error: prompt must be a string")
		return nil, false
	}
	if req.StreamOptions != nil && !req.Stream {
		writeError(w, http.StatusBadRequest, "BadRequestError", "Stream options can only be defined when `stream=True`.")
		return nil, false
	}
	promptTokens := countTokens(prompt)
	if promptTokens >= s.args.MaxModelLen {
		writeError(w, http.StatusBadRequest, "BadRequestError",
			fmt.Sprintf("Input length (%d) exceeds model's maximum context length (%d).", promptTokens, s.args.MaxModelLen))
		return nil, false
	}
	maxTokens := 16
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	if maxTokens < 1 {
		writeError(w, http.StatusBadRequest, "BadRequestError", "max_tokens must be at least 1, got "+strconv.Itoa(maxTokens))
		return nil, false
	}
	if req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > maxLogprobs) {
		writeError(w, http.StatusBadRequest, "BadRequestError",
			fmt.Sprintf("Requested sample logprobs of %d, which is greater than max allowed: %d", *req.Logprobs, maxLogprobs))
		return nil, false
	}
	maxTokens = min(maxTokens, s.args.MaxModelLen-promptTokens)
	stopAt := maxTokens
	if !req.IgnoreEOS {
		// Without ignore_eos the model ends on its own: a prompt-determined length.
		stopAt = max(req.MinTokens, 1+int(countTokens(prompt)*7)%max(maxTokens, 1))
	}
	return &completion{req: req, prompt: prompt, adapter: adapter, promptTokens: promptTokens, maxTokens: maxTokens, stopAt: stopAt}, true
}

// answerCompletion answers a non-streamed completion once it is generated.
func (s *server) answerCompletion(w http.ResponseWriter, c *completion) {
	req := c.req
	var text strings.Builder
	var toks []token
	finish := ""
	for t := range c.sq.out {
		finish = t.finish
		if t.finish != "abort" {
			text.WriteString(t.text)
			toks = append(toks, t)
		}
	}
	n := len(toks)
	usage := map[string]any{"prompt_tokens": c.promptTokens, "completion_tokens": n, "total_tokens": n + c.promptTokens}
	if s.args.EnablePromptTokensDetails {
		usage["prompt_tokens_details"] = map[string]int{"cached_tokens": c.sq.cached}
	}
	choice := map[string]any{"index": 0, "text": text.String(), "logprobs": nil, "finish_reason": finish, "stop_reason": nil}
	if req.Logprobs != nil {
		choice["logprobs"] = logprobsOf(c.sq.gen, toks, *req.Logprobs, req.ReturnTokensAsTokenIDs)
	}
	if req.ReturnTokenIDs {
		ids := make([]int, n)
		for i, t := range toks {
			ids[i] = t.id
		}
		choice["token_ids"] = ids
		choice["prompt_token_ids"] = promptIDs(c.prompt, c.promptTokens)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": c.id, "object": "text_completion", "created": time.Now().Unix(), "model": c.name,
		"choices": []map[string]any{choice}, "usage": usage})
}

// streamCompletion streams a completion token by token as server-sent
// events, the stream faults hooked in before each token.
func (s *server) streamCompletion(w http.ResponseWriter, r *http.Request, c *completion) {
	req := c.req
	includeUsage := req.StreamOptions != nil && (req.StreamOptions.IncludeUsage == nil || *req.StreamOptions.IncludeUsage)
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		fl.Flush()
	}
	enc := newChunkEncoder(c.id, time.Now().Unix(), c.name, s.stamp)
	n := 0
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	for t := range c.sq.out {
		if t.finish != "abort" {
			n++
		}
		if s.inject(w, r, s.faults.onToken(c.nth, n, min(c.maxTokens, c.stopAt))) {
			return
		}
		if !write(enc.token(t.text, t.finish)) {
			return // client gone; the engine drops the sequence at its next step
		}
	}
	if includeUsage {
		cached := -1
		if s.args.EnablePromptTokensDetails {
			cached = c.sq.cached
		}
		write(enc.usage(c.promptTokens, n, cached))
	}
	write([]byte("data: [DONE]\n\n"))
}

func (s *server) handleRPC(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Method *string `json:"method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", "JSON decode error: "+err.Error())
		return
	}
	if body.Method == nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", "Missing 'method' in request body")
		return
	}
	if *body.Method != "reload_weights" {
		writeError(w, http.StatusInternalServerError, "InternalServerError", fmt.Sprintf("'Worker' object has no attribute '%s'", *body.Method))
		return
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	asleep := s.weightsAsleep
	s.mu.Unlock()
	if asleep {
		writeError(w, http.StatusInternalServerError, "InternalServerError", "reload_weights: the weight pool is asleep; call /wake_up?tags=weights first")
		return
	}
	s.log.Printf("Reloading weights inplace...")
	if !s.slowOp(r.Context(), "reload") || !s.clock.sleep(r.Context(), s.phys.Reload()) {
		return
	}
	if s.dev.real != nil && !s.faults.NoReload { // the checkpoint's bytes, written on the device
		if err := s.dev.real.fillWeights(); err != nil {
			writeError(w, http.StatusInternalServerError, "InternalServerError", fmt.Sprintf("reload_weights: %v", err))
			return
		}
	}
	s.mu.Lock()
	s.weightsValid = !s.faults.NoReload
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"results": []any{nil}})
}

// target is what the server's state asks the device to hold.
func (s *server) target() poolState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := poolState{
		extra:   uint64(float64(s.sleeps) * s.faults.LeakPerCycleMiB * (1 << 20)),
		weights: !s.weightsAsleep || (s.level != 0 && s.faults.NoRelease),
		kv:      !s.kvAsleep,
		level:   s.level,
	}
	if s.commMapped {
		st.extra += s.phys.ExtraResidualBytes
		if s.commSuspended {
			st.extra -= s.phys.SuspendBytes
		}
	}
	if s.graphOffloaded {
		st.graphOff = s.phys.GraphPoolBytes
	}
	return st
}

// used is the device memory this process holds now.
func (s *server) used() uint64 {
	st := s.target()
	u := s.phys.ContextBytes() + st.extra - st.graphOff
	if st.weights {
		u += s.phys.WeightBytes()
	}
	if st.kv {
		u += s.phys.KVBytes
	}
	return u
}

// publishLater publishes the device state after d (fault late-release),
// replacing a publish still pending; nothing once the server has closed.
func (s *server) publishLater(d time.Duration) {
	s.lateMu.Lock()
	defer s.lateMu.Unlock()
	if s.closed {
		return
	}
	if s.late != nil {
		s.late.Stop()
	}
	s.late = time.AfterFunc(d, func() {
		s.lateMu.Lock()
		defer s.lateMu.Unlock()
		if !s.closed {
			s.publish()
		}
	})
}

// close stops a pending late publish for good: the server is going away.
func (s *server) close() {
	s.lateMu.Lock()
	defer s.lateMu.Unlock()
	s.closed = true
	if s.late != nil {
		s.late.Stop()
	}
}

// publish makes the device show the server's state: its simulated GPUs' process entries, or
// in real-device mode the pools it holds on the real one (an error there is logged and
// returned: a wake that cannot allocate fails).
func (s *server) publish() error {
	s.dev.mu.Lock() // the state and the publish as one: a later state is never overwritten by an earlier
	defer s.dev.mu.Unlock()
	var err error
	if s.dev.real != nil {
		err = s.dev.real.apply(s.target())
	} else {
		err = s.dev.publish(s.used())
	}
	if err != nil {
		err = fmt.Errorf("device memory: %w", err)
		s.log.Printf("ERROR %v", err)
	}
	return err
}

// device is the server's simulated GPUs: one per rank.
type device struct {
	ranks []*rank
	info  simgpu.Device // rank 0's GPU (the product every rank runs on)
	// real holds the server's memory on a real GPU in real-device mode (VLLMSIM_DEVICE=cuda),
	// nil on the simulated one.
	real *realPools

	// mu orders publishes (server.publish holds it over reading the state
	// and publishing it): every rank shows the same, latest state.
	mu sync.Mutex
}

// publish records used bytes on every rank's GPU (each rank holds the
// same). Caller holds d.mu.
func (d *device) publish(used uint64) error {
	var errs []error
	for _, r := range d.ranks {
		errs = append(errs, r.publish(used))
	}
	return errors.Join(errs...)
}

// free is the least device memory not held by anyone on any rank's GPU:
// what an allocation every rank makes at once can count on.
func (d *device) free() (uint64, error) {
	each, err := d.freeEach()
	if err != nil {
		return 0, err
	}
	return slices.Min(each), nil
}

// freeEach is each rank's GPU memory not held by anyone.
func (d *device) freeEach() ([]uint64, error) {
	if d.real != nil {
		f, err := d.real.free()
		if err != nil {
			return nil, fmt.Errorf("CUDA device memory: %w", err)
		}
		return []uint64{f}, nil
	}
	out := make([]uint64, len(d.ranks))
	for i, r := range d.ranks {
		var err error
		if out[i], err = r.free(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// prefix is what vLLM's multiprocess executor puts before a worker's log
// lines, as users' logs of it show ("(VllmWorker TP0 pid=720) ERROR …
// [multiproc_executor.py:596]"); "" for one GPU, where vllmsim logs as
// one process.
func (d *device) prefix(i int) string {
	if len(d.ranks) < 2 {
		return ""
	}
	return fmt.Sprintf("(VllmWorker TP%d pid=%d) ", i, d.ranks[i].pid)
}

// stop ends every rank: the device memory of the server is freed.
func (d *device) stop() {
	if d.real != nil {
		d.real.close()
	}
	for _, r := range d.ranks {
		r.stop()
	}
}

var errStartup = errors.New("start-up failed")

// startup walks through vLLM's start: CUDA context, weight load, the
// free-memory check, KV-cache allocation; each step shows on the device.
func (s *server) startup(ctx context.Context, warm bool) error {
	s.weightsAsleep, s.kvAsleep = true, true // nothing of the pools mapped yet
	s.publish()                              // CUDA context (the residual) exists from the first moment
	if err := s.power.starting(); err != nil {
		s.log.Printf("ERROR simulated GPU power: %v", err)
	}
	util := s.args.GPUMemUtilization
	free, err := s.dev.free()
	if err != nil {
		return err
	}
	if want := util * float64(s.dev.info.TotalBytes); float64(free) < want {
		return fmt.Errorf("%w: ValueError: Free memory on device (%.2f/%.2f GiB) on startup is less than desired GPU memory utilization (%.2f, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes",
			errStartup, float64(free)/GiB, float64(s.dev.info.TotalBytes)/GiB, util, want/GiB)
	}
	// NCCL's buffers (and fault tp-residual's) come after the check, with
	// the workers' distributed set-up.
	s.mu.Lock()
	s.commMapped = true
	s.mu.Unlock()
	s.publish()
	load := s.phys.LoadWeights()
	if !s.slowOp(ctx, "start") || !s.clock.sleep(ctx, 0.3*s.phys.StartCost(warm)) || !s.clock.sleep(ctx, load) {
		return ctx.Err()
	}
	if s.faults.CrashAtStart {
		return fmt.Errorf("%w: injected fault crash-at-start: RuntimeError: Engine core initialization failed", errStartup)
	}
	if s.faults.StartHang {
		s.log.Printf("injected fault start-hang: start-up stops here")
		<-ctx.Done()
		return ctx.Err()
	}
	s.mu.Lock()
	s.weightsAsleep = false
	s.mu.Unlock()
	if err := s.publish(); err != nil && s.dev.real != nil {
		return fmt.Errorf("%w: %v", errStartup, err)
	}
	if s.dev.real != nil { // the checkpoint's bytes, written on the device
		if err := s.dev.real.fillWeights(); err != nil {
			return fmt.Errorf("%w: %v", errStartup, err)
		}
	}
	s.syncPower()
	// vLLM's gpu_model_runner line: wakebench reads the weight size from it.
	s.log.Printf("Model loading took %.4f GiB and %.6f seconds", float64(s.phys.WeightBytes())/GiB, load*s.clock.scale)
	if !s.clock.sleep(ctx, 0.7*s.phys.StartCost(warm)) {
		return ctx.Err()
	}
	// vLLM's backends.py lines: wakebench reads whether a start compiled.
	if took := 0.7 * s.phys.StartCost(warm) * s.clock.scale; warm {
		s.log.Printf("Directly load the compiled graph(s) for dynamic shape from the cache, took %.3f s", took)
	} else {
		s.log.Printf("Compiling a graph for dynamic shape takes %.2f s", took)
	}
	// vLLM's gpu_model_runner capture_model line (after the compile and
	// the KV cache's sizing, as vLLM's start runs them): wakebench reads the
	// graph pool's size from it (--sleep-mode-offload-cudagraph backs it up).
	if s.phys.GraphBytes > 0 {
		s.log.Printf("Graph capturing finished in %.0f secs, took %.2f GiB", 0.3*s.phys.StartCost(warm)*s.clock.scale, float64(s.phys.GraphBytes)/GiB)
	}
	if free, err := s.dev.free(); err != nil {
		return err
	} else if free < s.phys.KVBytes {
		return fmt.Errorf("%w: CUDA out of memory allocating the KV cache (%.2f GiB, %.2f GiB free)", errStartup, float64(s.phys.KVBytes)/GiB, float64(free)/GiB)
	}
	s.mu.Lock()
	s.kvAsleep = false
	s.weightsValid = true
	s.mu.Unlock()
	if err := s.publish(); err != nil && s.dev.real != nil {
		return fmt.Errorf("%w: %v", errStartup, err)
	}
	s.log.Printf("Available KV cache memory: %.2f GiB", float64(s.phys.KVBytes)/GiB)
	return nil
}

// engineAdapter is the adapter the engine runs a request to adapter
// under (its prefix-cache blocks): "" after a wake with fault
// adapter-ignored-after-wake.
func (s *server) engineAdapter(adapter string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.woken && s.faults.AdapterIgnoredAfterWake {
		return ""
	}
	return adapter
}

// generator is the output of prompt through adapter ("" for the base model)
// in the server's present state: "!" from uninitialised weights, and after
// a wake the corruption faults.
func (s *server) generator(prompt, adapter string) generator {
	s.mu.Lock()
	valid, woken := s.weightsValid, s.woken
	s.mu.Unlock()
	if woken && s.faults.LoRAIgnored {
		adapter = ""
	}
	g := newGenerator(prompt, adapter, valid)
	g.poison = !valid && s.poisonPages
	if woken {
		g.divergeFrom, g.drift, g.flipTie = s.faults.DivergeAfterWake, s.faults.LogprobDrift, s.faults.TieFlipAfterWake
	}
	return g
}

// logprobsOf is a non-streamed choice's "logprobs" (vLLM's
// CompletionLogProbs) for the generated tokens, with k alternatives each;
// asIDs writes every token as "token_id:N" (return_tokens_as_token_ids).
func logprobsOf(g generator, toks []token, k int, asIDs bool) map[string]any {
	name := func(t genToken) string {
		if asIDs {
			return "token_id:" + strconv.Itoa(t.id)
		}
		return t.text
	}
	offsets, lps, names, tops := []int{}, []float64{}, []string{}, []map[string]float64{}
	off := 0
	for i, t := range toks {
		offsets, lps, names = append(offsets, off), append(lps, t.logprob), append(names, name(t.genToken))
		off += len(t.text)
		top := map[string]float64{}
		for _, a := range g.top(i, max(k, 1)) {
			top[name(a)] = a.logprob
		}
		tops = append(tops, top)
	}
	return map[string]any{"text_offset": offsets, "token_logprobs": lps, "tokens": names, "top_logprobs": tops}
}

// promptIDs are stand-in ids of a prompt's n tokens.
func promptIDs(prompt string, n int) []int {
	g := newGenerator(prompt, "", true)
	ids := make([]int, n)
	for i := range ids {
		ids[i] = int(mix(g.seed^0x5bd1e995, i) % uint64(len(words)))
	}
	return ids
}

// pyList writes tags as Python prints a list of strings: ['weights', 'kv_cache'].
func pyList(tags []string) string {
	q := make([]string, len(tags))
	for i, t := range tags {
		q[i] = "'" + t + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}
