// Package kube is wakebench's side of the Kubernetes API: the typed clients
// its phase and its node agent use (client-go, from a kubeconfig; kubefake
// makes them on client-go's fake clientset for tests); Track, which watches
// one object and notes when each of its milestones was first seen (a Pod
// scheduled, started, ready; a claim allocated); and Tracker, which runs
// Tracks beside a step and says why the step failed. It starts nothing.
package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	batchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	rbacv1 "k8s.io/client-go/kubernetes/typed/rbac/v1"
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
	Batch        batchv1.BatchV1Interface // the fleet's Job
	RBAC         rbacv1.RbacV1Interface   // the fleet's Role and RoleBinding
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
	if c.Batch, err = batchv1.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.RBAC, err = rbacv1.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
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
