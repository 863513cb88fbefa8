package fleetjob

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/wakebench/wakebench/internal/kube"
)

// LockName is the Lease a fleet run holds in its namespace: one fleet run
// there at a time. Two runs on the same nodes would time each other's
// GPUs (and with one GPU a node, each other's claims would leave Pods
// unschedulable). client-go's LeaseLock does the reads and the
// conflict-checked writes; a run holds it as a leader holds its election
// Lease, and a crashed run's Lease expires after lockDuration.
const LockName = "wakebench-fleet-lock"

const lockDuration = 60 * time.Second

// fleetLock is a held fleet lock. Only Run's goroutine uses it.
type fleetLock struct {
	ll  *resourcelock.LeaseLock
	rec resourcelock.LeaderElectionRecord
}

// acquire takes the fleet lock of namespace ns for holder (the run's Job):
// an error naming the holder when another run holds it and has renewed it
// within its duration.
func acquire(ctx context.Context, c *kube.Clients, ns, holder string, d time.Duration) (*fleetLock, error) {
	ll := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: LockName, Namespace: ns}, Client: c.Coordination,
		LockConfig: resourcelock.ResourceLockConfig{Identity: holder}}
	now := metav1.NewTime(time.Now())
	l := &fleetLock{ll: ll, rec: resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: int(d.Seconds()), AcquireTime: now, RenewTime: now}}
	cur, _, err := ll.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		err = ll.Create(ctx, l.rec)
	case err != nil:
	case cur.HolderIdentity != "" && cur.HolderIdentity != holder &&
		cur.RenewTime.Add(time.Duration(cur.LeaseDurationSeconds)*time.Second).After(now.Time):
		return nil, fmt.Errorf("fleet: another fleet run (%s) holds the Lease %s/%s, renewed %.0f s ago: two runs on the same nodes time each other's GPUs; wait for it to end (its Lease expires %d s after its last renewal) or use another fleet.namespace",
			cur.HolderIdentity, ns, LockName, now.Sub(cur.RenewTime.Time).Seconds(), cur.LeaseDurationSeconds)
	default: // free, or its holder stopped renewing: taken over
		l.rec.LeaderTransitions = cur.LeaderTransitions + 1
		err = ll.Update(ctx, l.rec)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: the fleet lock (Lease %s/%s): %w", ns, LockName, err)
	}
	return l, nil
}

// renew marks the lock held now. It reads the Lease first: LeaseLock
// writes with the resourceVersion of its last read, and one failed write
// would make every later one a conflict.
func (l *fleetLock) renew(ctx context.Context) error {
	cur, _, err := l.ll.Get(ctx)
	if err != nil {
		return fmt.Errorf("fleet lock (Lease %s): renew: %w", l.ll.Describe(), err)
	}
	if cur.HolderIdentity != l.rec.HolderIdentity {
		return fmt.Errorf("fleet lock (Lease %s): held by %s now (this run did not renew it in time): another run may be timing the same GPUs", l.ll.Describe(), cur.HolderIdentity)
	}
	l.rec.RenewTime, l.rec.LeaderTransitions = metav1.NewTime(time.Now()), cur.LeaderTransitions
	if err := l.ll.Update(ctx, l.rec); err != nil {
		return fmt.Errorf("fleet lock (Lease %s): renew: %w", l.ll.Describe(), err)
	}
	return nil
}

// release deletes the Lease if this run still holds it.
func (l *fleetLock) release(ctx context.Context) error {
	cur, err := l.ll.Client.Leases(l.ll.LeaseMeta.Namespace).Get(ctx, LockName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.rec.HolderIdentity {
		return nil // taken over after this run stopped renewing: not ours to delete
	}
	return l.ll.Client.Leases(l.ll.LeaseMeta.Namespace).Delete(ctx, LockName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})
}
