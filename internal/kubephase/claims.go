package kubephase

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/record"
)

// shared records the shared claim with both Pods on it.
func (p *phase) shared(ctx context.Context, claim string) error {
	c, err := p.Clients.Resource.ResourceClaims(p.ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: ResourceClaim %s: %w", claim, err)
	}
	sc := &record.SharedClaim{Claim: claim, UsedGiB: -1, DeallocatedS: -1}
	if c.Status.Allocation != nil {
		for _, r := range c.Status.Allocation.Devices.Results {
			sc.Device = r.Driver + "/" + r.Pool + "/" + r.Device
		}
	}
	for _, r := range c.Status.ReservedFor {
		sc.ReservedFor = append(sc.ReservedFor, r.Name)
	}
	sort.Strings(sc.ReservedFor)
	if len(sc.ReservedFor) != 2 {
		return fmt.Errorf("kubernetes: ResourceClaim %s is reserved for %v, not both models' Pods", claim, sc.ReservedFor)
	}
	if p.Memory != nil {
		if used, _, err := p.Memory(ctx); err == nil {
			sc.UsedGiB = used
		}
	}
	p.out.Shared = sc
	return nil
}

// scaleToZero deletes label's awake Pod, then starts a new one.
func (p *phase) scaleToZero(ctx context.Context, label, claim string) error {
	r := p.pods[label]
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	sz := record.ScaleToZero{Model: label, Pod: r.name, FreedGiB: -1, WakeS: -1}
	var before float64 = -1
	if p.Memory != nil {
		if used, _, err := p.Memory(ctx); err == nil {
			before = used
		}
	}
	tr := kube.NewTracker(tctx)
	tctx = tr.Context()
	var claimP kube.Progress[*resourcev1.ResourceClaim]
	tr.Go(func() error {
		var err error
		claimP, err = kube.Track(tctx, p.Clients.Resource.ResourceClaims(p.ns).Watch, claim, "", []kube.Milestone[*resourcev1.ResourceClaim]{{Name: "released", Reached: func(c *resourcev1.ResourceClaim) bool {
			return !slices.ContainsFunc(c.Status.ReservedFor, func(x resourcev1.ResourceClaimConsumerReference) bool { return x.UID == r.uid })
		}}}, nil)
		if err != nil {
			return fmt.Errorf("kubernetes: ResourceClaim %s still reserved for deleted pod %s (kube-controller-manager's resourceclaim controller releases it): %w", claim, r.name, err)
		}
		return nil
	})
	var gone time.Time
	tr.Go(func() error {
		_, err := kube.Track(tctx, p.Clients.Core.Pods(p.ns).Watch, r.name, "", []kube.Milestone[*corev1.Pod]{{Name: "never", Reached: func(*corev1.Pod) bool { return false }}}, nil)
		if errors.Is(err, kube.ErrGone) {
			gone = time.Now()
			return nil
		}
		return fmt.Errorf("kubernetes: deleted pod %s never went (is its node stopping it?): %w", r.name, err)
	})
	t0 := time.Now()
	if err := p.Clients.Core.Pods(p.ns).Delete(tctx, r.name, metav1.DeleteOptions{}); err != nil {
		return tr.Fail(fmt.Errorf("kubernetes: delete pod %s: %w", r.name, err))
	}
	if err := tr.Wait(); err != nil {
		return err
	}
	delete(p.pods, label)
	sz.GoneS, sz.ReleasedS = since(t0, gone), since(t0, claimP.At["released"])
	if p.Memory != nil && before >= 0 {
		if used, _, err := p.Memory(ctx); err == nil {
			sz.FreedGiB = before - used
		}
	}
	ps, err := p.coldStart(ctx, label, claim, "scale-up")
	if err != nil {
		return err
	}
	sz.BackS = ps.FirstTokenS
	var wakes []float64
	for _, h := range p.out.Handoffs {
		if h.To == label {
			wakes = append(wakes, h.FirstTokenS)
		}
	}
	if len(wakes) > 0 {
		slices.Sort(wakes)
		sz.WakeS = wakes[(len(wakes)-1)/2]
	}
	p.out.Scale = append(p.out.Scale, sz)
	p.Logf("kubernetes: scale to zero of %s: gone %.3fs, claim released %.3fs, back to first token %.3fs (a wake: %.3fs)", label, sz.GoneS, sz.ReleasedS, sz.BackS, sz.WakeS)
	return nil
}

// capacity ends the shared claim (every Pod deleted: its allocation
// cleared) and runs per-Pod claims on the device's memory capacity: A's
// Pod asleep, B's awake, then a third Pod whose request fits the memory
// the device has free but not the capacity the scheduler still counts.
func (p *phase) capacity(ctx context.Context, shared string) error {
	dev, err := p.releaseSharedClaim(ctx, shared)
	if err != nil {
		return err
	}
	cc, total, err := p.deviceCapacity(ctx, dev)
	if err != nil || cc == nil {
		return err
	}
	third, err := p.startOnOwnClaims(ctx, cc, total)
	if err != nil {
		return err
	}
	return p.askBeyondCapacity(ctx, cc, third)
}

// releaseSharedClaim deletes every Pod on the shared claim and waits for
// the claim's allocation to be cleared (recorded as its DeallocatedS); it
// returns the device the claim had.
func (p *phase) releaseSharedClaim(ctx context.Context, shared string) (resourcev1.DeviceRequestAllocationResult, error) {
	c := p.Clients
	var dev resourcev1.DeviceRequestAllocationResult
	sc, err := c.Resource.ResourceClaims(p.ns).Get(ctx, shared, metav1.GetOptions{})
	if err != nil {
		return dev, fmt.Errorf("kubernetes: ResourceClaim %s: %w", shared, err)
	}
	if sc.Status.Allocation != nil && len(sc.Status.Allocation.Devices.Results) > 0 {
		dev = sc.Status.Allocation.Devices.Results[0]
	}
	tctx, cancel := p.timeout(ctx)
	defer cancel()
	t0 := time.Now()
	for _, l := range p.order {
		if r := p.pods[l]; r != nil {
			if err := c.Core.Pods(p.ns).Delete(tctx, r.name, metav1.DeleteOptions{}); err != nil {
				return dev, fmt.Errorf("kubernetes: delete pod %s: %w", r.name, err)
			}
			delete(p.pods, l)
		}
	}
	pr, err := kube.Track(tctx, c.Resource.ResourceClaims(p.ns).Watch, shared, "", []kube.Milestone[*resourcev1.ResourceClaim]{{Name: "deallocated",
		Reached: func(c *resourcev1.ResourceClaim) bool { return c.Status.Allocation == nil }}}, nil)
	if err != nil {
		return dev, fmt.Errorf("kubernetes: ResourceClaim %s still allocated after its last Pod was deleted (kube-controller-manager's resourceclaim controller deallocates it): %w", shared, err)
	}
	p.out.Shared.DeallocatedS = since(t0, pr.At["deallocated"])
	return dev, nil
}

// deviceCapacity reads dev's memory capacity (bytes) from its
// ResourceSlice and whether it may be shared out between claims. It
// returns nil, with a note saying why, when per-Pod claims cannot run on
// it.
func (p *phase) deviceCapacity(ctx context.Context, dev resourcev1.DeviceRequestAllocationResult) (*record.CapacityClaims, int64, error) {
	rs, err := p.Clients.Resource.ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("kubernetes: ResourceSlices: %w", err)
	}
	cc := &record.CapacityClaims{RequestGiB: map[string]float64{}, UsedGiB: -1, FreeGiB: -1}
	var total int64
	for _, s := range rs.Items {
		if s.Spec.Driver != dev.Driver || s.Spec.Pool.Name != dev.Pool {
			continue
		}
		for _, d := range s.Spec.Devices {
			if d.Name == dev.Device {
				if q, ok := d.Capacity["memory"]; ok {
					total = q.Value.Value()
				}
				cc.Enabled = d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
			}
		}
	}
	if total == 0 {
		p.out.Notes = append(p.out.Notes, fmt.Sprintf("claim accounting with per-Pod claims not executed: device %s/%s/%s publishes no memory capacity", dev.Driver, dev.Pool, dev.Device))
		return nil, 0, nil
	}
	cc.DeviceGiB = float64(total) / record.GiB
	p.out.Capacity = cc
	if !cc.Enabled {
		// Without multiple allocations a device goes whole to one claim: a
		// second Pod with its own claim could never share it, asleep or not.
		p.out.Notes = append(p.out.Notes, fmt.Sprintf("per-Pod claims on one device not executed: device %s/%s/%s does not allow multiple allocations (the DRAConsumableCapacity feature gate is off in kube-apiserver or kube-scheduler, or the driver does not publish allowMultipleAllocations), so each Pod's own claim would take the whole GPU", dev.Driver, dev.Pool, dev.Device))
		return nil, 0, nil
	}
	return cc, total, nil
}

// startOnOwnClaims makes a claim on the device's memory for each model's
// Pod and one for a third Pod (model A's again), starts A's and B's Pods
// on theirs and puts A's to sleep. It returns the third Pod's claim.
func (p *phase) startOnOwnClaims(ctx context.Context, cc *record.CapacityClaims, total int64) (string, error) {
	a, b := p.order[0], p.order[1]
	claims := map[string]string{a: "wakebench-cap-" + lower(a), b: "wakebench-cap-" + lower(b), "third": "wakebench-cap-third"}
	for who, name := range claims {
		l := who
		if who == "third" {
			l = a
		}
		if _, err := p.Clients.Resource.ResourceClaims(p.ns).Create(ctx, claimSpec(p.ns, name, p.k.DeviceClass, p.memoryRequest(l, total)), metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("kubernetes: ResourceClaim %s: %w", name, err)
		}
	}
	for _, l := range []string{a, b} {
		ps, err := p.coldStart(ctx, l, claims[l], "per-pod-claim")
		if err != nil {
			return "", err
		}
		cc.Scheduled = append(cc.Scheduled, ps.Pod)
		cc.RequestGiB[ps.Pod] = float64(p.memoryRequest(l, total)) / record.GiB
		if l == a {
			if err := p.sleep(ctx, a, p.k.SleepLevel); err != nil {
				return "", err
			}
			cc.AsleepPods = append(cc.AsleepPods, ps.Pod)
		}
	}
	cc.RequestedGiB = float64(p.memoryRequest(a, total)) / record.GiB
	return claims["third"], nil
}

// memoryRequest is model label's claim on a device of total bytes: its
// share of the memory, in whole MiB.
func (p *phase) memoryRequest(label string, total int64) int64 {
	return int64(p.models[label].GPUMemoryUtilization*float64(total)) &^ (1<<20 - 1)
}

// askBeyondCapacity creates the third Pod, model A's on claim, whose
// request fits the memory the device has free (A's Pod asleep) but not the
// capacity the scheduler counts, and records whether it was refused.
func (p *phase) askBeyondCapacity(ctx context.Context, cc *record.CapacityClaims, claim string) error {
	a := p.order[0]
	name, port, host, err := p.next(a)
	if err != nil {
		return err
	}
	if p.Memory != nil {
		if used, tot, err := p.Memory(ctx); err == nil {
			cc.UsedGiB, cc.FreeGiB = used, tot-used
			cc.WouldFit = cc.RequestedGiB <= cc.FreeGiB
		}
	}
	if _, err := p.Clients.Core.Pods(p.ns).Create(ctx, podSpec(p.Cfg, p.models[a], name, claim, host, port), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes: create pod %s: %w", name, err)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Duration(p.k.RefuseWaitS*float64(time.Second)))
	defer rcancel()
	_, err = kube.Track(rctx, p.Clients.Core.Pods(p.ns).Watch, name, "", []kube.Milestone[*corev1.Pod]{{Name: "scheduled", Reached: condTrue(corev1.PodScheduled)}},
		func(pod *corev1.Pod) error {
			if c := refusal(pod); c != nil {
				cc.Refused, cc.Message = name, c.Message
				return errRefused
			}
			return nil
		})
	switch {
	case errors.Is(err, errRefused):
		p.Logf("kubernetes: the scheduler refused %s (%.2f GiB asked, %.2f GiB free on the device): %s", name, cc.RequestedGiB, cc.FreeGiB, cc.Message)
	case err == nil:
		cc.Scheduled = append(cc.Scheduled, name)
		p.out.Notes = append(p.out.Notes, fmt.Sprintf("the scheduler placed %s beside %v: the claims' requests (%.2f GiB each) fit the device's %.2f GiB", name, cc.Scheduled[:2], cc.RequestedGiB, cc.DeviceGiB))
	default:
		return fmt.Errorf("kubernetes: pod %s neither scheduled nor refused after %vs: is kube-scheduler running? %w", name, p.k.RefuseWaitS, err)
	}
	return nil
}

var errRefused = errors.New("refused")
