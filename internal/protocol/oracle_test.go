package protocol_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/testmain"
)

func same(s gpu.Source) gpu.Source { return s }

func byName(cs []record.Check) map[string]record.Check {
	out := map[string]record.Check{}
	for _, c := range cs {
		out[c.Name+"/"+c.Model] = c
	}
	return out
}

// TestCorruptionIsCaughtByName: each fault answers every request with 200
// and plausible text, so the cycles succeed and the garbage check passes;
// the replay of the probe set after each wake fails the correctness check
// and names the probe and the token. Without a fault the same cycles pass;
// a wake that reorders a near-tie passes too, counted as a tie, unless a
// logprob drifted before it.
func TestCorruptionIsCaughtByName(t *testing.T) {
	testmain.Long(t)
	for fault, want := range map[string]struct {
		perReplay int // probes that diverge in each replay
		failure   string
		ties      int // probes that stopped at a tie in each replay
	}{
		"":                     {0, "", 0},
		"diverge-after-wake=3": {3, `probe "short" diverged from its answer before the first sleep at token 3 (token)`, 0},
		"lora-ignored":         {1, `probe "lora:sql" diverged from its answer before the first sleep at token 1 (token)`, 0},
		"logprob-drift=0.3":    {3, `probe "short" diverged from its answer before the first sleep at token 1 (logprob)`, 0},
		// Each probe of tiny-a has a near-tie within its 16 tokens
		// (short at token 5, long at 4, lora:sql at 1).
		"tie-flip-after-wake":                   {0, "", 3},
		"tie-flip-after-wake,logprob-drift=0.3": {3, `probe "short" diverged from its answer before the first sleep at token 1 (logprob)`, 0},
	} {
		t.Run("fault="+fault, func(t *testing.T) {
			_, rec, p := simtest.Env(t, same, func(cfg *config.Config) {
				cfg.Protocol.SleepL1Cycles = 2
				cfg.Models = cfg.Models[:1]
				cfg.Models[0].SimFaults = fault
				cfg.Models[0].LoRAModules = map[string]string{"sql": "/adapters/sql"}
			})
			cyclesOut, err := protocol.Sleep{Env: p, Level: 1}.Run(t.Context(), "A", t.Logf)
			cycles := cyclesOut.Value
			require.NoError(t, err, "every cycle's wake and first token succeed: a 200 hides the fault")
			require.Len(t, cycles, 2)
			c := byName(cyclesOut.Checks)["correctness.sleep-level1.mismatches/A"]
			assert.Equal(t, float64(2*want.perReplay), c.Value, "mismatching probes over 2 replays")
			raw := rec.Raw()
			ties := 0
			for _, rp := range raw.Replays["A"] {
				for _, r := range rp.Results {
					if r.Tie > 0 {
						ties++
						assert.True(t, r.Match, "a tie is no mismatch")
					}
				}
			}
			assert.Equal(t, 2*want.ties, ties, "ties over 2 replays")
			assert.Equal(t, []string{"short", "long", "lora:sql"}, raw.References["A"].Probes)
			assert.Equal(t, "token ids + logprobs", raw.References["A"].Basis)
			if want.perReplay == 0 {
				assert.Equal(t, "PASS", c.Verdict)
				assert.Empty(t, raw.Failures)
				return
			}
			assert.Equal(t, "FAIL", c.Verdict)
			require.Len(t, raw.Failures, 1, "the first mismatch is a failure; the check counts the rest")
			f := raw.Failures[0]
			assert.Equal(t, "correctness after sleep-level1 wake 1", f.Step)
			assert.Contains(t, f.Error, want.failure)
		})
	}
}

// TestEngineAccountAgrees: each cycle carries the server's own account,
// inside the HTTP times and matching the release: its log lines in every
// era, and the operation metric where the server has it (vLLM ≥ 0.32,
// eras d and proposed; v0.31 has none: NaN, not judged).
func TestEngineAccountAgrees(t *testing.T) {
	testmain.Long(t)
	for _, era := range []string{"c", "d", "proposed"} {
		t.Run(era, func(t *testing.T) {
			_, _, p := simtest.Env(t, same, func(cfg *config.Config) { cfg.Protocol.SleepL2Cycles, cfg.Sim.Era = 2, era })
			for _, level := range []int{1, 2} {
				cyclesOut, err := protocol.Sleep{Env: p, Level: level}.Run(t.Context(), "A", t.Logf)
				cycles := cyclesOut.Value
				require.NoError(t, err)
				for i, c := range cycles {
					e := c.Engine
					require.NotNil(t, e, "level %d cycle %d", level, i+1)
					assert.Empty(t, e.Disagreements)
					assert.Positive(t, e.SleepS)
					assert.LessOrEqual(t, e.SleepS, c.SleepS, "the engine's sleep is inside the /sleep call")
					assert.LessOrEqual(t, e.WakeS, c.WakeAPIS, "the wake calls' engine time inside the wake")
					assert.InDelta(t, 4.5, e.FreedGiB, 0.01, "tiny-a frees its 0.5 GiB of weights and its 4 GiB KV cache")
					if era == "c" {
						assert.True(t, math.IsNaN(e.MetricSleepS), "v0.31 exports no operation metric")
						continue
					}
					// The log times the engine's part, the metric the whole
					// operation, the HTTP call holds both: an order a busy
					// machine keeps (the log's microseconds may round down by 0.5 µs).
					assert.LessOrEqual(t, e.SleepS, e.MetricSleepS+0.5e-6, "the log's sleep inside the metric's")
					assert.LessOrEqual(t, e.MetricSleepS, c.SleepS, "the metric's sleep inside the /sleep call")
				}
				assert.Equal(t, "PASS", byName(cyclesOut.Checks)[fmt.Sprintf("sleep.level%d.engine_disagreements/A", level)].Verdict)
			}
		})
	}
}

// TestHandoffEngineAccount: each handoff carries the sleep of the model
// handing over and the wake of the one taking over, as their servers
// logged them; the initial activation, with nothing to sleep, only the wake.
func TestHandoffEngineAccount(t *testing.T) {
	_, _, p := simPool(t, same, 2)
	handoffsOut, err := protocol.Switch{Env: p}.Run(t.Context(), t.Logf)
	handoffs := handoffsOut.Value
	require.NoError(t, err)
	require.Len(t, handoffs, 3)
	for _, ho := range handoffs {
		e := ho.Engine
		require.NotNil(t, e, "%s→%s", ho.From, ho.To)
		assert.Empty(t, e.Disagreements)
		assert.LessOrEqual(t, e.WakeS, ho.WakeS, "the engine's wake is inside the HTTP call")
		if ho.Initial && ho.From == "" {
			assert.True(t, e.SleepS != e.SleepS, "no sleep in an activation from nothing")
			continue
		}
		assert.LessOrEqual(t, e.SleepS, ho.SleepS)
		assert.Positive(t, e.FreedGiB)
	}
	cs := byName(handoffsOut.Checks)
	assert.Equal(t, "PASS", cs["switch.A→B.engine_disagreements/"].Verdict)
}

// three is the default config with a third tiny model and the soak on.
func three(cycles int, faults map[string]string) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.Models = append(cfg.Models, config.Model{Label: "C", Name: "tiny-c", GPUMemoryUtilization: 0.3})
		for i := range cfg.Models {
			cfg.Models[i].GPUMemoryUtilization = 0.3
			cfg.Models[i].SimFaults = faults[cfg.Models[i].Label]
		}
		cfg.Protocol.KVGiB, cfg.Protocol.SettleS = 1, 0.01
		cfg.Protocol.SoakCycles = cycles
	}
}

// TestSoakFindsALeak: a server that keeps 64 MiB more after every sleep
// shows a residual slope of 64 MiB per cycle and fails its growth limit;
// the others grow by nothing. Every process's first level-1 sleep pays
// for its pinned buffer and is kept apart from the steady state.
func TestSoakFindsALeak(t *testing.T) {
	_, rec, p := simtest.Env(t, same, three(12, map[string]string{"B": "leak-per-cycle=64"}))
	cyclesOut, err := protocol.Soak{Env: p}.Run(t.Context(), t.Logf)
	cycles := cyclesOut.Value
	require.NoError(t, err)
	require.Len(t, cycles, 12)
	cs := byName(cyclesOut.Checks)
	assert.Equal(t, "PASS", cs["soak.successful_cycles/"].Verdict)
	b := cs["soak.residual_growth_mib_per_cycle/B"]
	assert.Equal(t, "FAIL", b.Verdict)
	assert.InDelta(t, 64, b.Value, 0.5, "64 MiB per sleep of B")
	for _, l := range []string{"A", "C"} {
		assert.Equal(t, "PASS", cs["soak.residual_growth_mib_per_cycle/"+l].Verdict, l)
		assert.InDelta(t, 0, cs["soak.residual_growth_mib_per_cycle/"+l].Value, 0.01, l)
		assert.Equal(t, "PASS", cs["soak.engine_disagreements/"+l].Verdict, l)
		assert.Equal(t, "PASS", cs["correctness.soak.mismatches/"+l].Verdict, l)
	}
	raw := rec.Raw()
	for _, c := range cycles {
		assert.Positive(t, c.HeadroomGiB, "cycle %d", c.Cycle)
		assert.False(t, c.RSSGiB != c.RSSGiB, "host RSS of %s read", c.From)
	}
	for _, l := range []string{"A", "B", "C"} {
		require.NotEmpty(t, raw.FirstSleeps[l], l)
		assert.Equal(t, 1, raw.FirstSleeps[l][0].Level)
	}
}

// TestSoakNamesAnOOMBeforeTheWake: a server leaking 3 GiB a sleep eats the
// headroom; the soak stops at the cycle whose wake could not fit, before
// sending it, and names the model and the memory.
func TestSoakNamesAnOOMBeforeTheWake(t *testing.T) {
	_, rec, p := simtest.Env(t, same, three(30, map[string]string{"A": "leak-per-cycle=3072"}))
	cyclesOut, err := protocol.Soak{Env: p}.Run(t.Context(), t.Logf)
	cycles := cyclesOut.Value
	require.Error(t, err)
	assert.ErrorContains(t, err, "the wake would run out of memory")
	last := cycles[len(cycles)-1]
	assert.False(t, last.OK)
	assert.Negative(t, last.HeadroomGiB)
	assert.Less(t, len(cycles), 30)
	assert.Zero(t, last.WakeS, "the wake was not sent")
	f := rec.Raw().Failures
	require.Len(t, f, 1)
	assert.Equal(t, "soak", f[0].Phase)
	assert.Equal(t, last.To, f[0].Model)
	assert.True(t, strings.HasSuffix(f[0].Step, "headroom before the wake"), f[0].Step)
}
