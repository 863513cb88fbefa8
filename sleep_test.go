package wakebench

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/stats"
)

func TestSleepLevel1(t *testing.T) { testSleep(t, 1) }

// TestAfterWake measures serving again right after a level-1 sleep and wake
// and compares output tok/s with the baseline.
func TestAfterWake(t *testing.T) {
	h, ctx := begin(t)
	for _, l := range h.Labels() {
		t.Run(l, func(t *testing.T) {
			runs, err := h.AfterWake(ctx, l, progress(t))
			assert.NoError(t, err)
			checkServing(t, h, l, runs)
			min := h.Config().Thresholds.MinAfterWakeTPSRatio
			if min == 0 {
				return
			}
			base := baselineTPS(h, l)
			for _, r := range runs {
				b, ok := base[r.Concurrency]
				if !ok {
					t.Logf("no baseline at concurrency %d for %s (TestBaseline not run): after-wake ratio not checked", r.Concurrency, l)
					continue
				}
				aw, err := stats.Summarize(r.RoundTPS)
				require.NoError(t, err)
				check(t, fmt.Sprintf("after-wake.conc%d.tps_ratio", r.Concurrency), l, aw.Median/b, ">=", min)
			}
		})
	}
}

func TestSleepLevel2(t *testing.T) { testSleep(t, 2) }

func testSleep(t *testing.T, level int) {
	h, ctx := begin(t)
	cfg := h.Config()
	planned := cfg.Protocol.SleepL1Cycles
	maxFTT := cfg.Thresholds.MaxL1WakeToFirstTokenS
	if level == 2 {
		planned, maxFTT = cfg.Protocol.SleepL2Cycles, cfg.Thresholds.MaxL2WakeToFirstTokenS
	}
	for _, l := range h.Labels() {
		t.Run(l, func(t *testing.T) {
			cycles, err := h.SleepCycles(ctx, l, level, progress(t))
			assert.NoError(t, err)
			ok, prefix := 0, fmt.Sprintf("sleep.level%d", level)
			var ftt, resid []float64
			for _, c := range cycles {
				if c.OK {
					ok++
					ftt = append(ftt, c.ToFirstTokenS)
					resid = append(resid, c.ResidualGiB)
					assert.GreaterOrEqual(t, c.ToFirstTokenS, c.WakeAPIS, "first token comes after the wake calls")
				}
			}
			check(t, prefix+".successful_cycles", l, float64(ok), "==", float64(planned))
			if s, err := stats.Summarize(ftt); err == nil && maxFTT > 0 {
				check(t, prefix+".to_first_token_s.p95", l, s.P95, "<=", maxFTT)
			}
			if s, err := stats.Summarize(resid); err == nil && cfg.Thresholds.MaxResidualGiB > 0 && h.Sampler() != nil {
				check(t, prefix+".residual_gib.median", l, s.Median, "<=", cfg.Thresholds.MaxResidualGiB)
			}
			if level == 1 && cfg.Thresholds.MinL1ReleasePercent > 0 && h.Sampler() != nil {
				rel := h.Rec.Raw().Release[l]
				s, err := stats.Summarize(rel)
				require.NoError(t, err, "level-1 release fractions of %s", l)
				check(t, "memory.l1_release_fraction.median", l, s.Median, ">=", cfg.Thresholds.MinL1ReleasePercent)
			}
		})
	}
}

// baselineTPS is the median baseline tok/s per concurrency for label.
func baselineTPS(h *protocol.Harness, label string) map[int]float64 {
	out := map[int]float64{}
	for _, p := range h.Rec.Raw().Perf[label] {
		if p.Stage != "baseline" {
			continue
		}
		if s, err := stats.Summarize(p.RoundTPS); err == nil {
			out[p.Concurrency] = s.Median
		}
	}
	return out
}
