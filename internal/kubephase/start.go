package kubephase

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/vllm"
)

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
	st := p.trackStart(ctx, tr, label, name, claim)
	defer st.stopClaim()
	fail := func(err error) (*record.PodStart, error) { return ps, tr.Fail(err) }
	var pod *corev1.Pod
	select {
	case pod = <-st.started:
	case <-tctx.Done():
		// The pod tracker says why (unschedulable, never scheduled, …).
		return fail(context.Cause(tctx))
	}
	r := &running{label: label, name: name, uid: obj.UID,
		client: vllm.New("http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))}
	p.pods[label] = r
	p.conns = append(p.conns, r.client)
	health, models, ft, err := p.serveFirstToken(tctx, r)
	if err != nil {
		return fail(err)
	}
	if err := p.setGate(tctx, name, true); err != nil {
		return fail(err)
	}
	// The claim was allocated before the Pod was bound, long ago: a claim
	// watch still open only waits for nothing.
	st.stopClaim()
	if err := tr.Wait(); err != nil {
		return ps, err
	}
	ps.ScheduledS, ps.ContainerStartedS = since(t0, st.pod.At["scheduled"]), since(t0, st.pod.At["started"])
	ps.ContainersReadyS, ps.ReadyS = since(t0, st.pod.At["containers-ready"]), since(t0, st.pod.At["ready"])
	ps.HealthS, ps.ModelsS, ps.FirstTokenS = since(t0, health), since(t0, models), since(t0, ft)
	ps.RoutableS = since(t0, st.slice.At["routable"])
	ps.ClaimAllocatedS = since(t0, st.claim.At["allocated"])
	if preAllocated {
		ps.ClaimAllocatedS = 0
	}
	p.out.Starts = append(p.out.Starts, *ps)
	p.Logf("kubernetes: %s scheduled %.3fs, started %.3fs, /health %.3fs, first token %.3fs, Ready %.3fs, routable %.3fs",
		name, ps.ScheduledS, ps.ContainerStartedS, ps.HealthS, ps.FirstTokenS, ps.ReadyS, ps.RoutableS)
	return ps, nil
}

// startTracks are the watches beside a Pod's start: the Pod's milestones,
// its claim's allocation and its Service's EndpointSlice. Their Progress
// is read after the Tracker's Wait.
type startTracks struct {
	started   chan *corev1.Pod // the Pod when its container first ran, with its IP
	pod       kube.Progress[*corev1.Pod]
	claim     kube.Progress[*resourcev1.ResourceClaim]
	slice     kube.Progress[*discoveryv1.EndpointSlice]
	stopClaim context.CancelFunc // ends the claim's watch, which may have nothing left to see
}

// trackStart starts, on tr, the watches of Pod name's start (model label,
// on claim); ctx is the step's own, for explaining a Pod that got stuck.
func (p *phase) trackStart(ctx context.Context, tr *kube.Tracker, label, name, claim string) *startTracks {
	tctx := tr.Context()
	st := &startTracks{started: make(chan *corev1.Pod, 1)}
	tr.Go(func() error {
		var err error
		st.pod, err = kube.Track(tctx, p.Clients.Core.Pods(p.ns).Watch, name, "", []kube.Milestone[*corev1.Pod]{
			{Name: "scheduled", Reached: condTrue(corev1.PodScheduled)},
			{Name: "started", Reached: func(pod *corev1.Pod) bool {
				cs := pod.Status.ContainerStatuses
				return len(cs) > 0 && cs[0].State.Running != nil && pod.Status.PodIP != ""
			}, Then: func(pod *corev1.Pod) { st.started <- pod }},
			{Name: "containers-ready", Reached: condTrue(corev1.ContainersReady)},
			{Name: "ready", Reached: condTrue(corev1.PodReady)},
		}, failedStart)
		if err != nil {
			return p.explainPod(ctx, name, st.pod, err)
		}
		return nil
	})
	claimCtx, stopClaim := context.WithCancel(tctx)
	st.stopClaim = stopClaim
	tr.Go(func() error {
		st.claim, _ = kube.Track(claimCtx, p.Clients.Resource.ResourceClaims(p.ns).Watch, claim, "", []kube.Milestone[*resourcev1.ResourceClaim]{
			{Name: "allocated", Reached: func(c *resourcev1.ResourceClaim) bool { return c.Status.Allocation != nil }},
		}, nil)
		return nil
	})
	tr.Go(func() error {
		var err error
		st.slice, err = kube.Track(tctx, p.Clients.Discovery.EndpointSlices(p.ns).Watch, "", discoveryv1.LabelServiceName+"="+serviceName(label),
			[]kube.Milestone[*discoveryv1.EndpointSlice]{{Name: "routable", Reached: endpointReady(name, true)}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s never routable: Service %s's EndpointSlice does not list it ready (is kube-controller-manager's endpointslice controller running?): %w", name, serviceName(label), err)
		}
		return nil
	})
	return st
}

// failedStart fails a starting Pod the scheduler refused or whose
// container exited before it was ready.
func failedStart(pod *corev1.Pod) error {
	if err := unschedulable(pod); err != nil {
		return err
	}
	if cs := pod.Status.ContainerStatuses; len(cs) > 0 && cs[0].RestartCount > 0 {
		code := int32(-1)
		if t := cs[0].LastTerminationState.Terminated; t != nil {
			code = t.ExitCode
		}
		return fmt.Errorf("pod %s: container %s exited with code %d before it was ready (restarted %d times): see its log", pod.Name, cs[0].Name, code, cs[0].RestartCount)
	}
	return nil
}

// serveFirstToken follows a started Pod's server to its first token: when
// /health answered, when /v1/models listed the model, when the first token
// came. It notes the server's version.
func (p *phase) serveFirstToken(ctx context.Context, r *running) (health, models, firstToken time.Time, err error) {
	m := p.models[r.label]
	poll := time.Duration(p.Cfg.Timeouts.PollMS * float64(time.Millisecond))
	if health, err = r.client.WaitReady(ctx, poll); err != nil {
		return health, models, firstToken, fmt.Errorf("kubernetes: pod %s: /health: %w", r.name, err)
	}
	ids, err := r.client.Models(ctx)
	if err != nil || !slices.Contains(ids, m.Name) {
		return health, models, firstToken, fmt.Errorf("kubernetes: pod %s: /v1/models lists %v, not %q: %v", r.name, ids, m.Name, err)
	}
	models = time.Now()
	if v, err := r.client.Version(ctx); err == nil {
		p.out.ServerVersion = v
	}
	firstToken, err = p.firstToken(ctx, r)
	return health, models, firstToken, err
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
