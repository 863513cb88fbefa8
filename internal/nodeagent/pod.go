package nodeagent

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/server"
)

// serve watches the Pods bound to the node and acts on each change, until
// ctx ends.
func (a *Agent) serve(ctx context.Context) {
	opts := metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.o.Node}
	for ctx.Err() == nil {
		w, err := a.c.Core.Pods("").Watch(ctx, opts)
		if err != nil {
			if ctx.Err() == nil {
				a.fail(fmt.Errorf("node %s: watch pods: %w", a.o.Node, err))
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			continue
		}
		a.syncEach(ctx, w)
		w.Stop()
	}
}

// syncEach syncs each Pod w reports until w or ctx ends.
func (a *Agent) syncEach(ctx context.Context, w watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return // the server ended the watch: start another
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Error || ev.Type == watch.Bookmark {
				continue
			}
			a.sync(ctx, p, ev.Type == watch.Deleted)
		}
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
			a.neverRan(ctx, obj)
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
			p.terminal(ctx)
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

// pod is one Pod the agent runs: one container (the phase's Pods have one).
type pod struct {
	a        *Agent
	uid      types.UID
	ns, name string
	changed  chan struct{} // poked when the object changes (readiness gates)
	done     chan struct{} // closed when run returns

	mu       sync.Mutex // guards the fields below
	obj      *corev1.Pod
	srv      *server.Server
	started  metav1.Time
	ready    bool
	restarts int32
	last     *corev1.ContainerStateTerminated
	waiting  *corev1.ContainerStateWaiting
	stopped  bool
	// final: the container ran to completion and stays terminated
	// (restartPolicy Never, OnFailure after exit 0, or evicted): last is
	// its state, and the Pod's phase is Succeeded or Failed.
	final bool
	// killReason is the reason the next exit is reported with (OOMKilled),
	// evicted the eviction's message ("": not evicted).
	killReason, evicted string
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

// terminal writes a deleted Pod's terminal phase once its container has
// stopped, as the kubelet does since Kubernetes 1.27 (docs: Pod Lifecycle,
// "the kubelet transitions deleted Pods ... to a terminal phase (Failed or
// Succeeded depending on the exit statuses of the pod containers)"): a Job
// with a podFailurePolicy counts a Pod only once it is terminal, and its
// finalizer keeps the object until then.
func (p *pod) terminal(ctx context.Context) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return
	}
	p.mu.Lock()
	// run does not write the status once the Pod is stopped, final or
	// not: written here.
	if p.last == nil { // never started
		now := metav1.Now()
		p.last = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown", Message: "the Pod was deleted before its container ran", StartedAt: now, FinishedAt: now}
	}
	p.final = true
	p.mu.Unlock()
	p.status(ctx)
}

// neverRan writes the terminal phase of a Pod deleted before the agent
// started it (Failed, as the kubelet does; see terminal), unless it has one.
func (a *Agent) neverRan(ctx context.Context, obj *corev1.Pod) {
	if obj.Status.Phase == corev1.PodSucceeded || obj.Status.Phase == corev1.PodFailed || len(obj.Spec.Containers) == 0 {
		return
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := a.c.Core.Pods(obj.Namespace).Get(ctx, obj.Name, metav1.GetOptions{})
		if err != nil || cur.UID != obj.UID || cur.Status.Phase == corev1.PodSucceeded || cur.Status.Phase == corev1.PodFailed {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodFailed
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: cur.Spec.Containers[0].Name, Image: cur.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
				Message: "the Pod was deleted before its container ran", StartedAt: now, FinishedAt: now}}}}
		_, err = a.c.Core.Pods(obj.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		a.fail(fmt.Errorf("pod %s status: %w", kube.Name(obj), err))
	}
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
