package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/server"
)

// jobPod is an Indexed Job's Pod as the Job controller creates it: its
// completion index in an annotation and JOB_COMPLETION_INDEX from it
// through the downward API, bound to the node; its container (the test
// binary) writes its environment to out and exits with code.
func jobPod(t *testing.T, c *kube.Clients, policy corev1.RestartPolicy, code int, out string) {
	t.Helper()
	fr := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, UID: "uid-p",
		Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "2"},
		Labels:      map[string]string{"batch.kubernetes.io/controller-uid": "job-uid"}},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: policy,
			Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"serve"},
				Env: []corev1.EnvVar{{Name: exitEnv, Value: strconv.Itoa(code)}, {Name: outEnv, Value: out},
					{Name: echoEnv, Value: "JOB_COMPLETION_INDEX,POD,NS,NODE,JOB_UID"},
					{Name: "JOB_COMPLETION_INDEX", ValueFrom: fr("metadata.annotations['batch.kubernetes.io/job-completion-index']")},
					{Name: "POD", ValueFrom: fr("metadata.name")}, {Name: "NS", ValueFrom: fr("metadata.namespace")},
					{Name: "NODE", ValueFrom: fr("spec.nodeName")},
					{Name: "JOB_UID", ValueFrom: fr("metadata.labels['batch.kubernetes.io/controller-uid']")}}}}}}
	_, err := c.Core.Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

func TestAgentRunsAJobPodToCompletion(t *testing.T) {
	for _, tc := range []struct {
		policy corev1.RestartPolicy
		code   int
		phase  corev1.PodPhase
		reason string
	}{
		{corev1.RestartPolicyNever, 3, corev1.PodFailed, "Error"},
		{corev1.RestartPolicyNever, 0, corev1.PodSucceeded, "Completed"},
		{corev1.RestartPolicyOnFailure, 0, corev1.PodSucceeded, "Completed"},
	} {
		t.Run(string(tc.policy)+"/"+strconv.Itoa(tc.code), func(t *testing.T) {
			a, c, _ := startAgent(t)
			defer func() { assert.NoError(t, a.Stop()) }()
			out := filepath.Join(t.TempDir(), "env")
			jobPod(t, c, tc.policy, tc.code, out)
			p := waitPod(t, c, "terminal", func(p *corev1.Pod) bool { return p.Status.Phase == tc.phase })
			cs := p.Status.ContainerStatuses[0]
			require.NotNil(t, cs.State.Terminated, "the container stays terminated: %+v", cs.State)
			assert.EqualValues(t, tc.code, cs.State.Terminated.ExitCode)
			assert.Equal(t, tc.reason, cs.State.Terminated.Reason)
			assert.Zero(t, cs.RestartCount, "never restarted")
			assert.Equal(t, corev1.ConditionFalse, condition(p, corev1.PodReady))
			b, err := os.ReadFile(out)
			require.NoError(t, err)
			assert.Equal(t, "JOB_COMPLETION_INDEX=2\nPOD=p\nNS=ns\nNODE=node-1\nJOB_UID=job-uid\n", string(b), "the downward API's fields")
			time.Sleep(300 * time.Millisecond)
			assert.Zero(t, a.PID(ns, "p"), "not started again")
		})
	}
}

func TestAgentRestartsAnOnFailurePodThatFailed(t *testing.T) {
	a, c, _ := startAgent(t)
	defer func() { assert.NoError(t, a.Stop()) }()
	jobPod(t, c, corev1.RestartPolicyOnFailure, 1, filepath.Join(t.TempDir(), "env"))
	p := waitPod(t, c, "restarted", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 1
	})
	assert.NotEqual(t, corev1.PodFailed, p.Status.Phase, "OnFailure: a failure is restarted, not final")
}

func TestAgentRefusesAnEnvSourceItCannotResolve(t *testing.T) {
	a, c, _ := startAgent(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, UID: "uid-p"},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Command: []string{"serve"}, Env: []corev1.EnvVar{{Name: "X",
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIPs"}}}}}}}}
	_, err := c.Core.Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	p := waitPod(t, c, "refused", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "RunContainerError"
	})
	assert.Contains(t, p.Status.ContainerStatuses[0].State.Waiting.Message, `fieldRef "status.podIPs" is not supported`)
	assert.ErrorContains(t, a.Stop(), "status.podIPs")
}

// servingPod is a Pod whose container serves until killed.
func servingPod(t *testing.T, c *kube.Clients, policy corev1.RestartPolicy) {
	t.Helper()
	port, err := server.FreePort("127.0.0.1")
	require.NoError(t, err)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, UID: "uid-p"},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: policy,
			Containers: []corev1.Container{{Name: "c", Command: []string{"serve"},
				Env: []corev1.EnvVar{{Name: serveEnv, Value: "127.0.0.1:" + strconv.Itoa(port)}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt(port)}}}}}}}
	_, err = c.Core.Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPod(t, c, "ready", func(p *corev1.Pod) bool { return condition(p, corev1.ContainersReady) == corev1.ConditionTrue })
}

func TestAgentEvictsAPod(t *testing.T) {
	a, c, _ := startAgent(t)
	defer func() { assert.NoError(t, a.Stop()) }()
	servingPod(t, c, corev1.RestartPolicyAlways)
	require.NoError(t, a.Evict(ns, "p", "The node was low on resource: memory."))
	p := waitPod(t, c, "evicted", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, "Evicted", p.Status.Reason, "as the kubelet's eviction manager writes it")
	assert.Equal(t, "The node was low on resource: memory.", p.Status.Message)
	time.Sleep(300 * time.Millisecond)
	assert.Zero(t, a.PID(ns, "p"), "an evicted Pod is not restarted, even with restartPolicy Always")
}

func TestAgentOOMKillIsAFailureWithItsReason(t *testing.T) {
	a, c, _ := startAgent(t)
	defer func() { assert.NoError(t, a.Stop()) }()
	servingPod(t, c, corev1.RestartPolicyNever)
	require.NoError(t, a.OOMKill(ns, "p"))
	p := waitPod(t, c, "failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	term := p.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	assert.Equal(t, "OOMKilled", term.Reason)
	assert.EqualValues(t, 137, term.ExitCode)
	assert.Empty(t, p.Status.Reason, "not an eviction")
}

func TestAgentNodeCarriesItsLabelsAndTaints(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	a, c, _ := startAgentWith(t, func(o *Options) {
		o.Labels = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
		o.Taints = []corev1.Taint{gpuTaint}
	})
	defer func() { assert.NoError(t, a.Stop()) }()
	n, err := c.Core.Nodes().Get(context.Background(), node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "NVIDIA-H100-80GB-HBM3", n.Labels["nvidia.com/gpu.product"])
	assert.Equal(t, node, n.Labels["kubernetes.io/hostname"])
	assert.Equal(t, []corev1.Taint{gpuTaint}, n.Spec.Taints, "Start returned with its own taint still on (only not-ready was waited for)")
}

func TestLogTailIsTheKubeletsTerminationMessage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.log")
	var log []byte
	for i := range 200 {
		log = append(log, []byte("line "+strconv.Itoa(i)+"\n")...)
	}
	require.NoError(t, os.WriteFile(path, log, 0o644))
	tail := logTail(path)
	lines := strings.Split(tail, "\n")
	assert.Len(t, lines, 80, "at most 80 lines")
	assert.Equal(t, "line 199", lines[79], "the end of the log")
	require.NoError(t, os.WriteFile(path, append(log, []byte(strings.Repeat("x", 3000)+"\n")...), 0o644))
	assert.Len(t, logTail(path), 2047, "at most 2048 bytes (the trailing newline dropped)")
	assert.Empty(t, logTail(filepath.Join(t.TempDir(), "missing.log")))
}
