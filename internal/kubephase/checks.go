package kubephase

import (
	"maps"
	"slices"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// Checks: every planned handoff across Pods happened; per direction,
// p95 handoff begun → the woken Pod ready in its EndpointSlice ≤
// max_pod_switch_routable_s (when set; a handoff whose routable moment was
// never seen counts as failing it).
func Checks(cfg config.Config, k record.Kubernetes) []record.Check {
	out := []record.Check{record.Evaluate("kubernetes.handoffs", "", float64(len(k.Handoffs)), "==", float64(cfg.Kubernetes.Handoffs))}
	limit := cfg.Thresholds.MaxPodSwitchRoutableS
	if limit <= 0 {
		return out
	}
	byDir := map[string][]float64{}
	unseen := map[string]bool{}
	for _, h := range k.Handoffs {
		dir := record.DirectionKey(h.From, h.To)
		if h.RoutableS < 0 {
			unseen[dir] = true
			continue
		}
		byDir[dir] = append(byDir[dir], h.RoutableS)
	}
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		c := record.Evaluate("kubernetes.switch."+dir+".routable_s.p95", "", record.Summary(byDir[dir]).P95, "<=", limit) // report.json's routable_s
		if unseen[dir] {
			c.Verdict = "FAIL"
		}
		out = append(out, c)
	}
	return out
}
