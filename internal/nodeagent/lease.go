package nodeagent

import (
	"context"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// createLease creates the node's Lease in kube-node-lease, held by the
// node, as the kubelet does when it registers.
func (a *Agent) createLease(ctx context.Context) error {
	lease := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.o.Node, Namespace: corev1.NamespaceNodeLease},
		Spec: coordv1.LeaseSpec{HolderIdentity: &a.o.Node, LeaseDurationSeconds: ptr(int32(40)), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if _, err := a.c.Coordination.Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("node %s lease: %w", a.o.Node, err)
	}
	return nil
}

// renewLease renews the node's Lease every LeaseRenew until ctx ends: the
// node's heartbeat, as the kubelet's.
func (a *Agent) renewLease(ctx context.Context) {
	t := time.NewTicker(a.o.LeaseRenew)
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
