// Package nodeagent is the node of the local Kubernetes phase, where no
// container image can be pulled: a small kubelet stand-in that registers a
// Node, keeps its Lease fresh, publishes the node's GPU as a DRA
// ResourceSlice (what a DRA driver's kubelet plugin does), and runs the
// containers of the Pods bound to it as host processes (vllmsim, or vllm on
// a GPU runner). Like the kubelet it reports each Pod's phase, IP, container
// states and conditions, probes readiness (httpGet), honours readiness
// gates, restarts exited containers (restartPolicy Always), stops a deleted
// Pod's containers before removing it, and passes each container the
// devices its ResourceClaims were allocated (CUDA_VISIBLE_DEVICES, where a
// DRA driver would inject them through CDI). On a real cluster the kubelet
// and the NVIDIA DRA driver do all of this and this package is not used.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/server"
)

// GPU is one device the node publishes in its ResourceSlice.
type GPU struct {
	Name        string // device name in the slice ("gpu-0")
	UUID        string // what CUDA_VISIBLE_DEVICES gets
	Product     string
	MemoryBytes uint64
}

// Options are the agent's settings.
type Options struct {
	Node string
	// IP is the node's address, and every Pod's (they run on its network):
	// not a loopback one, which EndpointSlices refuse.
	IP      string
	Driver  string // the DRA driver name its ResourceSlice is published under
	GPUs    []GPU
	Clients *kube.Clients
	// Programs maps a container's command[0] to the host program run for
	// it ("vllm" → the vllmsim binary); others are looked up in PATH.
	Programs map[string]string
	// Env is the node's environment, given to every container (the
	// simulated GPU's directory, vllmsim's profile).
	Env []string
	// Dir holds each Pod's directory: the caches (VLLM_CACHE_ROOT …) that
	// live as long as the Pod, like an emptyDir.
	Dir string
	// LogDir receives each container's log, <namespace>_<pod>_<container>.log
	// ("": Dir).
	LogDir string
	// Ready bounds the wait for the node to become schedulable.
	Ready time.Duration
}

// Agent is a running node agent.
type Agent struct {
	o      Options
	c      *kube.Clients
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	pods map[types.UID]*pod
	errs []error // what went wrong in the background, reported by Stop
}

// Start registers the node, publishes its ResourceSlice and starts serving
// Pods; it returns once the node is schedulable (the control plane's node
// lifecycle controller has lifted the not-ready taint).
func Start(ctx context.Context, o Options) (*Agent, error) {
	if o.Ready == 0 {
		o.Ready = 90 * time.Second
	}
	if o.LogDir == "" {
		o.LogDir = o.Dir
	}
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("node %s: %w", o.Node, err)
	}
	a := &Agent{o: o, c: o.Clients, pods: map[types.UID]*pod{}}
	if err := a.register(ctx); err != nil {
		return nil, err
	}
	if err := a.publish(ctx); err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.wg.Go(func() { a.heartbeat(bg) })
	a.wg.Go(func() { a.serve(bg) })
	if err := a.waitSchedulable(ctx); err != nil {
		return nil, errors.Join(err, a.Stop())
	}
	return a, nil
}

// Stop stops every container the agent runs and its loops; it says what
// went wrong while it ran.
func (a *Agent) Stop() error {
	a.cancel()
	a.wg.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	errs := a.errs
	for _, p := range a.pods {
		errs = append(errs, p.stop())
	}
	a.pods = map[types.UID]*pod{}
	return errors.Join(errs...)
}

func (a *Agent) fail(err error) {
	a.mu.Lock()
	a.errs = append(a.errs, err)
	a.mu.Unlock()
}

func (a *Agent) register(ctx context.Context) error {
	now := metav1.Now()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: a.o.Node, Labels: map[string]string{"kubernetes.io/hostname": a.o.Node, "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("128Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("128Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "WakebenchNodeAgentReady",
				Message: "wakebench node agent (host processes)", LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: a.o.IP}, {Type: corev1.NodeHostName, Address: a.o.Node}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "wakebench-nodeagent", OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "host-process://wakebench"},
		},
	}
	if _, err := a.c.Core.Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register node %s: %w", a.o.Node, err)
	}
	lease := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.o.Node, Namespace: corev1.NamespaceNodeLease},
		Spec: coordv1.LeaseSpec{HolderIdentity: &a.o.Node, LeaseDurationSeconds: ptr(int32(40)), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if _, err := a.c.Coordination.Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("node %s lease: %w", a.o.Node, err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// SliceName is the name of the node's ResourceSlice.
func (a *Agent) SliceName() string { return a.o.Node + "-gpus" }

// publish writes the node's ResourceSlice: one device per GPU, with its
// UUID and product as attributes and its memory as capacity that may be
// shared out (DRAConsumableCapacity: allowMultipleAllocations).
func (a *Agent) publish(ctx context.Context) error {
	var devs []resourcev1.Device
	for _, g := range a.o.GPUs {
		devs = append(devs, resourcev1.Device{
			Name: g.Name,
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"uuid": {StringValue: ptr(g.UUID)}, "productName": {StringValue: ptr(g.Product)},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)},
			},
			AllowMultipleAllocations: ptr(true),
		})
	}
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: a.SliceName()},
		Spec: resourcev1.ResourceSliceSpec{Driver: a.o.Driver, NodeName: &a.o.Node, Devices: devs,
			Pool: resourcev1.ResourcePool{Name: a.o.Node, Generation: 1, ResourceSliceCount: 1}},
	}
	if _, err := a.c.Resource.ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("node %s: publish ResourceSlice: %w", a.o.Node, err)
	}
	return nil
}

// heartbeat renews the node's Lease every 10 s, as the kubelet does.
func (a *Agent) heartbeat(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l, err := a.c.Coordination.Leases(corev1.NamespaceNodeLease).Get(ctx, a.o.Node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, err = a.c.Coordination.Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
			return err
		})
		if err != nil && ctx.Err() == nil {
			a.fail(fmt.Errorf("node %s: renew lease: %w", a.o.Node, err))
		}
	}
}

// waitSchedulable waits until the node carries no NoSchedule taint.
func (a *Agent) waitSchedulable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.o.Ready)
	defer cancel()
	p, err := kube.Track(ctx, a.c.Core.Nodes().Watch, a.o.Node, "", []kube.Milestone[*corev1.Node]{{Name: "schedulable", Reached: func(n *corev1.Node) bool {
		return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoSchedule })
	}}}, nil)
	if err != nil {
		var taints []string
		if p.Seen {
			for _, t := range p.Last.Spec.Taints {
				taints = append(taints, t.Key+":"+string(t.Effect))
			}
		}
		return fmt.Errorf("node %s not schedulable after %v (taints %v): is kube-controller-manager running (its node lifecycle controller lifts node.kubernetes.io/not-ready)? %w",
			a.o.Node, a.o.Ready, taints, err)
	}
	return nil
}

// serve watches the Pods bound to the node and acts on each change.
func (a *Agent) serve(ctx context.Context) {
	opts := metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.o.Node}
	for ctx.Err() == nil {
		w, err := a.c.Core.Pods("").Watch(ctx, opts)
		if err != nil {
			if ctx.Err() == nil {
				a.fail(fmt.Errorf("node %s: watch pods: %w", a.o.Node, err))
				time.Sleep(time.Second)
			}
			continue
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Error || ev.Type == watch.Bookmark {
				continue
			}
			a.sync(ctx, p, ev.Type == watch.Deleted)
		}
		w.Stop()
	}
}

// sync brings one Pod's containers in line with its object.
func (a *Agent) sync(ctx context.Context, obj *corev1.Pod, deleted bool) {
	a.mu.Lock()
	p := a.pods[obj.UID]
	if p == nil && !deleted && obj.DeletionTimestamp == nil {
		p = newPod(a, obj)
		a.pods[obj.UID] = p
		a.wg.Go(func() { p.run(ctx) })
	}
	a.mu.Unlock()
	if p == nil {
		if obj.DeletionTimestamp != nil && !deleted { // never started here: nothing to stop
			a.remove(ctx, obj)
		}
		return
	}
	switch {
	case deleted:
		a.forget(p)
	case obj.DeletionTimestamp != nil:
		a.wg.Go(func() {
			if err := p.stop(); err != nil {
				a.fail(err)
			}
			a.remove(ctx, obj)
			a.forget(p)
		})
	default:
		p.observe(obj)
	}
}

// remove is the kubelet's last word on a deleted Pod whose containers have
// stopped: the object goes (grace 0, this very Pod only).
func (a *Agent) remove(ctx context.Context, obj *corev1.Pod) {
	err := a.c.Core.Pods(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0)),
		Preconditions: &metav1.Preconditions{UID: &obj.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		a.fail(fmt.Errorf("delete pod %s: %w", kube.Name(obj), err))
	}
}

func (a *Agent) forget(p *pod) {
	a.mu.Lock()
	delete(a.pods, p.uid)
	a.mu.Unlock()
}

// Restart kills the running container of Pod ns/name, as a crash would:
// the agent starts it again (restartPolicy Always). It returns when the
// old process has gone.
func (a *Agent) Restart(ns, name string) error {
	a.mu.Lock()
	var p *pod
	for _, q := range a.pods {
		if q.ns == ns && q.name == name {
			p = q
		}
	}
	a.mu.Unlock()
	if p == nil {
		return fmt.Errorf("restart %s/%s: no such pod on node %s", ns, name, a.o.Node)
	}
	return p.kill()
}

// PID is the process of Pod ns/name's container (0 when none runs), for
// the memory sampler's attribution.
func (a *Agent) PID(ns, name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pods {
		if p.ns == ns && p.name == name {
			return p.pid()
		}
	}
	return 0
}

// pod is one Pod the agent runs: one container (the phase's Pods have one).
type pod struct {
	a        *Agent
	uid      types.UID
	ns, name string

	mu       sync.Mutex
	obj      *corev1.Pod
	srv      *server.Server
	started  metav1.Time
	ready    bool
	restarts int32
	last     *corev1.ContainerStateTerminated
	waiting  *corev1.ContainerStateWaiting
	stopped  bool
	changed  chan struct{} // poked when the object changes (readiness gates)
	done     chan struct{} // closed when run returns
}

func newPod(a *Agent, obj *corev1.Pod) *pod {
	return &pod{a: a, uid: obj.UID, ns: obj.Namespace, name: obj.Name, obj: obj.DeepCopy(),
		changed: make(chan struct{}, 1), done: make(chan struct{})}
}

func (p *pod) observe(obj *corev1.Pod) {
	p.mu.Lock()
	p.obj = obj.DeepCopy()
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *pod) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		return 0
	}
	return p.srv.PID()
}

func (p *pod) kill() error {
	p.mu.Lock()
	srv := p.srv
	p.mu.Unlock()
	if srv == nil {
		return fmt.Errorf("restart %s/%s: no container running", p.ns, p.name)
	}
	return srv.Kill()
}

// stop ends the Pod's container for good.
func (p *pod) stop() error {
	p.mu.Lock()
	p.stopped = true
	srv := p.srv
	grace := 30 * time.Second
	if g := p.obj.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	p.mu.Unlock()
	if srv == nil {
		return nil
	}
	if err := srv.Stop(grace); err != nil {
		return fmt.Errorf("stop pod %s/%s: %w", p.ns, p.name, err)
	}
	return nil
}

// run starts the container, probes it, restarts it when it exits, and
// reports its status, until the Pod is stopped.
func (p *pod) run(ctx context.Context) {
	defer close(p.done)
	p.status(ctx)
	env, err := p.devices(ctx)
	if err != nil {
		p.mu.Lock()
		p.waiting = &corev1.ContainerStateWaiting{Reason: "DeviceClaimError", Message: err.Error()}
		p.mu.Unlock()
		p.status(ctx)
		p.a.fail(err)
		return
	}
	for attempt := 0; ; attempt++ {
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		if attempt > 1 { // the kubelet restarts at once, then backs off
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
		}
		srv, err := p.start(env)
		if err != nil {
			p.mu.Lock()
			p.waiting = &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: err.Error()}
			p.mu.Unlock()
			p.status(ctx)
			p.a.fail(err)
			return
		}
		p.status(ctx)
		p.probe(ctx, srv)
		// The container exited (or the Pod is stopping).
		p.mu.Lock()
		term := &corev1.ContainerStateTerminated{ExitCode: exitCode(srv.ExitErr()), Reason: "Error", StartedAt: p.started, FinishedAt: metav1.Now()}
		if term.ExitCode == 0 {
			term.Reason = "Completed"
		}
		p.srv, p.ready, p.last = nil, false, term
		if !p.stopped {
			p.restarts++
		}
		stopped = p.stopped
		p.mu.Unlock()
		if !stopped {
			p.status(ctx)
		}
	}
}

func exitCode(err error) int32 {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if c := ee.ExitCode(); c >= 0 {
			return int32(c)
		}
		return 137
	}
	return 0
}

// devices resolves the Pod's ResourceClaims to the GPUs they were
// allocated on this node, as the environment that makes them the
// container's devices. A claim that is not allocated, or not reserved for
// this Pod, is an error naming it (the kubelet refuses such a Pod too).
func (p *pod) devices(ctx context.Context) ([]string, error) {
	p.mu.Lock()
	obj := p.obj.DeepCopy()
	p.mu.Unlock()
	var uuids []string
	for _, rc := range obj.Spec.ResourceClaims {
		name := ""
		if rc.ResourceClaimName != nil {
			name = *rc.ResourceClaimName
		}
		for _, st := range obj.Status.ResourceClaimStatuses {
			if st.Name == rc.Name && st.ResourceClaimName != nil {
				name = *st.ResourceClaimName
			}
		}
		if name == "" {
			return nil, fmt.Errorf("pod %s: resource claim %q has no ResourceClaim yet", kube.Name(obj), rc.Name)
		}
		claim, err := p.a.c.Resource.ResourceClaims(obj.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("pod %s: ResourceClaim %s: %w", kube.Name(obj), name, err)
		}
		if claim.Status.Allocation == nil {
			return nil, fmt.Errorf("pod %s: ResourceClaim %s is not allocated", kube.Name(obj), name)
		}
		if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == obj.UID }) {
			return nil, fmt.Errorf("pod %s: ResourceClaim %s is not reserved for it", kube.Name(obj), name)
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != p.a.o.Driver || r.Pool != p.a.o.Node {
				continue
			}
			i := slices.IndexFunc(p.a.o.GPUs, func(g GPU) bool { return g.Name == r.Device })
			if i < 0 {
				return nil, fmt.Errorf("pod %s: ResourceClaim %s names device %s, which node %s does not publish", kube.Name(obj), name, r.Device, p.a.o.Node)
			}
			if !slices.Contains(uuids, p.a.o.GPUs[i].UUID) {
				uuids = append(uuids, p.a.o.GPUs[i].UUID)
			}
		}
	}
	if len(uuids) == 0 {
		return nil, nil
	}
	return []string{"CUDA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")}, nil
}

// start runs the Pod's container as a host process.
func (p *pod) start(devEnv []string) (*server.Server, error) {
	p.mu.Lock()
	obj := p.obj.DeepCopy()
	p.mu.Unlock()
	if len(obj.Spec.Containers) != 1 {
		return nil, fmt.Errorf("pod %s: the node agent runs Pods of one container, not %d", kube.Name(obj), len(obj.Spec.Containers))
	}
	c := obj.Spec.Containers[0]
	argv := append(slices.Clone(c.Command), c.Args...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("pod %s: container %s has no command (the node agent has no images to take one from)", kube.Name(obj), c.Name)
	}
	prog, ok := p.a.o.Programs[argv[0]]
	if !ok {
		var err error
		if prog, err = exec.LookPath(argv[0]); err != nil {
			return nil, fmt.Errorf("pod %s: container %s: %w", kube.Name(obj), c.Name, err)
		}
	}
	dir := filepath.Join(p.a.o.Dir, obj.Namespace+"_"+obj.Name+"_"+string(obj.UID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	env := slices.Clone(p.a.o.Env)
	// Caches live with the Pod (an emptyDir): empty at the Pod's first
	// start, kept over its container's restarts.
	env = append(env, "VLLM_CACHE_ROOT="+filepath.Join(dir, "vllm"), "TORCHINDUCTOR_CACHE_DIR="+filepath.Join(dir, "inductor"),
		"TRITON_CACHE_DIR="+filepath.Join(dir, "triton"), "CUDA_CACHE_PATH="+filepath.Join(dir, "cuda"))
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("pod %s: container %s: env %s: valueFrom is not supported by the node agent", kube.Name(obj), c.Name, e.Name)
		}
		env = append(env, e.Name+"="+e.Value)
	}
	env = append(env, devEnv...)
	srv, err := server.Start(server.Spec{Label: obj.Name, Path: prog, Args: argv[1:], Env: env, LogPath: p.a.LogPath(obj.Namespace, obj.Name, c.Name)})
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", kube.Name(obj), err)
	}
	p.mu.Lock()
	p.srv, p.started, p.ready, p.waiting = srv, metav1.Now(), false, nil
	p.mu.Unlock()
	return srv, nil
}

// LogPath is where container c of Pod ns/name logs on this node.
func (a *Agent) LogPath(ns, name, c string) string {
	return filepath.Join(a.o.LogDir, ns+"_"+name+"_"+c+".log")
}

// probe runs the container's readiness probe until the process exits,
// and reports readiness changes and readiness-gate changes as they come.
func (p *pod) probe(ctx context.Context, srv *server.Server) {
	p.mu.Lock()
	rp := p.obj.Spec.Containers[0].ReadinessProbe
	p.mu.Unlock()
	period := time.Second
	if rp != nil && rp.PeriodSeconds > 0 {
		period = time.Duration(rp.PeriodSeconds) * time.Second
	}
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		p.mu.Lock()
		obj := p.obj // replaced, never changed in place
		p.mu.Unlock()
		ready := rp == nil || httpReady(ctx, hc, obj, rp)
		p.mu.Lock()
		change := ready != p.ready
		p.ready = ready
		p.mu.Unlock()
		if change {
			p.status(ctx)
		}
		select {
		case <-ctx.Done():
			_ = srv.Stop(0)
			return
		case <-srv.Done():
			return
		case <-p.changed:
			p.status(ctx) // a readiness gate may have changed: Ready follows at once
		case <-t.C:
		}
	}
}

func httpReady(ctx context.Context, hc *http.Client, obj *corev1.Pod, rp *corev1.Probe) bool {
	if rp.HTTPGet == nil {
		return true
	}
	port := rp.HTTPGet.Port.IntValue()
	if rp.HTTPGet.Port.Type == intstr.String {
		for _, cp := range obj.Spec.Containers[0].Ports {
			if cp.Name == rp.HTTPGet.Port.StrVal {
				port = int(cp.ContainerPort)
			}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(obj.Status.PodIP, strconv.Itoa(port))+rp.HTTPGet.Path, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// status writes the Pod's status as the agent sees it, keeping the
// conditions others own (readiness gates); Ready is the containers'
// readiness and every readiness gate's condition True.
func (p *pod) status(ctx context.Context) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := p.a.c.Core.Pods(p.ns).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.uid {
			return nil
		}
		p.mu.Lock()
		p.obj = cur.DeepCopy()
		st := p.build(cur)
		p.mu.Unlock()
		cur.Status = st
		_, err = p.a.c.Core.Pods(p.ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		p.a.fail(fmt.Errorf("pod %s/%s status: %w", p.ns, p.name, err))
	}
}

// build is the Pod's status from the agent's state (p.mu held).
func (p *pod) build(cur *corev1.Pod) corev1.PodStatus {
	st := cur.Status
	now := metav1.Now()
	c := cur.Spec.Containers[0]
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, RestartCount: p.restarts, Ready: p.ready && p.srv != nil}
	switch {
	case p.srv != nil:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: p.started}
		cs.Started = ptr(true)
		cs.ContainerID = "host-process://" + strconv.Itoa(p.srv.PID())
	case p.waiting != nil:
		cs.State.Waiting = p.waiting
	case p.last != nil:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	if p.last != nil {
		cs.LastTerminationState.Terminated = p.last
	}
	st.ContainerStatuses = []corev1.ContainerStatus{cs}
	ip := p.a.o.IP
	st.HostIP, st.PodIP = ip, ip
	st.HostIPs, st.PodIPs = []corev1.HostIP{{IP: ip}}, []corev1.PodIP{{IP: ip}}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.Phase = corev1.PodPending
	if p.srv != nil || p.last != nil {
		st.Phase = corev1.PodRunning
	}
	gates := true
	for _, g := range cur.Spec.ReadinessGates {
		i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		if i < 0 || st.Conditions[i].Status != corev1.ConditionTrue {
			gates = false
		}
	}
	set := func(t corev1.PodConditionType, ok bool, reason string) {
		s := corev1.ConditionFalse
		if ok {
			s, reason = corev1.ConditionTrue, ""
		}
		i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == t })
		if i < 0 {
			st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now})
			return
		}
		if st.Conditions[i].Status != s {
			st.Conditions[i].LastTransitionTime = now
		}
		st.Conditions[i].Status, st.Conditions[i].Reason = s, reason
	}
	set(corev1.PodReadyToStartContainers, true, "")
	set(corev1.PodInitialized, true, "")
	set(corev1.ContainersReady, cs.Ready, "ContainersNotReady")
	reason := "ContainersNotReady"
	if cs.Ready {
		reason = "ReadinessGatesNotReady"
	}
	set(corev1.PodReady, cs.Ready && gates, reason)
	return st
}
