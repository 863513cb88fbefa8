package gate

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// Correctness: no probe replayed at stage diverged from the model's
// reference (every mismatching probe counts); nil when nothing was replayed.
func Correctness(label, stage string, replays []record.Replay) []record.Check {
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
	return []record.Check{Evaluate("correctness."+stage+".mismatches", label, float64(bad), "==", 0)}
}

// Disagreements compares a server's own account of one sleep and wake (e)
// with the harness's: the HTTP times of the sleep (httpSleep: /sleep, or
// a KV-only release cycle's /release_kv_cache_memory) and of the wake, and
// the GiB the sleep released (NaN when unknown). Times: the engine's part
// of a call cannot be longer than the call (beyond 10 ms), and the log's
// time, the inner part, not longer than the metric's (beyond tol percent
// and 10 ms). Memory: freed and released may differ by tol percent or
// 0.1 GiB, whichever is more.
func Disagreements(e *record.Engine, httpSleep, httpWake, released, tolPct float64) []string {
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

// EngineAgreement: no cycle at prefix ("sleep.level1", "soak") where the
// server's account disagreed with the harness's; nil when the server
// reported nothing (no log lines, no metric).
func EngineAgreement(prefix, label string, engines []*record.Engine) []record.Check {
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
	return []record.Check{Evaluate(prefix+".engine_disagreements", label, float64(bad), "==", 0)}
}

// Soak: every planned cycle succeeded; each model's residual grows by no
// more than max_residual_growth_mib_per_cycle (the fitted slope; not
// evaluated for a model with fewer than 3 residuals); the engine's account
// agrees.
func Soak(cfg config.Config, cycles []record.SoakCycle) []record.Check {
	ok := 0
	var engines = map[string][]*record.Engine{}
	for _, c := range cycles {
		if c.OK {
			ok++
			engines[c.From] = append(engines[c.From], c.Engine)
		}
	}
	out := []record.Check{Evaluate("soak.successful_cycles", "", float64(ok), "==", float64(cfg.Protocol.SoakCycles))}
	residuals := record.ResidualSeriesMiB(cycles)
	for _, l := range slices.Sorted(maps.Keys(engines)) {
		limit := cfg.ThresholdsFor(l).MaxResidualGrowthMiBPerCycle
		if limit > 0 {
			if tr, err := stats.FitTrend(residuals[l]); err == nil {
				out = append(out, Evaluate("soak.residual_growth_mib_per_cycle", l, tr.Slope, "<=", limit))
			} else {
				c := notEvaluated(cfg, "soak.residual_growth_mib_per_cycle", l, "<=", limit, "max_residual_growth_mib_per_cycle")
				if _, none := memoryRequired(cfg, l, "max_residual_growth_mib_per_cycle"); none == "" { // else it says "memory": "none"
					c.Reason = "no trend: fewer than 3 residuals of the model (memory not sampled or not attributed, or too few cycles)"
				}
				out = append(out, c)
			}
		}
		out = append(out, EngineAgreement("soak", l, engines[l])...)
	}
	return out
}
