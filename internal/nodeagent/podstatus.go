package nodeagent

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// status writes the Pod's status as the agent sees it, keeping the
// conditions others own (readiness gates); Ready is the containers'
// readiness and every readiness gate's condition True.
func (p *pod) status(ctx context.Context) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := p.a.c.Core.Pods(p.ns).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.uid {
			return nil
		}
		p.mu.Lock()
		p.obj = cur.DeepCopy()
		st := p.build(cur)
		p.mu.Unlock()
		cur.Status = st
		_, err = p.a.c.Core.Pods(p.ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		p.a.fail(fmt.Errorf("pod %s/%s status: %w", p.ns, p.name, err))
	}
}

// build is the Pod's status from the agent's state (p.mu held).
func (p *pod) build(cur *corev1.Pod) corev1.PodStatus {
	st := cur.Status
	now := metav1.Now()
	c := cur.Spec.Containers[0]
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, RestartCount: p.restarts, Ready: p.ready && p.srv != nil}
	switch {
	case p.final:
		cs.State.Terminated = p.last
	case p.srv != nil:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: p.started}
		cs.Started = ptr(true)
		cs.ContainerID = "host-process://" + strconv.Itoa(p.srv.PID())
	case p.waiting != nil:
		cs.State.Waiting = p.waiting
	case p.last != nil:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	if p.last != nil && !p.final {
		cs.LastTerminationState.Terminated = p.last
	}
	st.ContainerStatuses = []corev1.ContainerStatus{cs}
	ip := p.a.o.IP
	st.HostIP, st.PodIP = ip, ip
	st.HostIPs, st.PodIPs = []corev1.HostIP{{IP: ip}}, []corev1.PodIP{{IP: ip}}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.Phase = corev1.PodPending
	switch {
	case p.final && p.last.ExitCode == 0 && p.evicted == "":
		st.Phase = corev1.PodSucceeded
	case p.final:
		st.Phase = corev1.PodFailed
		if p.evicted != "" { // as the kubelet's eviction manager writes it
			st.Reason, st.Message = "Evicted", p.evicted
		}
	case p.srv != nil || p.last != nil:
		st.Phase = corev1.PodRunning
	}
	gates := true
	for _, g := range cur.Spec.ReadinessGates {
		i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		if i < 0 || st.Conditions[i].Status != corev1.ConditionTrue {
			gates = false
		}
	}
	set := func(t corev1.PodConditionType, ok bool, reason string) {
		s := corev1.ConditionFalse
		if ok {
			s, reason = corev1.ConditionTrue, ""
		}
		i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == t })
		if i < 0 {
			st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now})
			return
		}
		if st.Conditions[i].Status != s {
			st.Conditions[i].LastTransitionTime = now
		}
		st.Conditions[i].Status, st.Conditions[i].Reason = s, reason
	}
	set(corev1.PodReadyToStartContainers, true, "")
	set(corev1.PodInitialized, true, "")
	set(corev1.ContainersReady, cs.Ready, "ContainersNotReady")
	reason := "ContainersNotReady"
	if p.final {
		reason = "PodCompleted"
	}
	if cs.Ready {
		reason = "ReadinessGatesNotReady"
	}
	set(corev1.PodReady, cs.Ready && gates, reason)
	return st
}
