package protocol

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// byName maps each check's name to it.
func byName(cs []record.Check) map[string]record.Check {
	out := map[string]record.Check{}
	for _, c := range cs {
		out[c.Name] = c
	}
	return out
}

// healthConfig is one model A with speculative decoding and adapter sql.
func healthConfig() config.Config {
	cfg := config.SimDefault()
	cfg.Models = []config.Model{{Label: "A", Name: "tiny-a", ExtraArgs: []string{"--speculative-config", `{"num_speculative_tokens": 3}`},
		LoRAModules: map[string]string{"sql": "/a/sql"}}}
	cfg.Thresholds.MinSpecAcceptanceRatio, cfg.Thresholds.MinPrefixHitRatio, cfg.Thresholds.MinDecodeRateRatio = 0.8, 0.8, 0.8
	cfg.Thresholds.MaxAdapterHitChange = 0.1
	return cfg
}

// TestHealthComparesWithBeforeTheFirstSleep, by hand: before the first
// sleep acceptance 0.7, hit rate 0.6, 300 tok/s, the adapter's hit rate
// 0.6 at 250 tok/s; after a level-2 wake acceptance 0 (0 / 0.7 = 0 < 0.8:
// FAIL), hit rate 0.6 (1: PASS), 120 tok/s (0.4: FAIL), the adapter's 0.8
// (+0.2, beyond ±0.1: FAIL) at 250 tok/s (1: PASS). The windows of other
// stages are not this one's; a stage with no window is NOT EVALUATED.
func TestHealthComparesWithBeforeTheFirstSleep(t *testing.T) {
	cfg := healthConfig()
	before := record.Health{Stage: record.PhaseBaseline, SpecAcceptance: 0.7, PrefixHitRate: 0.6, DecodeTPS: 300,
		Adapters: []record.AdapterHealth{{Name: "sql", PrefixHitRate: 0.6, DecodeTPS: 250}}}
	l1 := record.Health{Stage: record.PhaseAfterWake, SpecAcceptance: 0.7, PrefixHitRate: 0.6, DecodeTPS: 290,
		Adapters: []record.AdapterHealth{{Name: "sql", PrefixHitRate: 0.6, DecodeTPS: 250}}}
	l2 := record.Health{Stage: record.PhaseAfterWakeL2, SpecAcceptance: 0, PrefixHitRate: 0.6, DecodeTPS: 120,
		Adapters: []record.AdapterHealth{{Name: "sql", PrefixHitRate: 0.8, DecodeTPS: 250}}}
	hs := []record.Health{before, l1, l2}

	c := byName(engineHealthChecks(cfg, "A", record.PhaseAfterWakeL2, hs))
	require.Len(t, c, 5)
	assert.Equal(t, "PASS", c["health.after-wake-l2.adapter.sql.decode_rate_ratio"].Verdict)
	assert.InDelta(t, 1, c["health.after-wake-l2.adapter.sql.decode_rate_ratio"].Value, 1e-12)
	assert.Equal(t, "FAIL", c["health.after-wake-l2.spec_acceptance_ratio"].Verdict)
	assert.Zero(t, c["health.after-wake-l2.spec_acceptance_ratio"].Value)
	assert.Equal(t, "PASS", c["health.after-wake-l2.prefix_hit_ratio"].Verdict)
	assert.InDelta(t, 1, c["health.after-wake-l2.prefix_hit_ratio"].Value, 1e-12)
	assert.Equal(t, "FAIL", c["health.after-wake-l2.decode_rate_ratio"].Verdict)
	assert.InDelta(t, 0.4, c["health.after-wake-l2.decode_rate_ratio"].Value, 1e-12)
	adapter := c["health.after-wake-l2.adapter.sql.prefix_hit_change"]
	assert.Equal(t, "FAIL", adapter.Verdict)
	assert.InDelta(t, 0.2, adapter.Value, 1e-12)
	assert.Equal(t, "within", adapter.Op)

	for _, ck := range engineHealthChecks(cfg, "A", record.PhaseAfterWake, hs) {
		assert.Equal(t, "PASS", ck.Verdict, "%s: the level-1 wake kept every feature", ck)
	}
	kv := engineHealthChecks(cfg, "A", record.PhaseKVRelease, hs)
	require.Len(t, kv, 1, "no window after a KV-only wake: said so")
	assert.Equal(t, record.NotEvaluated, kv[0].Verdict)
	assert.Contains(t, kv[0].Reason, "no engine-health window in phase kv-release")
	cfg.Protocol.HealthRequests = 0
	assert.Empty(t, engineHealthChecks(cfg, "A", record.PhaseKVRelease, hs), "the windows off: no check")
}

// TestHealthOnlyWhatTheModelTurnsOn: without --speculative-config no
// acceptance check; with --no-enable-prefix-caching no hit-rate checks
// (the adapters' neither); a feature turned on that the server does not
// export is NOT EVALUATED with why, required where the user set its
// threshold; a zero threshold is off.
func TestHealthOnlyWhatTheModelTurnsOn(t *testing.T) {
	before := record.Health{Stage: record.PhaseBaseline, SpecAcceptance: math.NaN(), PrefixHitRate: 0.5, DecodeTPS: 100}
	after := record.Health{Stage: record.PhaseSwitch, SpecAcceptance: math.NaN(), PrefixHitRate: 0.5, DecodeTPS: 100,
		Adapters: []record.AdapterHealth{{Name: "sql", PrefixHitRate: 0.5}}}
	hs := []record.Health{before, after}

	plain := healthConfig()
	plain.Models[0].ExtraArgs = []string{"--no-enable-prefix-caching"}
	c := byName(engineHealthChecks(plain, "A", record.PhaseSwitch, hs))
	assert.Equal(t, []string{"health.switch.decode_rate_ratio"}, keys(c))

	spec := healthConfig()
	spec.UserThresholds = []string{"min_spec_acceptance_ratio"}
	c = byName(engineHealthChecks(spec, "A", record.PhaseSwitch, hs))
	sa := c["health.switch.spec_acceptance_ratio"]
	assert.Equal(t, record.NotEvaluated, sa.Verdict)
	assert.Contains(t, sa.Reason, "vllm:spec_decode_num_draft_tokens_total")
	assert.True(t, sa.Required, "the user set it: not evaluating it fails the run")
	assert.Equal(t, record.NotEvaluated, c["health.switch.adapter.sql.prefix_hit_change"].Verdict, "the adapter had no window before")

	spec.Thresholds.MinDecodeRateRatio = 0
	assert.NotContains(t, keys(byName(engineHealthChecks(spec, "A", record.PhaseSwitch, hs))), "health.switch.decode_rate_ratio")

	noBefore := engineHealthChecks(healthConfig(), "A", record.PhaseSwitch, []record.Health{after})
	for _, ck := range noBefore {
		assert.Equal(t, record.NotEvaluated, ck.Verdict, ck.Name)
	}
}

func keys(m map[string]record.Check) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestLostPrefixPrice, by hand: warm 0.05 s, first after the level-1
// wake 0.65 s: a price of 0.6 s ≤ 1: PASS; at level 2 3.05 − 0.05 = 3 > 1:
// FAIL; max_lost_prefix_s 0 is off. Nothing cached to lose is NOT
// EVALUATED: prefix caching off, or a warm request the server says
// found nothing cached.
func TestLostPrefixPrice(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Thresholds.MaxLostPrefixS = 1
	lps := []record.LostPrefix{{Level: 1, WarmTTFTS: 0.05, WokenTTFTS: 0.65, WarmCached: -1, WokenCached: -1},
		{Level: 2, WarmTTFTS: 0.05, WokenTTFTS: 3.05, WarmCached: 2048, WokenCached: 0}}
	l1 := lostPrefixChecks(cfg, "A", 1, lps)
	require.Len(t, l1, 1)
	assert.Equal(t, "lost_prefix.level1.price_s", l1[0].Name)
	assert.InDelta(t, 0.6, l1[0].Value, 1e-12)
	assert.Equal(t, "PASS", l1[0].Verdict)
	l2 := lostPrefixChecks(cfg, "A", 2, lps)
	require.Len(t, l2, 1)
	assert.InDelta(t, 3, l2[0].Value, 1e-12)
	assert.Equal(t, "FAIL", l2[0].Verdict)
	cold := lostPrefixChecks(cfg, "A", 1, []record.LostPrefix{{Level: 1, WarmTTFTS: 0.6, WokenTTFTS: 0.6, WarmCached: 0}})
	require.Len(t, cold, 1)
	assert.Equal(t, record.NotEvaluated, cold[0].Verdict)
	assert.Contains(t, cold[0].Reason, "found nothing cached")
	cfg.Models[0].ExtraArgs = []string{"--no-enable-prefix-caching"}
	off := lostPrefixChecks(cfg, "A", 2, lps)
	require.Len(t, off, 1)
	assert.Equal(t, record.NotEvaluated, off[0].Verdict)
	assert.Contains(t, off[0].Reason, "prefix caching is off")
	cfg.Thresholds.MaxLostPrefixS = 0
	assert.Empty(t, lostPrefixChecks(cfg, "A", 1, lps))
}
