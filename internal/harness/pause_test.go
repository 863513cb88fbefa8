package harness

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
)

// TestPauseCyclesByEra: the level-0 and KV-only release cycles on
// vllmsim's newest eras (d, c) measure what they name — a pause frees nothing
// and a request sent meanwhile waits for the wake; a KV release frees the
// KV cache (kv_gib) and vLLM refused it without a pause — and on an older
// vLLM (era a: no /pause, no /release_kv_cache_memory) they are off, NOT
// EVALUATED with the reason, and the run is not failed for it. On era d
// (v0.32+, #52864's operation metrics) each KV cycle has the engine's own
// release time, inside the HTTP call's; v0.31 (c) has no such metric.
func TestPauseCyclesByEra(t *testing.T) {
	for _, era := range []string{"d", "c", "a"} {
		t.Run("era "+era, func(t *testing.T) {
			t.Setenv("VLLMSIM_ERA", era)
			cfg := small(t)
			cfg.Protocol.SleepL0Cycles, cfg.Protocol.KVReleaseCycles = 2, 2
			h, err := Open(t.Context(), cfg)
			require.NoError(t, err)
			logf := func(string, ...any) {}
			_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", logf)
			require.NoError(t, err)
			l0Out, err := protocol.Level0{Env: h.env}.Run(t.Context(), "A", logf)
			l0 := l0Out.Value
			require.NoError(t, err)
			c0 := l0Out.Checks
			kvOut, err := protocol.KVRelease{Env: h.env}.Run(t.Context(), "A", logf)
			kv := kvOut.Value
			require.NoError(t, err)
			ckv := kvOut.Checks
			rep, err := h.Close(nil)
			require.NoError(t, err)
			checks := append(c0, ckv...)
			if era == "a" {
				assert.Empty(t, l0)
				assert.Empty(t, kv)
				require.Len(t, checks, 2, "%+v", checks)
				for _, c := range checks {
					assert.Equal(t, record.NotEvaluated, c.Verdict, c.Name)
					assert.False(t, c.Required, "not failed: %s", c.Name)
					assert.Contains(t, c.Reason, "(vLLM before the pause API): the cycle is off")
				}
				assert.Contains(t, rep.Models["A"].Sleep["0"].Off, "no /pause")
				return
			}
			for _, c := range checks {
				if strings.HasPrefix(c.Name, "health.") { // the phases alone: no baseline's window to compare with
					assert.Equal(t, record.NotEvaluated, c.Verdict, c.Name)
					assert.False(t, c.Required, c.Name)
					assert.Contains(t, c.Reason, "no engine-health window before the first sleep", c.Name)
					continue
				}
				assert.Equal(t, "PASS", c.Verdict, "%s %v", c.Name, c.Value)
			}
			require.Len(t, l0, 2)
			for _, c := range l0 {
				assert.InDelta(t, 0, c.FreedGiB, 0.01, "a pause frees nothing")
				assert.GreaterOrEqual(t, c.HeldPastWakeS, 0.0, "the held request's first token came after the wake")
				assert.Less(t, c.HeldS-c.HeldPastWakeS, 0.1, "the wake went out once the server held the probe, settle_s not waited")
			}
			require.Len(t, kv, 2)
			for _, c := range kv {
				assert.InDelta(t, cfg.Protocol.KVGiB, c.FreedGiB, 0.05, "the KV cache is what a KV-only release frees")
				assert.Greater(t, c.ReleaseS, 0.0)
				if era == "c" {
					assert.True(t, c.Engine == nil || math.IsNaN(c.Engine.MetricReleaseS), "v0.31 has no operation metrics")
					continue
				}
				require.NotNil(t, c.Engine)
				assert.Greater(t, c.Engine.MetricReleaseS, 0.0, "the engine's release")
				assert.LessOrEqual(t, c.Engine.MetricReleaseS, c.ReleaseS, "recorded before the answer: inside the call")
				assert.Greater(t, c.Engine.MetricWakeS, 0.0, "the engine's wake_up?tags=kv_cache")
				assert.Empty(t, c.Engine.Disagreements)
			}
			kvs := rep.Models["A"].Sleep["kv"]
			assert.Equal(t, 2, kvs.SuccessfulCycles)
			if era == "d" {
				require.NotNil(t, kvs.Engine)
				require.NotNil(t, kvs.Engine.MetricReleaseS)
				assert.Equal(t, 2, kvs.Engine.MetricReleaseS.N)
				assert.Equal(t, max(kv[0].Engine.MetricReleaseS, kv[1].Engine.MetricReleaseS), kvs.Engine.MetricReleaseS.Max)
			}
		})
	}
}
