package kubephase

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/record"
)

// restartInPod kills label's container and follows the node's restart to
// the first token.
func (p *phase) restartInPod(ctx context.Context, label string) error {
	r := p.pods[label]
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	t0 := time.Now()
	if err := p.Node.Restart(p.ns, r.name); err != nil {
		return fmt.Errorf("kubernetes: in-Pod restart of %s: %w", r.name, err)
	}
	health, err := r.client.WaitReady(tctx, time.Duration(p.Cfg.Timeouts.PollMS*float64(time.Millisecond)))
	if err != nil {
		return fmt.Errorf("kubernetes: in-Pod restart of %s: /health: %w", r.name, err)
	}
	ft, err := p.firstToken(tctx, r)
	if err != nil {
		return err
	}
	pod, err := p.Clients.Core.Pods(p.ns).Get(tctx, r.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: in-Pod restart of %s: %w", r.name, err)
	}
	rs := record.PodRestart{Model: label, Pod: r.name, HealthS: since(t0, health), FirstTokenS: since(t0, ft)}
	if cs := pod.Status.ContainerStatuses; len(cs) > 0 {
		rs.RestartCount = cs[0].RestartCount
	}
	p.out.Restarts = append(p.out.Restarts, rs)
	p.Logf("kubernetes: in-Pod restart of %s: /health %.3fs, first token %.3fs (restart count %d)", r.name, rs.HealthS, rs.FirstTokenS, rs.RestartCount)
	return nil
}

// sleep takes label's Pod out of its Service (gate False) and puts it to
// sleep (outside a handoff: nothing routes to it meanwhile).
func (p *phase) sleep(ctx context.Context, label string, level int) error {
	r := p.pods[label]
	if err := p.setGate(ctx, r.name, false); err != nil {
		return err
	}
	return p.sleepServer(ctx, r, level)
}

// sleepServer sends r's server to sleep at level.
func (p *phase) sleepServer(ctx context.Context, r *running, level int) error {
	tctx, cancel := context.WithTimeout(ctx, time.Duration(p.Cfg.Timeouts.SleepS*float64(time.Second)))
	defer cancel()
	if err := r.client.Sleep(tctx, level); err != nil {
		return fmt.Errorf("kubernetes: sleep pod %s: %w", r.name, err)
	}
	r.asleep = true
	return nil
}

// handoff switches the device from one model's Pod to the other's.
func (p *phase) handoff(ctx context.Context, from, to string, level int) error {
	rf, rt := p.pods[from], p.pods[to]
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	ho := record.PodHandoff{From: from, To: to, Level: level, UsedGiB: -1}
	tr := kube.NewTracker(tctx)
	tctx = tr.Context()
	var readyP kube.Progress[*corev1.Pod]
	var inP, outP kube.Progress[*discoveryv1.EndpointSlice]
	t0 := time.Now()
	tr.Go(func() error {
		var err error
		readyP, err = kube.Track(tctx, p.Clients.Core.Pods(p.ns).Watch, rt.name, "", []kube.Milestone[*corev1.Pod]{
			{Name: "ready", Reached: condTrue(corev1.PodReady)}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s not Ready after its wake: %w", rt.name, err)
		}
		return nil
	})
	tr.Go(func() error {
		var err error
		inP, err = kube.Track(tctx, p.Clients.Discovery.EndpointSlices(p.ns).Watch, "", discoveryv1.LabelServiceName+"="+serviceName(to),
			// To's endpoint went unready with its last sleep: it turns ready with this wake.
			[]kube.Milestone[*discoveryv1.EndpointSlice]{{Name: "routable", Reached: endpointReady(rt.name, true)}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s not routable after its wake (Service %s): %w", rt.name, serviceName(to), err)
		}
		return nil
	})
	drained := make(chan struct{})
	tr.Go(func() error {
		var err error
		outP, err = kube.Track(tctx, p.Clients.Discovery.EndpointSlices(p.ns).Watch, "", discoveryv1.LabelServiceName+"="+serviceName(from),
			[]kube.Milestone[*discoveryv1.EndpointSlice]{{Name: "unroutable", Reached: endpointReady(rf.name, false),
				Then: func(*discoveryv1.EndpointSlice) { close(drained) }}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s still routable while asleep (Service %s): %w", rf.name, serviceName(from), err)
		}
		return nil
	})
	// Drain: From leaves its Service (gate off) and the phase waits until
	// its EndpointSlice says so before the sleep, as a deployment must, or
	// requests still routed to it would meet a sleeping server.
	if err := p.setGate(tctx, rf.name, false); err != nil {
		return tr.Fail(err)
	}
	select {
	case <-drained:
	case <-tctx.Done():
		return tr.Fail(context.Cause(tctx))
	}
	s0 := time.Now()
	if err := p.sleepServer(tctx, rf, level); err != nil {
		return tr.Fail(err)
	}
	ho.SleepS = time.Since(s0).Seconds()
	w0 := time.Now()
	wctx, wcancel := context.WithTimeout(tctx, time.Duration(p.Cfg.Timeouts.WakeS*float64(time.Second)))
	step, err := rt.client.Wake(wctx, level)
	wcancel()
	if err != nil {
		return tr.Fail(fmt.Errorf("kubernetes: wake pod %s (%s): %w", rt.name, step, err))
	}
	ho.WakeS = time.Since(w0).Seconds()
	rt.asleep = false
	ft, err := p.firstToken(tctx, rt)
	if err != nil {
		return tr.Fail(err)
	}
	if err := p.setGate(tctx, rt.name, true); err != nil {
		return tr.Fail(err)
	}
	if err := tr.Wait(); err != nil {
		return err
	}
	ho.FirstTokenS, ho.ReadyS = since(t0, ft), since(t0, readyP.At["ready"])
	ho.RoutableS, ho.UnroutableS = since(t0, inP.At["routable"]), since(t0, outP.At["unroutable"])
	if p.Memory != nil {
		if used, _, err := p.Memory(ctx); err == nil {
			ho.UsedGiB = used
		}
	}
	p.out.Handoffs = append(p.out.Handoffs, ho)
	p.Logf("kubernetes: handoff %s→%s: drained %.3fs, sleep %.3fs, wake %.3fs, first token %.3fs, Ready %.3fs, routable %.3fs", from, to, ho.UnroutableS, ho.SleepS, ho.WakeS, ho.FirstTokenS, ho.ReadyS, ho.RoutableS)
	return nil
}
