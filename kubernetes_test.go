package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/kubephase"
)

// TestKubernetes is the Kubernetes phase: the models as Pods on a real
// control plane sharing one GPU through a DRA ResourceClaim (cold start,
// in-Pod restart, handoffs across Pods to routable, the claims' accounting,
// scale to zero). Off unless kubernetes.control_plane is set: make k8s runs
// it on a local control plane it builds once.
func TestKubernetes(t *testing.T) {
	h, ctx := begin(t, kubephase.Phase)
	k8s := h.Config().Kubernetes
	if !k8s.On() {
		t.Skip("kubernetes phase off (kubernetes.control_plane unset): run make k8s, or set it to local or kubeconfig (docs/kubernetes.md)")
	}
	skipIfStopped(t)
	out, err := h.Kubernetes(ctx, progress(t))
	require.NoError(t, err)
	passes(t, out.Checks)
	k := out.Value
	for _, l := range h.Labels() {
		var cold, wake bool
		for _, s := range k.Starts {
			cold = cold || (s.Model == l && s.Kind == "cold" && s.FirstTokenS > 0 && s.RoutableS > s.FirstTokenS)
		}
		for _, ho := range k.Handoffs {
			wake = wake || (ho.To == l && ho.FirstTokenS > 0 && ho.RoutableS > 0)
		}
		assert.True(t, cold, "model %s: a Pod cold start to first token and routable", l)
		assert.True(t, wake, "model %s: a handoff to it across Pods", l)
	}
	assert.Len(t, k.Handoffs, k8s.Handoffs, "every planned handoff")
	require.NotNil(t, k.Shared)
	assert.Len(t, k.Shared.ReservedFor, 2, "one claim reserved for both Pods")
	assert.Len(t, k.Scale, 1, "scale to zero and back")
	if k8s.ControlPlane == "local" {
		assert.Len(t, k.Restarts, 1, "the in-Pod restart")
		require.NotNil(t, k.Capacity, "per-Pod claims on the device's capacity")
		assert.NotEmpty(t, k.Capacity.Refused, "the scheduler refuses a third Pod: it counts the sleeping Pod's request")
		assert.True(t, k.Capacity.WouldFit, "the refused Pod would fit the device's free memory")
	}
}
