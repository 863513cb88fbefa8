package protocol_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/vllm"
)

// sleepsSeen is what label's server process itself counts of its sleep
// calls (vLLM's sleep-mode histogram, per process): not the harness's
// own account.
func sleepsSeen(t *testing.T, m map[string]float64) float64 {
	t.Helper()
	require.True(t, slices.ContainsFunc(slices.Collect(maps.Keys(m)), func(k string) bool { return strings.HasPrefix(k, "vllm:engine_fully_awake") }),
		"the server speaks the proposed API (its metrics)")
	_, n, _ := vllm.Metrics(m).SleepOp("sleep") // no series before the first sleep: 0
	return n
}

// servingConfig is a short serving protocol: one concurrency, one round;
// vllmsim speaks the proposed API (its resource states; the operation
// histogram, sleepsSeen, is vLLM ≥ 0.32's, docs/vllm-api.md §0).
func servingConfig(cfg *config.Config) {
	cfg.Sim.Era = "proposed"
	cfg.Protocol.RestartWarm = 0
	cfg.Protocol.Concurrency, cfg.Protocol.Rounds, cfg.Protocol.RequestsPerRound = []int{1}, 1, 4
}

// TestBaselineBeforeAnySleep: after the restart phase of every model
// (which puts A to sleep to start B), each model's baseline is served by
// a process that has never slept, by the servers' own count.
func TestBaselineBeforeAnySleep(t *testing.T) {
	testmain.Long(t)
	f, _, p := simtest.Env(t, nil, servingConfig)
	ctx := t.Context()
	for _, l := range p.Labels() {
		_, err := protocol.Restart{Env: p}.Run(ctx, l, t.Logf)
		require.NoError(t, err)
	}
	require.True(t, f.Slept("A"), "the restart phase put A to sleep to start B")
	for _, l := range p.Labels() {
		runsOut, err := protocol.Baseline{Env: p}.Run(ctx, l, t.Logf)
		runs := runsOut.Value
		require.NoError(t, err)
		require.Len(t, runs, 1)
		m, err := f.Engine().Metrics(ctx, l)
		require.NoError(t, err)
		assert.Zero(t, sleepsSeen(t, m), "%s's baseline ran in a process that had slept", l)
		assert.False(t, f.Slept(l))
	}
	// The count does see a sleep: the same read after one says 1.
	_, err := f.Run(ctx, "B", pool.Sleep(1))
	require.NoError(t, err)
	m, err := f.Engine().Metrics(ctx, "B")
	require.NoError(t, err)
	assert.Equal(t, 1.0, sleepsSeen(t, m))
}

// TestAfterWakeCatchesASlowerDecode: a wake that leaves decoding three
// times slower for good (vllmsim's slow-decode-after-wake) fails
// after-wake's tok/s ratio against a baseline from before any sleep; the
// same run without the fault passes it.
func TestAfterWakeCatchesASlowerDecode(t *testing.T) {
	testmain.Long(t)
	for _, tc := range []struct {
		faults string
		pass   bool
	}{{"slow-decode-after-wake=3", false}, {"", true}} {
		t.Run("faults="+tc.faults, func(t *testing.T) {
			f, _, p := simtest.Env(t, nil, func(cfg *config.Config) {
				servingConfig(cfg)
				cfg.Models[0].SimFaults = tc.faults
				cfg.Thresholds.MinAfterWakeTPSRatio = 0.7
			})
			ctx := t.Context()
			for _, l := range p.Labels() {
				_, err := protocol.Restart{Env: p}.Run(ctx, l, t.Logf)
				require.NoError(t, err)
			}
			_, err := protocol.Baseline{Env: p}.Run(ctx, "A", t.Logf)
			require.NoError(t, err)
			runsOut, err := protocol.AfterWake{Env: p, Level: 1}.Run(ctx, "A", t.Logf)
			require.NoError(t, err)
			m, err := f.Engine().Metrics(ctx, "A")
			require.NoError(t, err)
			assert.Equal(t, 1.0, sleepsSeen(t, m), "after-wake served after one sleep of a fresh process")
			var ratio *record.Check
			for _, c := range runsOut.Checks {
				if c.Name == "after-wake.conc1.tps_ratio" {
					ratio = &c
				}
			}
			require.NotNil(t, ratio, "the tok/s ratio was checked")
			t.Logf("after-wake / baseline tok/s: %.3f", ratio.Value)
			assert.Equal(t, tc.pass, ratio.Verdict == "PASS", "ratio %.3f, limit %v: %s", ratio.Value, ratio.Limit, ratio.Verdict)
		})
	}
}

// TestAfterWakeServesBeforeItsReplay: after the wake, the server's next
// completion is a serving request, not a correctness probe (a replay
// would warm the engine first). The witness is the server's own request
// count: its 5th completion (after the baseline's 4) answers 500. The
// lost-prefix probe, whose last request is by design the first after the
// wake, and the engine-health bursts (counted by the server too) are off.
func TestAfterWakeServesBeforeItsReplay(t *testing.T) {
	_, rec, p := simtest.Env(t, nil, func(cfg *config.Config) {
		servingConfig(cfg)
		cfg.Protocol.LostPrefixTokens, cfg.Protocol.HealthRequests = 0, 0
		cfg.Models[0].SimFaults = "error-status=5:500"
		cfg.Thresholds.MaxFailedRequests = 1
	})
	ctx := t.Context()
	for _, l := range p.Labels() {
		_, err := protocol.Restart{Env: p}.Run(ctx, l, t.Logf)
		require.NoError(t, err)
	}
	runsOut, err := protocol.Baseline{Env: p}.Run(ctx, "A", t.Logf) // a fresh process: completions 1-4
	runs := runsOut.Value
	require.NoError(t, err)
	require.Equal(t, 4, runs[0].Success)
	runsOut, err = protocol.AfterWake{Env: p, Level: 1}.Run(ctx, "A", t.Logf)
	runs = runsOut.Value
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, 3, runs[0].Success, "the first request after the wake was a serving request")
	replays := rec.Raw().Replays["A"]
	require.NotEmpty(t, replays)
	last := replays[len(replays)-1]
	assert.Equal(t, record.PhaseAfterWake, last.Stage)
	assert.Empty(t, last.Err, "the replay came after the serving")
	assert.Zero(t, last.Mismatches())
}
