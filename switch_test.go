// Switching the GPU between models: the invariants of the switch phase's
// handoffs and of the traffic phase's wake-on-demand router, and the
// soak's hundreds of handoffs over three or more models.

package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
)

// switchInvariants: switch → first token covers the sleep and the wake of
// every handoff that succeeded.
func switchInvariants(t *testing.T, v any) {
	for _, ho := range v.([]record.Handoff) {
		if ho.OK && !ho.Initial {
			assert.GreaterOrEqual(t, ho.ToFirstTokenS, ho.SleepS+ho.WakeS, "switch → first token covers sleep and wake (%s)", record.DirectionKey(ho.From, ho.To))
		}
	}
}

// trafficInvariants: every planned arrival was sent once through the
// router (whose first token came after it left the router), the router
// woke models on demand, and one sleep with requests in flight ran per
// pause mode.
func trafficInvariants(t *testing.T, v any) {
	h := suite.h
	tr := v.(record.Traffic)
	shared := 0
	for _, r := range tr.Requests {
		if r.Run == record.RunShared {
			shared++
			if r.Err == "" && !r.FirstToken.IsZero() {
				assert.False(t, r.FirstToken.Before(r.Dispatched), "request %d: first token after it left the router", r.Index)
			}
		}
	}
	plan := h.TrafficPlan()
	require.NotNil(t, plan, "TestMain planned the traffic before the run")
	arrivals := plan.Arrivals
	assert.Equal(t, len(arrivals), shared, "every arrival sent once")
	if len(h.Labels()) > 1 && len(arrivals) > 0 {
		assert.NotEmpty(t, tr.Switches, "the router woke models on demand")
	}
	// One sleep with requests in flight per pause mode; none with
	// traffic.in_flight_requests 0 (docs/traffic.md's setting for vLLM before
	// PR #34528).
	wantInFlight := len(h.Config().Traffic.InFlightModes)
	if h.Config().Traffic.InFlightRequests == 0 {
		wantInFlight = 0
	}
	assert.Len(t, tr.InFlight, wantInFlight)
}

// TestSoak is the soak phase: hundreds of handoffs round-robin over three
// or more models, every sleep's residual fitted for growth, the headroom
// before every wake, a correctness replay after it. Off unless
// protocol.soak_cycles is set (make soak): it is a phase of its own, not
// one of the protocol's.
func TestSoak(t *testing.T) {
	h, ctx := begin(t, record.PhaseSoak)
	n := h.Config().Protocol.SoakCycles
	if n == 0 {
		t.Skip("soak off (protocol.soak_cycles 0): run make soak, or set WAKEBENCH_PROTOCOL_SOAK_CYCLES with three or more models")
	}
	skipIfStopped(t)
	out, err := protocol.Soak{Env: h.Env()}.Run(ctx, progress(t))
	assert.NoError(t, err)
	assert.Len(t, out.Value, n, "every planned cycle ran")
	passes(t, out.Checks)
}
