package wakebench

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/stats"
)

// TestSwitch hands the GPU back and forth: one initial activation, then
// protocol.handoffs handoffs A→B, B→A, …
func TestSwitch(t *testing.T) {
	h, ctx := begin(t)
	handoffs, err := h.Switch(ctx, progress(t))
	assert.NoError(t, err)
	ok := 0
	byDir := map[string][]float64{}
	for _, ho := range handoffs {
		if ho.Initial || !ho.OK {
			continue
		}
		ok++
		k := report.DirectionKey(ho.From, ho.To)
		byDir[k] = append(byDir[k], ho.ToFirstTokenS)
		assert.GreaterOrEqual(t, ho.ToFirstTokenS, ho.SleepS+ho.WakeS, "switch → first token covers sleep and wake (%s)", k)
	}
	check(t, "switch.successful_handoffs", "", float64(ok), "==", float64(h.Config().Protocol.Handoffs))
	if limit := h.Config().Thresholds.MaxSwitchToFirstTokenS; limit > 0 {
		for k, xs := range byDir {
			s, _ := stats.Summarize(xs)
			check(t, "switch."+k+".to_first_token_s.p95", "", s.P95, "<=", limit)
		}
	}
}
