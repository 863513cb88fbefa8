// Package gate decides PASS or FAIL: pure functions from a phase's
// measurements and the config's thresholds to record.Checks, and the
// regression gate that judges a run against baseline runs (their per-run
// medians, a history's change points, or one run's noise floor). It
// records nothing itself and reads the one benchfmt reader
// (ReadBench) that the regression gate and make perf share.
package gate

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// Evaluate compares value with limit by op: "<=", ">=", "==", or "within"
// (a change in percent no further than limit from zero either way).
func Evaluate(name, model string, value float64, op string, limit float64) record.Check {
	var ok bool
	switch op {
	case "<=":
		ok = value <= limit
	case ">=":
		ok = value >= limit
	case "==":
		ok = value == limit
	case "within":
		ok = value >= -limit && value <= limit
	default:
		panic("gate.Evaluate: unknown op " + op)
	}
	c := record.Check{Name: name, Model: model, Value: value, Op: op, Limit: limit, Verdict: "PASS"}
	if !ok {
		c.Verdict = "FAIL"
	}
	return c
}

// Restart: every planned start happened.
func Restart(cfg config.Config, label string, rs []record.Restart) []record.Check {
	return []record.Check{Evaluate("restart.starts", label, float64(len(rs)), "==", float64(1+cfg.Protocol.RestartWarm))}
}

// Serve: failed requests within max_failed_requests, and rounds with a
// failed request no more than the failures allowed (each can spoil one
// round: with the default 0, every round must pass), per concurrency.
func Serve(cfg config.Config, label string, runs []record.PerfRun) []record.Check {
	limit := cfg.ThresholdsFor(label).MaxFailedRequests
	var out []record.Check
	for _, r := range runs {
		out = append(out,
			Evaluate(fmt.Sprintf("%s.conc%d.failed_requests", r.Stage, r.Concurrency), label,
				float64(r.Planned-r.Success), "<=", float64(limit)),
			Evaluate(fmt.Sprintf("%s.conc%d.rounds_passed", r.Stage, r.Concurrency), label, float64(r.RoundsPassed), ">=", float64(max(0, r.Rounds-limit))))
	}
	return out
}

// AfterWake is Serve's checks plus, when min_after_wake_tps_ratio is set,
// the median tok/s of stage (record.PhaseAfterWake, PhaseAfterWakeL2: a serving stage is its phase's name) against
// the baseline's (from all, the model's serving runs so far) for each
// concurrency that has a baseline.
func AfterWake(cfg config.Config, label, stage string, runs, all []record.PerfRun) []record.Check {
	out := Serve(cfg, label, runs)
	min := cfg.ThresholdsFor(label).MinAfterWakeTPSRatio
	if min == 0 {
		return out
	}
	base := map[int]float64{}
	for _, p := range all {
		if s, err := stats.Summarize(p.RoundTPS); err == nil && p.Stage == record.PhaseBaseline {
			base[p.Concurrency] = s.Median
		}
	}
	for _, r := range runs {
		aw, err := stats.Summarize(r.RoundTPS)
		if b, ok := base[r.Concurrency]; ok && err == nil && b > 0 {
			out = append(out, Evaluate(fmt.Sprintf("%s.conc%d.tps_ratio", stage, r.Concurrency), label, aw.Median/b, ">=", min))
		}
	}
	return out
}

// Sleep: every cycle succeeded; wake → first token p95, residual median
// and (level 1) the median share released (release: every level-1 release
// of the model so far, as Release judges it) within their limits when set.
func Sleep(cfg config.Config, label string, level int, cycles []record.Cycle, release []float64) []record.Check {
	t := cfg.ThresholdsFor(label)
	planned, maxFTT := cfg.Protocol.SleepL1Cycles, t.MaxL1WakeToFirstTokenS
	if level == 2 {
		planned, maxFTT = cfg.Protocol.SleepL2Cycles, t.MaxL2WakeToFirstTokenS
	}
	prefix := fmt.Sprintf("sleep.level%d", level)
	var ftt, resid, worstGPU []float64
	for _, c := range cycles {
		if c.OK {
			ftt = append(ftt, c.ToFirstTokenS)
			if c.ResidualGiB == c.ResidualGiB { // not NaN
				resid = append(resid, c.ResidualGiB)
			}
			if len(c.ResidualPerGPU) > 1 {
				worstGPU = append(worstGPU, slices.Max(c.ResidualPerGPU))
			}
		}
	}
	out := []record.Check{Evaluate(prefix+".successful_cycles", label, float64(len(ftt)), "==", float64(planned))}
	if s, err := stats.Summarize(ftt); err == nil && maxFTT > 0 {
		out = append(out, Evaluate(prefix+".to_first_token_s.p95", label, s.P95, "<=", maxFTT))
	}
	// A memory median against its limit (key), when set; not evaluated when
	// cycles succeeded but left no figure.
	median := func(name string, xs []float64, op string, limit float64, key string) {
		if limit <= 0 {
			return
		}
		if s, err := stats.Summarize(xs); err == nil {
			out = append(out, Evaluate(name, label, s.Median, op, limit))
		} else if len(ftt) > 0 {
			out = append(out, notEvaluated(cfg, name, label, op, limit, key))
		}
	}
	// A model across n GPUs (--tensor-parallel-size n) keeps a CUDA
	// context (and NCCL's buffers) on each: max_residual_gib is per GPU it
	// spans (a healthy TP 4 run of vLLM 0.13 kept 1.14 GB on each,
	// vllm#32714). Not per GPU of the run: a model on one of two GPUs is
	// held to the limit as it is.
	gpus := 1
	if m, ok := cfg.Model(label); ok {
		if tp, ok := config.TensorParallel(m.ExtraArgs); ok && tp > 1 {
			gpus = tp
		}
	}
	median(prefix+".residual_gib.median", resid, "<=", t.MaxResidualGiB*float64(gpus), "max_residual_gib")
	if len(worstGPU) > 0 { // a model across GPUs (one GPU has no per-GPU figure)
		median(prefix+".residual_gib_per_gpu.max.median", worstGPU, "<=", t.MaxResidualGiBPerGPU, "max_residual_gib_per_gpu")
	}
	if level == 1 {
		out = append(out, Release(cfg, label, release, len(ftt) > 0)...)
	}
	var engines []*record.Engine
	for _, c := range cycles {
		if c.OK {
			engines = append(engines, c.Engine)
		}
	}
	return append(out, EngineAgreement(prefix, label, engines)...)
}

// Release: the median share of the model's memory released by its
// level-1 sleeps (release: every one measured so far, the figure the
// report's memory.l1_release_fraction summarises) ≥ min_l1_release_percent
// when set. With no figure it is NOT EVALUATED if slept (a level-1 sleep
// succeeded), else not given at all.
func Release(cfg config.Config, label string, release []float64, slept bool) []record.Check {
	const name, op = "memory.l1_release_fraction.median", ">="
	limit := cfg.ThresholdsFor(label).MinL1ReleasePercent
	if limit <= 0 {
		return nil
	}
	if s, err := stats.Summarize(release); err == nil {
		return []record.Check{Evaluate(name, label, s.Median, op, limit)}
	}
	if slept {
		return []record.Check{notEvaluated(cfg, name, label, op, limit, "min_l1_release_percent")}
	}
	return nil
}

// Pause: the level-0 cycles, or the KV-only release cycles (level
// record.LevelKVRelease), as Sleep has the others: every cycle succeeded
// and the p95 of wake → first token within its limit when set; where the
// server lacks the endpoints (off says why) the count is NOT EVALUATED,
// not failed. The KV release also needs vLLM to have refused a release
// without a pause, level 0 a /pause that held a request until /resume
// (confirmed).
func Pause(cfg config.Config, label string, level int, cycles []record.Cycle, off string, confirmed bool) []record.Check {
	t := cfg.ThresholdsFor(label)
	prefix, planned, maxFTT := "sleep.level0", cfg.Protocol.SleepL0Cycles, t.MaxL0WakeToFirstTokenS
	if level == record.LevelKVRelease {
		prefix, planned, maxFTT = "kv_release", cfg.Protocol.KVReleaseCycles, t.MaxKVWakeToFirstTokenS
	}
	if planned == 0 {
		return nil
	}
	if off != "" {
		out := []record.Check{{Name: prefix + ".successful_cycles", Model: label, Op: "==", Limit: float64(planned),
			Verdict: record.NotEvaluated, Reason: off}}
		key := map[string]string{"sleep.level0": "max_l0_wake_to_first_token_s", "kv_release": "max_kv_wake_to_first_token_s"}[prefix]
		if maxFTT > 0 && cfg.ThresholdSetByUser(label, key) { // the user's limit is not dropped: required, unevaluated
			out = append(out, record.Check{Name: prefix + ".to_first_token_s.p95", Model: label, Op: "<=", Limit: maxFTT,
				Verdict: record.NotEvaluated, Reason: off, Required: true})
		}
		return out
	}
	var ftt []float64
	for _, c := range cycles {
		if c.OK {
			ftt = append(ftt, c.ToFirstTokenS)
		}
	}
	out := []record.Check{Evaluate(prefix+".successful_cycles", label, float64(len(ftt)), "==", float64(planned))}
	if level == record.LevelKVRelease {
		out = append(out, Evaluate(prefix+".refused_without_pause", label, b2f(confirmed), "==", 1))
		// A release that freed nothing did not release: at least half the
		// KV cache vLLM was given (--kv-cache-memory-bytes = kv_gib).
		var freed []float64
		for _, c := range cycles {
			if c.OK && !math.IsNaN(c.FreedGiB) {
				freed = append(freed, c.FreedGiB)
			}
		}
		name, limit := prefix+".freed_gib.median", cfg.Protocol.KVGiB/2
		if s, err := stats.Summarize(freed); err == nil {
			out = append(out, Evaluate(name, label, s.Median, ">=", limit))
		} else if len(ftt) > 0 {
			_, none := memoryRequired(cfg, label, name) // the limit is half of protocol.kv_gib: only the "memory": "none" reason is taken
			out = append(out, record.Check{Name: name, Model: label, Op: ">=", Limit: limit, Verdict: record.NotEvaluated,
				Reason: cmp.Or(none, "no figure: memory was not sampled, or could not be attributed to the model (see memory.note)")})
		}
	} else {
		out = append(out, Evaluate(prefix+".pause_resume_held_a_request", label, b2f(confirmed), "==", 1))
	}
	if s, err := stats.Summarize(ftt); err == nil && maxFTT > 0 {
		out = append(out, Evaluate(prefix+".to_first_token_s.p95", label, s.P95, "<=", maxFTT))
	}
	return out
}

// Unverified is the check of a model whose sleep-mode verifications after
// a sleep or wake (no resource left unknown, no operation hung) could not
// all be made, its /metrics unreadable (why, in the order tried): NOT
// EVALUATED with the reason, and required, so that a hung operation a
// broken /metrics hides is never a silent PASS.
func Unverified(label string, why []string) record.Check {
	reason := fmt.Sprintf("%d sleep-mode verification(s) could not be made; first: %s", len(why), why[0])
	return record.Check{Name: "engine.verified", Model: label, Op: "==", Limit: 0, Verdict: record.NotEvaluated, Reason: reason, Required: true}
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// notEvaluated is the check of a threshold whose figure is absent (no
// memory source, or none that could attribute memory to the model): it
// fails the run only when the user set the threshold (key) on a run that
// has a memory source (memoryRequired).
func notEvaluated(cfg config.Config, name, label, op string, limit float64, key string) record.Check {
	required, why := memoryRequired(cfg, label, key)
	return record.Check{Name: name, Model: label, Op: op, Limit: limit, Verdict: record.NotEvaluated,
		Reason: cmp.Or(why, "no figure: memory was not sampled, or could not be attributed to the model (see memory.note)"), Required: required}
}

// memoryRequired says whether a threshold whose figure needs a memory
// source (GPU memory, the energy counter) fails the run when it could not
// be evaluated: where the user set it (key), unless the config itself says
// there is no memory source ("memory": "none", a runner without NVML). A
// threshold set in a config shared with NVML runners is then not
// evaluated, and why says so and what to change, rather than failing a
// run that was told it cannot measure memory (issue 47).
func memoryRequired(cfg config.Config, label, key string) (required bool, why string) {
	if cfg.Memory == "none" {
		return false, fmt.Sprintf(`no figure: the config says "memory": "none", so no GPU memory or power is measured and %s is not evaluated; set "memory": "nvml" on a runner with the NVIDIA driver to evaluate it`, key)
	}
	return cfg.ThresholdSetByUser(label, key), ""
}

// Switch: every handoff succeeded; switch → first token p95 per direction
// within its limit when set.
func Switch(cfg config.Config, handoffs []record.Handoff) []record.Check {
	ok := 0
	byDir := map[string][]float64{}
	engines := map[string][]*record.Engine{}
	for _, ho := range handoffs {
		if ho.Initial || !ho.OK {
			continue
		}
		ok++
		k := record.DirectionKey(ho.From, ho.To)
		byDir[k] = append(byDir[k], ho.ToFirstTokenS)
		engines[k] = append(engines[k], ho.Engine)
	}
	out := []record.Check{Evaluate("switch.successful_handoffs", "", float64(ok), "==", float64(cfg.Protocol.Handoffs))}
	if limit := cfg.Thresholds.MaxSwitchToFirstTokenS; limit > 0 {
		for _, k := range slices.Sorted(maps.Keys(byDir)) {
			s, _ := stats.Summarize(byDir[k])
			out = append(out, Evaluate("switch."+k+".to_first_token_s.p95", "", s.P95, "<=", limit))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(engines)) {
		out = append(out, EngineAgreement("switch."+k, "", engines[k])...)
	}
	return out
}
