package kubelocal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wakebench/wakebench/internal/kube"
)

// ApplyRBAC creates the objects of a multi-document YAML file such as
// deploy/rbac.yaml: Namespaces, ServiceAccounts, Roles, ClusterRoles and
// their bindings (another kind is an error naming it).
func ApplyRBAC(ctx context.Context, c *kube.Clients, y []byte) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(y)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("RBAC document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("RBAC document %d: %w", i, err)
		}
		opts := metav1.CreateOptions{}
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = c.Core.Namespaces().Create(ctx, o, opts)
		case *corev1.ServiceAccount:
			_, err = c.Core.ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.Role:
			_, err = c.RBAC.Roles(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.RoleBinding:
			_, err = c.RBAC.RoleBindings(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.ClusterRole:
			_, err = c.RBAC.ClusterRoles().Create(ctx, o, opts)
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RBAC.ClusterRoleBindings().Create(ctx, o, opts)
		default:
			return fmt.Errorf("RBAC document %d: a %s, not an RBAC object", i, gvk.Kind)
		}
		if err != nil {
			return fmt.Errorf("RBAC document %d (%s %s): %w", i, gvk.Kind, kube.Name(obj), err)
		}
	}
}

// ClientsAs are clients of the local control plane acting as
// ServiceAccount ns/name, with a token from the TokenRequest API (as a
// Pod or a CI job using that identity has): what its RBAC allows, and
// nothing more.
func (f *Fleet) ClientsAs(ctx context.Context, ns, name string) (*kube.Clients, error) {
	exp := int64(3600)
	tr, err := f.Clients.Core.ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for ServiceAccount %s/%s: %w", ns, name, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.CP.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", f.CP.Kubeconfig, err)
	}
	cfg.BearerToken, cfg.BearerTokenFile = tr.Status.Token, ""
	cfg.CertFile, cfg.KeyFile, cfg.CertData, cfg.KeyData = "", "", nil, nil
	return kube.New(cfg)
}
