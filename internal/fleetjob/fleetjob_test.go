package fleetjob

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wakebench/wakebench/internal/fleetreport"
	"github.com/wakebench/wakebench/internal/kube/kubefake"
)

func spec() Spec {
	return Spec{Name: "fleet-1", Namespace: "wb", Image: "img", Command: []string{"wakebench"}, Args: []string{"-test.v"},
		Config: []byte(`{"x":1}`), Nodes: []string{"a", "b", "c"}, Parallelism: 2, DeadlineS: 600, DeviceClass: "gpu.example.com",
		Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
}

func TestJobIsIndexedOnePodPerSelectedNodeBoundedInTime(t *testing.T) {
	j := Job(spec())
	assert.Equal(t, batchv1.IndexedCompletion, *j.Spec.CompletionMode)
	assert.EqualValues(t, 3, *j.Spec.Completions, "one completion per selected node")
	assert.EqualValues(t, 2, *j.Spec.Parallelism)
	assert.EqualValues(t, 0, *j.Spec.BackoffLimitPerIndex, "a node's failure is not retried elsewhere")
	assert.EqualValues(t, 600, *j.Spec.ActiveDeadlineSeconds)
	ps := j.Spec.Template.Spec
	assert.Equal(t, corev1.RestartPolicyNever, ps.RestartPolicy)
	assert.Equal(t, ServiceAccount, ps.ServiceAccountName)
	assert.Equal(t, spec().Tolerations, ps.Tolerations)
	var names []string
	for _, term := range ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		require.Len(t, term.MatchFields, 1)
		require.Len(t, term.MatchFields[0].Values, 1, "the API server allows one value per metadata.name field selector")
		names = append(names, term.MatchFields[0].Values[0])
	}
	assert.Equal(t, []string{"a", "b", "c"}, names, "only the selected nodes")
	anti := ps.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	assert.Equal(t, corev1.LabelHostname, anti.TopologyKey)
	assert.Equal(t, "fleet-1", anti.LabelSelector.MatchLabels[LabelFleet])
	assert.Equal(t, "fleet-1", j.Spec.Template.Labels[LabelFleet], "the anti-affinity selects the Job's own Pods")
	assert.Equal(t, "fleet-1", *ps.ResourceClaims[0].ResourceClaimTemplateName)
	c := ps.Containers[0]
	assert.Equal(t, []string{"wakebench"}, c.Command)
	assert.Equal(t, []corev1.ResourceClaim{{Name: "gpu"}}, c.Resources.Claims, "the container gets the node's GPU")
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	assert.Equal(t, `{"x":1}`, env[EnvConfig].Value)
	assert.Equal(t, "spec.nodeName", env[EnvNode].ValueFrom.FieldRef.FieldPath)
	assert.Equal(t, "metadata.labels['batch.kubernetes.io/controller-uid']", env[EnvJobUID].ValueFrom.FieldRef.FieldPath)

	s := spec()
	s.Parallelism = 0
	assert.EqualValues(t, 3, *Job(s).Spec.Parallelism, "0: every node at once")
	ct := ClaimTemplate(spec())
	assert.Equal(t, "gpu.example.com", ct.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName)
	assert.Equal(t, "fleet-1", ct.Spec.Labels[LabelFleet], "its claims carry the label cleanup deletes by")
	_, role, rb := RBAC("wb")
	assert.Equal(t, []string{"configmaps"}, role.Rules[0].Resources)
	assert.Equal(t, []string{"create", "get", "update"}, role.Rules[0].Verbs)
	assert.Equal(t, ServiceAccount, rb.Subjects[0].Name)
}

func csv(lines int) []byte {
	var b bytes.Buffer
	b.WriteString("t_s,gpu,used_bytes\n")
	r := rand.New(rand.NewPCG(1, 2))
	for i := range lines {
		fmt.Fprintf(&b, "%d.%03d,0,%d\n", i, r.IntN(1000), r.Int64()) // incompressible enough
	}
	return b.Bytes()
}

func TestResultRoundTripsThroughAConfigMap(t *testing.T) {
	r := Result{Node: "n1", Pod: "p", ExitCode: 1, Report: []byte(`{"status":"FAIL"}`), Bench: []byte("BenchmarkX 1 2 s/op\n"), Samples: csv(100)}
	cm, err := Encode(r, "fleet-1", "uid-1", "3", "wb", 0)
	require.NoError(t, err)
	assert.Equal(t, "fleet-1-result-3", cm.Name)
	assert.Equal(t, "uid-1", string(cm.OwnerReferences[0].UID), "owned by the Job: outlives the Pod, goes with the Job")
	assert.Equal(t, "n1", cm.Labels[LabelNode])
	got, err := Decode(cm)
	require.NoError(t, err)
	assert.Equal(t, r.Report, got.Report)
	assert.Equal(t, r.Bench, got.Bench)
	assert.Equal(t, r.Samples, got.Samples)
	assert.False(t, got.Truncated)
	assert.Equal(t, 1, got.ExitCode)
}

func TestResultCutsSamplesAtALineToFitAndSaysSo(t *testing.T) {
	samples := csv(200000) // ~6 MB: several MiB gzipped
	r := Result{Node: "n1", Report: []byte(`{}`), Bench: []byte("b\n"), Samples: samples}
	cm, err := Encode(r, "fleet-1", "", "0", "wb", 0)
	require.NoError(t, err)
	size := 0
	for _, v := range cm.Data {
		size += len(v)
	}
	for _, v := range cm.BinaryData {
		size += len(v)
	}
	assert.LessOrEqual(t, size, ConfigMapMax, "within the API server's bound")
	assert.Greater(t, size, DefaultMaxBytes*9/10, "the bound is used, not wasted")
	got, err := Decode(cm)
	require.NoError(t, err)
	assert.True(t, got.Truncated)
	assert.Equal(t, len(samples), got.SamplesBytes)
	assert.True(t, bytes.HasPrefix(samples, got.Samples), "a prefix of the samples")
	assert.True(t, bytes.HasSuffix(got.Samples, []byte("\n")), "cut at a line")
	assert.True(t, strings.HasPrefix(string(got.Samples), "t_s,gpu,used_bytes\n"), "the header kept")

	_, err = Encode(Result{Node: "n1", Report: csv(200000)}, "fleet-1", "", "0", "wb", 0)
	assert.ErrorContains(t, err, "over the result's bound", "a report that cannot fit is an error, not cut")
}

func TestUploadCreatesThenReplacesTheResult(t *testing.T) {
	c, _ := kubefake.New()
	dir := t.TempDir()
	env := map[string]string{EnvNamespace: "wb", EnvJob: "fleet-1", EnvNode: "n1", EnvPod: "fleet-1-0-x", EnvJobUID: "uid", "JOB_COMPLETION_INDEX": "0"}
	require.NoError(t, Upload(context.Background(), c, func(k string) string { return env[k] }, dir, 0))
	require.NoError(t, Upload(context.Background(), c, func(k string) string { return env[k] }, dir, 2), "a second try of the index replaces it")
	cm, err := c.Core.ConfigMaps("wb").Get(context.Background(), "fleet-1-result-0", metav1.GetOptions{})
	require.NoError(t, err)
	got, err := Decode(cm)
	require.NoError(t, err)
	assert.Equal(t, 2, got.ExitCode)
	assert.Empty(t, got.Report, "no report.json: sent empty")
	delete(env, "JOB_COMPLETION_INDEX")
	assert.ErrorContains(t, Upload(context.Background(), c, func(k string) string { return env[k] }, dir, 0), "not a Pod of an Indexed Job")
}

// The coordinator's view of each fault, on objects as the control plane
// and the nodes would leave them.
func TestStepNamesEachNodesFault(t *testing.T) {
	now := time.Now()
	node := func(n string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}} }
	lease := func(n string, age time.Duration) *coordv1.Lease {
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: corev1.NamespaceNodeLease},
			Spec: coordv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-age)}}}
	}
	pod := func(name, n string, phase corev1.PodPhase, edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "wb", Labels: map[string]string{LabelFleet: "fleet-1"}},
			Spec: corev1.PodSpec{NodeName: n}, Status: corev1.PodStatus{Phase: phase}}
		edit(p)
		return p
	}
	ok, err := Encode(Result{Node: "ok", Report: []byte("{}")}, "fleet-1", "", "0", "wb", 0)
	require.NoError(t, err)
	objs := []runtime.Object{
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "fleet-1", Namespace: "wb"}},
		node("ok"), node("evicted"), node("oom"), node("lost"), node("running"),
		lease("lost", 2*time.Minute), lease("running", time.Second), ok,
		pod("p0", "ok", corev1.PodSucceeded, func(*corev1.Pod) {}),
		pod("p1", "evicted", corev1.PodFailed, func(p *corev1.Pod) {
			p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
		}),
		pod("p2", "oom", corev1.PodFailed, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
		}),
		pod("p3", "lost", corev1.PodRunning, func(*corev1.Pod) {}),
		pod("p4", "running", corev1.PodRunning, func(*corev1.Pod) {}),
		pod("p5", "", corev1.PodPending, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/6 nodes are available: 1 node(s) had untolerated taint {wakebench.dev/broken: }."}}
		}),
	}
	c, _ := kubefake.New(objs...)
	s := spec()
	s.Nodes = []string{"evicted", "lost", "never", "ok", "oom", "running"}
	r := &run{o: Options{Spec: s, ScheduleTimeout: time.Hour, NodeLost: 40 * time.Second, Logf: t.Logf}, c: c, ns: "wb", name: "fleet-1",
		decided: map[string]fleetreport.NodeResult{}, pending: map[string]time.Time{}, unsched: map[string]string{}, ran: map[string]string{}}
	done, err := r.step(context.Background())
	require.NoError(t, err)
	assert.False(t, done, "a node still runs")
	assert.Equal(t, fleetreport.StatusPass, r.decided["ok"].Status)
	assert.Equal(t, []byte("{}"), r.decided["ok"].Report)
	assert.Equal(t, "Pod evicted: The node was low on resource: memory.", r.decided["evicted"].Reason)
	assert.Contains(t, r.decided["oom"].Reason, "OOM-killed (exit 137)")
	assert.Contains(t, r.decided["lost"].Reason, "node lost mid-run: its Lease was last renewed 120 s ago")
	_, err = c.Core.Pods("wb").Get(context.Background(), "p3", metav1.GetOptions{})
	assert.Error(t, err, "the lost node's Pod is deleted so the Job goes on")
	assert.NotContains(t, r.decided, "running")
	assert.NotContains(t, r.decided, "never")

	// The running node finishes with a failing suite; the last Pod stays
	// unschedulable past the timeout: its node is named with the reason.
	require.NoError(t, c.Core.Pods("wb").Delete(context.Background(), "p4", metav1.DeleteOptions{}))
	failed, err := Encode(Result{Node: "running", ExitCode: 1}, "fleet-1", "", "4", "wb", 0)
	require.NoError(t, err)
	_, err = c.Core.ConfigMaps("wb").Create(context.Background(), failed, metav1.CreateOptions{})
	require.NoError(t, err)
	r.o.ScheduleTimeout = 0
	done, err = r.step(context.Background())
	require.NoError(t, err)
	assert.True(t, done)
	assert.Contains(t, r.decided["running"].Reason, "go test exited 1")
	assert.Equal(t, fleetreport.StatusFail, r.decided["never"].Status)
	assert.Contains(t, r.decided["never"].Reason, "untolerated taint {wakebench.dev/broken: }")
}

func TestStepTimesOutTheRestWhenTheJobsDeadlinePasses(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "fleet-1", Namespace: "wb"}, Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded}}}}
	c, _ := kubefake.New(job)
	s := spec()
	r := &run{o: Options{Spec: s, ScheduleTimeout: time.Hour, Logf: t.Logf}, c: c, ns: "wb", name: "fleet-1",
		decided: map[string]fleetreport.NodeResult{}, pending: map[string]time.Time{}, unsched: map[string]string{}, ran: map[string]string{}}
	done, err := r.step(context.Background())
	require.NoError(t, err)
	assert.True(t, done)
	for _, n := range s.Nodes {
		assert.Contains(t, r.decided[n].Reason, "timed out: the Job's activeDeadlineSeconds (600s)")
	}
}

func TestSelectNodesByDriverWithTheirGPUKind(t *testing.T) {
	slice := func(n, driver, product string) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: n + "-" + driver}, Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &n,
			Devices: []resourcev1.Device{{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: &product}}}}}}
	}
	node := func(n string, l map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: l}}
	}
	c, _ := kubefake.New(node("g1", map[string]string{"pool": "x"}), node("g2", map[string]string{"pool": "y"}), node("cpu", nil),
		slice("g1", "gpu.example.com", "NVIDIA H100 80GB HBM3"), slice("g2", "gpu.example.com", "NVIDIA L20"), slice("cpu", "other", "x"))
	s, err := selectNodes(context.Background(), c, Selection{Driver: "gpu.example.com"})
	require.NoError(t, err)
	assert.Equal(t, []string{"g1", "g2"}, s.nodes, "every node publishing the driver's device")
	assert.Equal(t, "NVIDIA H100 80GB HBM3", s.gpus["g1"])
	s, err = selectNodes(context.Background(), c, Selection{Driver: "gpu.example.com", NodeSelector: map[string]string{"pool": "y"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"g2"}, s.nodes)
	s, err = selectNodes(context.Background(), c, Selection{Driver: "gpu.example.com", Nodes: []string{"g1", "cpu", "gone"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"g1"}, s.nodes)
	require.Len(t, s.notRun, 2)
	assert.Equal(t, "no such node (or it does not match the node selector)", s.notRun[0].Reason)
	assert.Equal(t, "publishes no device of DRA driver gpu.example.com", s.notRun[1].Reason)
}

// A Pod that could not land on its node lands on a finished one (the
// scheduler does not count finished Pods for anti-affinity): it is
// deleted, and the node it could not reach is named with the scheduler's
// message once the Job has ended.
func TestStepDeletesASecondPodOnANodeAndNamesTheNodeLeftOut(t *testing.T) {
	ok, err := Encode(Result{Node: "ok", Report: []byte("{}")}, "fleet-1", "", "0", "wb", 0)
	require.NoError(t, err)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "fleet-1", Namespace: "wb"}}
	labels := map[string]string{LabelFleet: "fleet-1"}
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p0", Namespace: "wb", Labels: labels}, Spec: corev1.PodSpec{NodeName: "ok"},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "wb", Labels: labels}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "1 node(s) had untolerated taint {wakebench.dev/broken: }"}}}}
	c, _ := kubefake.New(job, ok, done, pending)
	s := spec()
	s.Nodes = []string{"ok", "tainted"}
	r := &run{o: Options{Spec: s, ScheduleTimeout: time.Hour, Logf: t.Logf}, c: c, ns: "wb", name: "fleet-1",
		decided: map[string]fleetreport.NodeResult{}, pending: map[string]time.Time{}, unsched: map[string]string{}, ran: map[string]string{}}
	ctx := context.Background()
	fin, err := r.step(ctx)
	require.NoError(t, err)
	require.False(t, fin)

	// The pending Pod lands on the finished node; the Job then ends.
	pending.Spec.NodeName, pending.Status = "ok", corev1.PodStatus{Phase: corev1.PodRunning}
	_, err = c.Core.Pods("wb").Update(ctx, pending, metav1.UpdateOptions{})
	require.NoError(t, err)
	fin, err = r.step(ctx)
	require.NoError(t, err)
	require.False(t, fin)
	_, err = c.Core.Pods("wb").Get(ctx, "p1", metav1.GetOptions{})
	assert.Error(t, err, "the second Pod on node ok is deleted")
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "FailedIndexes"}}
	_, err = c.Batch.Jobs("wb").UpdateStatus(ctx, job, metav1.UpdateOptions{})
	require.NoError(t, err)
	fin, err = r.step(ctx)
	require.NoError(t, err)
	assert.True(t, fin)
	assert.Equal(t, fleetreport.StatusPass, r.decided["ok"].Status, "the node's own result stands")
	assert.Equal(t, "no Pod scheduled on it: 1 node(s) had untolerated taint {wakebench.dev/broken: }", r.decided["tainted"].Reason)
}
