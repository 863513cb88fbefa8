// Package kube is wakebench's side of the Kubernetes API: the typed clients
// its phase and its node agent use (client-go, from a kubeconfig), and
// Track, which watches one object and notes when each of its milestones was
// first seen (a Pod scheduled, started, ready; a claim allocated). It
// starts nothing.
package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Clients are the API groups wakebench uses (typed clients of those groups
// only: the whole clientset would build every group's).
type Clients struct {
	Host         string // the API server's URL
	Core         corev1.CoreV1Interface
	Resource     resourcev1.ResourceV1Interface
	Discovery    discoveryv1.DiscoveryV1Interface
	Coordination coordinationv1.CoordinationV1Interface
}

// Connect reads a kubeconfig (path "" means client-go's defaults: $KUBECONFIG,
// then ~/.kube/config) and makes the clients.
func Connect(path string) (*Clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w", path, err)
	}
	return New(cfg)
}

// New makes the clients from a REST config. Its rate limits are raised:
// the phase watches and patches a handful of objects, and client-go's
// default (5 QPS) would add its own waits to the times it measures.
func New(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	c := &Clients{Host: cfg.Host}
	var err error
	if c.Core, err = corev1.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.Resource, err = resourcev1.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.Discovery, err = discoveryv1.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.Coordination, err = coordinationv1.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

// Milestone is a state of an object worth a timestamp: Reached says
// whether the object is in it.
type Milestone[T any] struct {
	Name    string
	Reached func(T) bool
	Then    func(T) // called once, when first reached (may be nil)
}

// Progress is what Track saw: when each milestone was first seen, and the
// object last seen (nil if none was).
type Progress[T any] struct {
	At   map[string]time.Time
	Last T
	Seen bool
}

// ErrGone is returned by Track when the object was deleted before its last
// milestone.
var ErrGone = errors.New("deleted")

// WatchFunc is a typed client's Watch (Pods(ns).Watch, ResourceClaims(ns).Watch, …).
type WatchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

// Track watches the object named name (selector narrows further, e.g. an
// EndpointSlice's service label; name "" then) until every milestone has
// been reached, fail returns an error (the object can never get there: an
// unschedulable Pod), or ctx ends. Each milestone's time is when the
// watch event that first showed it arrived: API timestamps have one-second
// resolution. A watch starts with the object's current state, so a
// milestone reached before Track began is stamped when Track saw it.
// Track returns what it saw in every case.
func Track[T runtime.Object](ctx context.Context, w WatchFunc, name, selector string, ms []Milestone[T], fail func(T) error) (Progress[T], error) {
	p := Progress[T]{At: map[string]time.Time{}}
	opts := metav1.ListOptions{LabelSelector: selector}
	if name != "" {
		opts.FieldSelector = "metadata.name=" + name
	}
	done := func() bool { return len(p.At) == len(ms) }
	for {
		wi, err := w(ctx, opts)
		if err != nil {
			if ctx.Err() != nil {
				return p, context.Cause(ctx)
			}
			return p, fmt.Errorf("watch %s: %w", name, err)
		}
		err = func() error {
			defer wi.Stop()
			for {
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case ev, ok := <-wi.ResultChan():
					if !ok {
						return nil // the server ended the watch: start another
					}
					now := time.Now()
					switch ev.Type {
					case watch.Error:
						return fmt.Errorf("watch %s: %v", name, ev.Object)
					case watch.Deleted:
						if obj, ok := ev.Object.(T); ok {
							p.Last, p.Seen = obj, true
						}
						if name != "" {
							return fmt.Errorf("%s: %w", name, ErrGone)
						}
						continue
					case watch.Bookmark:
						continue
					}
					obj, ok := ev.Object.(T)
					if !ok {
						continue
					}
					p.Last, p.Seen = obj, true
					for _, m := range ms {
						if _, seen := p.At[m.Name]; !seen && m.Reached(obj) {
							p.At[m.Name] = now
							if m.Then != nil {
								m.Then(obj)
							}
						}
					}
					if done() {
						return nil
					}
					if fail != nil {
						if err := fail(obj); err != nil {
							return err
						}
					}
				}
			}
		}()
		if err != nil || done() {
			return p, err
		}
	}
}

// Name is an object's namespace/name, for messages.
func Name(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	if m.GetNamespace() == "" {
		return m.GetName()
	}
	return m.GetNamespace() + "/" + m.GetName()
}
