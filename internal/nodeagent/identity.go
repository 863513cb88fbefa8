package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/wakebench/wakebench/internal/kube"
)

// identity is the environment that gives the container its Pod's
// ServiceAccount, as the kubelet's projected service-account token does:
// a kubeconfig in the Pod's directory (Options.PodIdentityFrom's cluster)
// holding a token from the TokenRequest API bound to the Pod, so the
// container may do what that ServiceAccount's RBAC allows and no more.
// Nothing without Options.PodIdentityFrom.
func (p *pod) identity(ctx context.Context) ([]string, error) {
	base := p.a.o.PodIdentityFrom
	if base == "" {
		return nil, nil
	}
	p.mu.Lock()
	obj := p.obj.DeepCopy()
	p.mu.Unlock()
	sa := obj.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(3600)
	tr, err := p.a.c.Core.ServiceAccounts(obj.Namespace).CreateToken(ctx, sa, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp,
		BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: obj.Name, UID: obj.UID}}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("pod %s: a token for its ServiceAccount %s: %w", kube.Name(obj), sa, err)
	}
	cfg, err := clientcmd.LoadFromFile(base)
	if err != nil {
		return nil, fmt.Errorf("pod %s: kubeconfig %s: %w", kube.Name(obj), base, err)
	}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{"pod": {Token: tr.Status.Token}}
	for _, c := range cfg.Contexts {
		c.AuthInfo = "pod"
		c.Namespace = obj.Namespace
	}
	dir := p.a.podDir(obj)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return nil, fmt.Errorf("pod %s: kubeconfig: %w", kube.Name(obj), err)
	}
	return []string{"KUBECONFIG=" + path}, nil
}

// podDir is Pod obj's directory on this node (its caches, its identity).
func (a *Agent) podDir(obj *corev1.Pod) string {
	return filepath.Join(a.o.Dir, obj.Namespace+"_"+obj.Name+"_"+string(obj.UID))
}
