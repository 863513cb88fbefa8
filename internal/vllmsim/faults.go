package vllmsim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
)

// EnvFaults names the environment variable holding the faults to inject.
const EnvFaults = "VLLMSIM_FAULTS"

// Faults are failures vllmsim injects on demand, each one seen in real vLLM.
// VLLMSIM_FAULTS is a comma-separated list of:
//
//	crash-at-start         exit 1 halfway through start-up
//	start-hang             start-up never finishes (a stuck compile or NCCL init): /health never answers
//	crash-after=N          exit 3 when the Nth completion request arrives
//	crash-mid-stream=N     the Nth completion stream stops after 2 tokens and the process exits
//	truncate-stream=N      the Nth stream ends without [DONE]; the server lives on
//	error-status=N:CODE    the Nth completion is answered with HTTP CODE
//	error-event=N          the Nth stream carries an error event after 1 token
//	stall-stream=N:S       the Nth stream stalls S seconds (not scaled) after its first token
//	delay=PATH:S           every request to PATH (e.g. /wake_up, /is_sleeping, /version,
//	                       /health) is answered S seconds (not scaled) later, as a busy
//	                       API server would; several delay items may be given
//	wake-fail[=N]          /wake_up answers 500 CUDA out of memory (every time, or the Nth)
//	wake-hang[=N]          /wake_up never answers (every time, or the Nth)
//	no-reload              reload_weights answers 200 but loads nothing (level-2 garbage)
//	prefix-reset-false[=N] /reset_prefix_cache answers {"success": false} (every time, or the first N)
//	no-release             sleep keeps the weights on the device (vLLM 0.14/0.15 regression)
//	late-release=S         the device shows a sleep's release S seconds (not scaled) after
//	                       /sleep answered, not before (vLLM releases before it answers:
//	                       CuMemAllocator.sleep, vllm/device_allocator/cumem.py)
//	asleep-crash           a request while asleep crashes the engine (vLLM before 2026-02):
//	                       the process exits 1
//	inflight-crash         a sleep while requests run crashes the engine (vLLM before
//	                       PR #34528: #15483, #45520, #28714): the process exits 1
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
//	slow-wake=F            every /wake_up takes F times its modelled time; nothing
//	                       else changes (what the regression gate must catch alone)
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
	LateReleaseS     float64
	AsleepCrash      bool
	InFlightCrash    bool
	DivergeAfterWake int
	LoRAIgnored      bool
	LogprobDrift     float64
	SlowDecodeAfter  float64 // slow-decode-after-wake: decode step cost factor after the first wake
	SlowWake         float64 // slow-wake: factor on every wake's modelled time (0: none)
	TieFlipAfterWake bool
	LeakPerCycleMiB  float64

	// Delays: path → seconds added before it is handled (delay=PATH:S).
	Delays map[string]float64

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
		n := func() (int, error) {
			v, err := strconv.Atoi(arg)
			if err != nil || v < 1 {
				return 0, fmt.Errorf("%s: %q: want a request number ≥ 1", name, arg)
			}
			return v, nil
		}
		pair := func() (int, string, error) {
			a, b, ok := strings.Cut(arg, ":")
			v, err := strconv.Atoi(a)
			if !ok || err != nil || v < 1 {
				return 0, "", fmt.Errorf("%s: %q: want N:VALUE", name, arg)
			}
			return v, b, nil
		}
		positive := func() (float64, error) {
			v, err := strconv.ParseFloat(arg, 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("%s: %q: want a number > 0", name, arg)
			}
			return v, nil
		}
		everyOr := func() (int, error) {
			if !hasArg {
				return -1, nil
			}
			return n()
		}
		var err error
		switch name {
		case "crash-at-start":
			f.CrashAtStart = true
		case "start-hang":
			f.StartHang = true
		case "crash-after":
			f.CrashAfter, err = n()
		case "crash-mid-stream":
			f.CrashMidStream, err = n()
		case "truncate-stream":
			f.TruncateStream, err = n()
		case "error-event":
			f.ErrorEvent, err = n()
		case "error-status":
			var code string
			f.ErrorStatusN, code, err = pair()
			if err == nil {
				f.ErrorStatusCode, err = strconv.Atoi(code)
				if err != nil || f.ErrorStatusCode < 400 || f.ErrorStatusCode > 599 {
					err = fmt.Errorf("error-status: %q: want an HTTP status 400-599", code)
				}
			}
		case "stall-stream":
			var secs string
			f.StallStreamN, secs, err = pair()
			if err == nil {
				f.StallStreamS, err = strconv.ParseFloat(secs, 64)
			}
		case "delay":
			path, secs, ok := strings.Cut(arg, ":")
			v, perr := strconv.ParseFloat(secs, 64)
			if !ok || !strings.HasPrefix(path, "/") || perr != nil || !(v > 0) || math.IsInf(v, 0) {
				err = fmt.Errorf("delay: %q: want PATH:SECONDS, PATH starting with / and SECONDS > 0", arg)
				break
			}
			if f.Delays == nil {
				f.Delays = map[string]float64{}
			}
			f.Delays[path] = v
		case "wake-fail":
			f.WakeFail, err = everyOr()
		case "wake-hang":
			f.WakeHang, err = everyOr()
		case "no-reload":
			f.NoReload = true
		case "prefix-reset-false":
			f.PrefixResetFalse, err = everyOr()
		case "no-release":
			f.NoRelease = true
		case "late-release":
			f.LateReleaseS, err = positive()
		case "asleep-crash":
			f.AsleepCrash = true
		case "inflight-crash":
			f.InFlightCrash = true
		case "diverge-after-wake":
			f.DivergeAfterWake, err = n()
		case "lora-ignored":
			f.LoRAIgnored = true
		case "tie-flip-after-wake":
			f.TieFlipAfterWake = true
		case "logprob-drift":
			f.LogprobDrift, err = positive()
		case "slow-decode-after-wake":
			f.SlowDecodeAfter, err = positive()
		case "slow-wake":
			f.SlowWake, err = positive()
		case "leak-per-cycle":
			f.LeakPerCycleMiB, err = positive()
		default:
			err = fmt.Errorf("unknown fault %q", name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvFaults, err)
		}
	}
	return f, nil
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
