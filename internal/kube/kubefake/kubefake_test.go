package kubefake

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/wakebench/wakebench/internal/testmain"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

func TestMain(m *testing.M) { testmain.Main(m, "") }

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node}}
}

// next is the next event of w, or fails.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev := <-w.ResultChan():
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return watch.Event{}
	}
}

// none says w has no event for a while.
func none(t *testing.T, w watch.Interface) {
	t.Helper()
	select {
	case ev := <-w.ResultChan():
		t.Fatalf("unexpected %s event for %v", ev.Type, ev.Object)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestWatchStartsWithWhatExistsAndKeepsToItsSelector(t *testing.T) {
	c, _ := New(pod("a", "n1"), pod("b", "n2"))
	ctx := context.Background()
	w, err := c.Core.Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	require.NoError(t, err)
	defer w.Stop()
	ev := next(t, w)
	assert.Equal(t, watch.Added, ev.Type)
	assert.Equal(t, "a", ev.Object.(*corev1.Pod).Name)
	none(t, w) // b is on another node

	_, err = c.Core.Pods("ns").Create(ctx, pod("c", "n2"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Core.Pods("ns").Create(ctx, pod("d", "n1"), metav1.CreateOptions{})
	require.NoError(t, err)
	ev = next(t, w)
	assert.Equal(t, "d", ev.Object.(*corev1.Pod).Name, "c is on another node")

	byName, err := c.Core.Pods("ns").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=b"})
	require.NoError(t, err)
	defer byName.Stop()
	assert.Equal(t, "b", next(t, byName).Object.(*corev1.Pod).Name)
	none(t, byName)
}

func TestUpdatesCarryAResourceVersion(t *testing.T) {
	c, _ := New()
	ctx := context.Background()
	p, err := c.Core.Pods("ns").Create(ctx, pod("a", "n1"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, p.ResourceVersion)
	w, err := c.Core.Pods("ns").Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	next(t, w) // a, as it is

	// Nothing changed: nothing written, no event.
	same, err := c.Core.Pods("ns").UpdateStatus(ctx, p.DeepCopy(), metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, p.ResourceVersion, same.ResourceVersion)
	none(t, w)

	changed := p.DeepCopy()
	changed.Status.Phase = corev1.PodRunning
	now, err := c.Core.Pods("ns").UpdateStatus(ctx, changed, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, p.ResourceVersion, now.ResourceVersion)
	assert.Equal(t, corev1.PodRunning, next(t, w).Object.(*corev1.Pod).Status.Phase)

	// An update from the first read is stale.
	stale := p.DeepCopy()
	stale.Status.Phase = corev1.PodFailed
	_, err = c.Core.Pods("ns").UpdateStatus(ctx, stale, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "%v", err)

	// A patch moves the version on: an update from before it is stale.
	_, err = c.Core.Pods("ns").Patch(ctx, "a", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	now.Status.Phase = corev1.PodSucceeded
	_, err = c.Core.Pods("ns").UpdateStatus(ctx, now, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "%v", err)
}

func TestDeletingABoundPodMarksIt(t *testing.T) {
	c, _ := New(pod("bound", "n1"), pod("pending", ""))
	ctx := context.Background()
	require.NoError(t, c.Core.Pods("ns").Delete(ctx, "bound", metav1.DeleteOptions{}))
	p, err := c.Core.Pods("ns").Get(ctx, "bound", metav1.GetOptions{})
	require.NoError(t, err, "its node removes it")
	require.NotNil(t, p.DeletionTimestamp)
	assert.EqualValues(t, 30, *p.DeletionGracePeriodSeconds)

	require.NoError(t, c.Core.Pods("ns").Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	_, err = c.Core.Pods("ns").Get(ctx, "bound", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "grace 0 removes it: %v", err)

	require.NoError(t, c.Core.Pods("ns").Delete(ctx, "pending", metav1.DeleteOptions{}))
	_, err = c.Core.Pods("ns").Get(ctx, "pending", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a Pod on no node goes at once: %v", err)
}
