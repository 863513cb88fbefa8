package phases

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
)

// TestWakeBurst runs the opt-in phase on vllmsim: a serving run of stage
// wake-burst per concurrency, every round one wave of `concurrency`
// requests after a wake of its own (as many wakes as rounds, as many
// requests a round as the concurrency: each wave is in flight at once).
// Its TTFT is the wave's own: a wake slowed by 0.5 s (model A) leaves it
// under that, since the requests go out at the wake's answer, and a
// prefill slowed by 0.3 s (model B) moves it past that.
func TestWakeBurst(t *testing.T) {
	const slowWake, slowPrefill = 0.5, 0.3
	_, rec, env := simtest.Env(t, nil, func(cfg *config.Config) {
		cfg.Protocol.Concurrency, cfg.Protocol.Rounds, cfg.Protocol.RequestsPerRound = []int{1, 2}, 2, 8 // a wave is c requests, not 8
		cfg.Protocol.OptIn = []string{WakeBurst}
		cfg.Models[0].SimFaults = "slow=wake:0.5"
		cfg.Models[1].SimFaults = "slow=prefill:0.3"
	})
	in := Inputs{Config: env.Config()}
	for _, l := range []string{"A", "B"} {
		out, err := wakeBurst{env: env, perf: rec.Writers().Perf}.Run(t.Context(), l, t.Logf)
		require.NoError(t, err, l)
		runs := out.Value
		require.NoError(t, servingHolds(in, runs), l)
		for i, r := range runs {
			c := []int{1, 2}[i]
			assert.Equal(t, record.PerfRun{Stage: WakeBurst, Concurrency: c, Rounds: 2, Planned: 2 * c, Success: 2 * c, RoundsPassed: 2},
				record.PerfRun{Stage: r.Stage, Concurrency: r.Concurrency, Rounds: r.Rounds, Planned: r.Planned, Success: r.Success, RoundsPassed: r.RoundsPassed}, l)
			require.Len(t, r.TTFT, 2*c, l)
			assert.Len(t, r.RoundTPS, 2, l)
			for _, ttft := range r.TTFT {
				if l == "A" {
					assert.Less(t, ttft, slowWake, "A: the wake is not inside the burst's TTFT")
				} else {
					assert.GreaterOrEqual(t, ttft, slowPrefill, "B: the prefill is")
				}
			}
		}
	}
	rec.Read(func(raw *record.Raw) {
		for _, l := range []string{"A", "B"} {
			wakes := 0
			for _, e := range raw.Events {
				if e.Label == l && e.Kind == "wake" {
					wakes++
				}
			}
			assert.Equal(t, 2*2, wakes, "%s: a wake per round", l)
			require.Len(t, raw.Perf[l], 2, "recorded, stage %s", WakeBurst)
			assert.Equal(t, WakeBurst, raw.Perf[l][0].Stage)
		}
		assert.Contains(t, raw.Phases, WakeBurst)
		assert.Contains(t, raw.Windows, "A-"+WakeBurst, "its window, which the gate's Serve/stage= lines read")
	})
}
