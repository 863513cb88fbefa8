package fleetjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/wakebench/wakebench/internal/fleetreport"
	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/kube/kubefake"
)

// testRun is a run of spec s on c whose informers' stores hold objs (the
// Job, its Pods, node Leases), as the control plane and nodes left them.
func testRun(t testing.TB, c *kube.Clients, s Spec, objs ...runtime.Object) *run {
	r := newRun(Options{Clients: c, Spec: s, ScheduleTimeout: time.Hour, NodeLost: 40 * time.Second, Logf: t.Logf})
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *batchv1.Job:
			err = r.jobs.Add(o)
		case *corev1.Pod:
			err = r.pods.Add(o)
		case *coordv1.Lease:
			err = r.leases.Add(o)
		}
		require.NoError(t, err)
	}
	return r
}

func node(n string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}} }

// pod is the run's Pod of completion index i on node n ("" unscheduled).
func pod(i int, n string, phase corev1.PodPhase, edit func(*corev1.Pod)) *corev1.Pod {
	idx := strconv.Itoa(i)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p" + idx, Namespace: "wb", Labels: map[string]string{LabelFleet: "fleet-1"},
		Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: idx}},
		Spec: corev1.PodSpec{NodeName: n}, Status: corev1.PodStatus{Phase: phase}}
	if edit != nil {
		edit(p)
	}
	return p
}

func result(t *testing.T, c *kube.Clients, node string, index, exit int) {
	cm, err := Encode(Result{Node: node, ExitCode: exit, Report: []byte("{}")}, "fleet-1", "", strconv.Itoa(index), "wb", 0)
	require.NoError(t, err)
	_, err = c.Core.ConfigMaps("wb").Create(context.Background(), cm, metav1.CreateOptions{})
	require.NoError(t, err)
}

// marks are node n's label and whether it carries the run's taint.
func marks(t *testing.T, c *kube.Clients, n string) (string, bool) {
	got, err := c.Core.Nodes().Get(context.Background(), n, metav1.GetOptions{})
	require.NoError(t, err)
	taint := TestedTaint("fleet-1")
	return got.Labels[NodeLabel("fleet-1")], slices.ContainsFunc(got.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&taint) })
}

var job1 = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "fleet-1", Namespace: "wb"}}

// The coordinator's view of each fault, on objects as the control plane
// and the nodes would leave them.
func TestStepNamesEachNodesFault(t *testing.T) {
	now := time.Now()
	lease := func(n string, age time.Duration) *coordv1.Lease {
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: corev1.NamespaceNodeLease},
			Spec: coordv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-age)}}}
	}
	ctx := context.Background()
	objs := []runtime.Object{job1,
		lease("lost", 2*time.Minute), lease("running", time.Second),
		pod(0, "ok", corev1.PodSucceeded, nil),
		pod(1, "evicted", corev1.PodFailed, func(p *corev1.Pod) {
			p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
		}),
		pod(2, "oom", corev1.PodFailed, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
		}),
		pod(3, "lost", corev1.PodRunning, nil),
		pod(4, "running", corev1.PodRunning, nil),
		pod(5, "", corev1.PodPending, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/6 nodes are available: 1 node(s) had untolerated taint {wakebench.dev/broken: }."}}
		}),
		pod(6, "quiet", corev1.PodSucceeded, nil),
	}
	c, _ := kubefake.New(append(objs, node("ok"), node("evicted"), node("oom"), node("lost"), node("running"), node("quiet"), node("never"))...)
	result(t, c, "ok", 0, 0)
	s := spec()
	s.Nodes = []string{"evicted", "lost", "never", "ok", "oom", "quiet", "running"}
	r := testRun(t, c, s, objs...)
	r.leaseSeen["lost"] = leaseSeen{renew: *objs[1].(*coordv1.Lease).Spec.RenewTime, at: now.Add(-2 * time.Minute)} // unchanged for 2 min
	done, err := r.step(ctx)
	require.NoError(t, err)
	assert.False(t, done, "a node still runs")
	assert.Equal(t, fleetreport.StatusPass, r.decided["ok"].Status)
	assert.Equal(t, []byte("{}"), r.decided["ok"].Report)
	assert.Equal(t, "Pod evicted: The node was low on resource: memory.", r.decided["evicted"].Reason)
	assert.Contains(t, r.decided["oom"].Reason, "OOM-killed (exit 137)")
	assert.Contains(t, r.decided["lost"].Reason, "node lost mid-run: its Lease was not renewed for 120 s")
	assert.Equal(t, "its Pod p6 succeeded but sent no result (ConfigMap fleet-1-result-6)", r.decided["quiet"].Reason,
		"a Pod uploads before it exits: a result missing once it has ended never came")
	_, err = c.Core.Pods("wb").Get(ctx, "p3", metav1.GetOptions{})
	assert.Error(t, err, "the lost node's Pod is deleted so the Job goes on")
	assert.NotContains(t, r.decided, "running")
	assert.NotContains(t, r.decided, "never")
	for _, n := range []string{"ok", "evicted", "oom", "lost", "running", "quiet"} {
		_, tainted := marks(t, c, n)
		assert.True(t, tainted, "node %s had a Pod bound: tainted out of the Job's reach", n)
	}
	_, tainted := marks(t, c, "never")
	assert.False(t, tainted, "no Pod bound there: left as it was")

	// The running node finishes with a failing suite; the last Pod stays
	// unschedulable past the timeout: its node is named with the reason.
	result(t, c, "running", 4, 1)
	require.NoError(t, r.pods.Update(pod(4, "running", corev1.PodSucceeded, nil)))
	r.o.ScheduleTimeout = 0
	done, err = r.step(ctx)
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
	r := testRun(t, c, s, job)
	done, err := r.step(context.Background())
	require.NoError(t, err)
	assert.True(t, done)
	for _, n := range s.Nodes {
		assert.Contains(t, r.decided[n].Reason, "timed out: the Job's activeDeadlineSeconds (600s)")
	}
}

// A result sent before the Pod ended stands whatever befell the Pod
// afterwards (evicted, or deleted by someone); a Pod deleted before it
// sent one is its node's FAIL, named.
func TestStepKeepsAResultSentBeforeThePodWasEvictedOrDeleted(t *testing.T) {
	evicted := pod(0, "a", corev1.PodFailed, func(p *corev1.Pod) { p.Status.Reason, p.Status.Message = "Evicted", "low on memory" })
	c, _ := kubefake.New(job1, node("a"), node("b"), node("c"))
	result(t, c, "a", 0, 0)
	result(t, c, "b", 1, 0)
	r := testRun(t, c, spec(), job1, evicted)
	r.gone.add(pod(1, "b", corev1.PodRunning, nil))
	r.gone.add(pod(2, "c", corev1.PodRunning, nil))
	r.gone.add(pod(3, "", corev1.PodPending, nil))
	done, err := r.step(context.Background())
	require.NoError(t, err)
	assert.True(t, done, "every node has its outcome")
	assert.Equal(t, fleetreport.StatusPass, r.decided["a"].Status, "evicted after it sent its result: nothing lost")
	assert.Equal(t, fleetreport.StatusPass, r.decided["b"].Status, "deleted after it sent its result")
	assert.Equal(t, fleetreport.StatusFail, r.decided["c"].Status)
	assert.Equal(t, "its Pod p2 was deleted before it sent a result (not by this run)", r.decided["c"].Reason)
}

func TestStepEndsWhenTheJobIsDeletedUnderIt(t *testing.T) {
	c, _ := kubefake.New()
	r := testRun(t, c, spec(), job1)
	done, err := r.step(context.Background())
	require.NoError(t, err)
	require.False(t, done)
	require.NoError(t, r.jobs.Delete(job1))
	done, err = r.step(context.Background())
	require.NoError(t, err)
	assert.True(t, done)
	assert.Equal(t, "the Job was deleted while the run went on (not by this run)", r.decided["a"].Reason)
}

// A second index bound to a node before the coordinator tainted it (the
// taint write failed, or came late): deleted, the node keeps its own
// Pod's result, and the node left out says an index was spent.
func TestStepDeletesASecondPodOnANodeAndNamesTheNodeLeftOut(t *testing.T) {
	ctx := context.Background()
	done := pod(0, "ok", corev1.PodSucceeded, func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Minute)) })
	pending := pod(1, "", corev1.PodPending, func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "1 node(s) had untolerated taint {wakebench.dev/broken: }"}}
	})
	c, _ := kubefake.New(job1, node("ok"), node("tainted"), pending)
	result(t, c, "ok", 0, 0)
	s := spec()
	s.Nodes = []string{"ok", "tainted"}
	r := testRun(t, c, s, job1, done, pending)
	fin, err := r.step(ctx)
	require.NoError(t, err)
	require.False(t, fin)

	landed := pending.DeepCopy()
	landed.Spec.NodeName, landed.Status = "ok", corev1.PodStatus{Phase: corev1.PodRunning}
	require.NoError(t, r.pods.Update(landed))
	fin, err = r.step(ctx)
	require.NoError(t, err)
	require.False(t, fin)
	_, err = c.Core.Pods("wb").Get(ctx, "p1", metav1.GetOptions{})
	assert.Error(t, err, "the second Pod on node ok is deleted")
	require.NoError(t, r.pods.Delete(landed))
	r.gone.add(landed)
	ended := job1.DeepCopy()
	ended.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "FailedIndexes"}}
	require.NoError(t, r.jobs.Update(ended))
	fin, err = r.step(ctx)
	require.NoError(t, err)
	assert.True(t, fin)
	assert.Equal(t, fleetreport.StatusPass, r.decided["ok"].Status, "the node's own result stands")
	assert.Equal(t, "no Pod of the Job ran on it before the Job ended (1 index(es) spent on nodes already tested: p1 on ok)", r.decided["tainted"].Reason,
		"the index the stray Pod cost is named, not its old scheduler message")
}

// prepare, labelNodes, createJob and cleanup on a fake API server: what a
// run makes, and that cleanup takes all of it away again.
func TestARunLeavesNothingBehind(t *testing.T) {
	ctx := context.Background()
	c, _ := kubefake.New(node("a"), node("b"))
	s := spec()
	r := newRun(Options{Clients: c, Spec: s, Logf: t.Logf})
	require.NoError(t, r.prepare(ctx))
	labelled, gone, err := r.labelNodes(ctx, []string{"a", "b", "c"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, labelled)
	require.Len(t, gone, 1)
	assert.Equal(t, fleetreport.NodeResult{Node: "c", Status: fleetreport.StatusNotRun, Reason: "the node was deleted before the run started"}, gone[0])
	label, _ := marks(t, c, "a")
	assert.Equal(t, NodeSelected, label)
	r.o.Spec.Nodes = labelled
	require.NoError(t, r.createJob(ctx))
	require.NoError(t, r.markTested(ctx, "a"))
	for _, get := range []func() error{
		func() error { _, err := c.Core.Namespaces().Get(ctx, "wb", metav1.GetOptions{}); return err },
		func() error {
			_, err := c.Core.ServiceAccounts("wb").Get(ctx, "fleet-1", metav1.GetOptions{})
			return err
		},
		func() error { _, err := c.RBAC.RoleBindings("wb").Get(ctx, "fleet-1", metav1.GetOptions{}); return err },
		func() error {
			_, err := c.Coordination.Leases("wb").Get(ctx, LockName, metav1.GetOptions{})
			return err
		},
		func() error { _, err := c.Batch.Jobs("wb").Get(ctx, "fleet-1", metav1.GetOptions{}); return err },
		func() error {
			_, err := c.Resource.ResourceClaimTemplates("wb").Get(ctx, "fleet-1", metav1.GetOptions{})
			return err
		},
	} {
		require.NoError(t, get(), "made by the run")
	}
	require.NoError(t, r.cleanup(ctx))
	_, err = c.Core.Namespaces().Get(ctx, "wb", metav1.GetOptions{})
	assert.Error(t, err, "the namespace it made is deleted")
	_, err = c.Core.ServiceAccounts("wb").Get(ctx, "fleet-1", metav1.GetOptions{})
	assert.Error(t, err, "its ServiceAccount")
	_, err = c.Coordination.Leases("wb").Get(ctx, LockName, metav1.GetOptions{})
	assert.Error(t, err, "its lock")
	_, err = c.Batch.Jobs("wb").Get(ctx, "fleet-1", metav1.GetOptions{})
	assert.Error(t, err, "its Job")
	_, err = c.Resource.ResourceClaimTemplates("wb").Get(ctx, "fleet-1", metav1.GetOptions{})
	assert.Error(t, err, "its claim template")
	_, err = c.RBAC.Roles("wb").Get(ctx, "fleet-1", metav1.GetOptions{})
	assert.Error(t, err, "its Role")
	_, err = c.RBAC.RoleBindings("wb").Get(ctx, "fleet-1", metav1.GetOptions{})
	assert.Error(t, err, "its RoleBinding")
	for _, n := range []string{"a", "b"} {
		label, tainted := marks(t, c, n)
		assert.Empty(t, label, "node %s unlabelled", n)
		assert.False(t, tainted, "node %s untainted", n)
	}

	s.ServiceAccount = "wakebench-fleet"
	err = newRun(Options{Clients: c, Spec: s}).prepare(ctx)
	assert.ErrorContains(t, err, "the Pods' ServiceAccount wb/wakebench-fleet (fleet.service_account)")
	assert.ErrorContains(t, err, "apply deploy/rbac.yaml")
}

func TestTheFleetLockKeepsASecondRunOutUntilItExpires(t *testing.T) {
	ctx := context.Background()
	c, _ := kubefake.New()
	first, err := acquire(ctx, c, "wb", "fleet-1", time.Minute)
	require.NoError(t, err)
	require.NoError(t, first.renew(ctx))
	_, err = acquire(ctx, c, "wb", "fleet-2", time.Minute)
	assert.ErrorContains(t, err, "another fleet run (fleet-1) holds the Lease wb/wakebench-fleet-lock")
	_, err = acquire(ctx, c, "other-ns", "fleet-2", time.Minute)
	assert.NoError(t, err, "a lock per namespace")

	// fleet-1 stops renewing (its coordinator died): once its Lease has
	// expired the next run takes it over, and fleet-1's release leaves it.
	l, err := c.Coordination.Leases("wb").Get(ctx, LockName, metav1.GetOptions{})
	require.NoError(t, err)
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-2 * time.Minute)}
	_, err = c.Coordination.Leases("wb").Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	second, err := acquire(ctx, c, "wb", "fleet-2", time.Minute)
	require.NoError(t, err)
	assert.ErrorContains(t, first.renew(ctx), "held by fleet-2 now", "fleet-1 learns it lost the lock")
	require.NoError(t, second.renew(ctx), "a renewal reads the Lease first: never stuck on a stale resourceVersion")
	require.NoError(t, first.release(ctx))
	l, err = c.Coordination.Leases("wb").Get(ctx, LockName, metav1.GetOptions{})
	require.NoError(t, err, "not fleet-1's to delete any more")
	assert.Equal(t, "fleet-2", *l.Spec.HolderIdentity)
	require.NoError(t, second.release(ctx))
	_, err = c.Coordination.Leases("wb").Get(ctx, LockName, metav1.GetOptions{})
	assert.Error(t, err, "released: deleted")
}

// The informers see the run's Pods (and only them) come, change and go.
func TestInformersFollowTheRunsPods(t *testing.T) {
	c, _ := kubefake.New(job1)
	r := newRun(Options{Clients: c, Spec: spec()})
	ctx, cancel := context.WithCancel(context.Background())
	wg, err := r.inform(ctx)
	defer func() { cancel(); wg.Wait() }()
	require.NoError(t, err)
	_, ok, err := r.jobs.GetByKey("wb/fleet-1")
	require.NoError(t, err)
	assert.True(t, ok, "the Job, from the first list")
	p := pod(0, "a", corev1.PodRunning, nil)
	_, err = c.Core.Pods("wb").Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	other := pod(1, "a", corev1.PodRunning, func(p *corev1.Pod) { p.Labels[LabelFleet] = "fleet-2" })
	_, err = c.Core.Pods("wb").Create(ctx, other, metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case <-r.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no change seen")
	}
	require.Eventually(t, func() bool { return len(r.pods.List()) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "p0", r.pods.List()[0].(*corev1.Pod).Name, "only the run's own Pods")
	require.NoError(t, c.Core.Pods("wb").Delete(ctx, "p0", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}))
	require.Eventually(t, func() bool { return len(r.pods.List()) == 0 }, 10*time.Second, 10*time.Millisecond)
	// The informer's store drops the Pod before its delete handler runs
	// (client-go hands events to handlers on goroutines of their own):
	// the log is waited for, not read once (under make stress it was
	// still empty when the store was).
	var gone []*corev1.Pod
	require.Eventually(t, func() bool { gone = append(gone, r.gone.take()...); return len(gone) > 0 }, 10*time.Second, 10*time.Millisecond)
	require.Len(t, gone, 1)
	assert.Equal(t, "p0", gone[0].Name)
}

// A list the coordinator may not make ends the run at once, naming the
// RBAC, instead of an informer retrying for ever.
func TestInformersStopAtARefusal(t *testing.T) {
	c, cs := kubefake.New(job1)
	cs.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC: access denied"))
	})
	r := newRun(Options{Clients: c, Spec: spec()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wg, err := r.inform(ctx)
	assert.NoError(t, ctx.Err(), "refused at once, not at the timeout")
	cancel()
	wg.Wait()
	require.Error(t, err)
	assert.ErrorContains(t, err, "list and watch Pods")
	assert.ErrorContains(t, err, "deploy/rbac.yaml")
}

// fleetOf is a run of n nodes, each with its Pod running (and its node's
// Lease fresh), on a fake API server holding the nodes; c is its clients.
func fleetOf(tb testing.TB, n int) (*run, *kube.Clients, *fake.Clientset) {
	objs := []runtime.Object{job1}
	var nodes []string
	var pods []runtime.Object
	for i := range n {
		name := fmt.Sprintf("node-%04d", i)
		nodes = append(nodes, name)
		objs = append(objs, node(name))
		pods = append(pods, pod(i, name, corev1.PodRunning, nil),
			&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease}, Spec: coordv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now()}}})
	}
	c, cs := kubefake.New(objs...)
	s := spec()
	s.Nodes = nodes
	r := testRun(tb, c, s, append([]runtime.Object{job1}, pods...)...)
	r.o.NodeLost = time.Hour
	r.o.Logf = func(string, ...any) {}
	return r, c, cs
}

// endAll ends every Pod of r with a result of about reportBytes.
func endAll(tb testing.TB, r *run, c *kube.Clients, reportBytes int) {
	report := bytes.Repeat([]byte(`{"k":1.5}`), reportBytes/9)
	for i, n := range r.o.Spec.Nodes {
		cm, err := Encode(Result{Node: n, Report: report, Bench: []byte("BenchmarkX 1 2 s/op\n")}, "fleet-1", "", strconv.Itoa(i), "wb", 0)
		require.NoError(tb, err)
		_, err = c.Core.ConfigMaps("wb").Create(context.Background(), cm, metav1.CreateOptions{})
		require.NoError(tb, err)
		require.NoError(tb, r.pods.Update(pod(i, n, corev1.PodSucceeded, nil)))
	}
}

// The coordinator's API calls grow with the nodes, not with the polls:
// per node one relabel and one result read, whatever the number of steps.
func TestCoordinatorCallsPerNodeNotPerPoll(t *testing.T) {
	const n, polls = 50, 20
	r, c, cs := fleetOf(t, n)
	ctx := context.Background()
	count := func() map[string]int {
		calls := map[string]int{}
		for _, a := range cs.Actions() {
			calls[a.GetVerb()+" "+a.GetResource().Resource]++
		}
		cs.ClearActions()
		return calls
	}
	cs.ClearActions()
	for range polls {
		done, err := r.step(ctx)
		require.NoError(t, err)
		require.False(t, done)
	}
	assert.Equal(t, map[string]int{"get nodes": n, "update nodes": n}, count(), "while the nodes run: one taint each, nothing per poll")
	endAll(t, r, c, 1000)
	cs.ClearActions()
	done, err := r.step(ctx)
	require.NoError(t, err)
	require.True(t, done)
	for range polls {
		_, err := r.step(ctx)
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]int{"get configmaps": n}, count(), "once they end: one result read per node, nothing per poll")
	for _, nd := range r.o.Spec.Nodes {
		assert.Equal(t, fleetreport.StatusPass, r.decided[nd].Status)
	}
}

// BenchmarkStep is one look at a fleet of N running nodes (what the
// coordinator does on every change and every Poll), and BenchmarkCollect
// the step that reads and decodes N nodes' results (70 KB reports).
func BenchmarkStep(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			r, _, _ := fleetOf(b, n)
			ctx := context.Background()
			_, err := r.step(ctx) // the relabels
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.step(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCollect(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				r, c, _ := fleetOf(b, n)
				_, err := r.step(ctx)
				require.NoError(b, err)
				endAll(b, r, c, 70<<10)
				b.StartTimer()
				done, err := r.step(ctx)
				if err != nil || !done {
					b.Fatal(err, done)
				}
			}
		})
	}
}

func TestPodFailureQuotesTheEndOfTheLog(t *testing.T) {
	p := pod(0, "a", corev1.PodFailed, func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error",
			Message: "=== RUN TestProtocol\nwakebench fleet node: configmaps is forbidden: cannot create resource \"configmaps\"\n\n"}}}}
	})
	assert.Equal(t, `container exited 3 (Error) before it sent a result: wakebench fleet node: configmaps is forbidden: cannot create resource "configmaps"`, podFailure(p))
	p.Status.ContainerStatuses[0].State.Terminated.Message = ""
	assert.Equal(t, "container exited 3 (Error) before it sent a result", podFailure(p))
}

// A node's Lease is judged by when this run saw it change, not by the
// renew time the node wrote: a coordinator whose clock is 5 min ahead
// does not call a live node lost, and a node whose Lease stops changing
// is lost NodeLost later.
func TestNodeLostByTheCoordinatorsOwnClock(t *testing.T) {
	c, _ := kubefake.New(node("a"))
	r := testRun(t, c, spec())
	now := time.Now()
	lease := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: corev1.NamespaceNodeLease},
		Spec: coordv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-5 * time.Minute)}}}
	require.NoError(t, r.leases.Add(lease))
	ctx := context.Background()
	lost, _ := r.nodeLost(ctx, "a", now)
	assert.False(t, lost, "a renew time 5 min behind this clock, seen now: not lost")
	renewed := lease.DeepCopy()
	renewed.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-5*time.Minute + 10*time.Second)}
	require.NoError(t, r.leases.Update(renewed))
	lost, _ = r.nodeLost(ctx, "a", now.Add(35*time.Second))
	assert.False(t, lost, "renewed since: not lost")
	lost, why := r.nodeLost(ctx, "a", now.Add(35*time.Second+41*time.Second))
	assert.True(t, lost, "unchanged for 41 s (over 40 s)")
	assert.Equal(t, "its Lease was not renewed for 41 s (over 40s): its kubelet stopped", why)
}

// A toleration of every taint would let a second Pod onto a tested node.
func TestRunRefusesATolerationOfEveryTaint(t *testing.T) {
	c, _ := kubefake.New()
	s := spec()
	s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	_, err := Run(context.Background(), Options{Clients: c, Spec: s})
	assert.ErrorContains(t, err, "toleration 0 (key \"\", operator Exists) tolerates every taint")
}
