package traffic

import (
	"fmt"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// asleepFirstTokens is, per model, issued → first token of the shared
// run's successful requests that had to wait for their model.
func asleepFirstTokens(t record.Traffic) map[string][]float64 {
	out := map[string][]float64{}
	for _, r := range t.Requests {
		if r.Run == record.RunShared && !r.WarmUp && r.Waited && r.Err == "" {
			out[r.Model] = append(out[r.Model], r.TTFTS)
		}
	}
	return out
}

// trafficChecks: the shared run's failed requests within max_failed_requests,
// its shed requests (refused with the router's queue full, never sent: not
// failures) within max_shed_requests;
// goodput shared / ideal ≥ min_traffic_goodput_ratio (not evaluated
// without an ideal run); per model, p99 issued → first token of requests
// that found their model asleep ≤ max_asleep_first_token_p99_s; each
// sleep with requests in flight survived, every request as its mode says.
func trafficChecks(cfg config.Config, t record.Traffic) []record.Check {
	var out []record.Check
	failed, shed, n := map[string]int{}, map[string]int{}, map[string]int{}
	for _, r := range t.Requests {
		if !r.WarmUp {
			n[r.Run]++
			switch {
			case r.Shed:
				shed[r.Run]++
			case r.Err != "":
				failed[r.Run]++
			}
		}
	}
	if t.IdealRan && n[record.RunIdeal] > 0 { // every request the harness sends belongs to a check
		out = append(out, record.Evaluate("traffic.ideal.failed_requests", "", float64(failed[record.RunIdeal]), "<=", float64(cfg.Thresholds.MaxFailedRequests)))
	}
	if n[record.RunShared] == 0 {
		out = append(out, notEvaluatedTraffic(cfg, t)...)
	} else {
		out = append(out, record.Evaluate("traffic.failed_requests", "", float64(failed[record.RunShared]), "<=", float64(cfg.Thresholds.MaxFailedRequests)),
			record.Evaluate("traffic.shed_requests", "", float64(shed[record.RunShared]), "<=", float64(cfg.Thresholds.MaxShedRequests)))
		if limit := cfg.Thresholds.MinTrafficGoodputRatio; limit > 0 {
			shared, ideal := t.GoodputRPS(record.RunShared), t.GoodputRPS(record.RunIdeal)
			switch {
			case t.IdealRan && failed[record.RunIdeal] > 0:
				out = append(out, record.Check{Name: "traffic.goodput_ratio", Op: ">=", Limit: limit, Verdict: record.NotEvaluated,
					Reason:   fmt.Sprintf("the ideal run lost %d of its %d requests to failures: no ideal to compare with", failed[record.RunIdeal], n[record.RunIdeal]),
					Required: cfg.ThresholdSetByUser("", "min_traffic_goodput_ratio")})
			case t.IdealRan && ideal > 0:
				out = append(out, record.Evaluate("traffic.goodput_ratio", "", shared/ideal, ">=", limit))
			default:
				reason := t.IdealNote
				if reason == "" {
					reason = "no ideal run (traffic.ideal off), or no good request in it"
				}
				out = append(out, record.Check{Name: "traffic.goodput_ratio", Op: ">=", Limit: limit, Verdict: record.NotEvaluated,
					Reason: reason, Required: cfg.ThresholdSetByUser("", "min_traffic_goodput_ratio")})
			}
		}
		asleep := asleepFirstTokens(t)
		for _, m := range cfg.Models {
			l, limit := m.Label, cfg.ThresholdsFor(m.Label).MaxAsleepFirstTokenP99S
			switch {
			case limit <= 0:
			case len(asleep[l]) > 0:
				out = append(out, record.Evaluate("traffic.asleep_first_token_s.p99", l, stats.Distribute(asleep[l]).P99, "<=", limit))
			case cfg.ThresholdSetByUser(l, "max_asleep_first_token_p99_s"):
				// A threshold the user set is said to be unevaluated, not dropped.
				out = append(out, record.Check{Name: "traffic.asleep_first_token_s.p99", Model: l, Op: "<=", Limit: limit, Verdict: record.NotEvaluated,
					Reason: "no request for " + l + " found it asleep and succeeded", Required: true})
			}
		}
	}
	for _, f := range t.InFlight {
		if f.Off != "" {
			for _, what := range []string{"survived", "unexpected"} {
				out = append(out, record.Check{Name: fmt.Sprintf("traffic.in_flight.%s.%s", f.Mode, what), Op: "==",
					Verdict: record.NotEvaluated, Reason: f.Off})
			}
			continue
		}
		survived := 0.0
		if f.Survived {
			survived = 1
		}
		out = append(out,
			record.Evaluate(fmt.Sprintf("traffic.in_flight.%s.survived", f.Mode), "", survived, "==", 1),
			record.Evaluate(fmt.Sprintf("traffic.in_flight.%s.unexpected", f.Mode), "", float64(f.Unexpected), "==", 0))
	}
	return out
}

// notEvaluatedTraffic: with no request through the router (rate 0, no
// trace), the traffic thresholds the user set cannot be evaluated, and
// say so (a required check that is not evaluated fails the run).
func notEvaluatedTraffic(cfg config.Config, t record.Traffic) []record.Check {
	reason := "no request went through the router (traffic.rate 0 and no traffic.trace)"
	if t.Arrivals != "" {
		reason = "no counted request went through the router (" + t.Arrivals + ")"
	}
	var out []record.Check
	// A ratio or a time limit of 0 is off (as harness's offPhaseChecks has it); a shed
	// count of 0 is a limit: none may be shed.
	if cfg.ThresholdSetByUser("", "min_traffic_goodput_ratio") && cfg.Thresholds.MinTrafficGoodputRatio > 0 {
		out = append(out, record.Check{Name: "traffic.goodput_ratio", Op: ">=", Limit: cfg.Thresholds.MinTrafficGoodputRatio,
			Verdict: record.NotEvaluated, Reason: reason, Required: true})
	}
	if cfg.ThresholdSetByUser("", "max_shed_requests") {
		out = append(out, record.Check{Name: "traffic.shed_requests", Op: "<=", Limit: float64(cfg.Thresholds.MaxShedRequests),
			Verdict: record.NotEvaluated, Reason: reason, Required: true})
	}
	for _, m := range cfg.Models {
		if lim := cfg.ThresholdsFor(m.Label).MaxAsleepFirstTokenP99S; cfg.ThresholdSetByUser(m.Label, "max_asleep_first_token_p99_s") && lim > 0 {
			out = append(out, record.Check{Name: "traffic.asleep_first_token_s.p99", Model: m.Label, Op: "<=",
				Limit: lim, Verdict: record.NotEvaluated, Reason: reason, Required: true})
		}
	}
	return out
}
