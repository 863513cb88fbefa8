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
	"time"

	corev1 "k8s.io/api/core/v1"
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
const Phase = record.PhaseKubernetes

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
		return fmt.Errorf("kubernetes: DeviceClass %s (kubernetes.device_class): %w; install the DRA driver that provides it (docs/kubernetes.md: runner guide)", p.k.DeviceClass, err)
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
