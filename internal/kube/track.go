package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

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
