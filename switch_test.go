// Switching the GPU between models: one handoff per iteration
// (BenchmarkSwitch), and the soak's hundreds of handoffs over three or
// more models (the switch and traffic phases' invariants are their
// phases', in package phases: Phase.Holds).

package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

func BenchmarkSwitch(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	labels := h.Labels()
	if len(labels) < 2 {
		b.Skip("switching needs two models")
	}
	for i, from := range labels {
		to := labels[(i+1)%len(labels)]
		b.Run("dir="+record.DirectionKey(from, to), func(b *testing.B) {
			var sleep, wake, first []float64
			for b.Loop() {
				ho, err := h.Steps().Handoff(ctx, from, to)
				if err != nil {
					b.Fatal(err)
				}
				sleep, wake, first = append(sleep, ho.SleepS), append(wake, ho.WakeS), append(first, ho.ToFirstTokenS)
			}
			reportMean(b, sleep, report.UnitSleep)
			reportMean(b, wake, report.UnitWake)
			reportMean(b, first, report.UnitFirstToken)
		})
	}
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
