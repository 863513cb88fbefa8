package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/report"
)

// TestSwitch hands the GPU back and forth: one initial activation, then
// protocol.handoffs handoffs A→B, B→A, …
func TestSwitch(t *testing.T) {
	h, ctx := begin(t)
	if n := len(h.Labels()); n < 2 {
		t.Skipf("switching needs two models; the config has %d", n)
	}
	handoffs, err := h.Switch(ctx, progress(t))
	assert.NoError(t, err)
	for _, ho := range handoffs {
		if ho.OK && !ho.Initial {
			assert.GreaterOrEqual(t, ho.ToFirstTokenS, ho.SleepS+ho.WakeS, "switch → first token covers sleep and wake (%s)", report.DirectionKey(ho.From, ho.To))
		}
	}
	passes(t, h.SwitchChecks(handoffs))
}
