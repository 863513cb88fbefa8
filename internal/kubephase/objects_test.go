package kubephase

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/vllm"
)

// The Pod is vLLM's OpenAI server as the image runs it: `vllm serve` with
// exactly the launcher's argv, dev mode on (no /sleep without it), one
// claim, a readiness probe on /health and the awake readiness gate.
func TestPodSpecIsVLLMServeOnTheClaim(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Models = []config.Model{{Label: "A", Name: "Qwen/Qwen3-4B", GPUMemoryUtilization: 0.4, SimFaults: "wake-fail=1"}}
	pod := podSpec(cfg, cfg.Models[0], "wakebench-a-1", "wakebench-gpu", "0.0.0.0", 8000)

	assert.Equal(t, map[string]string{labelApp: "wakebench", labelModel: "a"}, pod.Labels)
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	assert.Equal(t, []string{"vllm"}, c.Command)
	assert.Equal(t, vllm.ServeArgs(vllm.ServeOptions{Model: "Qwen/Qwen3-4B", Host: "0.0.0.0", Port: 8000, MaxModelLen: cfg.Protocol.ContextTokens,
		KVCacheBytes: cfg.KVBytes(), GPUMemoryUtilization: 0.4}), c.Args, "the launcher's argv, serve first")
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "VLLM_SERVER_DEV_MODE", Value: "1"})
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "VLLMSIM_FAULTS", Value: "wake-fail=1"}, "a model's faults travel in its Pod")
	assert.Equal(t, "/health", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, []corev1.ResourceClaim{{Name: "gpu"}}, c.Resources.Claims)
	require.Len(t, pod.Spec.ResourceClaims, 1)
	assert.Equal(t, "wakebench-gpu", *pod.Spec.ResourceClaims[0].ResourceClaimName)
	assert.Equal(t, []corev1.PodReadinessGate{{ConditionType: AwakeGate}}, pod.Spec.ReadinessGates)
	assert.Equal(t, corev1.RestartPolicyAlways, pod.Spec.RestartPolicy)

	svc := service("wakebench", "A", 8000)
	assert.Equal(t, map[string]string{labelModel: "a"}, svc.Spec.Selector, "the Service routes to the model's Pods")
}

// Claims ask for a whole device, or with a capacity for that much of its
// memory; the DeviceClass selects the driver's devices.
func TestClaimsAndDeviceClass(t *testing.T) {
	whole := claimSpec("ns", "c", "gpu.nvidia.com", 0)
	req := whole.Spec.Devices.Requests[0].Exactly
	assert.Equal(t, "gpu.nvidia.com", req.DeviceClassName)
	assert.Nil(t, req.Capacity)
	part := claimSpec("ns", "c", "gpu.nvidia.com", 20<<30)
	q := part.Spec.Devices.Requests[0].Exactly.Capacity.Requests["memory"]
	assert.Equal(t, "20Gi", q.String())
	assert.Equal(t, `device.driver == "gpu.wakebench.dev"`, deviceClass("x", "gpu.wakebench.dev").Spec.Selectors[0].CEL.Expression)
}

// Pods on a node's network get ports of their own; on a Pod network all
// listen on the configured port; the local node picks free ones.
func TestEveryPodHasAnAddress(t *testing.T) {
	cfg := config.SimDefault()
	p := &phase{k: cfg.Kubernetes}
	for range 2 {
		port, host, err := p.address()
		require.NoError(t, err)
		assert.Equal(t, 8000, port)
		assert.Equal(t, "0.0.0.0", host)
	}
	p = &phase{k: cfg.Kubernetes}
	p.k.HostNetwork = true
	var ports []int
	for range 3 {
		port, _, err := p.address()
		require.NoError(t, err)
		ports = append(ports, port)
	}
	assert.Equal(t, []int{8000, 8001, 8002}, ports)
	next := 40000
	p = &phase{k: cfg.Kubernetes, Env: Env{HostIP: "192.0.2.2", FreePort: func() (int, error) { next++; return next, nil }}}
	port, host, err := p.address()
	require.NoError(t, err)
	assert.Equal(t, 40001, port)
	assert.Equal(t, "192.0.2.2", host)
}
