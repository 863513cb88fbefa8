package kubephase

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func since(t0, t time.Time) float64 {
	if t.IsZero() {
		return -1
	}
	return t.Sub(t0).Seconds()
}

func cond(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func condTrue(t corev1.PodConditionType) func(*corev1.Pod) bool {
	return func(pod *corev1.Pod) bool {
		c := cond(pod, t)
		return c != nil && c.Status == corev1.ConditionTrue
	}
}

// refusal is the scheduler's PodScheduled condition when it has refused
// the Pod (Unschedulable), nil otherwise.
func refusal(pod *corev1.Pod) *corev1.PodCondition {
	if c := cond(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
		return c
	}
	return nil
}

// unschedulable fails a Pod the scheduler has refused, with its reason.
func unschedulable(pod *corev1.Pod) error {
	if c := refusal(pod); c != nil {
		return fmt.Errorf("pod %s unschedulable: %s", pod.Name, c.Message)
	}
	if cs := pod.Status.ContainerStatuses; len(cs) > 0 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Message != "" {
		return fmt.Errorf("pod %s: container %s: %s", pod.Name, cs[0].State.Waiting.Reason, cs[0].State.Waiting.Message)
	}
	return nil
}

// endpointReady is whether pod's endpoint in the Service's slice is ready (want) .
func endpointReady(pod string, want bool) func(*discoveryv1.EndpointSlice) bool {
	return func(s *discoveryv1.EndpointSlice) bool {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && e.TargetRef.Name == pod {
				return (e.Conditions.Ready != nil && *e.Conditions.Ready) == want
			}
		}
		return !want // absent: not routable
	}
}

// setGate sets the awake readiness gate of pod.
func (p *phase) setGate(ctx context.Context, pod string, awake bool) error {
	st := corev1.ConditionFalse
	if awake {
		st = corev1.ConditionTrue
	}
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"lastTransitionTime":%q}]}}`,
		AwakeGate, st, time.Now().UTC().Format(time.RFC3339))
	_, err := p.Clients.Core.Pods(p.ns).Patch(ctx, pod, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("kubernetes: set %s=%s on pod %s: %w", AwakeGate, st, pod, err)
	}
	return nil
}
