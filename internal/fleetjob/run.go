package fleetjob

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wakebench/wakebench/internal/fleetreport"
	"github.com/wakebench/wakebench/internal/kube"
)

// Selection says which nodes run the suite. Nodes, when set, names them;
// else NodeSelector's nodes; and with Driver, only nodes publishing a
// device of that DRA driver in a ResourceSlice (the device class's
// driver: every GPU node, without a selector).
type Selection struct {
	Nodes        []string
	NodeSelector map[string]string
	Driver       string
}

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
	// Poll is how often the run's objects are read (0: 1 s).
	Poll time.Duration
	Logf func(string, ...any)
}

// Run runs the fleet: selects the nodes, applies the RBAC, creates the
// Job and waits until every node has its outcome or the run's deadline
// (Spec.DeadlineS) passed, and deletes what it created (also when ctx
// ends). It returns one result per selected node, in node-name order
// (and NOT RUN for an explicitly named node that is not there).
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
	sel, err := selectNodes(ctx, o.Clients, o.Select)
	if err != nil {
		return nil, err
	}
	if len(sel.nodes) == 0 {
		return sel.notRun, fmt.Errorf("fleet: no node selected (%s)", o.Select)
	}
	o.Spec.Nodes = sel.nodes
	r := &run{o: o, c: o.Clients, ns: o.Spec.Namespace, name: o.Spec.Name, gpus: sel.gpus, decided: map[string]fleetreport.NodeResult{}, pending: map[string]time.Time{},
		unsched: map[string]string{}, ran: map[string]string{}}
	defer func() {
		// Cleanup outlives ctx: an interrupted run leaves nothing behind.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
		defer cancel()
		if cerr := r.cleanup(cctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err := r.create(ctx); err != nil {
		return nil, err
	}
	o.Logf("fleet: Job %s/%s on %d nodes (parallelism %d, deadline %ds): %s", r.ns, r.name, len(sel.nodes),
		*Job(o.Spec).Spec.Parallelism, o.Spec.DeadlineS, strings.Join(sel.nodes, ", "))
	werr := r.wait(ctx)
	for _, n := range sel.nodes {
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

func (s Selection) String() string {
	var parts []string
	if len(s.Nodes) > 0 {
		parts = append(parts, "nodes "+strings.Join(s.Nodes, ","))
	}
	if len(s.NodeSelector) > 0 {
		parts = append(parts, "node selector "+labels.SelectorFromSet(s.NodeSelector).String())
	}
	if s.Driver != "" {
		parts = append(parts, "nodes publishing DRA driver "+s.Driver)
	}
	if len(parts) == 0 {
		return "every node"
	}
	return strings.Join(parts, "; ")
}

type selection struct {
	nodes  []string
	gpus   map[string]string // node → GPU kind
	notRun []fleetreport.NodeResult
}

// selectNodes resolves s to node names, each with its GPU kind: the
// productName its ResourceSlice publishes (the NVIDIA DRA driver and the
// local node agent both do), else its nvidia.com/gpu.product label.
func selectNodes(ctx context.Context, c *kube.Clients, s Selection) (selection, error) {
	out := selection{gpus: map[string]string{}}
	nl, err := c.Core.Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(s.NodeSelector).String()})
	if err != nil {
		return out, fmt.Errorf("fleet: list nodes: %w", err)
	}
	nodes := map[string]corev1.Node{}
	for _, n := range nl.Items {
		nodes[n.Name] = n
	}
	published := map[string]string{} // node → product, for nodes with a device of the driver
	if s.Driver != "" {
		sl, err := c.Resource.ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return out, fmt.Errorf("fleet: list ResourceSlices: %w", err)
		}
		for _, rs := range sl.Items {
			if rs.Spec.Driver != s.Driver || rs.Spec.NodeName == nil || len(rs.Spec.Devices) == 0 {
				continue
			}
			product := ""
			if a, ok := rs.Spec.Devices[0].Attributes["productName"]; ok && a.StringValue != nil {
				product = *a.StringValue
			}
			published[*rs.Spec.NodeName] = product
		}
	}
	names := slices.Sorted(maps.Keys(nodes))
	if len(s.Nodes) > 0 {
		names = nil
		for _, n := range s.Nodes {
			if _, ok := nodes[n]; !ok {
				out.notRun = append(out.notRun, fleetreport.NodeResult{Node: n, Status: fleetreport.StatusNotRun,
					Reason: "no such node (or it does not match the node selector)"})
				continue
			}
			names = append(names, n)
		}
	}
	for _, n := range names {
		product, ok := published[n]
		if s.Driver != "" && !ok {
			if len(s.Nodes) > 0 {
				out.notRun = append(out.notRun, fleetreport.NodeResult{Node: n, Status: fleetreport.StatusNotRun,
					Reason: "publishes no device of DRA driver " + s.Driver})
			}
			continue
		}
		if product == "" {
			product = strings.ReplaceAll(nodes[n].Labels["nvidia.com/gpu.product"], "-", " ")
		}
		out.nodes = append(out.nodes, n)
		out.gpus[n] = product
	}
	return out, nil
}

// run is one fleet run in progress. Only Run's goroutine uses it.
type run struct {
	o        Options
	c        *kube.Clients
	ns, name string
	gpus     map[string]string

	createdNS   bool
	createdRBAC bool
	decided     map[string]fleetreport.NodeResult // node → outcome
	pending     map[string]time.Time              // unscheduled Pod → first seen
	unsched     map[string]string                 // Pod → the scheduler's latest message about placing it
	ran         map[string]string                 // node → the Pod that runs (ran) the suite there
}

func (r *run) create(ctx context.Context) error {
	if _, err := r.c.Core.Namespaces().Get(ctx, r.ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := r.c.Core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("fleet: namespace %s: %w", r.ns, err)
		}
		r.createdNS = true
	} else if err != nil {
		return fmt.Errorf("fleet: namespace %s: %w", r.ns, err)
	}
	sa, role, rb := RBAC(r.ns)
	_, err := r.c.Core.ServiceAccounts(r.ns).Create(ctx, sa, metav1.CreateOptions{})
	if err == nil {
		r.createdRBAC = true
		if _, err = r.c.RBAC.Roles(r.ns).Create(ctx, role, metav1.CreateOptions{}); err == nil {
			_, err = r.c.RBAC.RoleBindings(r.ns).Create(ctx, rb, metav1.CreateOptions{})
		}
	}
	if err != nil && !apierrors.IsAlreadyExists(err) { // already there: deploy/rbac.yaml, kept
		return fmt.Errorf("fleet: RBAC (ServiceAccount, Role and RoleBinding %s; or apply deploy/rbac.yaml): %w", ServiceAccount, err)
	}
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

// wait reads the run's objects every Poll until every node has its
// outcome, the Job has ended, or ctx (bounded by the deadline and a
// margin) ends.
func (r *run) wait(ctx context.Context) error {
	deadline := time.Duration(r.o.Spec.DeadlineS)*time.Second + 30*time.Second // the Job controller's and the Pods' stop
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	t := time.NewTicker(r.o.Poll)
	defer t.Stop()
	for {
		done, err := r.step(ctx)
		if err != nil && ctx.Err() == nil {
			r.o.Logf("fleet: %v (retrying)", err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			reason := fmt.Sprintf("timed out: the fleet run's deadline (%ds and a 30 s margin) passed before its Pod finished", r.o.Spec.DeadlineS)
			if context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				reason = "the fleet run was stopped: " + context.Cause(ctx).Error()
			}
			r.decideRest(reason)
			return fmt.Errorf("fleet: %w", context.Cause(ctx))
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

// step reads the Job, its Pods, the results and the nodes' Leases once and
// decides what it can; done when every node has its outcome.
func (r *run) step(ctx context.Context) (bool, error) {
	sel := metav1.ListOptions{LabelSelector: LabelFleet + "=" + r.name}
	job, err := r.c.Batch.Jobs(r.ns).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("Job: %w", err)
	}
	pods, err := r.c.Core.Pods(r.ns).List(ctx, sel)
	if err != nil {
		return false, fmt.Errorf("Pods: %w", err)
	}
	// Results after Pods: a Pod seen finished has uploaded before it did.
	cms, err := r.c.Core.ConfigMaps(r.ns).List(ctx, sel)
	if err != nil {
		return false, fmt.Errorf("ConfigMaps: %w", err)
	}
	for i := range cms.Items {
		cm := &cms.Items[i]
		node := cm.Labels[LabelNode]
		if _, ok := r.decided[node]; ok || !slices.Contains(r.o.Spec.Nodes, node) {
			continue
		}
		res, err := Decode(cm)
		if err != nil {
			r.decide(node, fleetreport.StatusFail, "its result could not be read: "+err.Error())
			continue
		}
		status, reason := fleetreport.StatusPass, ""
		if res.ExitCode != 0 {
			status, reason = fleetreport.StatusFail, fmt.Sprintf("the suite failed on the node (go test exited %d; see its report)", res.ExitCode)
		}
		r.decide(node, status, reason)
		d := r.decided[node]
		d.Report, d.Bench, d.Samples, d.Truncated = res.Report, res.Bench, res.Samples, res.Truncated
		r.decided[node] = d
	}
	// Finished Pods first, then by age: on a node with two, the one that
	// ran first is its own.
	slices.SortStableFunc(pods.Items, func(a, b corev1.Pod) int {
		ta, tb := a.Status.Phase == corev1.PodSucceeded || a.Status.Phase == corev1.PodFailed, b.Status.Phase == corev1.PodSucceeded || b.Status.Phase == corev1.PodFailed
		if ta != tb {
			if ta {
				return -1
			}
			return 1
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	now := time.Now()
	var unschedulable []string // the scheduler's messages for Pods pending past ScheduleTimeout
	active := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		node := p.Spec.NodeName
		terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if node == "" {
			if terminal || p.DeletionTimestamp != nil {
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
		if first, ok := r.ran[node]; ok && first != p.Name {
			// A second index on a node: kube-scheduler does not count
			// finished Pods for anti-affinity (its informer drops them),
			// so a Pod that could not land on its own node lands on a
			// finished one. Deleted: the node is tested once, and the
			// node it could not reach keeps the scheduler's message.
			if !terminal && p.DeletionTimestamp == nil {
				if msg := r.failedScheduling(ctx, p.Name); msg != "" {
					r.unsched[p.Name] = msg // why it could not land where it should have
				}
				r.o.Logf("fleet: Pod %s landed on node %s, already tested by %s: deleted", p.Name, node, first)
				_ = r.c.Core.Pods(r.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
			}
			continue
		}
		r.ran[node] = p.Name
		if _, ok := r.decided[node]; ok {
			continue
		}
		switch {
		case p.Status.Phase == corev1.PodFailed:
			r.decide(node, fleetreport.StatusFail, podFailure(p))
		case p.Status.Phase == corev1.PodSucceeded:
			// Uploaded before it exited: a result not there yet is a
			// ConfigMap list older than the Pod's; the next step has it.
		default:
			active++
			if lost, why := r.nodeLost(ctx, node, now); lost {
				r.decide(node, fleetreport.StatusFail, "node lost mid-run: "+why)
				// Its Pod cannot be stopped by its node: deleted at once,
				// so the Job counts the index failed and goes on.
				_ = r.c.Core.Pods(r.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
			}
		}
	}
	if len(r.decided) == len(r.o.Spec.Nodes) {
		return true, nil
	}
	if c := jobCondition(job, batchv1.JobFailed); c != nil && c.Reason == batchv1.JobReasonDeadlineExceeded {
		r.decideRest(fmt.Sprintf("timed out: the Job's activeDeadlineSeconds (%ds) passed before this node finished", r.o.Spec.DeadlineS))
		return true, nil
	}
	// Every Pod still there is unschedulable past the timeout: the nodes
	// without an outcome are those no Pod could land on.
	if len(unschedulable) > 0 && len(unschedulable) == active {
		slices.Sort(unschedulable)
		r.decideRest(fmt.Sprintf("no Pod scheduled on it in %v: %s", r.o.ScheduleTimeout, strings.Join(slices.Compact(unschedulable), "; ")))
		return true, nil
	}
	if jobCondition(job, batchv1.JobComplete) != nil || jobCondition(job, batchv1.JobFailed) != nil {
		if active == 0 {
			reason := "no Pod of the Job ran on it before the Job ended"
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
	}
	return false, nil
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
			return fmt.Sprintf("container exited %d (%s) before it sent a result", t.ExitCode, t.Reason)
		}
	}
	if p.Status.Reason != "" {
		return fmt.Sprintf("Pod failed: %s: %s", p.Status.Reason, p.Status.Message)
	}
	return "Pod failed before it sent a result"
}

// nodeLost reports whether node's Lease is older than NodeLost (its
// kubelet has stopped), or the node is gone.
func (r *run) nodeLost(ctx context.Context, node string, now time.Time) (bool, string) {
	l, err := r.c.Coordination.Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, nerr := r.c.Core.Nodes().Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(nerr) {
			return true, "the Node object was deleted"
		}
		return false, ""
	}
	if err != nil || l.Spec.RenewTime == nil {
		return false, ""
	}
	if age := now.Sub(l.Spec.RenewTime.Time); age > r.o.NodeLost {
		return true, fmt.Sprintf("its Lease was last renewed %.0f s ago (over %v): its kubelet stopped", age.Seconds(), r.o.NodeLost)
	}
	return false, ""
}

// cleanup deletes everything the run created and waits until its Pods
// and claims are gone (a claim holds its device until then).
func (r *run) cleanup(ctx context.Context) error {
	var errs []error
	del := func(what string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("fleet cleanup: %s: %w", what, err))
		}
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
		del("RoleBinding", r.c.RBAC.RoleBindings(r.ns).Delete(ctx, ServiceAccount, metav1.DeleteOptions{}))
		del("Role", r.c.RBAC.Roles(r.ns).Delete(ctx, ServiceAccount, metav1.DeleteOptions{}))
		del("ServiceAccount", r.c.Core.ServiceAccounts(r.ns).Delete(ctx, ServiceAccount, metav1.DeleteOptions{}))
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
	for s := left(); s != ""; s = left() {
		select {
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("fleet cleanup: %s still there after the Job was deleted", s))
			return errors.Join(errs...)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if r.createdNS {
		del("Namespace", r.c.Core.Namespaces().Delete(ctx, r.ns, metav1.DeleteOptions{}))
	}
	return errors.Join(errs...)
}

// failedScheduling is the last FailedScheduling event's message about Pod
// name ("" if none): the scheduler's reason, when the Pod was placed
// before the coordinator saw its PodScheduled condition say it.
func (r *run) failedScheduling(ctx context.Context, name string) string {
	evs, err := r.c.Core.Events(r.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return ""
	}
	msg := ""
	for _, e := range evs.Items {
		if e.Reason == "FailedScheduling" {
			msg = e.Message
		}
	}
	return msg
}
