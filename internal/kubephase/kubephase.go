// Package kubephase is the Kubernetes phase: the run's two models as Pods
// on a real Kubernetes control plane, sharing one GPU through a DRA
// ResourceClaim. It measures what the rest of the protocol cannot: a Pod's
// cold start (created → scheduled with its claim allocated → container
// started → /health → /v1/models → first token → Ready → routable) beside
// the in-Pod restart and the wake; handoffs across Pods on one claim, with
// the time until the woken Pod is routable (a readiness gate tied to sleep
// state, the Service's EndpointSlice); what the scheduler's claim
// accounting allows with per-Pod claims on a device's memory capacity; and
// scale to zero and back against sleeping. It talks to any API server
// (package kube); the local node agent or a real kubelet runs the Pods.
package kubephase

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/vllm"
)

// Phase is the Kubernetes phase's name in the report.
const Phase = "kubernetes"

// Node is what the phase may ask of the node beyond the API: restarting a
// container in place (the local node agent can; on a cluster nil).
type Node interface {
	Restart(ns, name string) error
}

// Env is what the phase runs with.
type Env struct {
	Cfg     config.Config
	Clients *kube.Clients
	Node    Node // nil on a real cluster: no in-Pod restart
	// Memory reads the device's used and total GiB; nil without a source.
	Memory func(ctx context.Context) (used, total float64, err error)
	// Driver, when set, is the local DRA driver: the phase creates the
	// DeviceClass selecting it (on a cluster the DRA driver installs it).
	Driver string
	// FreePort picks each Pod's port on the host network (local); nil:
	// every Pod listens on kubernetes.port.
	FreePort func() (int, error)
	// HostIP is the address local Pods bind to (with FreePort).
	HostIP string
	// Claim overrides the shared claim's name in the Pods (tests: a claim
	// that does not exist).
	Claim string
	Logf  func(format string, args ...any)
}

type phase struct {
	Env
	k      config.Kubernetes
	ns     string
	out    record.Kubernetes
	n      map[string]int // Pods made per model
	made   int            // Pods made in all
	conns  []*vllm.Client // every Pod's client, their idle connections closed at the end
	pods   map[string]*running
	order  []string // model labels
	models map[string]config.Model
}

// running is a Pod the phase started and talks to.
type running struct {
	label, name string
	uid         types.UID
	client      *vllm.Client
	asleep      bool
}

// Run runs the phase. It returns what it measured, also when it fails,
// and deletes every object it created.
func Run(ctx context.Context, env Env) (record.Kubernetes, error) {
	p := &phase{Env: env, k: env.Cfg.Kubernetes, ns: env.Cfg.Kubernetes.Namespace, n: map[string]int{},
		pods: map[string]*running{}, models: map[string]config.Model{}}
	if p.Logf == nil {
		p.Logf = func(string, ...any) {}
	}
	for _, m := range env.Cfg.Models {
		p.order = append(p.order, m.Label)
		p.models[m.Label] = m
	}
	p.out.Namespace = p.ns
	err := p.run(ctx)
	// Cleanup runs on a context of its own: a cancelled run still deletes.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(p.k.TimeoutS*float64(time.Second)))
	defer cancel()
	if cerr := p.cleanup(cctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	for _, c := range p.conns {
		c.CloseIdle()
	}
	return p.out, err
}

func (p *phase) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, time.Duration(p.k.TimeoutS*float64(time.Second)))
}

func (p *phase) run(ctx context.Context) error {
	if err := p.setup(ctx); err != nil {
		return err
	}
	a, b := p.order[0], p.order[1]
	claim := SharedClaim
	if p.Claim != "" {
		claim = p.Claim
	}
	// 1. Cold start of A; its in-Pod restart; A to sleep; cold start of B.
	if _, err := p.coldStart(ctx, a, claim, "cold"); err != nil {
		return err
	}
	if p.Node != nil {
		if err := p.restartInPod(ctx, a); err != nil {
			return err
		}
	} else {
		p.out.Notes = append(p.out.Notes, "in-Pod restart not executed: a cluster's kubelet restarts a container only when it exits, which the phase cannot cause without exec")
	}
	if err := p.sleep(ctx, a, p.k.SleepLevel); err != nil {
		return err
	}
	if _, err := p.coldStart(ctx, b, claim, "cold"); err != nil {
		return err
	}
	// 2. Shared-claim accounting and handoffs across Pods.
	if err := p.shared(ctx, claim); err != nil {
		return err
	}
	from, to := b, a
	for range p.k.Handoffs {
		if err := p.handoff(ctx, from, to, p.k.SleepLevel); err != nil {
			return err
		}
		from, to = to, from
	}
	// 3. Scale to zero and back: delete the awake Pod, start a new one.
	if err := p.scaleToZero(ctx, from, claim); err != nil {
		return err
	}
	// 4. Per-Pod claims on the device's memory capacity.
	return p.capacity(ctx, claim)
}

// setup makes the namespace, DeviceClass (local), Services and the shared
// claim, and waits for the namespace's default ServiceAccount (Pods need it).
func (p *phase) setup(ctx context.Context) error {
	c := p.Clients
	_, err := c.Core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes: namespace %s: %w", p.ns, err)
	}
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	if _, err := kube.Track(tctx, c.Core.ServiceAccounts(p.ns).Watch, "default", "", []kube.Milestone[*corev1.ServiceAccount]{{Name: "exists", Reached: func(*corev1.ServiceAccount) bool { return true }}}, nil); err != nil {
		return fmt.Errorf("kubernetes: ServiceAccount default never appeared in namespace %s (is kube-controller-manager running? it creates it): %w", p.ns, err)
	}
	if p.Driver != "" {
		_, err := c.Resource.DeviceClasses().Create(ctx, deviceClass(p.k.DeviceClass, p.Driver), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubernetes: DeviceClass %s: %w", p.k.DeviceClass, err)
		}
	} else if _, err := c.Resource.DeviceClasses().Get(ctx, p.k.DeviceClass, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("kubernetes: DeviceClass %s (kubernetes.device_class): %w; install the DRA driver that provides it (README: runner guide)", p.k.DeviceClass, err)
	}
	for _, l := range p.order {
		if _, err := c.Core.Services(p.ns).Create(ctx, service(p.ns, l, p.k.Port), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubernetes: Service %s: %w", serviceName(l), err)
		}
	}
	if p.Claim == "" {
		if _, err := c.Resource.ResourceClaims(p.ns).Create(ctx, claimSpec(p.ns, SharedClaim, p.k.DeviceClass, 0), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubernetes: ResourceClaim %s: %w", SharedClaim, err)
		}
	}
	return nil
}

// cleanup deletes the Pods, claims and Services the phase made, and waits
// for the Pods to go (their containers stopped).
func (p *phase) cleanup(ctx context.Context) error {
	c := p.Clients
	sel := metav1.ListOptions{LabelSelector: labelApp + "=wakebench"}
	var errs []error
	if err := c.Core.Pods(p.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("kubernetes cleanup: pods: %w", err))
	}
	for {
		l, err := c.Core.Pods(p.ns).List(ctx, sel)
		if err != nil || len(l.Items) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("kubernetes cleanup: %d Pods still there: %w", len(l.Items), context.Cause(ctx)))
			return errors.Join(errs...)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := c.Resource.ResourceClaims(p.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("kubernetes cleanup: claims: %w", err))
	}
	for _, l := range p.order {
		if err := c.Core.Services(p.ns).Delete(ctx, serviceName(l), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("kubernetes cleanup: service: %w", err))
		}
	}
	return errors.Join(errs...)
}

func since(t0, t time.Time) float64 {
	if t.IsZero() {
		return -1
	}
	return t.Sub(t0).Seconds()
}

func cond(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func condTrue(t corev1.PodConditionType) func(*corev1.Pod) bool {
	return func(pod *corev1.Pod) bool {
		c := cond(pod, t)
		return c != nil && c.Status == corev1.ConditionTrue
	}
}

// refusal is the scheduler's PodScheduled condition when it has refused
// the Pod (Unschedulable), nil otherwise.
func refusal(pod *corev1.Pod) *corev1.PodCondition {
	if c := cond(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
		return c
	}
	return nil
}

// unschedulable fails a Pod the scheduler has refused, with its reason.
func unschedulable(pod *corev1.Pod) error {
	if c := refusal(pod); c != nil {
		return fmt.Errorf("pod %s unschedulable: %s", pod.Name, c.Message)
	}
	if cs := pod.Status.ContainerStatuses; len(cs) > 0 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Message != "" {
		return fmt.Errorf("pod %s: container %s: %s", pod.Name, cs[0].State.Waiting.Reason, cs[0].State.Waiting.Message)
	}
	return nil
}

// endpointReady is whether pod's endpoint in the Service's slice is ready (want) .
func endpointReady(pod string, want bool) func(*discoveryv1.EndpointSlice) bool {
	return func(s *discoveryv1.EndpointSlice) bool {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && e.TargetRef.Name == pod {
				return (e.Conditions.Ready != nil && *e.Conditions.Ready) == want
			}
		}
		return !want // absent: not routable
	}
}

// setGate sets the awake readiness gate of pod.
func (p *phase) setGate(ctx context.Context, pod string, awake bool) error {
	st := corev1.ConditionFalse
	if awake {
		st = corev1.ConditionTrue
	}
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"lastTransitionTime":%q}]}}`,
		AwakeGate, st, time.Now().UTC().Format(time.RFC3339))
	_, err := p.Clients.Core.Pods(p.ns).Patch(ctx, pod, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("kubernetes: set %s=%s on pod %s: %w", AwakeGate, st, pod, err)
	}
	return nil
}

// coldStart creates model label's next Pod on claim and follows it to its
// first token, Ready and routable.
func (p *phase) coldStart(ctx context.Context, label, claim, kind string) (*record.PodStart, error) {
	m := p.models[label]
	name, port, host, err := p.next(label)
	if err != nil {
		return nil, err
	}
	ps := &record.PodStart{Model: label, Pod: name, Kind: kind}
	for _, r := range p.pods {
		ps.OtherAsleep = ps.OtherAsleep || (r.asleep && r.label != label)
	}
	p.Logf("kubernetes: %s start of %s (%s) as pod %s on claim %s", kind, label, m.Name, name, claim)
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	started := make(chan *corev1.Pod, 1)
	// A claim another Pod holds is allocated already: 0 for this Pod.
	pre, err := p.Clients.Resource.ResourceClaims(p.ns).Get(ctx, claim, metav1.GetOptions{})
	preAllocated := err == nil && pre.Status.Allocation != nil
	t0 := time.Now()
	obj, err := p.Clients.Core.Pods(p.ns).Create(ctx, podSpec(p.Cfg, m, name, claim, host, port), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: create pod %s: %w", name, err)
	}
	tr := kube.NewTracker(tctx)
	tctx = tr.Context()
	var podP kube.Progress[*corev1.Pod]
	tr.Go(func() error {
		var err error
		podP, err = kube.Track(tctx, p.Clients.Core.Pods(p.ns).Watch, name, "", []kube.Milestone[*corev1.Pod]{
			{Name: "scheduled", Reached: condTrue(corev1.PodScheduled)},
			{Name: "started", Reached: func(pod *corev1.Pod) bool {
				cs := pod.Status.ContainerStatuses
				return len(cs) > 0 && cs[0].State.Running != nil && pod.Status.PodIP != ""
			}, Then: func(pod *corev1.Pod) { started <- pod }},
			{Name: "containers-ready", Reached: condTrue(corev1.ContainersReady)},
			{Name: "ready", Reached: condTrue(corev1.PodReady)},
		}, func(pod *corev1.Pod) error {
			if err := unschedulable(pod); err != nil {
				return err
			}
			if cs := pod.Status.ContainerStatuses; len(cs) > 0 && cs[0].RestartCount > 0 {
				code := int32(-1)
				if t := cs[0].LastTerminationState.Terminated; t != nil {
					code = t.ExitCode
				}
				return fmt.Errorf("pod %s: container %s exited with code %d before it was ready (restarted %d times): see its log", name, cs[0].Name, code, cs[0].RestartCount)
			}
			return nil
		})
		if err != nil {
			return p.explainPod(ctx, name, podP, err)
		}
		return nil
	})
	var claimP kube.Progress[*resourcev1.ResourceClaim]
	claimCtx, stopClaim := context.WithCancel(tctx)
	defer stopClaim()
	tr.Go(func() error {
		claimP, _ = kube.Track(claimCtx, p.Clients.Resource.ResourceClaims(p.ns).Watch, claim, "", []kube.Milestone[*resourcev1.ResourceClaim]{
			{Name: "allocated", Reached: func(c *resourcev1.ResourceClaim) bool { return c.Status.Allocation != nil }},
		}, nil)
		return nil
	})
	var sliceP kube.Progress[*discoveryv1.EndpointSlice]
	tr.Go(func() error {
		var err error
		sliceP, err = kube.Track(tctx, p.Clients.Discovery.EndpointSlices(p.ns).Watch, "", discoveryv1.LabelServiceName+"="+serviceName(label),
			[]kube.Milestone[*discoveryv1.EndpointSlice]{{Name: "routable", Reached: endpointReady(name, true)}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s never routable: Service %s's EndpointSlice does not list it ready (is kube-controller-manager's endpointslice controller running?): %w", name, serviceName(label), err)
		}
		return nil
	})
	fail := func(err error) (*record.PodStart, error) { return ps, tr.Fail(err) }
	var pod *corev1.Pod
	select {
	case pod = <-started:
	case <-tctx.Done():
		// The pod tracker says why (unschedulable, never scheduled, …).
		return fail(context.Cause(tctx))
	}
	r := &running{label: label, name: name, uid: obj.UID,
		client: vllm.New("http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))}
	p.pods[label] = r
	p.conns = append(p.conns, r.client)
	poll := time.Duration(p.Cfg.Timeouts.PollMS * float64(time.Millisecond))
	health, err := r.client.WaitReady(tctx, poll)
	if err != nil {
		return fail(fmt.Errorf("kubernetes: pod %s: /health: %w", name, err))
	}
	ids, err := r.client.Models(tctx)
	if err != nil || !slices.Contains(ids, m.Name) {
		return fail(fmt.Errorf("kubernetes: pod %s: /v1/models lists %v, not %q: %v", name, ids, m.Name, err))
	}
	models := time.Now()
	if v, err := r.client.Version(tctx); err == nil {
		p.out.ServerVersion = v
	}
	ft, err := p.firstToken(tctx, r)
	if err != nil {
		return fail(err)
	}
	if err := p.setGate(tctx, name, true); err != nil {
		return fail(err)
	}
	// The claim was allocated before the Pod was bound, long ago: a claim
	// watch still open only waits for nothing.
	stopClaim()
	if err := tr.Wait(); err != nil {
		return ps, err
	}
	ps.ScheduledS, ps.ContainerStartedS = since(t0, podP.At["scheduled"]), since(t0, podP.At["started"])
	ps.ContainersReadyS, ps.ReadyS = since(t0, podP.At["containers-ready"]), since(t0, podP.At["ready"])
	ps.HealthS, ps.ModelsS, ps.FirstTokenS = since(t0, health), since(t0, models), since(t0, ft)
	ps.RoutableS = since(t0, sliceP.At["routable"])
	ps.ClaimAllocatedS = since(t0, claimP.At["allocated"])
	if preAllocated {
		ps.ClaimAllocatedS = 0
	}
	p.out.Starts = append(p.out.Starts, *ps)
	p.Logf("kubernetes: %s scheduled %.3fs, started %.3fs, /health %.3fs, first token %.3fs, Ready %.3fs, routable %.3fs",
		name, ps.ScheduledS, ps.ContainerStartedS, ps.HealthS, ps.FirstTokenS, ps.ReadyS, ps.RoutableS)
	return ps, nil
}

// next names model label's next Pod (wakebench-<label>-<n>) and gives it
// its address.
func (p *phase) next(label string) (name string, port int, host string, err error) {
	p.n[label]++
	port, host, err = p.address()
	return fmt.Sprintf("wakebench-%s-%d", lower(label), p.n[label]), port, host, err
}

// address is the next Pod's port and the address it binds: a free port
// on the local node; kubernetes.port on a Pod network, where every Pod has
// its own IP; successive ports from it on a cluster node's network, where
// Pods of the phase may share a node.
func (p *phase) address() (port int, host string, err error) {
	p.made++
	switch {
	case p.FreePort != nil:
		port, err = p.FreePort()
		return port, p.HostIP, err
	case p.k.HostNetwork:
		return p.k.Port + p.made - 1, "0.0.0.0", nil
	}
	return p.k.Port, "0.0.0.0", nil
}

// explainPod turns a Pod that did not get where it should into an error
// naming the component or object to look at.
func (p *phase) explainPod(ctx context.Context, name string, pp kube.Progress[*corev1.Pod], err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded) && pp.At["scheduled"].IsZero():
		// The scheduler holds back, without a word on the Pod, a Pod
		// whose claim does not exist: name the claim.
		if pp.Seen {
			for _, rc := range pp.Last.Spec.ResourceClaims {
				if rc.ResourceClaimName == nil {
					continue
				}
				_, gerr := p.Clients.Resource.ResourceClaims(p.ns).Get(ctx, *rc.ResourceClaimName, metav1.GetOptions{})
				if apierrors.IsNotFound(gerr) {
					return fmt.Errorf("kubernetes: pod %s not scheduled after %vs: its ResourceClaim %q does not exist in namespace %s: %w", name, p.k.TimeoutS, *rc.ResourceClaimName, p.ns, err)
				}
			}
		}
		if pp.Seen && cond(pp.Last, corev1.PodScheduled) == nil {
			return fmt.Errorf("kubernetes: pod %s not scheduled after %vs and no scheduler said why (no PodScheduled condition): is kube-scheduler running? %w", name, p.k.TimeoutS, err)
		}
		return fmt.Errorf("kubernetes: pod %s not scheduled after %vs: %w", name, p.k.TimeoutS, err)
	case errors.Is(err, context.DeadlineExceeded) && pp.At["started"].IsZero():
		return fmt.Errorf("kubernetes: pod %s scheduled but its container never started after %vs: is the node's kubelet (or node agent) running? %w", name, p.k.TimeoutS, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("kubernetes: pod %s started but not Ready after %vs: %w", name, p.k.TimeoutS, err)
	}
	return fmt.Errorf("kubernetes: %w", err)
}

// firstToken sends one short streamed completion; it returns when its first
// token arrived.
func (p *phase) firstToken(ctx context.Context, r *running) (time.Time, error) {
	m := p.models[r.label]
	s, err := r.client.Complete(ctx, vllm.CompletionRequest{Model: m.Name, Prompt: p.Cfg.Protocol.Prompt,
		MaxTokens: p.Cfg.Protocol.ProbeMaxTokens, IgnoreEOS: true})
	if err != nil {
		return time.Time{}, fmt.Errorf("kubernetes: pod %s: first token: %w", r.name, err)
	}
	if len(s.Tokens) == 0 {
		return time.Time{}, fmt.Errorf("kubernetes: pod %s: the probe returned no token", r.name)
	}
	return s.Tokens[0], nil
}

// restartInPod kills label's container and follows the node's restart to
// the first token.
func (p *phase) restartInPod(ctx context.Context, label string) error {
	r := p.pods[label]
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	t0 := time.Now()
	if err := p.Node.Restart(p.ns, r.name); err != nil {
		return fmt.Errorf("kubernetes: in-Pod restart of %s: %w", r.name, err)
	}
	health, err := r.client.WaitReady(tctx, time.Duration(p.Cfg.Timeouts.PollMS*float64(time.Millisecond)))
	if err != nil {
		return fmt.Errorf("kubernetes: in-Pod restart of %s: /health: %w", r.name, err)
	}
	ft, err := p.firstToken(tctx, r)
	if err != nil {
		return err
	}
	pod, err := p.Clients.Core.Pods(p.ns).Get(tctx, r.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: in-Pod restart of %s: %w", r.name, err)
	}
	rs := record.PodRestart{Model: label, Pod: r.name, HealthS: since(t0, health), FirstTokenS: since(t0, ft)}
	if cs := pod.Status.ContainerStatuses; len(cs) > 0 {
		rs.RestartCount = cs[0].RestartCount
	}
	p.out.Restarts = append(p.out.Restarts, rs)
	p.Logf("kubernetes: in-Pod restart of %s: /health %.3fs, first token %.3fs (restart count %d)", r.name, rs.HealthS, rs.FirstTokenS, rs.RestartCount)
	return nil
}

// sleep takes label's Pod out of its Service (gate False) and puts it to
// sleep (outside a handoff: nothing routes to it meanwhile).
func (p *phase) sleep(ctx context.Context, label string, level int) error {
	r := p.pods[label]
	if err := p.setGate(ctx, r.name, false); err != nil {
		return err
	}
	return p.sleepServer(ctx, r, level)
}

// sleepServer sends r's server to sleep at level.
func (p *phase) sleepServer(ctx context.Context, r *running, level int) error {
	tctx, cancel := context.WithTimeout(ctx, time.Duration(p.Cfg.Timeouts.SleepS*float64(time.Second)))
	defer cancel()
	if err := r.client.Sleep(tctx, level); err != nil {
		return fmt.Errorf("kubernetes: sleep pod %s: %w", r.name, err)
	}
	r.asleep = true
	return nil
}

// handoff switches the device from one model's Pod to the other's.
func (p *phase) handoff(ctx context.Context, from, to string, level int) error {
	rf, rt := p.pods[from], p.pods[to]
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	ho := record.PodHandoff{From: from, To: to, Level: level, UsedGiB: -1}
	tr := kube.NewTracker(tctx)
	tctx = tr.Context()
	var readyP kube.Progress[*corev1.Pod]
	var inP, outP kube.Progress[*discoveryv1.EndpointSlice]
	t0 := time.Now()
	tr.Go(func() error {
		var err error
		readyP, err = kube.Track(tctx, p.Clients.Core.Pods(p.ns).Watch, rt.name, "", []kube.Milestone[*corev1.Pod]{
			{Name: "ready", Reached: condTrue(corev1.PodReady)}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s not Ready after its wake: %w", rt.name, err)
		}
		return nil
	})
	tr.Go(func() error {
		var err error
		inP, err = kube.Track(tctx, p.Clients.Discovery.EndpointSlices(p.ns).Watch, "", discoveryv1.LabelServiceName+"="+serviceName(to),
			// To's endpoint went unready with its last sleep: it turns ready with this wake.
			[]kube.Milestone[*discoveryv1.EndpointSlice]{{Name: "routable", Reached: endpointReady(rt.name, true)}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s not routable after its wake (Service %s): %w", rt.name, serviceName(to), err)
		}
		return nil
	})
	drained := make(chan struct{})
	tr.Go(func() error {
		var err error
		outP, err = kube.Track(tctx, p.Clients.Discovery.EndpointSlices(p.ns).Watch, "", discoveryv1.LabelServiceName+"="+serviceName(from),
			[]kube.Milestone[*discoveryv1.EndpointSlice]{{Name: "unroutable", Reached: endpointReady(rf.name, false),
				Then: func(*discoveryv1.EndpointSlice) { close(drained) }}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s still routable while asleep (Service %s): %w", rf.name, serviceName(from), err)
		}
		return nil
	})
	// Drain: From leaves its Service (gate off) and the phase waits until
	// its EndpointSlice says so before the sleep, as a deployment must, or
	// requests still routed to it would meet a sleeping server.
	if err := p.setGate(tctx, rf.name, false); err != nil {
		return tr.Fail(err)
	}
	select {
	case <-drained:
	case <-tctx.Done():
		return tr.Fail(context.Cause(tctx))
	}
	s0 := time.Now()
	if err := p.sleepServer(tctx, rf, level); err != nil {
		return tr.Fail(err)
	}
	ho.SleepS = time.Since(s0).Seconds()
	w0 := time.Now()
	wctx, wcancel := context.WithTimeout(tctx, time.Duration(p.Cfg.Timeouts.WakeS*float64(time.Second)))
	step, err := rt.client.Wake(wctx, level)
	wcancel()
	if err != nil {
		return tr.Fail(fmt.Errorf("kubernetes: wake pod %s (%s): %w", rt.name, step, err))
	}
	ho.WakeS = time.Since(w0).Seconds()
	rt.asleep = false
	ft, err := p.firstToken(tctx, rt)
	if err != nil {
		return tr.Fail(err)
	}
	if err := p.setGate(tctx, rt.name, true); err != nil {
		return tr.Fail(err)
	}
	if err := tr.Wait(); err != nil {
		return err
	}
	ho.FirstTokenS, ho.ReadyS = since(t0, ft), since(t0, readyP.At["ready"])
	ho.RoutableS, ho.UnroutableS = since(t0, inP.At["routable"]), since(t0, outP.At["unroutable"])
	if p.Memory != nil {
		if used, _, err := p.Memory(ctx); err == nil {
			ho.UsedGiB = used
		}
	}
	p.out.Handoffs = append(p.out.Handoffs, ho)
	p.Logf("kubernetes: handoff %s→%s: drained %.3fs, sleep %.3fs, wake %.3fs, first token %.3fs, Ready %.3fs, routable %.3fs", from, to, ho.UnroutableS, ho.SleepS, ho.WakeS, ho.FirstTokenS, ho.ReadyS, ho.RoutableS)
	return nil
}

// shared records the shared claim with both Pods on it.
func (p *phase) shared(ctx context.Context, claim string) error {
	c, err := p.Clients.Resource.ResourceClaims(p.ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: ResourceClaim %s: %w", claim, err)
	}
	sc := &record.SharedClaim{Claim: claim, UsedGiB: -1, DeallocatedS: -1}
	if c.Status.Allocation != nil {
		for _, r := range c.Status.Allocation.Devices.Results {
			sc.Device = r.Driver + "/" + r.Pool + "/" + r.Device
		}
	}
	for _, r := range c.Status.ReservedFor {
		sc.ReservedFor = append(sc.ReservedFor, r.Name)
	}
	sort.Strings(sc.ReservedFor)
	if len(sc.ReservedFor) != 2 {
		return fmt.Errorf("kubernetes: ResourceClaim %s is reserved for %v, not both models' Pods", claim, sc.ReservedFor)
	}
	if p.Memory != nil {
		if used, _, err := p.Memory(ctx); err == nil {
			sc.UsedGiB = used
		}
	}
	p.out.Shared = sc
	return nil
}

// scaleToZero deletes label's awake Pod, then starts a new one.
func (p *phase) scaleToZero(ctx context.Context, label, claim string) error {
	r := p.pods[label]
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	sz := record.ScaleToZero{Model: label, Pod: r.name, FreedGiB: -1, WakeS: -1}
	var before float64 = -1
	if p.Memory != nil {
		if used, _, err := p.Memory(ctx); err == nil {
			before = used
		}
	}
	tr := kube.NewTracker(tctx)
	tctx = tr.Context()
	var claimP kube.Progress[*resourcev1.ResourceClaim]
	tr.Go(func() error {
		var err error
		claimP, err = kube.Track(tctx, p.Clients.Resource.ResourceClaims(p.ns).Watch, claim, "", []kube.Milestone[*resourcev1.ResourceClaim]{{Name: "released", Reached: func(c *resourcev1.ResourceClaim) bool {
			return !slices.ContainsFunc(c.Status.ReservedFor, func(x resourcev1.ResourceClaimConsumerReference) bool { return x.UID == r.uid })
		}}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: ResourceClaim %s still reserved for deleted pod %s (kube-controller-manager's resourceclaim controller releases it): %w", claim, r.name, err)
		}
		return nil
	})
	var gone time.Time
	tr.Go(func() error {
		_, err := kube.Track(tctx, p.Clients.Core.Pods(p.ns).Watch, r.name, "", []kube.Milestone[*corev1.Pod]{{Name: "never", Reached: func(*corev1.Pod) bool { return false }}}, nil)
		if errors.Is(err, kube.ErrGone) {
			gone = time.Now()
			return nil
		}
		return fmt.Errorf("kubernetes: deleted pod %s never went (is its node stopping it?): %w", r.name, err)
	})
	t0 := time.Now()
	if err := p.Clients.Core.Pods(p.ns).Delete(tctx, r.name, metav1.DeleteOptions{}); err != nil {
		return tr.Fail(fmt.Errorf("kubernetes: delete pod %s: %w", r.name, err))
	}
	if err := tr.Wait(); err != nil {
		return err
	}
	delete(p.pods, label)
	sz.GoneS, sz.ReleasedS = since(t0, gone), since(t0, claimP.At["released"])
	if p.Memory != nil && before >= 0 {
		if used, _, err := p.Memory(ctx); err == nil {
			sz.FreedGiB = before - used
		}
	}
	ps, err := p.coldStart(ctx, label, claim, "scale-up")
	if err != nil {
		return err
	}
	sz.BackS = ps.FirstTokenS
	var wakes []float64
	for _, h := range p.out.Handoffs {
		if h.To == label {
			wakes = append(wakes, h.FirstTokenS)
		}
	}
	if len(wakes) > 0 {
		slices.Sort(wakes)
		sz.WakeS = wakes[(len(wakes)-1)/2]
	}
	p.out.Scale = append(p.out.Scale, sz)
	p.Logf("kubernetes: scale to zero of %s: gone %.3fs, claim released %.3fs, back to first token %.3fs (a wake: %.3fs)", label, sz.GoneS, sz.ReleasedS, sz.BackS, sz.WakeS)
	return nil
}

// capacity ends the shared claim (every Pod deleted: its allocation
// cleared) and runs per-Pod claims on the device's memory capacity: A's
// Pod asleep, B's awake, then a third Pod whose request fits the memory
// the device has free but not the capacity the scheduler still counts.
func (p *phase) capacity(ctx context.Context, shared string) error {
	c := p.Clients
	sc, err := c.Resource.ResourceClaims(p.ns).Get(ctx, shared, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: ResourceClaim %s: %w", shared, err)
	}
	var dev resourcev1.DeviceRequestAllocationResult
	if sc.Status.Allocation != nil && len(sc.Status.Allocation.Devices.Results) > 0 {
		dev = sc.Status.Allocation.Devices.Results[0]
	}
	// Every Pod off the device: the shared claim deallocated.
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	t0 := time.Now()
	for _, l := range p.order {
		if r := p.pods[l]; r != nil {
			if err := c.Core.Pods(p.ns).Delete(tctx, r.name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("kubernetes: delete pod %s: %w", r.name, err)
			}
			delete(p.pods, l)
		}
	}
	pr, err := kube.Track(tctx, c.Resource.ResourceClaims(p.ns).Watch, shared, "", []kube.Milestone[*resourcev1.ResourceClaim]{{Name: "deallocated",
		Reached: func(c *resourcev1.ResourceClaim) bool { return c.Status.Allocation == nil }}}, nil)
	if err != nil {
		return fmt.Errorf("kubernetes: ResourceClaim %s still allocated after its last Pod was deleted (kube-controller-manager's resourceclaim controller deallocates it): %w", shared, err)
	}
	p.out.Shared.DeallocatedS = since(t0, pr.At["deallocated"])

	rs, err := c.Resource.ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: ResourceSlices: %w", err)
	}
	cc := &record.CapacityClaims{RequestGiB: map[string]float64{}, UsedGiB: -1, FreeGiB: -1}
	var total int64
	for _, s := range rs.Items {
		if s.Spec.Driver != dev.Driver || s.Spec.Pool.Name != dev.Pool {
			continue
		}
		for _, d := range s.Spec.Devices {
			if d.Name == dev.Device {
				if q, ok := d.Capacity["memory"]; ok {
					total = q.Value.Value()
				}
				cc.Enabled = d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
			}
		}
	}
	if total == 0 {
		p.out.Notes = append(p.out.Notes, fmt.Sprintf("claim accounting with per-Pod claims not executed: device %s/%s/%s publishes no memory capacity", dev.Driver, dev.Pool, dev.Device))
		return nil
	}
	cc.DeviceGiB = float64(total) / record.GiB
	p.out.Capacity = cc
	if !cc.Enabled {
		// Without multiple allocations a device goes whole to one claim: a
		// second Pod with its own claim could never share it, asleep or not.
		p.out.Notes = append(p.out.Notes, fmt.Sprintf("per-Pod claims on one device not executed: device %s/%s/%s does not allow multiple allocations (the DRAConsumableCapacity feature gate is off in kube-apiserver or kube-scheduler, or the driver does not publish allowMultipleAllocations), so each Pod's own claim would take the whole GPU", dev.Driver, dev.Pool, dev.Device))
		return nil
	}
	request := func(l string) int64 {
		return int64(p.models[l].GPUMemoryUtilization*float64(total)) &^ (1<<20 - 1) // whole MiB
	}
	a, b := p.order[0], p.order[1]
	claims := map[string]string{a: "wakebench-cap-" + lower(a), b: "wakebench-cap-" + lower(b), "third": "wakebench-cap-third"}
	for who, name := range claims {
		l := who
		if who == "third" {
			l = a
		}
		if _, err := c.Resource.ResourceClaims(p.ns).Create(ctx, claimSpec(p.ns, name, p.k.DeviceClass, request(l)), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubernetes: ResourceClaim %s: %w", name, err)
		}
	}
	for _, l := range []string{a, b} {
		ps, err := p.coldStart(ctx, l, claims[l], "per-pod-claim")
		if err != nil {
			return err
		}
		cc.Scheduled = append(cc.Scheduled, ps.Pod)
		cc.RequestGiB[ps.Pod] = float64(request(l)) / record.GiB
		if l == a {
			if err := p.sleep(ctx, a, p.k.SleepLevel); err != nil {
				return err
			}
			cc.AsleepPods = append(cc.AsleepPods, ps.Pod)
		}
	}
	// The third Pod: model A's again, on a claim of its own.
	name, port, host, err := p.next(a)
	if err != nil {
		return err
	}
	cc.RequestedGiB = float64(request(a)) / record.GiB
	if p.Memory != nil {
		if used, tot, err := p.Memory(ctx); err == nil {
			cc.UsedGiB, cc.FreeGiB = used, tot-used
			cc.WouldFit = cc.RequestedGiB <= cc.FreeGiB
		}
	}
	if _, err := c.Core.Pods(p.ns).Create(ctx, podSpec(p.Cfg, p.models[a], name, claims["third"], host, port), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes: create pod %s: %w", name, err)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Duration(p.k.RefuseWaitS*float64(time.Second)))
	defer rcancel()
	_, err = kube.Track(rctx, c.Core.Pods(p.ns).Watch, name, "", []kube.Milestone[*corev1.Pod]{{Name: "scheduled", Reached: condTrue(corev1.PodScheduled)}},
		func(pod *corev1.Pod) error {
			if c := refusal(pod); c != nil {
				cc.Refused, cc.Message = name, c.Message
				return errRefused
			}
			return nil
		})
	switch {
	case errors.Is(err, errRefused):
		p.Logf("kubernetes: the scheduler refused %s (%.2f GiB asked, %.2f GiB free on the device): %s", name, cc.RequestedGiB, cc.FreeGiB, cc.Message)
	case err == nil:
		cc.Scheduled = append(cc.Scheduled, name)
		p.out.Notes = append(p.out.Notes, fmt.Sprintf("the scheduler placed %s beside %v: the claims' requests (%.2f GiB each) fit the device's %.2f GiB", name, cc.Scheduled[:2], cc.RequestedGiB, cc.DeviceGiB))
	default:
		return fmt.Errorf("kubernetes: pod %s neither scheduled nor refused after %vs: is kube-scheduler running? %w", name, p.k.RefuseWaitS, err)
	}
	return nil
}

var errRefused = errors.New("refused")

// MemoryFrom reads the device's used and total GiB from src (nil: none).
func MemoryFrom(src gpu.Source) func(ctx context.Context) (used, total float64, err error) {
	if src == nil {
		return nil
	}
	return func(ctx context.Context) (float64, float64, error) {
		r, err := src.Read(ctx)
		if err != nil {
			return 0, 0, err
		}
		return float64(r.Used) / record.GiB, float64(r.Total) / record.GiB, nil
	}
}
