package protocol

import (
	"cmp"
	"fmt"
	"math"
	"strings"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// The checks the phases here share: a replay's, the engine's account, the
// level-1 release, a memory figure not evaluated, a crowded machine's note.

// l1ReleaseChecks: the median share of the model's memory released by its
// level-1 sleeps (release: every one measured so far, the figure the
// report's memory.l1_release_fraction summarises) ≥ min_l1_release_percent
// when set. With no figure it is NOT EVALUATED if slept (a level-1 sleep
// succeeded), else not given at all.
func l1ReleaseChecks(cfg config.Config, label string, release []float64, slept bool) []record.Check {
	const name, op = "memory.l1_release_fraction.median", ">="
	limit := cfg.ThresholdsFor(label).MinL1ReleasePercent
	if limit <= 0 {
		return nil
	}
	if s := record.Summary(release); s.N > 0 {
		return []record.Check{record.Evaluate(name, label, s.Median, op, limit)}
	}
	if slept {
		return []record.Check{notEvaluated(cfg, name, label, op, limit, "min_l1_release_percent")}
	}
	return nil
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
// has a memory source (MemoryRequired).
func notEvaluated(cfg config.Config, name, label, op string, limit float64, key string) record.Check {
	required, why := MemoryRequired(cfg, label, key)
	return record.Check{Name: name, Model: label, Op: op, Limit: limit, Verdict: record.NotEvaluated,
		Reason: cmp.Or(why, "no figure: memory was not sampled, or could not be attributed to the model (see memory.note)"), Required: required}
}

// MemoryRequired says whether a threshold whose figure needs a memory
// source (GPU memory, the energy counter) fails the run when it could not
// be evaluated: where the user set it (key), unless the config itself says
// there is no memory source ("memory": "none", a runner without NVML). A
// threshold set in a config shared with NVML runners is then not
// evaluated, and why says so and what to change, rather than failing a
// run that was told it cannot measure memory (issue 47).
func MemoryRequired(cfg config.Config, label, key string) (required bool, why string) {
	if cfg.Memory == "none" {
		return false, fmt.Sprintf(`no figure: the config says "memory": "none", so no GPU memory or power is measured and %s is not evaluated; set "memory": "nvml" on a runner with the NVIDIA driver to evaluate it`, key)
	}
	return cfg.ThresholdSetByUser(label, key), ""
}

// replayChecks: no probe replayed at stage diverged from the model's
// reference (every mismatching probe counts); nil when nothing was replayed.
func replayChecks(label, stage string, replays []record.Replay) []record.Check {
	n, bad := 0, 0
	for _, rp := range replays {
		if rp.Stage == stage && rp.Err == "" {
			n++
			bad += rp.Mismatches()
		}
	}
	if n == 0 {
		return nil
	}
	return []record.Check{record.Evaluate("correctness."+stage+".mismatches", label, float64(bad), "==", 0)}
}

// disagreements compares a server's own account of one sleep and wake (e)
// with the harness's: the HTTP times of the sleep (httpSleep: /sleep, or
// a KV-only release cycle's /release_kv_cache_memory) and of the wake, and
// the GiB the sleep released (NaN when unknown). Times: the engine's part
// of a call cannot be longer than the call (beyond 10 ms), and the log's
// time, the inner part, not longer than the metric's (beyond tol percent
// and 10 ms). Memory: freed and released may differ by tol percent or
// 0.1 GiB, whichever is more.
func disagreements(e *record.Engine, httpSleep, httpWake, released, tolPct float64) []string {
	const slackS, slackGiB = 0.010, 0.1
	var out []string
	longer := func(what string, inner, outer float64, pct float64, outerName string) {
		if math.IsNaN(inner) || math.IsNaN(outer) {
			return
		}
		if inner > outer*(1+pct/100)+slackS {
			out = append(out, fmt.Sprintf("%s %.3fs is longer than %s %.3fs", what, inner, outerName, outer))
		}
	}
	longer("engine log: sleep", e.SleepS, httpSleep, 0, "the /sleep call")
	longer("engine log: wake", e.WakeS, httpWake, 0, "the wake calls")
	longer("metric: sleep", e.MetricSleepS, httpSleep, 0, "the /sleep call")
	longer("metric: release", e.MetricReleaseS, httpSleep, 0, "the /release_kv_cache_memory call")
	longer("metric: wake", e.MetricWakeS, httpWake, 0, "the wake calls")
	longer("engine log: sleep", e.SleepS, e.MetricSleepS, tolPct, "the metric's")
	longer("engine log: wake", e.WakeS, e.MetricWakeS, tolPct, "the metric's")
	if !math.IsNaN(e.FreedGiB) && !math.IsNaN(released) {
		if d := math.Abs(e.FreedGiB - released); d > max(slackGiB, tolPct/100*released) {
			out = append(out, fmt.Sprintf("engine log: freed %.2f GiB, the harness measured %.2f GiB released", e.FreedGiB, released))
		}
	}
	return out
}

// engineAgreement: no cycle at prefix ("sleep.level1", "soak") where the
// server's account disagreed with the harness's; nil when the server
// reported nothing (no log lines, no metric).
func engineAgreement(prefix, label string, engines []*record.Engine) []record.Check {
	seen, bad := 0, 0
	for _, e := range engines {
		if e == nil {
			continue
		}
		seen++
		if len(e.Disagreements) > 0 {
			bad++
		}
	}
	if seen == 0 {
		return nil
	}
	return []record.Check{record.Evaluate(prefix+".engine_disagreements", label, float64(bad), "==", 0)}
}

// BusyOthersPct is the share of the machine's CPU (percent of all its
// cores) that processes outside the run took over a phase window beyond
// which a failed speed ratio says the machine was crowded (NoteCrowded).
const BusyOthersPct = 25

// NoteCrowded adds to each failed check of cs whose name ends in suffix
// (a speed ratio: ".tps_ratio") what the machine did during the windows
// it compares (names: e.g. "A-after-wake", "A-baseline"), where other
// processes took at least BusyOthersPct of the CPU in one of them: the
// ratio may be the machine's, not the server's. The verdict stands (a
// threshold judges the run it was given); the reason says why it may
// not be the code's.
func NoteCrowded(cs []record.Check, suffix string, windows map[string]record.Window, names ...string) []record.Check {
	var parts []string
	busy := false
	for _, n := range names {
		w, ok := windows[n]
		if !ok || w.Host == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%.0f %% during %s", w.Host.OthersCPUPct, n))
		busy = busy || w.Host.OthersCPUPct >= BusyOthersPct
	}
	if !busy {
		return cs
	}
	note := fmt.Sprintf("other processes took %s of the machine's CPU: the ratio may be the machine's, not the server's; rerun on a quieter runner", strings.Join(parts, " and "))
	for i, c := range cs {
		if c.Verdict == "FAIL" && strings.HasSuffix(c.Name, suffix) {
			cs[i].Reason = strings.TrimPrefix(c.Reason+"; "+note, "; ")
		}
	}
	return cs
}
