package vllmsim

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// EnvFaults names the environment variable holding the faults to inject.
const EnvFaults = "VLLMSIM_FAULTS"

// Faults are failures vllmsim injects on demand, each one seen in real vLLM.
// VLLMSIM_FAULTS is a comma-separated list of:
//
//	crash-at-start         exit 1 halfway through start-up
//	start-hang             start-up never finishes (a stuck compile or NCCL init): /health never answers
//	crash-after=N          exit 3 when the Nth completion request arrives
//	crash-mid-stream=N     the Nth completion stream stops after 2 tokens (before its last, if shorter) and the process exits
//	truncate-stream=N      the Nth stream ends without [DONE] after 2 tokens (before its last, if shorter); the server lives on
//	error-status=N:CODE    the Nth completion is answered with HTTP CODE
//	error-event=N          the Nth stream carries an error event after 1 token (before it, a stream of one)
//	stall-stream=N:S       the Nth stream stalls S seconds (not scaled) after its first token (before it, a stream of one)
//	delay=PATH:S           every request to PATH (e.g. /wake_up, /is_sleeping, /version,
//	                       /health) is answered S seconds (not scaled) later, as a busy
//	                       API server would; several delay items may be given
//	wake-fail[=N]          /wake_up answers 500 CUDA out of memory (every time, or the Nth)
//	wake-hang[=N]          /wake_up never answers (every time, or the Nth)
//	no-reload              reload_weights answers 200 but loads nothing (level-2 garbage)
//	prefix-reset-false[=N] /reset_prefix_cache answers {"success": false} (every time, or the first N)
//	no-release             sleep keeps the weights on the device (vLLM 0.14/0.15 regression)
//	sleep-ignored[=paused] /sleep answers 200 and frees nothing, its log saying "Sleep mode
//	                       freed 0.00 GiB": a server that ignores --enable-sleep-mode;
//	                       /is_sleeping stays false (=paused: the scheduler pauses, so
//	                       /is_sleeping says true and only the log tells)
//	late-release=S         the device shows a sleep's release S seconds (not scaled) after
//	                       /sleep answered, not before (vLLM releases before it answers:
//	                       CuMemAllocator.sleep, vllm/device_allocator/cumem.py)
//	asleep-crash           a request while asleep crashes the engine (vLLM before 2026-02):
//	                       the process exits 1
//	inflight-crash         a sleep while requests run crashes the engine though it
//	                       paused first (#45520; era a crashes so without the
//	                       fault, #28714): the process exits 1
//
// Silent corruption after a wake: every answer is HTTP 200 and plausible
// text, only a replay of a request from before the sleep tells:
//
//	diverge-after-wake=K   after a wake, greedy output differs from the Kth token on
//	                       (hybrid-model state collapse, vLLM PR #44972)
//	lora-ignored           after a wake, requests to a LoRA adapter get the base
//	                       model's answer (the adapter is no longer applied, #53888)
//	logprob-drift=X        after a wake, the same tokens with every logprob X nats
//	                       lower (FP8 KV scales reset, PR #45617, #28783)
//
// Slower for good after a wake: every answer is right, only a comparison
// with the serving of a process that never slept tells:
//
//	slow-decode-after-wake=F  from the process's first wake on, every decode step
//	                       takes F times as long (prefill and the wake itself
//	                       are unchanged)
//	spec-off-after-wake    from the process's first wake after a level-2 sleep on,
//	                       speculative decoding accepts no draft token (the draft
//	                       model not reloaded, #52479): the same tokens,
//	                       acceptance 0, decoding slower
//	adapter-ignored-after-wake  from the first wake on, a LoRA adapter's requests
//	                       run as the base model's (its prefix-cache blocks shared
//	                       with the base model's), the tokens still the adapter's
//	                       (#53888's speed side; lora-ignored is its token side)
//	slow-wake=F            every /wake_up takes F times its modelled time; nothing
//	                       else changes (what the regression gate must catch alone)
//	slow=OP:S              the server's own operation OP takes S seconds (not scaled)
//	                       more, inside the engine's own timing of it (its "It took"
//	                       line and sleep-mode metric): start (start-up, before the
//	                       weights load), prefill (each prefill step), decode (each
//	                       decode step after a sequence's first token: the first
//	                       token is the prefill's), sleep (every level), wake (every
//	                       /wake_up call), reload (reload_weights), pause (/pause),
//	                       release (/release_kv_cache_memory); several may be given.
//	                       delay=PATH:S, by contrast, is the API server answering
//	                       late. The whole-run figure test (figures_test.go) slows
//	                       each operation in turn
//
// Benign, not a fault: numerics after a wake (another batch, another
// kernel split) may reorder two nearly equal candidates; the oracle must
// accept it as a tie, and still catch a drift before it:
//
//	tie-flip-after-wake    after a wake, greedy decoding takes the runner-up at the
//	                       first near-tie (vLLM is not batch-invariant unless
//	                       VLLM_BATCH_INVARIANT=1: docs/features/batch_invariance.md)
//
// Drift over many cycles:
//
//	leak-per-cycle=MiB     every sleep leaves MiB more device memory held (#36651)
//
// The newest sleep API's failure modes (docs/vllm-api.md §3, §7):
//
//	wake-stays-asleep      every /wake_up does its memory work but answers 200
//	                       {"status":"sleeping",…} and leaves the scheduler paused:
//	                       /is_sleeping stays true, vllm:engine_fully_awake 0
//	stuck-op=OP            OP (sleep, wake_up, release_kv_cache_memory) completes and
//	                       answers, but vllm:sleep_mode_operations_in_flight{operation}
//	                       stays 1 afterwards (a hung operation); several may be given
//	errored-op=OP          OP (sleep, wake_up, release_kv_cache_memory) completes and
//	                       answers success, but the server counts it
//	                       vllm:rl_sleep_mode_operations_total{status="error"}
//	                       (eras d and proposed, which count by status)
//	rpc-fail=OP            OP's memory RPC (sleep, wake_up, release_kv_cache_memory) fails: 500, the resources it
//	                       touched become unknown, and every later sleep, wake or KV
//	                       release is a 500 "… unknown … rebuild …" until restart
//	                       (test_failed_rpc_is_unknown); several may be given
//
// Host memory (issue 25):
//
//	host-oom               a level-1 sleep's host allocation (the pinned weight backup)
//	                       fails: the sleep answers 500 EngineDeadError naming host
//	                       memory and the engine dies: the process exits 1 (a full
//	                       host, ls1intum/edutelligence#583)
//
// The harness's own reads:
//
//	metrics-broken=500|garbage  GET /metrics answers HTTP 500, or 200 with a body
//	                       that is not Prometheus text (a broken exporter or proxy):
//	                       nothing the harness verifies from /metrics can be read
type Faults struct {
	CrashAtStart     bool
	StartHang        bool
	CrashAfter       int
	CrashMidStream   int
	TruncateStream   int
	ErrorStatusN     int
	ErrorStatusCode  int
	ErrorEvent       int
	StallStreamN     int
	StallStreamS     float64
	WakeFail         int // -1: every wake
	WakeHang         int // -1: every wake
	NoReload         bool
	PrefixResetFalse int // -1: every reset; N: the first N
	NoRelease        bool
	SleepIgnored     string // sleep-ignored: "on", or sleepIgnoredPaused ("": off)
	LateReleaseS     float64
	AsleepCrash      bool
	InFlightCrash    bool
	DivergeAfterWake int
	LoRAIgnored      bool
	LogprobDrift     float64
	SlowDecodeAfter  float64 // slow-decode-after-wake: decode step cost factor after the first wake
	SlowWake         float64 // slow-wake: factor on every wake's modelled time (0: none)
	TieFlipAfterWake bool
	SpecOffAfterWake bool
	// AdapterIgnoredAfterWake: after a wake an adapter's requests are the
	// base model's to the engine (cache blocks), not to the tokens.
	AdapterIgnoredAfterWake bool
	LeakPerCycleMiB         float64
	// TPResidualGiB (tp-residual=GiB): each rank holds this much more
	// outside the sleep-mode pools, kept on its GPU asleep, as vLLM
	// 0.14/0.15 kept 16 GB a GPU asleep against 1.14 GB on 0.13 on four
	// GPUs (vllm-project/vllm#32714, closed "fixed in nightly").
	TPResidualGiB   float64
	WakeStaysAsleep bool
	StuckOps        map[string]bool // stuck-op: operation (sleep, wake_up, release_kv_cache_memory)
	ErroredOps      map[string]bool // errored-op: operation counted failed though it answered success
	RPCFail         map[string]bool // rpc-fail: operation (sleep, wake_up, release_kv_cache_memory)
	HostOOM         bool            // host-oom: a level-1 sleep's host allocation fails
	MetricsBroken   string          // metrics-broken: "500" or "garbage" ("": /metrics works)

	// Delays: path → seconds added before it is handled (delay=PATH:S).
	Delays map[string]float64
	// Slow: operation (slowOps) → seconds it takes more (slow=OP:S).
	Slow map[string]float64

	completions atomic.Int64
	wakes       atomic.Int64
	resets      atomic.Int64
}

// ParseFaults parses VLLMSIM_FAULTS.
func ParseFaults(s string) (*Faults, error) {
	f := &Faults{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, arg, hasArg := strings.Cut(item, "=")
		parse, ok := faultParsers[name]
		if !ok {
			return nil, fmt.Errorf("%s: unknown fault %q", EnvFaults, name)
		}
		if err := parse(f, faultArg{name: name, arg: arg, has: hasArg}); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvFaults, err)
		}
	}
	return f, nil
}

// faultParsers set each fault's fields from its item, by the fault's name.
// A fault that takes no argument ignores one given.
var faultParsers = map[string]func(*Faults, faultArg) error{
	"crash-at-start":     flagFault(func(f *Faults) *bool { return &f.CrashAtStart }),
	"start-hang":         flagFault(func(f *Faults) *bool { return &f.StartHang }),
	"crash-after":        nthFault(func(f *Faults) *int { return &f.CrashAfter }),
	"crash-mid-stream":   nthFault(func(f *Faults) *int { return &f.CrashMidStream }),
	"truncate-stream":    nthFault(func(f *Faults) *int { return &f.TruncateStream }),
	"error-event":        nthFault(func(f *Faults) *int { return &f.ErrorEvent }),
	"error-status":       parseErrorStatus,
	"stall-stream":       parseStallStream,
	"delay":              parseDelay,
	"slow":               parseSlow,
	"wake-fail":          everyOrNthFault(func(f *Faults) *int { return &f.WakeFail }),
	"wake-hang":          everyOrNthFault(func(f *Faults) *int { return &f.WakeHang }),
	"no-reload":          flagFault(func(f *Faults) *bool { return &f.NoReload }),
	"prefix-reset-false": everyOrNthFault(func(f *Faults) *int { return &f.PrefixResetFalse }),
	"no-release":         flagFault(func(f *Faults) *bool { return &f.NoRelease }),
	"sleep-ignored": func(f *Faults, a faultArg) error {
		switch {
		case !a.has:
			f.SleepIgnored = "on"
		case a.arg == sleepIgnoredPaused:
			f.SleepIgnored = sleepIgnoredPaused
		default:
			return fmt.Errorf("%s: %q: want no argument, or paused", a.name, a.arg)
		}
		return nil
	},
	"late-release":               positiveFault(func(f *Faults) *float64 { return &f.LateReleaseS }),
	"asleep-crash":               flagFault(func(f *Faults) *bool { return &f.AsleepCrash }),
	"inflight-crash":             flagFault(func(f *Faults) *bool { return &f.InFlightCrash }),
	"diverge-after-wake":         nthFault(func(f *Faults) *int { return &f.DivergeAfterWake }),
	"lora-ignored":               flagFault(func(f *Faults) *bool { return &f.LoRAIgnored }),
	"tie-flip-after-wake":        flagFault(func(f *Faults) *bool { return &f.TieFlipAfterWake }),
	"spec-off-after-wake":        flagFault(func(f *Faults) *bool { return &f.SpecOffAfterWake }),
	"adapter-ignored-after-wake": flagFault(func(f *Faults) *bool { return &f.AdapterIgnoredAfterWake }),
	"logprob-drift":              positiveFault(func(f *Faults) *float64 { return &f.LogprobDrift }),
	"slow-decode-after-wake":     positiveFault(func(f *Faults) *float64 { return &f.SlowDecodeAfter }),
	"slow-wake":                  positiveFault(func(f *Faults) *float64 { return &f.SlowWake }),
	"leak-per-cycle":             positiveFault(func(f *Faults) *float64 { return &f.LeakPerCycleMiB }),
	"tp-residual":                positiveFault(func(f *Faults) *float64 { return &f.TPResidualGiB }),
	"wake-stays-asleep":          flagFault(func(f *Faults) *bool { return &f.WakeStaysAsleep }),
	"stuck-op":                   opFault(func(f *Faults) *map[string]bool { return &f.StuckOps }, opSleep, opWakeUp, opReleaseKV),
	"errored-op":                 opFault(func(f *Faults) *map[string]bool { return &f.ErroredOps }, opSleep, opWakeUp, opReleaseKV),
	"rpc-fail":                   opFault(func(f *Faults) *map[string]bool { return &f.RPCFail }, opSleep, opWakeUp, opReleaseKV),
	"host-oom":                   flagFault(func(f *Faults) *bool { return &f.HostOOM }),
	"metrics-broken": func(f *Faults, a faultArg) error {
		if a.arg != "500" && a.arg != "garbage" {
			return fmt.Errorf("%s: %q: want 500 or garbage", a.name, a.arg)
		}
		f.MetricsBroken = a.arg
		return nil
	},
}

// sleepIgnoredPaused is sleep-ignored's argument for a server whose
// scheduler pauses at /sleep (/is_sleeping true) though nothing sleeps.
const sleepIgnoredPaused = "paused"

// The sleep-mode operations faults name (the endpoints' paths).
const (
	opSleep     = "sleep"
	opWakeUp    = "wake_up"
	opReleaseKV = "release_kv_cache_memory"
)

// opFault parses a fault naming one of the operations ops (NAME=OP); each
// item adds one.
func opFault(field func(*Faults) *map[string]bool, ops ...string) func(*Faults, faultArg) error {
	return func(f *Faults, a faultArg) error {
		if !slices.Contains(ops, a.arg) {
			return fmt.Errorf("%s: %q: want one of %s", a.name, a.arg, strings.Join(ops, ", "))
		}
		m := field(f)
		if *m == nil {
			*m = map[string]bool{}
		}
		(*m)[a.arg] = true
		return nil
	}
}

// faultArg is one VLLMSIM_FAULTS item: NAME, or NAME=ARG.
type faultArg struct {
	name, arg string
	has       bool // an =ARG was given
}

// n is the argument as a request number ≥ 1.
func (a faultArg) n() (int, error) {
	v, err := strconv.Atoi(a.arg)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%s: %q: want a request number ≥ 1", a.name, a.arg)
	}
	return v, nil
}

// pair is the argument N:VALUE, N a request number ≥ 1.
func (a faultArg) pair() (int, string, error) {
	x, y, ok := strings.Cut(a.arg, ":")
	v, err := strconv.Atoi(x)
	if !ok || err != nil || v < 1 {
		return 0, "", fmt.Errorf("%s: %q: want N:VALUE", a.name, a.arg)
	}
	return v, y, nil
}

// positive is the argument as a finite number > 0.
func (a faultArg) positive() (float64, error) {
	v, err := strconv.ParseFloat(a.arg, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s: %q: want a number > 0", a.name, a.arg)
	}
	return v, nil
}

// everyOr is -1 (every time) without an argument, else the request number.
func (a faultArg) everyOr() (int, error) {
	if !a.has {
		return -1, nil
	}
	return a.n()
}

// flagFault parses a fault that is on or off.
func flagFault(field func(*Faults) *bool) func(*Faults, faultArg) error {
	return func(f *Faults, _ faultArg) error {
		*field(f) = true
		return nil
	}
}

// nthFault parses a fault that hits the Nth request (NAME=N).
func nthFault(field func(*Faults) *int) func(*Faults, faultArg) error {
	return func(f *Faults, a faultArg) (err error) {
		*field(f), err = a.n()
		return err
	}
}

// everyOrNthFault parses a fault that hits every time (NAME) or the Nth (NAME=N).
func everyOrNthFault(field func(*Faults) *int) func(*Faults, faultArg) error {
	return func(f *Faults, a faultArg) (err error) {
		*field(f), err = a.everyOr()
		return err
	}
}

// positiveFault parses a fault with an amount (NAME=X, X > 0).
func positiveFault(field func(*Faults) *float64) func(*Faults, faultArg) error {
	return func(f *Faults, a faultArg) (err error) {
		*field(f), err = a.positive()
		return err
	}
}

// parseErrorStatus parses error-status=N:CODE.
func parseErrorStatus(f *Faults, a faultArg) error {
	var code string
	var err error
	if f.ErrorStatusN, code, err = a.pair(); err != nil {
		return err
	}
	f.ErrorStatusCode, err = strconv.Atoi(code)
	if err != nil || f.ErrorStatusCode < 400 || f.ErrorStatusCode > 599 {
		return fmt.Errorf("error-status: %q: want an HTTP status 400-599", code)
	}
	return nil
}

// parseStallStream parses stall-stream=N:S.
func parseStallStream(f *Faults, a faultArg) error {
	var secs string
	var err error
	if f.StallStreamN, secs, err = a.pair(); err != nil {
		return err
	}
	f.StallStreamS, err = strconv.ParseFloat(secs, 64)
	return err
}

// parseDelay parses delay=PATH:S; several may be given.
func parseDelay(f *Faults, a faultArg) error {
	return keyedSeconds(&f.Delays, a, func(path string) bool { return strings.HasPrefix(path, "/") },
		"want PATH:SECONDS, PATH starting with / and SECONDS > 0")
}

// The server's own operations slow=OP:S names.
var slowOps = []string{"start", "prefill", "decode", "sleep", "wake", "reload", "pause", "release"}

// parseSlow parses slow=OP:S; several may be given.
func parseSlow(f *Faults, a faultArg) error {
	return keyedSeconds(&f.Slow, a, func(op string) bool { return slices.Contains(slowOps, op) },
		"want OP:SECONDS, OP one of "+strings.Join(slowOps, ", ")+" and SECONDS > 0")
}

// keyedSeconds parses a KEY:SECONDS item into *m (made when nil): KEY as
// valid says, SECONDS finite and above 0; want says what is wanted.
func keyedSeconds(m *map[string]float64, a faultArg, valid func(string) bool, want string) error {
	key, secs, ok := strings.Cut(a.arg, ":")
	v, err := strconv.ParseFloat(secs, 64)
	if !ok || !valid(key) || err != nil || !(v > 0) || math.IsInf(v, 0) {
		return fmt.Errorf("%s: %q: %s", a.name, a.arg, want)
	}
	if *m == nil {
		*m = map[string]float64{}
	}
	(*m)[key] = v
	return nil
}

// slow is how much longer the server's operation op takes (slow=OP:S).
func (f *Faults) slow(op string) time.Duration {
	return time.Duration(f.Slow[op] * float64(time.Second))
}

// nextCompletion counts a completion request and returns its number (from 1).
func (f *Faults) nextCompletion() int { return int(f.completions.Add(1)) }

// resetFails counts a /reset_prefix_cache call and reports whether it
// answers {"success": false}.
func (f *Faults) resetFails() bool {
	n := int(f.resets.Add(1))
	return f.PrefixResetFalse == -1 || n <= f.PrefixResetFalse
}

// nextWake counts a /wake_up call and returns its number (from 1).
func (f *Faults) nextWake() int { return int(f.wakes.Add(1)) }

func hits(rule, n int) bool { return rule == -1 || (rule > 0 && rule == n) }

// The hooks below are the request faults: a handler calls each at a fixed
// point of its request and carries out the action it returns
// (server.inject); with no fault set each returns no action.

// faultKind is what an injected fault does to a request.
type faultKind int

const (
	noFault    faultKind = iota
	crash                // log, then exit the process with code
	answer               // answer HTTP code with vLLM's error body (errType, message)
	endStream            // log, then end the stream without [DONE]
	errorEvent           // send an error event and [DONE], then end the stream
	stall                // log, then hold the stream for stallFor (or until the client goes)
	hang                 // log, then never answer (until the client goes)
)

// faultAction is one injected fault's effect on a request.
type faultAction struct {
	kind     faultKind
	logLine  string // the server's log line, "" for none
	code     int    // crash: the exit code; answer: the HTTP status
	errType  string // answer: the error body's type
	message  string // answer: the error body's message
	stallFor time.Duration
}

// beforeCompletion is the fault, if any, of the nth completion request
// (from 1) before it is validated; asleep: the model sleeps.
func (f *Faults) beforeCompletion(nth int, asleep bool) faultAction {
	switch {
	case nth == f.CrashAfter:
		return faultAction{kind: crash, code: 3, logLine: fmt.Sprintf("ERROR injected fault crash-after=%d: engine core died", nth)}
	case nth == f.ErrorStatusN:
		return faultAction{kind: answer, code: f.ErrorStatusCode, errType: http.StatusText(f.ErrorStatusCode),
			message: fmt.Sprintf("injected fault error-status=%d:%d", nth, f.ErrorStatusCode)}
	case asleep && f.AsleepCrash:
		return faultAction{kind: crash, code: 1, logLine: "ERROR injected fault asleep-crash: CUDA error: an illegal memory access was encountered"}
	}
	return faultAction{}
}

// onToken is the fault, if any, of the nth completion stream before it
// writes a token, tokens the tokens generated so far, this one included,
// of last in all. A fault meant for the stream's second or third token
// acts on its last where the stream is shorter: a stream of one token (a
// probe's) let it pass unfired, and the run PASSed (issue 48).
func (f *Faults) onToken(nth, tokens, last int) faultAction {
	at := func(k int) bool { return tokens == min(k, max(last, 1)) }
	switch {
	case at(3) && nth == f.CrashMidStream:
		return faultAction{kind: crash, code: 3, logLine: fmt.Sprintf("ERROR injected fault crash-mid-stream=%d", nth)}
	case at(3) && nth == f.TruncateStream:
		return faultAction{kind: endStream, logLine: fmt.Sprintf("WARNING injected fault truncate-stream=%d: ending the stream without [DONE]", nth)}
	case at(2) && nth == f.ErrorEvent:
		return faultAction{kind: errorEvent}
	case at(2) && nth == f.StallStreamN:
		return faultAction{kind: stall, stallFor: time.Duration(f.StallStreamS * float64(time.Second)),
			logLine: fmt.Sprintf("WARNING injected fault stall-stream=%d: stalling %gs", nth, f.StallStreamS)}
	}
	return faultAction{}
}

// beforeWake is the fault, if any, of the nth /wake_up call (from 1).
func (f *Faults) beforeWake(nth int) faultAction {
	switch {
	case hits(f.WakeHang, nth):
		return faultAction{kind: hang, logLine: fmt.Sprintf("WARNING injected fault wake-hang: /wake_up #%d will never answer", nth)}
	case hits(f.WakeFail, nth):
		return faultAction{kind: answer, code: http.StatusInternalServerError, errType: "InternalServerError",
			message: "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:163 (injected fault wake-fail)"}
	}
	return faultAction{}
}

// beforeSleep is the fault, if any, of a sleep; busy reports whether
// requests are running (asked only when a fault depends on it).
func (f *Faults) beforeSleep(busy func() bool) faultAction {
	if f.InFlightCrash && busy() {
		return faultAction{kind: crash, code: 1, logLine: "ERROR injected fault inflight-crash: CUDA error: an illegal memory access was encountered"}
	}
	return faultAction{}
}
