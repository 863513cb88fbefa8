package kubephase

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

func TestKubernetesChecks(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Kubernetes.Handoffs = 3
	k := record.Kubernetes{Handoffs: []record.PodHandoff{
		{From: "B", To: "A", RoutableS: 0.1}, {From: "A", To: "B", RoutableS: 0.3}, {From: "B", To: "A", RoutableS: 0.2},
	}}
	got := Checks(cfg, k)
	assert.Equal(t, []record.Check{record.Evaluate("kubernetes.handoffs", "", 3, "==", 3)}, got, "no limit: only the count")

	cfg.Thresholds.MaxPodSwitchRoutableS = 0.25
	got = Checks(cfg, k)
	assert.Len(t, got, 3)
	assert.Equal(t, "kubernetes.switch.A→B.routable_s.p95", got[1].Name)
	assert.Equal(t, "FAIL", got[1].Verdict, "0.3 s > 0.25 s")
	assert.Equal(t, "PASS", got[2].Verdict, "B→A p95 0.2 s")

	k.Handoffs[2].RoutableS = -1 // never seen routable
	got = Checks(cfg, k)
	assert.Equal(t, "FAIL", got[2].Verdict, "a Pod never seen routable fails the limit")

	k.Handoffs = k.Handoffs[:1]
	assert.Equal(t, "FAIL", Checks(cfg, k)[0].Verdict, "a handoff missing")
}
