package fleetjob

import (
	"context"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// inform starts the informers the run reads: its Job, its Pods (by the
// run's label) and the node Leases. One list, then a watch each: the API
// traffic grows with what changes, not with the nodes times the polls.
// It returns once they have synced; the WaitGroup (never nil) is done
// when ctx has ended and they have stopped.
func (r *run) inform(ctx context.Context) (*sync.WaitGroup, error) {
	var wg sync.WaitGroup
	// A list or watch the coordinator may not make (RBAC) would be
	// retried for ever: the first refusal ends the wait for the sync.
	syncCtx, refused := context.WithCancelCause(ctx)
	defer refused(nil)
	mine := LabelFleet + "=" + r.name
	notify := func() {
		select {
		case r.changed <- struct{}{}:
		default: // one pending wake-up is enough: step reads everything
		}
	}
	quiet := func() {}
	// start runs an informer whose changes call wake (notify: step at
	// once; quiet: read at the next Poll).
	start := func(what string, example runtime.Object, list func(context.Context, metav1.ListOptions) (runtime.Object, error),
		watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), onDelete func(any), wake func()) (cache.SharedIndexInformer, error) {
		inf := cache.NewSharedIndexInformer(&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}, example, 0, cache.Indexers{})
		h := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { wake() }, UpdateFunc: func(any, any) { wake() },
			DeleteFunc: func(obj any) {
				if onDelete != nil {
					onDelete(obj)
				}
				wake()
			}}
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, fmt.Errorf("fleet: %s informer: %w", what, err)
		}
		if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, rf *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				refused(fmt.Errorf("fleet: list and watch %ss: %w (the coordinator's RBAC: deploy/rbac.yaml)", what, err))
				return
			}
			cache.DefaultWatchErrorHandler(ctx, rf, err)
		}); err != nil {
			return nil, fmt.Errorf("fleet: %s informer: %w", what, err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
		return inf, nil
	}
	jobs, err := start("Job", &batchv1.Job{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", r.name).String()
			return r.c.Batch.Jobs(r.ns).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", r.name).String()
			return r.c.Batch.Jobs(r.ns).Watch(ctx, o)
		}, nil, notify)
	if err != nil {
		return &wg, err
	}
	pods, err := start("Pod", &corev1.Pod{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = mine
			return r.c.Core.Pods(r.ns).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = mine
			return r.c.Core.Pods(r.ns).Watch(ctx, o)
		}, func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				r.gone.add(p)
			}
		}, notify)
	if err != nil {
		return &wg, err
	}
	leases, err := start("node Lease", &coordinationv1.Lease{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.c.Coordination.Leases(corev1.NamespaceNodeLease).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return r.c.Coordination.Leases(corev1.NamespaceNodeLease).Watch(ctx, o)
		}, nil, quiet) // every node renews every 10 s: no step of its own
	if err != nil {
		return &wg, err
	}
	if !cache.WaitForCacheSync(syncCtx.Done(), jobs.HasSynced, pods.HasSynced, leases.HasSynced) {
		return &wg, fmt.Errorf("fleet: the informers did not sync: %w", context.Cause(syncCtx))
	}
	r.jobs, r.pods, r.leases = jobs.GetStore(), pods.GetStore(), leases.GetStore()
	return &wg, nil
}

// goneLog holds the Job's Pods the informer saw deleted until step takes
// them (the informer's handler runs on its own goroutine).
type goneLog struct {
	mu   sync.Mutex // guards pods
	pods []*corev1.Pod
}

func (g *goneLog) add(p *corev1.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pods = append(g.pods, p)
}

func (g *goneLog) take() []*corev1.Pod {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.pods
	g.pods = nil
	return p
}
