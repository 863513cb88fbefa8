package protocol_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
)

// TestAfterWakeFaultsAreCaughtByName: model A decodes speculatively and
// serves adapter sql. Its baseline takes the engine's health before the
// first sleep; the level-2 after-wake phase prices the lost prefix and
// takes it again after the wake. Without a fault every health and
// lost-prefix check passes; each fault (every answer right: the
// correctness replay passes) fails its own check by name, and the other
// features' pass: spec-off-after-wake the acceptance (0) and the decode
// rate it carried (#52479: 2× slower), adapter-ignored-after-wake the
// adapter's hit rate (its requests hit the base model's blocks).
func TestAfterWakeFaultsAreCaughtByName(t *testing.T) {
	const l2 = "health." + record.HealthAfterL2 + "."
	for fault, fails := range map[string][]string{
		"":                           nil,
		"spec-off-after-wake":        {l2 + "spec_acceptance_ratio/A", l2 + "decode_rate_ratio/A"},
		"adapter-ignored-after-wake": {l2 + "adapter.sql.prefix_hit_change/A"},
	} {
		t.Run("fault="+fault, func(t *testing.T) {
			t.Parallel()
			_, rec, p := simtest.Env(t, same, func(cfg *config.Config) {
				cfg.Models = cfg.Models[:1]
				cfg.Models[0].SimFaults = fault
				cfg.Models[0].LoRAModules = map[string]string{"sql": "/adapters/sql"}
				cfg.Models[0].ExtraArgs = []string{"--speculative-config", `{"method": "mtp", "num_speculative_tokens": 3}`}
				cfg.Protocol.Concurrency, cfg.Protocol.Rounds = []int{1}, 1
			})
			_, err := protocol.Baseline{Env: p}.Run(t.Context(), "A", t.Logf)
			require.NoError(t, err)
			out, err := protocol.AfterWake{Env: p, Level: 2}.Run(t.Context(), "A", t.Logf)
			require.NoError(t, err, "every request answered: the faults are on the speed side")
			cs := byName(out.Checks)
			for _, name := range []string{l2 + "spec_acceptance_ratio/A", l2 + "prefix_hit_ratio/A", l2 + "decode_rate_ratio/A",
				l2 + "adapter.sql.prefix_hit_change/A", "lost_prefix.level2.price_s/A", "correctness.after-wake-l2.mismatches/A"} {
				c, ok := cs[name]
				if !assert.True(t, ok, "check %s", name) {
					continue
				}
				want := "PASS"
				if slices.Contains(fails, name) {
					want = "FAIL"
				}
				assert.Equal(t, want, c.Verdict, "%s", c)
			}
			raw := rec.Raw()
			require.Len(t, raw.LostPrefix["A"], 1)
			lp := raw.LostPrefix["A"][0]
			assert.Equal(t, 2, lp.Level)
			assert.Greater(t, lp.PromptTokens, 2000, "about lost_prefix_tokens")
			assert.Greater(t, lp.WokenTTFTS, lp.WarmTTFTS, "the wake dropped the cached prefix: it is prefilled again")
		})
	}
}
