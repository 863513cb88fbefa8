package kubephase_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/controlplane"
	"github.com/wakebench/wakebench/internal/kubelocal"
	"github.com/wakebench/wakebench/internal/kubephase"
)

// local starts a local cluster on a simulated GPU for cfg (make k8s sets
// WAKEBENCH_K8S_BIN; without it these tests say so and skip).
func local(t *testing.T, cfg config.Config, without ...string) (kubephase.Env, *kubelocal.Cluster) {
	t.Helper()
	bin := os.Getenv("WAKEBENCH_K8S_BIN")
	if bin == "" {
		t.Skip("WAKEBENCH_K8S_BIN unset: the Kubernetes phase's tests run in make k8s, which builds the control plane")
	}
	require.NoError(t, controlplane.Check(bin))
	ctx := context.Background()
	dir := t.TempDir()
	be, err := backend.Open(ctx, cfg, dir)
	require.NoError(t, err)
	t.Cleanup(func() { be.Close() })
	g, err := kubelocal.NodeGPU(be.Source)
	require.NoError(t, err)
	cl, err := kubelocal.Start(ctx, kubelocal.Options{BinDir: bin, Dir: filepath.Join(dir, "k8s"), Program: be.Command, Env: be.NodeEnv(),
		GPU: g, Without: without})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cl.Stop()) })
	return cl.PhaseEnv(cfg, be.Source, t.Logf), cl
}

func tinyConfig(t *testing.T) config.Config {
	cfg := config.SimDefault()
	cfg.Models = []config.Model{{Label: "A", Name: "tiny-a", GPUMemoryUtilization: 0.4}, {Label: "B", Name: "tiny-b", GPUMemoryUtilization: 0.4}}
	cfg.Protocol.KVGiB = 1
	// A level-1 sleep's pinned backup really allocated at 1/20, as
	// simtest.Pool has it: at 1 a tiny model's sleep paged in its weights,
	// and a handoff (drain, that sleep, the wake) outlasted a new Pod's
	// start (0.46 s against 0.44 s in make k8s after make perf).
	cfg.Sim.HostScale = 0.05
	cfg.Kubernetes.ControlPlane = "local"
	cfg.Kubernetes.TimeoutS = 60
	cfg.OutDir = t.TempDir()
	require.NoError(t, cfg.Validate())
	return cfg
}

func TestPhaseOnALocalCluster(t *testing.T) {
	cfg := tinyConfig(t)
	env, _ := local(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	k, err := kubephase.Run(ctx, env)
	if err != nil {
		dump(t, env)
	}
	require.NoError(t, err)

	// Cold starts (A, B), the scale-up, the two Pods on per-Pod claims:
	// each milestone in the order it must come.
	var kinds []string
	for _, s := range k.Starts {
		kinds = append(kinds, s.Model+":"+s.Kind)
		assert.Greater(t, s.ScheduledS, 0.0, s.Pod)
		assert.GreaterOrEqual(t, s.ContainerStartedS, s.ScheduledS, s.Pod)
		assert.GreaterOrEqual(t, s.HealthS, s.ContainerStartedS, s.Pod)
		assert.GreaterOrEqual(t, s.FirstTokenS, s.HealthS, s.Pod)
		assert.GreaterOrEqual(t, s.ReadyS, s.FirstTokenS, "%s: Ready only once the awake gate is set, after the first token", s.Pod)
		// Ready and the EndpointSlice come on separate watches, in either
		// order; both follow the gate, set after the first token.
		assert.Greater(t, s.RoutableS, s.FirstTokenS, "%s: routable only once awake", s.Pod)
		assert.GreaterOrEqual(t, s.ClaimAllocatedS, 0.0, s.Pod)
	}
	assert.Equal(t, []string{"A:cold", "B:cold", "B:scale-up", "A:per-pod-claim", "B:per-pod-claim"}, kinds)
	assert.True(t, k.Starts[1].OtherAsleep, "B's cold start had A asleep on the device")

	require.Len(t, k.Restarts, 1)
	assert.Equal(t, int32(1), k.Restarts[0].RestartCount, "the node restarted the killed container in place")
	assert.Greater(t, k.Restarts[0].FirstTokenS, k.Restarts[0].HealthS)

	require.Len(t, k.Handoffs, cfg.Kubernetes.Handoffs)
	for i, h := range k.Handoffs {
		assert.Equal(t, []string{"BA", "AB"}[i%2], h.From+h.To, "handoffs alternate")
		assert.Greater(t, h.UnroutableS, 0.0, "the slept Pod left its Service")
		assert.Greater(t, h.FirstTokenS, h.UnroutableS+h.SleepS+h.WakeS-0.001, "switch → first token spans the drain, the sleep and the wake, one after the other")
		assert.Greater(t, h.RoutableS, h.FirstTokenS)
		assert.GreaterOrEqual(t, h.ReadyS, h.FirstTokenS)
		assert.Greater(t, h.UsedGiB, 0.0)
	}

	require.NotNil(t, k.Shared)
	assert.Equal(t, []string{"wakebench-a-1", "wakebench-b-1"}, k.Shared.ReservedFor, "one claim, both Pods")
	assert.Equal(t, kubelocal.Driver+"/"+kubelocal.Node+"/gpu-0", k.Shared.Device)
	assert.Greater(t, k.Shared.DeallocatedS, 0.0, "the claim is deallocated once its last Pod is gone")

	require.Len(t, k.Scale, 1)
	sz := k.Scale[0]
	assert.Greater(t, sz.FreedGiB, 0.5, "deleting the awake Pod frees its memory")
	assert.GreaterOrEqual(t, sz.ReleasedS, 0.0)
	assert.Greater(t, sz.BackS, sz.WakeS, "a new Pod to first token takes longer than a wake")

	c := k.Capacity
	require.NotNil(t, c)
	assert.True(t, c.Enabled, "the device allows multiple allocations (DRAConsumableCapacity)")
	assert.Equal(t, []string{"wakebench-a-2", "wakebench-b-3"}, c.Scheduled)
	assert.Equal(t, []string{"wakebench-a-2"}, c.AsleepPods)
	assert.Equal(t, "wakebench-a-3", c.Refused, "the third Pod is refused: the scheduler counts the sleeping Pod's request")
	assert.Contains(t, c.Message, "cannot allocate all claims")
	assert.True(t, c.WouldFit, "yet its %.2f GiB fit the %.2f GiB free", c.RequestedGiB, c.FreeGiB)
	assert.Greater(t, c.RequestedGiB*3, c.DeviceGiB, "three requests exceed the device's capacity")

	// Nothing is left: no Pod in the namespace, no container on the node.
	pods, err := env.Clients.Core.Pods(cfg.Kubernetes.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, pods.Items)
}

// dump logs the namespace's Pods and EndpointSlices, for a failure.
func dump(t *testing.T, env kubephase.Env) {
	ctx := context.Background()
	if pods, err := env.Clients.Core.Pods(env.Cfg.Kubernetes.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: %+v", p.Name, p.Status)
		}
	}
	if ss, err := env.Clients.Discovery.EndpointSlices(env.Cfg.Kubernetes.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range ss.Items {
			t.Logf("endpointslice %s %v: %+v", s.Name, s.Labels, s.Endpoints)
		}
	}
}

// A cluster whose scheduler is down: the Pod is never scheduled and the
// error says to look at kube-scheduler, within the configured timeout.
func TestMissingSchedulerIsNamed(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Kubernetes.TimeoutS = 5
	env, _ := local(t, cfg, controlplane.Scheduler)
	k, err := kubephase.Run(context.Background(), env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "wakebench-a-1 not scheduled")
	assert.Contains(t, err.Error(), "is kube-scheduler running?")
	assert.Empty(t, k.Starts, "nothing started")
}

// A Pod naming a ResourceClaim that does not exist: the scheduler holds
// it back without a condition, and the error names the claim, not the
// scheduler.
func TestMissingClaimIsNamed(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Kubernetes.TimeoutS = 5
	env, _ := local(t, cfg)
	env.Claim = "no-such-claim"
	_, err := kubephase.Run(context.Background(), env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `pod wakebench-a-1 not scheduled after 5s: its ResourceClaim "no-such-claim" does not exist in namespace wakebench`)
	assert.NotContains(t, err.Error(), "kube-scheduler")
}

// A container that exits at once (a bad flag here, a bad image or OOM on a
// cluster) fails the start by name at its first restart, not at the timeout.
func TestCrashingContainerIsNamed(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Models[0].ExtraArgs = []string{"--no-such-flag"}
	env, _ := local(t, cfg)
	began := time.Now()
	_, err := kubephase.Run(context.Background(), env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pod wakebench-a-1: container vllm exited with code")
	assert.Less(t, time.Since(began).Seconds(), cfg.Kubernetes.TimeoutS, "failed before the timeout")
}

// Level-2 handoffs across Pods: the wake is vLLM's level-2 sequence
// (weights, reload_weights, kv_cache, reset_prefix_cache), and the woken
// Pod answers correctly (vllmsim answers "!!!!" to a level-2 wake that
// skipped the reload, which the probe refuses).
func TestLevel2HandoffsAcrossPods(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Kubernetes.SleepLevel, cfg.Kubernetes.Handoffs = 2, 2
	env, _ := local(t, cfg)
	k, err := kubephase.Run(context.Background(), env)
	require.NoError(t, err)
	require.Len(t, k.Handoffs, 2)
	for _, h := range k.Handoffs {
		assert.Equal(t, 2, h.Level)
		assert.Greater(t, h.RoutableS, h.FirstTokenS)
	}
}
