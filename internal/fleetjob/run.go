package fleetjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/wakebench/wakebench/internal/fleetreport"
	"github.com/wakebench/wakebench/internal/kube"
)

// Options are a fleet run's settings.
type Options struct {
	Clients *kube.Clients
	// Spec is the Job's; Run fills its Nodes from Select.
	Spec   Spec
	Select Selection
	// ScheduleTimeout: a Pod not scheduled for this long (0: 120 s) is
	// its node's FAIL with the scheduler's message.
	ScheduleTimeout time.Duration
	// NodeLost: a node whose Lease has not been renewed for this long (0:
	// 40 s, a node Lease's duration) while its Pod runs is lost mid-run.
	NodeLost time.Duration
	// Poll is how often the run looks again at what its informers hold
	// when nothing changed (0: 1 s): the timeouts above are read then.
	Poll time.Duration
	Logf func(string, ...any)
}

// Run runs the fleet: selects the nodes, takes the namespace's fleet lock,
// labels the nodes, applies the RBAC, creates the Job and waits until
// every node has its outcome or the run's deadline (Spec.DeadlineS)
// passed, and deletes what it created (also when ctx ends). It returns
// one result per selected node, in node-name order (and NOT RUN for an
// explicitly named node that is not there).
func Run(ctx context.Context, o Options) (results []fleetreport.NodeResult, err error) {
	if o.ScheduleTimeout == 0 {
		o.ScheduleTimeout = 120 * time.Second
	}
	if o.NodeLost == 0 {
		o.NodeLost = 40 * time.Second
	}
	if o.Poll == 0 {
		o.Poll = time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Spec.DeadlineS <= 0 {
		return nil, errors.New("fleet: the run needs a deadline (fleet.deadline_s > 0): an unbounded fleet run may never end")
	}
	if errs := validation.IsQualifiedName(NodeLabel(o.Spec.Name)); len(errs) > 0 {
		return nil, fmt.Errorf("fleet: Job name %q makes node label %q: %s", o.Spec.Name, NodeLabel(o.Spec.Name), strings.Join(errs, "; "))
	}
	taint := TestedTaint(o.Spec.Name)
	for i, t := range o.Spec.Tolerations {
		if t.ToleratesTaint(&taint) {
			return nil, fmt.Errorf("fleet: toleration %d (key %q, operator %s) tolerates every taint, also the one that keeps a tested node from a second Pod: name the taint's key (fleet.tolerations)", i, t.Key, t.Operator)
		}
	}
	sel, err := selectNodes(ctx, o.Clients, o.Select)
	if err != nil {
		return nil, err
	}
	if len(sel.nodes) == 0 {
		return sel.notRun, fmt.Errorf("fleet: no node selected (%s)", o.Select)
	}
	r := newRun(o)
	r.gpus = sel.gpus
	defer func() {
		// Cleanup outlives ctx: an interrupted run leaves nothing behind.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
		defer cancel()
		if cerr := r.cleanup(cctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	labelled, gone, err := r.labelNodes(ctx, sel.nodes)
	if err != nil {
		return nil, err
	}
	sel.notRun = append(sel.notRun, gone...)
	if len(labelled) == 0 {
		return sel.notRun, fmt.Errorf("fleet: every selected node was deleted before the run started (%s)", o.Select)
	}
	r.o.Spec.Nodes = labelled
	ictx, stop := context.WithCancel(ctx)
	informed, err := r.inform(ictx)
	defer func() { stop(); informed.Wait() }() // before cleanup (deferred first, runs last)
	if err != nil {
		return nil, err
	}
	if err := r.createJob(ctx); err != nil {
		return nil, err
	}
	o.Logf("fleet: Job %s/%s on %d nodes (parallelism %d, deadline %ds): %s", r.ns, r.name, len(labelled),
		*Job(r.o.Spec).Spec.Parallelism, o.Spec.DeadlineS, strings.Join(labelled, ", "))
	werr := r.wait(ctx)
	for _, n := range labelled {
		res, ok := r.decided[n]
		if !ok {
			res = fleetreport.NodeResult{Node: n, Status: fleetreport.StatusFail, Reason: "no outcome: " + errText(werr)}
		}
		res.GPU = sel.gpus[n]
		results = append(results, res)
	}
	return append(results, sel.notRun...), werr
}

func errText(err error) string {
	if err == nil {
		return "the run ended before this node's Pod finished"
	}
	return err.Error()
}

// run is one fleet run in progress. Only Run's goroutine uses its fields
// (the informers' handlers reach it through changed and gone only).
type run struct {
	o        Options
	c        *kube.Clients
	ns, name string
	gpus     map[string]string

	// What the informers hold (inform; tests fill them directly).
	jobs, pods, leases cache.Store
	changed            chan struct{} // an informer saw a change (capacity 1: changes coalesce)
	gone               *goneLog      // the Job's Pods seen deleted

	lock        *fleetLock
	createdNS   bool
	createdRBAC bool
	labelled    []string                          // nodes the run labels (or tried to): unlabelled and untainted by cleanup
	tainted     map[string]bool                   // nodes tainted TestedTaint
	leaseSeen   map[string]leaseSeen              // node → its Lease's renew time and when this run saw it change
	nodeChecked map[string]time.Time              // node without a Lease → when its Node was last read
	strays      []string                          // "Pod on node": second Pods deleted (each cost an index)
	sawJob      bool                              // the Job was in the informer once
	decided     map[string]fleetreport.NodeResult // node → outcome
	pending     map[string]time.Time              // unscheduled Pod → first seen
	unsched     map[string]string                 // Pod → the scheduler's latest message about placing it
	ran         map[string]string                 // node → the Pod that runs (ran) the suite there
}

func newRun(o Options) *run {
	return &run{o: o, c: o.Clients, ns: o.Spec.Namespace, name: o.Spec.Name, gpus: map[string]string{},
		jobs: cache.NewStore(cache.MetaNamespaceKeyFunc), pods: cache.NewStore(cache.MetaNamespaceKeyFunc), leases: cache.NewStore(cache.MetaNamespaceKeyFunc),
		changed: make(chan struct{}, 1), gone: &goneLog{},
		tainted: map[string]bool{}, leaseSeen: map[string]leaseSeen{}, nodeChecked: map[string]time.Time{}, decided: map[string]fleetreport.NodeResult{}, pending: map[string]time.Time{}, unsched: map[string]string{}, ran: map[string]string{}}
}

// prepare makes the namespace (when missing), takes the fleet lock, and
// applies the Pods' RBAC: the run's own ServiceAccount, Role and binding,
// or it checks the named ServiceAccount is there.
func (r *run) prepare(ctx context.Context) error {
	if _, err := r.c.Core.Namespaces().Get(ctx, r.ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := r.c.Core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("fleet: namespace %s: %w", r.ns, err)
		}
		r.createdNS = true
	} else if err != nil {
		return fmt.Errorf("fleet: namespace %s: %w", r.ns, err)
	}
	var err error
	if r.lock, err = acquire(ctx, r.c, r.ns, r.name, lockDuration); err != nil {
		return err
	}
	if sa := r.o.Spec.ServiceAccount; sa != "" {
		if _, err := r.c.Core.ServiceAccounts(r.ns).Get(ctx, sa, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("fleet: the Pods' ServiceAccount %s/%s (fleet.service_account): %w; apply deploy/rbac.yaml, or leave it empty and the run makes its own", r.ns, sa, err)
		}
		return nil
	}
	sa, role, rb := RBAC(r.ns, r.name)
	r.createdRBAC = true // whatever part was made, cleanup deletes by name
	if _, err = r.c.Core.ServiceAccounts(r.ns).Create(ctx, sa, metav1.CreateOptions{}); err == nil {
		if _, err = r.c.RBAC.Roles(r.ns).Create(ctx, role, metav1.CreateOptions{}); err == nil {
			_, err = r.c.RBAC.RoleBindings(r.ns).Create(ctx, rb, metav1.CreateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("fleet: the Pods' RBAC (ServiceAccount, Role and RoleBinding %s/%s): %w; or apply deploy/rbac.yaml and set fleet.service_account", r.ns, r.name, err)
	}
	return nil
}

// labelNodes puts NodeLabel(name)=selected on each node (the Job's Pods go
// only there). It returns the nodes labelled and, NOT RUN, those deleted
// since they were selected.
func (r *run) labelNodes(ctx context.Context, nodes []string) (labelled []string, gone []fleetreport.NodeResult, err error) {
	type outcome struct {
		gone bool
		err  error
	}
	out := make([]outcome, len(nodes))
	r.labelled = nodes // tried: a patch whose answer was lost may have been applied
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, n := range nodes {
		g.Go(func() error {
			err := r.setNodeLabel(gctx, n)
			out[i] = outcome{gone: apierrors.IsNotFound(err), err: err}
			return nil
		})
	}
	_ = g.Wait()
	var errs []error
	for i, n := range nodes {
		switch o := out[i]; {
		case o.gone:
			gone = append(gone, fleetreport.NodeResult{Node: n, Status: fleetreport.StatusNotRun, Reason: "the node was deleted before the run started"})
		case o.err != nil:
			errs = append(errs, o.err)
		default:
			labelled = append(labelled, n)
		}
	}
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("fleet: label the selected nodes %s (the Job's Pods go only to nodes so labelled; the coordinator needs patch on nodes: deploy/rbac.yaml): %w",
			NodeLabel(r.name), errors.Join(errs...))
	}
	return labelled, gone, nil
}

// setNodeLabel puts NodeLabel(name)=NodeSelected on node.
func (r *run) setNodeLabel(ctx context.Context, node string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{NodeLabel(r.name): NodeSelected}}})
	if err != nil {
		return err
	}
	_, err = r.c.Core.Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	return nil
}

// markTested taints node TestedTaint once (a Pod of the run was bound
// there): no later index lands there.
func (r *run) markTested(ctx context.Context, node string) error {
	if r.tainted[node] {
		return nil
	}
	if err := r.setMarks(ctx, node, true); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("taint %s: %w", TestedTaint(r.name).Key, err)
	}
	r.tainted[node] = true
	return nil
}

// setMarks puts TestedTaint on node (on), or takes the run's taint and
// label off (cleanup: one read and one write per node). A Node's taints
// are one list (no merge key): read, changed, written back with its
// resourceVersion, again on a conflict with the node's other writers.
func (r *run) setMarks(ctx context.Context, node string, on bool) error {
	t := TestedTaint(r.name)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := r.c.Core.Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		has := slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
		_, labelled := n.Labels[NodeLabel(r.name)]
		switch {
		case on && has, !on && !has && !labelled:
			return nil
		case on:
			n.Spec.Taints = append(n.Spec.Taints, t)
		default:
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
			delete(n.Labels, NodeLabel(r.name))
		}
		_, err = r.c.Core.Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// createJob creates the claim template and the Job.
func (r *run) createJob(ctx context.Context) error {
	if r.o.Spec.DeviceClass != "" {
		if _, err := r.c.Resource.ResourceClaimTemplates(r.ns).Create(ctx, ClaimTemplate(r.o.Spec), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("fleet: ResourceClaimTemplate: %w", err)
		}
	}
	if _, err := r.c.Batch.Jobs(r.ns).Create(ctx, Job(r.o.Spec), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("fleet: Job: %w", err)
	}
	return nil
}

// wait decides what it can whenever an informer sees a change, and every
// Poll, until every node has its outcome, the Job has ended, or ctx
// (bounded by the deadline and a margin) ends. It renews the fleet lock.
func (r *run) wait(ctx context.Context) error {
	deadline := time.Duration(r.o.Spec.DeadlineS)*time.Second + 30*time.Second // the Job controller's and the Pods' stop
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	t := time.NewTicker(r.o.Poll)
	defer t.Stop()
	renewed := time.Now()
	for {
		done, err := r.step(ctx)
		if err != nil && ctx.Err() == nil {
			r.o.Logf("fleet: %v (retrying)", err)
		}
		if done {
			return nil
		}
		if r.lock != nil && time.Since(renewed) > lockDuration/3 {
			if err := r.lock.renew(ctx); err != nil && ctx.Err() == nil {
				r.o.Logf("fleet: %v (retrying)", err)
			} else {
				renewed = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			reason := fmt.Sprintf("timed out: the fleet run's deadline (%ds and a 30 s margin) passed before its Pod finished", r.o.Spec.DeadlineS)
			if context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				reason = "the fleet run was stopped: " + context.Cause(ctx).Error()
			}
			r.decideRest(reason)
			return fmt.Errorf("fleet: %w", context.Cause(ctx))
		case <-r.changed:
		case <-t.C:
		}
	}
}

// decideRest gives every node without an outcome reason.
func (r *run) decideRest(reason string) {
	for _, n := range r.o.Spec.Nodes {
		if _, ok := r.decided[n]; !ok {
			r.decide(n, fleetreport.StatusFail, reason)
		}
	}
}

func (r *run) decide(node, status, reason string) {
	r.decided[node] = fleetreport.NodeResult{Node: node, Status: status, Reason: reason}
	if status == fleetreport.StatusPass {
		r.o.Logf("fleet: node %s PASS", node)
	} else {
		r.o.Logf("fleet: node %s %s: %s", node, status, reason)
	}
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// step looks at the Job, its Pods and the nodes' Leases as the informers
// hold them and decides what it can; done when every node has its
// outcome. Its only API calls are once per node or Pod: the node's
// taint, the ended Pod's result, a stray Pod's deletion.
func (r *run) step(ctx context.Context) (bool, error) {
	obj, ok, err := r.jobs.GetByKey(r.ns + "/" + r.name)
	if err != nil {
		return false, fmt.Errorf("Job: %w", err)
	}
	var job *batchv1.Job
	if ok {
		job, r.sawJob = obj.(*batchv1.Job), true
	} else if r.sawJob {
		r.decideRest("the Job was deleted while the run went on (not by this run)")
		return true, nil
	}
	var pods []*corev1.Pod
	for _, o := range r.pods.List() {
		if p := o.(*corev1.Pod); p.Labels[LabelFleet] == r.name {
			pods = append(pods, p)
		}
	}
	// Finished Pods first, then by age: on a node with two, the one that
	// ran first is its own.
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		if ta, tb := terminal(a), terminal(b); ta != tb {
			if ta {
				return -1
			}
			return 1
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	var errs []error
	for _, p := range r.gone.take() {
		errs = append(errs, r.podGone(ctx, p))
	}
	now := time.Now()
	var unschedulable []string // the scheduler's messages for Pods pending past ScheduleTimeout
	active := 0
	for _, p := range pods {
		node := p.Spec.NodeName
		if node == "" {
			if terminal(p) || p.DeletionTimestamp != nil {
				continue
			}
			first, ok := r.pending[p.Name]
			if !ok {
				r.pending[p.Name] = now
				first = now
			}
			active++
			msg := scheduleMessage(p)
			r.unsched[p.Name] = msg
			if now.Sub(first) >= r.o.ScheduleTimeout {
				unschedulable = append(unschedulable, msg)
			}
			continue
		}
		errs = append(errs, r.markTested(ctx, node))
		if first, ok := r.ran[node]; ok && first != p.Name {
			// A second index on a node (bound before the node was
			// tainted): deleted, the node is tested once.
			if !terminal(p) && p.DeletionTimestamp == nil {
				r.o.Logf("fleet: Pod %s landed on node %s, already tested by %s: deleted", p.Name, node, first)
				r.strays = append(r.strays, p.Name+" on "+node)
				delete(r.unsched, p.Name) // its old message names no node left out
				_ = r.c.Core.Pods(r.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
			}
			continue
		}
		r.ran[node] = p.Name
		delete(r.unsched, p.Name) // placed: it explains no node left out
		if _, ok := r.decided[node]; ok {
			continue
		}
		if terminal(p) {
			errs = append(errs, r.ended(ctx, p, ""))
			continue
		}
		active++
		if lost, why := r.nodeLost(ctx, node, now); lost {
			r.decide(node, fleetreport.StatusFail, "node lost mid-run: "+why)
			// Its Pod cannot be stopped by its node: deleted at once,
			// so the Job counts the index failed and goes on.
			_ = r.c.Core.Pods(r.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		}
	}
	if len(r.decided) == len(r.o.Spec.Nodes) {
		return true, errors.Join(errs...)
	}
	if job == nil {
		return false, errors.Join(errs...)
	}
	if c := jobCondition(job, batchv1.JobFailed); c != nil && c.Reason == batchv1.JobReasonDeadlineExceeded {
		r.decideRest(fmt.Sprintf("timed out: the Job's activeDeadlineSeconds (%ds) passed before this node finished", r.o.Spec.DeadlineS))
		return true, errors.Join(errs...)
	}
	// Every Pod still there is unschedulable past the timeout: the nodes
	// without an outcome are those no Pod could land on.
	if len(unschedulable) > 0 && len(unschedulable) == active {
		slices.Sort(unschedulable)
		r.decideRest(fmt.Sprintf("no Pod scheduled on it in %v: %s", r.o.ScheduleTimeout, strings.Join(slices.Compact(unschedulable), "; ")))
		return true, errors.Join(errs...)
	}
	if (jobCondition(job, batchv1.JobComplete) != nil || jobCondition(job, batchv1.JobFailed) != nil) && active == 0 && errors.Join(errs...) == nil {
		reason := "no Pod of the Job ran on it before the Job ended"
		if len(r.strays) > 0 {
			reason += fmt.Sprintf(" (%d index(es) spent on nodes already tested: %s)", len(r.strays), strings.Join(r.strays, ", "))
		}
		if len(r.unsched) > 0 {
			msgs := slices.Sorted(maps.Values(r.unsched))
			if i := slices.Index(msgs, noScheduler); i >= 0 && len(slices.Compact(slices.Clone(msgs))) > 1 {
				msgs = slices.DeleteFunc(msgs, func(m string) bool { return m == noScheduler }) // seen before the scheduler wrote its reason
			}
			reason = "no Pod scheduled on it: " + strings.Join(slices.Compact(msgs), "; ")
		}
		r.decideRest(reason)
		return true, nil
	}
	return false, errors.Join(errs...)
}

// ended decides the node of Pod p, which has ended (or was deleted: why
// says so), from its result ConfigMap, read once by name: a Pod uploads
// before it exits, and a Get is read from etcd, so a result missing now
// never came. A result stands whatever happened to its Pod after it was
// sent (an eviction after finishing loses nothing).
func (r *run) ended(ctx context.Context, p *corev1.Pod, why string) error {
	node := p.Spec.NodeName
	index := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if index == "" {
		index = p.Labels[batchv1.JobCompletionIndexAnnotation]
	}
	cm, err := r.c.Core.ConfigMaps(r.ns).Get(ctx, ResultName(r.name, index), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && cm.Labels[LabelNode] != node):
		reason := why
		switch {
		case why != "":
		case p.Status.Phase == corev1.PodFailed:
			reason = podFailure(p)
		default:
			reason = fmt.Sprintf("its Pod %s succeeded but sent no result (ConfigMap %s)", p.Name, ResultName(r.name, index))
		}
		r.decide(node, fleetreport.StatusFail, reason)
		return nil
	case err != nil:
		return fmt.Errorf("node %s's result: %w", node, err)
	}
	res, err := Decode(cm)
	if err != nil {
		r.decide(node, fleetreport.StatusFail, "its result could not be read: "+err.Error())
		return nil
	}
	status, reason := fleetreport.StatusPass, ""
	if res.ExitCode != 0 {
		see := "its report"
		if res.Comparison != nil {
			see = "its comparison" // a variant run's: fleetreport gives its reason
		}
		status, reason = fleetreport.StatusFail, fmt.Sprintf("the suite failed on the node (go test exited %d; see %s)", res.ExitCode, see)
	}
	r.decide(node, status, reason)
	d := r.decided[node]
	d.Report, d.Bench, d.Samples, d.Truncated, d.Comparison = res.Report, res.Bench, res.Samples, res.Truncated, res.Comparison
	r.decided[node] = d
	return nil
}

// podGone is Pod p deleted: when it ran on a node without an outcome (not
// deleted by this run), that node's outcome is its result if it sent one,
// else the deletion.
func (r *run) podGone(ctx context.Context, p *corev1.Pod) error {
	delete(r.pending, p.Name) // its scheduler message (unsched) may still name a node left out
	node := p.Spec.NodeName
	if node != "" {
		if err := r.markTested(ctx, node); err != nil {
			return err
		}
	}
	if _, ok := r.decided[node]; node == "" || ok || (r.ran[node] != "" && r.ran[node] != p.Name) {
		return nil
	}
	why := fmt.Sprintf("its Pod %s was deleted before it sent a result (not by this run)", p.Name)
	if terminal(p) && p.Status.Phase == corev1.PodFailed {
		why = podFailure(p)
	}
	return r.ended(ctx, p, why)
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// scheduleMessage is why the scheduler has not placed p.
func scheduleMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	return noScheduler
}

const noScheduler = "no scheduler said why (no PodScheduled condition): is kube-scheduler running?"

// podFailure names why a Pod failed: eviction, OOM kill, or its exit.
func podFailure(p *corev1.Pod) string {
	if p.Status.Reason == "Evicted" {
		return "Pod evicted: " + p.Status.Message
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			if t.Reason == "OOMKilled" {
				return fmt.Sprintf("container OOM-killed (exit %d) before it sent a result", t.ExitCode)
			}
			msg := fmt.Sprintf("container exited %d (%s) before it sent a result", t.ExitCode, t.Reason)
			if m := lastLine(t.Message); m != "" {
				msg += ": " + m
			}
			return msg
		}
	}
	if p.Status.Reason != "" {
		return fmt.Sprintf("Pod failed: %s: %s", p.Status.Reason, p.Status.Message)
	}
	return "Pod failed before it sent a result"
}

// lastLine is a termination message's last non-empty line (the log's
// end, under FallbackToLogsOnError), at most 300 bytes.
func lastLine(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}

// leaseSeen is a node Lease's renew time and when this run first saw it.
type leaseSeen struct {
	renew metav1.MicroTime
	at    time.Time
}

// nodeLost reports whether node's Lease has not changed for NodeLost by
// this run's clock (its kubelet has stopped), or the node is gone. The
// time is when the coordinator saw the renew time change, not the renew
// time itself, as kube-controller-manager's node lifecycle controller
// does: a coordinator whose clock is ahead of the nodes' does not call
// every node lost.
func (r *run) nodeLost(ctx context.Context, node string, now time.Time) (bool, string) {
	obj, ok, _ := r.leases.GetByKey(corev1.NamespaceNodeLease + "/" + node)
	if !ok {
		// No Lease (a cluster without them): the Node read at most every
		// NodeLost/2, not at every look.
		if last, ok := r.nodeChecked[node]; ok && now.Sub(last) < r.o.NodeLost/2 {
			return false, ""
		}
		r.nodeChecked[node] = now
		if _, err := r.c.Core.Nodes().Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return true, "the Node object was deleted"
		}
		return false, ""
	}
	l := obj.(*coordinationv1.Lease)
	if l.Spec.RenewTime == nil {
		return false, ""
	}
	seen, ok := r.leaseSeen[node]
	if !ok || !seen.renew.Equal(l.Spec.RenewTime) {
		seen = leaseSeen{renew: *l.Spec.RenewTime, at: now}
		r.leaseSeen[node] = seen
	}
	if age := now.Sub(seen.at); age > r.o.NodeLost {
		return true, fmt.Sprintf("its Lease was not renewed for %.0f s (over %v): its kubelet stopped", age.Seconds(), r.o.NodeLost)
	}
	return false, ""
}

// cleanup deletes everything the run created, takes its label off the
// nodes, waits until its Pods and claims are gone (a claim holds its
// device until then), and lets the fleet lock go.
func (r *run) cleanup(ctx context.Context) error {
	var errs []error
	del := func(what string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("fleet cleanup: %s: %w", what, err))
		}
	}
	if r.lock == nil {
		// The lock not taken: the run made nothing (and what carries its
		// name may be another run's, started in the same second).
		if r.createdNS {
			del("Namespace", r.c.Core.Namespaces().Delete(ctx, r.ns, metav1.DeleteOptions{}))
		}
		return errors.Join(errs...)
	}
	sel := metav1.ListOptions{LabelSelector: LabelFleet + "=" + r.name}
	bg := metav1.DeletePropagationBackground
	del("Job", r.c.Batch.Jobs(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{PropagationPolicy: &bg}))
	del("Pods", r.c.Core.Pods(r.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
	del("ConfigMaps", r.c.Core.ConfigMaps(r.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
	if r.o.Spec.DeviceClass != "" {
		del("ResourceClaimTemplate", r.c.Resource.ResourceClaimTemplates(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{}))
		del("ResourceClaims", r.c.Resource.ResourceClaims(r.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
	}
	if r.createdRBAC {
		del("RoleBinding", r.c.RBAC.RoleBindings(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{}))
		del("Role", r.c.RBAC.Roles(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{}))
		del("ServiceAccount", r.c.Core.ServiceAccounts(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{}))
	}
	for _, n := range r.labelled {
		del("label and taint "+NodeLabel(r.name), r.setMarks(ctx, n, false))
	}
	left := func() string {
		var l []string
		if ps, err := r.c.Core.Pods(r.ns).List(ctx, sel); err == nil && len(ps.Items) > 0 {
			l = append(l, fmt.Sprintf("%d Pods", len(ps.Items)))
		}
		if r.o.Spec.DeviceClass != "" {
			if cs, err := r.c.Resource.ResourceClaims(r.ns).List(ctx, sel); err == nil && len(cs.Items) > 0 {
				l = append(l, fmt.Sprintf("%d ResourceClaims", len(cs.Items)))
			}
		}
		return strings.Join(l, ", ")
	}
wait:
	for s := left(); s != ""; s = left() {
		select {
		case <-ctx.Done():
			// Still the lock and the namespace: a namespace deleted takes
			// what is left in it with it.
			errs = append(errs, fmt.Errorf("fleet cleanup: %s still there after the Job was deleted", s))
			ctx = context.WithoutCancel(ctx)
			break wait
		case <-time.After(200 * time.Millisecond):
		}
	}
	if r.lock != nil {
		del("fleet lock", r.lock.release(ctx))
	}
	if r.createdNS {
		del("Namespace", r.c.Core.Namespaces().Delete(ctx, r.ns, metav1.DeleteOptions{}))
	}
	return errors.Join(errs...)
}
