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
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/server"
)

// GPU is one device the node publishes in its ResourceSlice.
type GPU struct {
	Name string // device name in the slice ("gpu-0")
	UUID string // the device's identity, published in the slice
	// Index is the device's index in PCI bus order: what a container's
	// CUDA_VISIBLE_DEVICES gets, with CUDA_DEVICE_ORDER=PCI_BUS_ID.
	Index       int
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
	// PodIdentityFrom, set, is a kubeconfig of the cluster: each container
	// gets KUBECONFIG naming a copy holding a token of its Pod's
	// ServiceAccount (as the kubelet's projected token), not this file's
	// credentials.
	PodIdentityFrom string
	// Dir holds each Pod's directory: the caches (VLLM_CACHE_ROOT …) that
	// live as long as the Pod, like an emptyDir.
	Dir string
	// LogDir receives each container's log, <namespace>_<pod>_<container>.log
	// ("": Dir).
	LogDir string
	// Ready bounds the wait for the node to become schedulable.
	Ready time.Duration
	// Labels are the Node's labels besides kubernetes.io/hostname and
	// kubernetes.io/os (e.g. nvidia.com/gpu.product, as GPU feature
	// discovery sets them on a real node).
	Labels map[string]string
	// Taints are the Node's own taints (e.g. nvidia.com/gpu:NoSchedule, as
	// GPU nodes carry): only Pods tolerating them land here. The agent
	// waits for the control plane's taints to go, never for these.
	Taints []corev1.Taint
	// LeaseRenew is how often the node's Lease is renewed (0: every 10 s,
	// as the kubelet does).
	LeaseRenew time.Duration
}

// Agent is a running node agent.
type Agent struct {
	o      Options
	c      *kube.Clients
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// watchdog kills the containers' processes if this process dies
	// without stopping them (server.Watchdog); closed once they stopped.
	watchdog *server.Watchdog

	stopOnce sync.Once
	stopErr  error // what the first Stop returned

	mu   sync.Mutex // guards pods and errs
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
	if o.LeaseRenew == 0 {
		o.LeaseRenew = 10 * time.Second
	}
	if o.LogDir == "" {
		o.LogDir = o.Dir
	}
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("node %s: %w", o.Node, err)
	}
	a := &Agent{o: o, c: o.Clients, pods: map[types.UID]*pod{}}
	var err error
	if a.watchdog, err = server.StartWatchdog(); err != nil {
		return nil, fmt.Errorf("node %s: %w", o.Node, err)
	}
	if err := a.registerNode(ctx); err != nil {
		a.watchdog.Close()
		return nil, err
	}
	if err := a.createLease(ctx); err != nil {
		a.watchdog.Close()
		return nil, err
	}
	if err := a.publish(ctx); err != nil {
		a.watchdog.Close()
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.wg.Go(func() { a.renewLease(bg) })
	a.wg.Go(func() { a.serve(bg) })
	if err := a.waitSchedulable(ctx); err != nil {
		return nil, errors.Join(err, a.Stop())
	}
	return a, nil
}

// Stop stops every container the agent runs and its loops; it says what
// went wrong while it ran. Only the first call does anything (a test that
// loses a node stops its agent before the cluster is stopped).
func (a *Agent) Stop() error {
	a.stopOnce.Do(func() { a.stopErr = a.stop() })
	return a.stopErr
}

func (a *Agent) stop() error {
	a.cancel()
	a.wg.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	errs := a.errs
	for _, p := range a.pods {
		errs = append(errs, p.stop())
	}
	a.pods = map[types.UID]*pod{}
	errs = append(errs, a.watchdog.Close())
	return errors.Join(errs...)
}

func (a *Agent) fail(err error) {
	a.mu.Lock()
	a.errs = append(a.errs, err)
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

// OOMKill kills the running container of Pod ns/name as the kernel's OOM
// killer would: it ends with exit code 137 and reason OOMKilled (what the
// kubelet reports from the runtime), and the Pod's restartPolicy decides
// what follows. It returns when the process has gone.
func (a *Agent) OOMKill(ns, name string) error {
	p := a.find(ns, name)
	if p == nil {
		return fmt.Errorf("oom-kill %s/%s: no such pod on node %s", ns, name, a.o.Node)
	}
	p.mu.Lock()
	p.killReason = "OOMKilled"
	p.mu.Unlock()
	return p.kill()
}

// Evict evicts Pod ns/name as the kubelet's eviction manager does under
// node pressure: its container is killed and the Pod ends Failed with
// reason Evicted and message, never restarted. It returns when the
// process has gone.
func (a *Agent) Evict(ns, name, message string) error {
	p := a.find(ns, name)
	if p == nil {
		return fmt.Errorf("evict %s/%s: no such pod on node %s", ns, name, a.o.Node)
	}
	p.mu.Lock()
	p.evicted = message
	p.mu.Unlock()
	return p.kill()
}

func (a *Agent) find(ns, name string) *pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, q := range a.pods {
		if q.ns == ns && q.name == name {
			return q
		}
	}
	return nil
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

func ptr[T any](v T) *T { return &v }
