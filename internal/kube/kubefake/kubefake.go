// Package kubefake makes kube.Clients on client-go's fake clientset, for
// tests that run without an API server. The fake stores objects and
// answers calls; three things the code under test relies on from a real
// API server are added here:
//
//   - a watch starts with the objects that exist (one Added event each) and
//     keeps to its field selector (metadata.name, metadata.namespace,
//     spec.nodeName) and label selector;
//   - writes carry a resourceVersion: an update from a stale read is a
//     Conflict, and an update that changes nothing is not written and sends
//     no event (a patch is written twice, so its watchers see it twice);
//   - deleting a Pod bound to a node with a grace period only marks it
//     (deletionTimestamp): its node removes it once its containers stopped.
//
// Admission, defaulting, validation and controllers are not there.
package kubefake

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"

	"github.com/wakebench/wakebench/internal/kube"
)

// New is a fake clientset holding objs, and the clients on it. Add
// reactors to the clientset (PrependReactor) to play the parts of the
// control plane a test needs.
func New(objs ...runtime.Object) (*kube.Clients, *fake.Clientset) {
	cs := fake.NewClientset(objs...)
	s := &server{tracker: cs.Tracker(), store: clienttesting.ObjectReaction(cs.Tracker())}
	cs.PrependReactor("create", "*", s.create)
	cs.PrependReactor("update", "*", s.update)
	cs.PrependReactor("patch", "*", s.patch)
	cs.PrependReactor("delete", "pods", s.deletePod)
	cs.PrependWatchReactor("*", s.watch)
	return &kube.Clients{Host: "fake", Core: cs.CoreV1(), Resource: cs.ResourceV1(), Discovery: cs.DiscoveryV1(),
		Coordination: cs.CoordinationV1(), Batch: cs.BatchV1(), RBAC: cs.RbacV1()}, cs
}

// server is the API server's part: resource versions, watches, graceful
// deletion. Its reactors run one at a time (the fake holds its lock).
type server struct {
	tracker clienttesting.ObjectTracker
	store   clienttesting.ReactionFunc // the fake's own reaction: the store
	rv      atomic.Int64
}

func (s *server) nextRV() string { return strconv.FormatInt(s.rv.Add(1), 10) }

func (s *server) create(a clienttesting.Action) (bool, runtime.Object, error) {
	if m, err := meta.Accessor(a.(clienttesting.CreateAction).GetObject()); err == nil {
		m.SetResourceVersion(s.nextRV())
	}
	return false, nil, nil // the fake stores it
}

func (s *server) update(a clienttesting.Action) (bool, runtime.Object, error) {
	obj := a.(clienttesting.UpdateAction).GetObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return false, nil, nil
	}
	cur, err := s.tracker.Get(a.GetResource(), a.GetNamespace(), m.GetName())
	if err != nil {
		return false, nil, nil // the fake says NotFound
	}
	cm, err := meta.Accessor(cur)
	if err != nil {
		return false, nil, nil
	}
	if rv := m.GetResourceVersion(); rv != "" && rv != cm.GetResourceVersion() {
		return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), m.GetName(),
			fmt.Errorf("the object has been modified (resourceVersion %s, now %s)", rv, cm.GetResourceVersion()))
	}
	m.SetResourceVersion(cm.GetResourceVersion())
	if apiequality.Semantic.DeepEqual(cur, obj) {
		return true, cur, nil // nothing changed: nothing written, no event
	}
	m.SetResourceVersion(s.nextRV())
	return false, nil, nil
}

// patch applies a patch (the fake's store does) and gives the result a
// new resourceVersion. Its watchers see two Modified events.
func (s *server) patch(a clienttesting.Action) (bool, runtime.Object, error) {
	_, obj, err := s.store(a)
	if err != nil {
		return true, obj, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, obj, nil
	}
	m.SetResourceVersion(s.nextRV())
	return true, obj, s.tracker.Update(a.GetResource(), obj, a.GetNamespace())
}

// deletePod marks a Pod bound to a node with a grace period for deletion;
// others go at once.
func (s *server) deletePod(a clienttesting.Action) (bool, runtime.Object, error) {
	d := a.(clienttesting.DeleteAction)
	obj, err := s.tracker.Get(a.GetResource(), a.GetNamespace(), d.GetName())
	if err != nil {
		return false, nil, nil
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	if g := d.GetDeleteOptions().GracePeriodSeconds; g != nil {
		grace = *g
	}
	if pod.Spec.NodeName == "" || grace == 0 {
		return false, nil, nil
	}
	if pod.DeletionTimestamp != nil {
		return true, pod, nil
	}
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &metav1.Time{Time: time.Now()}, &grace
	pod.ResourceVersion = s.nextRV()
	return true, pod, s.tracker.Update(a.GetResource(), pod, a.GetNamespace())
}

// watch starts a watch with the objects that exist and keeps to its
// selectors.
func (s *server) watch(a clienttesting.Action) (bool, watch.Interface, error) {
	wa := a.(clienttesting.WatchAction)
	r := wa.GetWatchRestrictions()
	gvr, ns := a.GetResource(), a.GetNamespace()
	in, err := s.tracker.Watch(gvr, ns)
	if err != nil {
		return true, nil, err
	}
	var existing []runtime.Object
	if gvk, ok := kindOf(gvr); ok {
		l, err := s.tracker.List(gvr, gvk, ns)
		if err != nil {
			in.Stop()
			return true, nil, err
		}
		if existing, err = meta.ExtractList(l); err != nil {
			in.Stop()
			return true, nil, err
		}
	}
	match := func(obj runtime.Object) bool {
		m, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		f := fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}
		if p, ok := obj.(*corev1.Pod); ok {
			f["spec.nodeName"] = p.Spec.NodeName
		}
		return (r.Fields == nil || r.Fields.Matches(f)) && (r.Labels == nil || r.Labels.Matches(labels.Set(m.GetLabels())))
	}
	out := make(chan watch.Event)
	w := watch.NewProxyWatcher(out)
	go func() {
		defer in.Stop()
		send := func(ev watch.Event) bool {
			if ev.Type != watch.Error && ev.Type != watch.Bookmark && !match(ev.Object) {
				return true
			}
			select {
			case out <- ev:
				return true
			case <-w.StopChan():
				return false
			}
		}
		for _, obj := range existing {
			if !send(watch.Event{Type: watch.Added, Object: obj}) {
				return
			}
		}
		for {
			select {
			case ev, ok := <-in.ResultChan():
				if !ok || !send(ev) {
					return
				}
			case <-w.StopChan():
				return
			}
		}
	}()
	return true, w, nil
}

// kindOf is the kind of the objects of resource gvr.
func kindOf(gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool) {
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.GroupVersion() != gvr.GroupVersion() {
			continue
		}
		if plural, _ := meta.UnsafeGuessKindToResource(gvk); plural == gvr {
			return gvk, true
		}
	}
	return schema.GroupVersionKind{}, false
}
