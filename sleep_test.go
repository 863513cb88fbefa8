// The sleep phases' benchmark: one sleep/wake cycle per iteration, at
// level 1 and level 2 (their invariants are their phases', in package
// phases: Phase.Holds).

package wakebench

import (
	"fmt"
	"testing"

	"github.com/wakebench/wakebench/internal/report"
)

func BenchmarkSleep(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	for _, l := range h.Labels() {
		for _, level := range []int{1, 2} {
			b.Run(fmt.Sprintf("model=%s/level=%d", l, level), func(b *testing.B) {
				var sleep, wake, first, resid []float64
				for b.Loop() {
					c, err := h.Steps().Cycle(ctx, l, level)
					if err != nil {
						b.Fatal(err)
					}
					sleep, wake, first = append(sleep, c.SleepS), append(wake, c.WakeAPIS), append(first, c.ToFirstTokenS)
					if c.ResidualGiB == c.ResidualGiB {
						resid = append(resid, c.ResidualGiB)
					}
				}
				reportMean(b, sleep, report.UnitSleep)
				reportMean(b, wake, report.UnitWake)
				reportMean(b, first, report.UnitFirstToken)
				reportMean(b, resid, report.UnitResidual)
			})
		}
	}
}
