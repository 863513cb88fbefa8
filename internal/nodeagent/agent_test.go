package nodeagent

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/retry"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/kube/kubefake"
	"github.com/wakebench/wakebench/internal/server"
)

const (
	node   = "node-1"
	ns     = "ns"
	driver = "gpu.example.com"
	gate   = "example.com/awake"
)

var gpu0 = GPU{Name: "gpu-0", UUID: "GPU-1234", Index: 3, Product: "Test GPU", MemoryBytes: 48 << 30}

// startAgent starts an agent on a fake API server whose node registration
// comes with the not-ready taint (as the API server's admission adds it);
// Start must wait until the test lifts it, as the node lifecycle
// controller would.
func startAgent(t *testing.T) (*Agent, *kube.Clients, *fake.Clientset) {
	t.Helper()
	return startAgentWith(t, func(*Options) {})
}

// startAgentWith is startAgent with the options edited by edit.
func startAgentWith(t *testing.T, edit func(*Options)) (*Agent, *kube.Clients, *fake.Clientset) {
	t.Helper()
	c, cs := kubefake.New()
	cs.PrependReactor("create", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		n := a.(clienttesting.CreateAction).GetObject().(*corev1.Node)
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
		return false, nil, nil
	})
	dir := t.TempDir()
	type started struct {
		a   *Agent
		err error
	}
	done := make(chan started, 1)
	go func() {
		o := Options{Node: node, IP: "127.0.0.1", Driver: driver, GPUs: []GPU{gpu0}, Clients: c,
			Programs: map[string]string{"serve": os.Args[0]}, Env: []string{"NODE_ENV=on"}, Dir: dir, Ready: 10 * time.Second,
			LeaseRenew: 20 * time.Millisecond}
		edit(&o)
		a, err := Start(context.Background(), o)
		done <- started{a, err}
	}()
	ctx := context.Background()
	var n *corev1.Node
	require.Eventually(t, func() bool {
		var err error
		n, err = c.Core.Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil
	}, 5*time.Second, 5*time.Millisecond)
	select {
	case s := <-done:
		t.Fatalf("Start returned while the node was tainted: %v", s.err)
	case <-time.After(100 * time.Millisecond):
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	_, err := c.Core.Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	s := <-done
	require.NoError(t, s.err)
	return s.a, c, cs
}

func TestAgentRegistersTheNodeRenewsItsLeaseAndPublishesItsGPU(t *testing.T) {
	a, c, _ := startAgent(t)
	ctx := context.Background()

	n, err := c.Core.Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"})
	i := slices.IndexFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, corev1.ConditionTrue, n.Status.Conditions[i].Status)

	l, err := c.Coordination.Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, node, *l.Spec.HolderIdentity)
	first := l.Spec.RenewTime.Time
	require.Eventually(t, func() bool {
		l, err := c.Coordination.Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first)
	}, 5*time.Second, 10*time.Millisecond, "the lease is renewed")

	s, err := c.Resource.ResourceSlices().Get(ctx, a.SliceName(), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, driver, s.Spec.Driver)
	assert.Equal(t, node, *s.Spec.NodeName)
	require.Len(t, s.Spec.Devices, 1)
	d := s.Spec.Devices[0]
	assert.Equal(t, "gpu-0", d.Name)
	assert.Equal(t, "GPU-1234", *d.Attributes["uuid"].StringValue)
	memory := d.Capacity["memory"].Value
	assert.Equal(t, int64(48<<30), memory.Value())
	assert.True(t, *d.AllowMultipleAllocations)

	require.NoError(t, a.Stop())
}

// boundPod is a Pod of one container, the test binary serving on port,
// bound to the node with a claim on gpu-0 (allocated and reserved for
// it unless not reserved), a named-port readiness probe and a readiness gate.
func boundPod(t *testing.T, c *kube.Clients, port int, reserved bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	grace := int64(5)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, UID: "uid-p"},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace,
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: new("claim")}},
			Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"serve"},
				Env:   []corev1.EnvVar{{Name: serveEnv, Value: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}}}}}}}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: ns},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: node, Device: "gpu-0"}}}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: pod.UID}}}}
	if !reserved {
		claim.Status.ReservedFor = nil
	}
	_, err := c.Resource.ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	require.NoError(t, err)
	pod, err = c.Core.Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return pod
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// waitPod waits until Pod p satisfies ok and returns it.
func waitPod(t *testing.T, c *kube.Clients, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	require.Eventually(t, func() bool {
		p, err := c.Core.Pods(ns).Get(context.Background(), "p", metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = p
		return ok(p)
	}, 20*time.Second, 10*time.Millisecond, "%s; last status %+v", what, func() any {
		if last == nil {
			return nil
		}
		return last.Status
	}())
	return last
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestAgentRunsABoundPodAsAHostProcess(t *testing.T) {
	a, c, _ := startAgent(t)
	defer func() { assert.NoError(t, a.Stop()) }()
	ctx := context.Background()
	port, err := server.FreePort("127.0.0.1")
	require.NoError(t, err)
	boundPod(t, c, port, true)

	// Started, probed ready; Ready waits for the readiness gate.
	p := waitPod(t, c, "containers ready", func(p *corev1.Pod) bool { return condition(p, corev1.ContainersReady) == corev1.ConditionTrue })
	assert.Equal(t, corev1.PodRunning, p.Status.Phase)
	assert.Equal(t, "127.0.0.1", p.Status.PodIP)
	require.Len(t, p.Status.ContainerStatuses, 1)
	cs := p.Status.ContainerStatuses[0]
	require.NotNil(t, cs.State.Running)
	pid := a.PID(ns, "p")
	require.NotZero(t, pid)
	assert.Equal(t, "host-process://"+strconv.Itoa(pid), cs.ContainerID)
	assert.Equal(t, corev1.ConditionFalse, condition(p, corev1.PodReady), "the readiness gate is not set")

	base := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/env?name="
	assert.Equal(t, "3", get(t, base+"CUDA_VISIBLE_DEVICES"), "the claim's device, by index: vLLM before 0.24 crashes on a UUID")
	assert.Equal(t, "PCI_BUS_ID", get(t, base+"CUDA_DEVICE_ORDER"), "indices in PCI bus order, as NVML's")
	assert.Equal(t, "on", get(t, base+"NODE_ENV"))
	assert.Equal(t, filepath.Join(a.o.Dir, "ns_p_uid-p", "vllm"), get(t, base+"VLLM_CACHE_ROOT"), "caches live with the Pod")

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := c.Core.Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue})
		_, err = c.Core.Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	}))
	waitPod(t, c, "Ready with its gate", func(p *corev1.Pod) bool { return condition(p, corev1.PodReady) == corev1.ConditionTrue })

	// A crash: the agent starts the container again and counts it.
	require.NoError(t, a.Restart(ns, "p"))
	p = waitPod(t, c, "restarted", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].State.Running != nil && cs[0].Ready
	})
	assert.EqualValues(t, 137, p.Status.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode, "killed")
	second := a.PID(ns, "p")
	assert.NotEqual(t, pid, second)
	assert.Error(t, syscall.Kill(pid, 0), "the first process is gone")

	// Deleted (graceful: marked, then removed by the agent once stopped).
	require.NoError(t, c.Core.Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := c.Core.Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 20*time.Second, 10*time.Millisecond, "the agent removes the Pod")
	assert.Error(t, syscall.Kill(second, 0), "its process is gone before the Pod is")
	// The agent forgets the Pod when it sees the deletion's watch event,
	// which may come a moment after the Get above already found none.
	assert.Eventually(t, func() bool { return a.PID(ns, "p") == 0 }, 5*time.Second, 10*time.Millisecond, "the agent forgets the Pod")
}

func TestAgentRefusesAPodWhoseClaimIsNotReservedForIt(t *testing.T) {
	a, c, _ := startAgent(t)
	port, err := server.FreePort("127.0.0.1")
	require.NoError(t, err)
	boundPod(t, c, port, false)
	p := waitPod(t, c, "refused", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "DeviceClaimError"
	})
	assert.Contains(t, p.Status.ContainerStatuses[0].State.Waiting.Message, "ResourceClaim claim is not reserved for it")
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	assert.Zero(t, a.PID(ns, "p"), "nothing runs")
	assert.ErrorContains(t, a.Stop(), "not reserved for it", "Stop says what went wrong")
}

// A Pod deleted before the agent ran it (a Job's Pod evicted as soon as
// it was bound) is written Failed before it is removed, as the kubelet
// does: a Job with a podFailurePolicy keeps its finalizer on a Pod until
// the Pod is terminal, so without the phase the Job would wait forever.
func TestAgentFailsAPodDeletedBeforeItRan(t *testing.T) {
	a, c, _ := startAgent(t)
	defer func() { assert.NoError(t, a.Stop()) }()
	ctx := context.Background()
	w, err := c.Core.Pods(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	now := metav1.Now()
	_, err = c.Core.Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns, UID: "uid-q", DeletionTimestamp: &now},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"serve"}}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var phases []corev1.PodPhase
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			p := ev.Object.(*corev1.Pod)
			phases = append(phases, p.Status.Phase)
			if ev.Type != "DELETED" {
				continue
			}
			assert.Contains(t, phases, corev1.PodFailed, "Failed before it is removed (phases seen: %v)", phases)
			return
		case <-timeout:
			t.Fatalf("the Pod was not removed; phases seen: %v", phases)
		}
	}
}
