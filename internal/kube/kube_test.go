package kube

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func pod(phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: phase}}
}

// watches hands out fake watches, one per call, and records the options.
type watches struct {
	mu   sync.Mutex
	w    []*watch.FakeWatcher
	opts []metav1.ListOptions
}

func (ws *watches) watch(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFakeWithChanSize(10, false)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.w, ws.opts = append(ws.w, w), append(ws.opts, o)
	return w, nil
}

// nth waits for the nth watch (0-based) and returns it.
func (ws *watches) nth(t *testing.T, n int) *watch.FakeWatcher {
	var w *watch.FakeWatcher
	require.Eventually(t, func() bool {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if len(ws.w) > n {
			w = ws.w[n]
		}
		return w != nil
	}, time.Second, time.Millisecond)
	return w
}

var phases = []Milestone[*corev1.Pod]{
	{Name: "pending", Reached: func(p *corev1.Pod) bool { return p.Status.Phase != "" }},
	{Name: "running", Reached: func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }},
}

func TestTrackStampsEachMilestoneOnceAndStartsAgainWhenAWatchEnds(t *testing.T) {
	ws := &watches{}
	var thens []string
	ms := []Milestone[*corev1.Pod]{phases[0], {Name: "running", Reached: phases[1].Reached, Then: func(p *corev1.Pod) { thens = append(thens, string(p.Status.Phase)) }}}
	done := make(chan struct{})
	var p Progress[*corev1.Pod]
	var err error
	go func() {
		p, err = Track(context.Background(), ws.watch, "p", "", ms, nil)
		close(done)
	}()
	w := ws.nth(t, 0)
	w.Add(pod(corev1.PodPending))
	w.Stop() // the server ends the watch: Track starts another
	ws.nth(t, 1).Modify(pod(corev1.PodRunning))
	<-done
	require.NoError(t, err)
	assert.Equal(t, "metadata.name=p", ws.opts[0].FieldSelector)
	assert.False(t, p.At["running"].Before(p.At["pending"]))
	assert.Equal(t, []string{"Running"}, thens, "Then runs once, with the object that reached it")
	assert.Equal(t, corev1.PodRunning, p.Last.Status.Phase)
}

func TestTrackEndsOnFailGoneAndContext(t *testing.T) {
	ws := &watches{}
	refused := errors.New("unschedulable")
	go func() { ws.nth(t, 0).Add(pod(corev1.PodPending)) }()
	p, err := Track(context.Background(), ws.watch, "p", "", phases, func(*corev1.Pod) error { return refused })
	assert.ErrorIs(t, err, refused)
	assert.Contains(t, p.At, "pending", "what was seen before the failure is kept")

	ws = &watches{}
	go func() { ws.nth(t, 0).Delete(pod(corev1.PodPending)) }()
	_, err = Track(context.Background(), ws.watch, "p", "", phases, nil)
	assert.ErrorIs(t, err, ErrGone)

	ws = &watches{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = Track(ctx, ws.watch, "p", "", phases, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
