package protocol

import (
	"fmt"
	"maps"
	"slices"

	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/stats"
)

// Check evaluates value op limit, records it in the report's checks and returns it.
func (h *Harness) Check(name, model string, value float64, op string, limit float64) report.Check {
	c := report.Evaluate(name, model, value, op, limit)
	h.Rec.Update(func(r *report.Raw) { r.Checks = append(r.Checks, c) })
	return c
}

// RestartChecks: every planned start happened.
func (h *Harness) RestartChecks(label string, rs []report.Restart) []report.Check {
	return []report.Check{h.Check("restart.starts", label, float64(len(rs)), "==", float64(1+h.cfg.Protocol.RestartWarm))}
}

// ServeChecks: failed requests within the limit and every round passed, per concurrency.
func (h *Harness) ServeChecks(label string, runs []report.PerfRun) []report.Check {
	var out []report.Check
	for _, r := range runs {
		out = append(out,
			h.Check(fmt.Sprintf("%s.conc%d.failed_requests", r.Stage, r.Concurrency), label,
				float64(r.Planned-r.Success), "<=", float64(h.cfg.ThresholdsFor(label).MaxFailedRequests)),
			h.Check(fmt.Sprintf("%s.conc%d.rounds_passed", r.Stage, r.Concurrency), label, float64(r.RoundsPassed), "==", float64(r.Rounds)))
	}
	return out
}

// AfterWakeChecks: after-wake median tok/s against the baseline's, per
// concurrency that has a baseline, when min_after_wake_tps_ratio is set.
func (h *Harness) AfterWakeChecks(label string, runs []report.PerfRun) []report.Check {
	out := h.ServeChecks(label, runs)
	min := h.cfg.ThresholdsFor(label).MinAfterWakeTPSRatio
	if min == 0 {
		return out
	}
	base := map[int]float64{}
	for _, p := range h.Rec.Raw().Perf[label] {
		if s, err := stats.Summarize(p.RoundTPS); err == nil && p.Stage == stageBaseline {
			base[p.Concurrency] = s.Median
		}
	}
	for _, r := range runs {
		aw, err := stats.Summarize(r.RoundTPS)
		if b, ok := base[r.Concurrency]; ok && err == nil && b > 0 {
			out = append(out, h.Check(fmt.Sprintf("after-wake.conc%d.tps_ratio", r.Concurrency), label, aw.Median/b, ">=", min))
		}
	}
	return out
}

// SleepChecks: every cycle succeeded; wake → first token p95, residual
// median and (level 1) release median within their limits when set.
func (h *Harness) SleepChecks(label string, level int, cycles []report.Cycle) []report.Check {
	t := h.cfg.ThresholdsFor(label)
	planned, maxFTT := h.cfg.Protocol.SleepL1Cycles, t.MaxL1WakeToFirstTokenS
	if level == 2 {
		planned, maxFTT = h.cfg.Protocol.SleepL2Cycles, t.MaxL2WakeToFirstTokenS
	}
	prefix := fmt.Sprintf("sleep.level%d", level)
	var ftt, resid []float64
	for _, c := range cycles {
		if c.OK {
			ftt = append(ftt, c.ToFirstTokenS)
			if c.ResidualGiB == c.ResidualGiB { // not NaN
				resid = append(resid, c.ResidualGiB)
			}
		}
	}
	out := []report.Check{h.Check(prefix+".successful_cycles", label, float64(len(ftt)), "==", float64(planned))}
	if s, err := stats.Summarize(ftt); err == nil && maxFTT > 0 {
		out = append(out, h.Check(prefix+".to_first_token_s.p95", label, s.P95, "<=", maxFTT))
	}
	if s, err := stats.Summarize(resid); err == nil && t.MaxResidualGiB > 0 {
		out = append(out, h.Check(prefix+".residual_gib.median", label, s.Median, "<=", t.MaxResidualGiB))
	}
	if level == 1 && t.MinL1ReleasePercent > 0 {
		if s, err := stats.Summarize(h.Rec.Raw().Release[label]); err == nil {
			out = append(out, h.Check("memory.l1_release_fraction.median", label, s.Median, ">=", t.MinL1ReleasePercent))
		}
	}
	return out
}

// SwitchChecks: every handoff succeeded; switch → first token p95 per
// direction within its limit when set.
func (h *Harness) SwitchChecks(handoffs []report.Handoff) []report.Check {
	ok := 0
	byDir := map[string][]float64{}
	for _, ho := range handoffs {
		if ho.Initial || !ho.OK {
			continue
		}
		ok++
		k := report.DirectionKey(ho.From, ho.To)
		byDir[k] = append(byDir[k], ho.ToFirstTokenS)
	}
	out := []report.Check{h.Check("switch.successful_handoffs", "", float64(ok), "==", float64(h.cfg.Protocol.Handoffs))}
	if limit := h.cfg.Thresholds.MaxSwitchToFirstTokenS; limit > 0 {
		for _, k := range slices.Sorted(maps.Keys(byDir)) {
			s, _ := stats.Summarize(byDir[k])
			out = append(out, h.Check("switch."+k+".to_first_token_s.p95", "", s.P95, "<=", limit))
		}
	}
	return out
}
