package phases

import (
	"errors"
	"fmt"

	"github.com/wakebench/wakebench/internal/record"
)

// The invariants below are written as what must hold, negated, so that
// a NaN (a figure never measured) breaks them as testify's comparisons did.

// holds makes an invariant of values of type T a Phase.Holds: a step
// whose value is of another type breaks it.
func holds[T any](f func(in Inputs, v T) error) func(Inputs, any) error {
	return func(in Inputs, v any) error {
		t, ok := v.(T)
		if !ok {
			return fmt.Errorf("the step measured a %T, not a %T", v, t)
		}
		return f(in, t)
	}
}

// restartHolds: every start became ready, then answered.
func restartHolds(_ Inputs, rs []record.Restart) error {
	var errs []error
	for i, r := range rs {
		if !(r.ReadyS > 0) { // NaN breaks it too
			errs = append(errs, fmt.Errorf("start %d: spawn → ready %g s, not positive", i, r.ReadyS))
		}
		if !(r.FirstTokenS >= r.ReadyS) {
			errs = append(errs, fmt.Errorf("start %d: first token %g s before ready %g s", i, r.FirstTokenS, r.ReadyS))
		}
	}
	return errors.Join(errs...)
}

// servingHolds: a serving phase ran every concurrency.
func servingHolds(in Inputs, runs []record.PerfRun) error {
	if n := len(in.Config.Protocol.Concurrency); len(runs) != n {
		return fmt.Errorf("%d serving runs, not one per concurrency (%d)", len(runs), n)
	}
	return nil
}

// cycleHolds: in every cycle that succeeded the first token came after
// the wake calls (the sleep phases at every level, the KV-only release).
func cycleHolds(_ Inputs, cs []record.Cycle) error {
	var errs []error
	for i, c := range cs {
		if c.OK && !(c.ToFirstTokenS >= c.WakeAPIS) {
			errs = append(errs, fmt.Errorf("cycle %d: first token %g s before the wake calls answered (%g s)", i, c.ToFirstTokenS, c.WakeAPIS))
		}
	}
	return errors.Join(errs...)
}

// costHolds: a level-1 sleep frees GPU memory and every transition takes
// time (a model's state costs); the fit table has one row per level.
func costHolds(_ Inputs, v any) error {
	switch c := v.(type) {
	case record.Cost:
		var errs []error
		awake, _ := c.State(record.StateAwake)
		l1, _ := c.State(record.StateL1)
		if awake.GPUGiB != nil && l1.GPUGiB != nil && !(l1.GPUGiB[0] < awake.GPUGiB[0]) {
			errs = append(errs, fmt.Errorf("asleep at level 1 %g GiB, awake %g GiB: the sleep freed nothing", l1.GPUGiB[0], awake.GPUGiB[0]))
		}
		for _, tr := range c.Transitions {
			if !(tr.S > 0) {
				errs = append(errs, fmt.Errorf("%s took %g s", tr.Op, tr.S))
			}
		}
		return errors.Join(errs...)
	case *record.Fit:
		if len(c.Levels) != 2 {
			return fmt.Errorf("the fit table has %d levels, not levels 1 and 2", len(c.Levels))
		}
		return nil
	}
	return fmt.Errorf("the state-cost step measured a %T", v)
}

// switchHolds: switch → first token covers the sleep and the wake of
// every handoff that succeeded.
func switchHolds(_ Inputs, hs []record.Handoff) error {
	var errs []error
	for _, ho := range hs {
		if ho.OK && !ho.Initial && !(ho.ToFirstTokenS >= ho.SleepS+ho.WakeS) {
			errs = append(errs, fmt.Errorf("%s: switch → first token %g s shorter than its sleep %g s and wake %g s", record.DirectionKey(ho.From, ho.To), ho.ToFirstTokenS, ho.SleepS, ho.WakeS))
		}
	}
	return errors.Join(errs...)
}

// trafficHolds: every planned arrival was sent once through the router
// (whose first token came after it left the router), the router woke
// models on demand, and one sleep with requests in flight was recorded
// per pause mode, tried or off (none with traffic.in_flight_requests 0).
func trafficHolds(in Inputs, tr record.Traffic) error {
	var errs []error
	shared := 0
	for _, r := range tr.Requests {
		if r.Run != record.RunShared {
			continue
		}
		shared++
		if r.Err == "" && !r.FirstToken.IsZero() && r.FirstToken.Before(r.Dispatched) {
			errs = append(errs, fmt.Errorf("request %d: first token before it left the router", r.Index))
		}
	}
	plan := in.Traffic
	if plan == nil {
		return errors.Join(append(errs, errors.New("no traffic plan: the run plans the traffic before it starts a server"))...)
	}
	if shared != len(plan.Arrivals) {
		errs = append(errs, fmt.Errorf("%d requests through the router, not the plan's %d arrivals once each", shared, len(plan.Arrivals)))
	}
	if len(in.Config.Models) > 1 && len(plan.Arrivals) > 0 && len(tr.Switches) == 0 {
		errs = append(errs, errors.New("the router woke no model on demand"))
	}
	cfg := in.Config.Traffic
	want := len(cfg.InFlightModes)
	if cfg.InFlightRequests == 0 {
		want = 0
	}
	if len(tr.InFlight) != want {
		errs = append(errs, fmt.Errorf("%d sleeps with requests in flight, not one per pause mode (%d)", len(tr.InFlight), want))
	}
	return errors.Join(errs...)
}
