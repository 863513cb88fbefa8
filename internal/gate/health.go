package gate

import (
	"fmt"
	"math"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// LostPrefix: the price of a lost prefix at level (the after-wake phase's
// probe: its first request after the wake, sent → first token, less the
// warm one's) within max_lost_prefix_s when set. NOT EVALUATED where
// nothing was cached to lose: the model's prefix caching is off, or the
// server said its warm request found nothing cached.
func LostPrefix(cfg config.Config, label string, level int, lps []record.LostPrefix) []record.Check {
	limit := cfg.ThresholdsFor(label).MaxLostPrefixS
	if limit == 0 {
		return nil
	}
	name := fmt.Sprintf("lost_prefix.level%d.price_s", level)
	absent := func(why string) []record.Check {
		return []record.Check{{Name: name, Model: label, Op: "<=", Limit: limit, Verdict: record.NotEvaluated, Reason: why,
			Required: cfg.ThresholdSetByUser(label, "max_lost_prefix_s")}}
	}
	var out []record.Check
	for _, lp := range lps {
		if lp.Level != level {
			continue
		}
		m, _ := cfg.Model(label)
		switch {
		case !m.PrefixCaching():
			out = absent("prefix caching is off (--no-enable-prefix-caching): nothing cached to lose")
		case lp.WarmCached == 0:
			out = absent("the warm request found nothing cached (usage.prompt_tokens_details.cached_tokens 0)")
		default:
			out = []record.Check{Evaluate(name, label, lp.PriceS(), "<=", limit)}
		}
	}
	return out
}

// Health judges label's engine-health window of stage (the phase whose
// wake it followed: record.PhaseAfterWake, PhaseAfterWakeL2,
// PhaseKVRelease, PhaseSwitch) against its window before the first sleep
// (record.PhaseBaseline), for each feature the model's
// configuration turns on: speculative acceptance (--speculative-config),
// the prefix-cache hit rate (prefix caching on) as ratios after / before;
// the decode rate, a ratio too; each LoRA adapter's hit rate as a change
// either way. A figure the server does not export is NOT EVALUATED with
// why, required where the user set the threshold.
func Health(cfg config.Config, label, stage string, hs []record.Health) []record.Check {
	var before, after *record.Health
	for i := range hs {
		switch h := &hs[i]; {
		case h.Stage == record.PhaseBaseline && before == nil:
			before = h
		case h.Stage == stage:
			after = h
		}
	}
	m, _ := cfg.Model(label)
	t := cfg.ThresholdsFor(label)
	name := func(f string) string { return "health." + stage + "." + f }
	absent := func(n, op string, limit float64, key, why string) record.Check {
		return record.Check{Name: n, Model: label, Op: op, Limit: limit, Verdict: record.NotEvaluated, Reason: why, Required: cfg.ThresholdSetByUser(label, key)}
	}
	if cfg.Protocol.HealthRequests == 0 {
		return nil // the windows are off
	}
	if after == nil { // the phase ran without such a wake of the model (a switch that never woke it)
		if t.MinDecodeRateRatio == 0 {
			return nil
		}
		return []record.Check{absent(name("decode_rate_ratio"), ">=", t.MinDecodeRateRatio, "min_decode_rate_ratio",
			"no engine-health window in phase "+stage+": the phase did not wake the model that way")}
	}
	// why is the reason a figure is absent (NaN) in h.
	why := func(h *record.Health, missing string) string {
		if h.Note != "" {
			return h.Note
		}
		return missing
	}
	var out []record.Check
	ratio := func(feature, key string, limit float64, a, b float64, missing string) {
		n := name(feature)
		switch {
		case limit == 0:
		case before == nil:
			out = append(out, absent(n, ">=", limit, key, "no engine-health window before the first sleep (the baseline phase did not take one)"))
		case math.IsNaN(b):
			out = append(out, absent(n, ">=", limit, key, "before the first sleep: "+why(before, missing)))
		case math.IsNaN(a):
			out = append(out, absent(n, ">=", limit, key, "after the wake: "+why(after, missing)))
		case b == 0:
			out = append(out, absent(n, ">=", limit, key, "0 before the first sleep: no ratio to compare"))
		default:
			out = append(out, Evaluate(n, label, a/b, ">=", limit))
		}
	}
	var b0 record.Health
	if before != nil {
		b0 = *before
	}
	if m.Speculative() {
		ratio("spec_acceptance_ratio", "min_spec_acceptance_ratio", t.MinSpecAcceptanceRatio, after.SpecAcceptance, b0.SpecAcceptance,
			"the server exports no speculative-decoding counters (vllm:spec_decode_num_draft_tokens_total), or drafted nothing")
	}
	if m.PrefixCaching() {
		ratio("prefix_hit_ratio", "min_prefix_hit_ratio", t.MinPrefixHitRatio, after.PrefixHitRate, b0.PrefixHitRate,
			"the server exports no prefix-cache counters (vllm:prefix_cache_queries_total, before them vllm:gpu_prefix_cache_queries_total)")
	}
	ratio("decode_rate_ratio", "min_decode_rate_ratio", t.MinDecodeRateRatio, after.DecodeTPS, b0.DecodeTPS,
		"the server exports no decode time (vllm:request_decode_time_seconds with vllm:generation_tokens_total)")
	for _, a := range after.Adapters {
		n := name("adapter." + a.Name + ".prefix_hit_change")
		var was *record.AdapterHealth
		for i := range b0.Adapters {
			if b0.Adapters[i].Name == a.Name {
				was = &b0.Adapters[i]
			}
		}
		if was != nil {
			ratio("adapter."+a.Name+".decode_rate_ratio", "min_decode_rate_ratio", t.MinDecodeRateRatio, a.DecodeTPS, was.DecodeTPS,
				"the server exports no decode time (vllm:request_decode_time_seconds with vllm:generation_tokens_total)")
		}
		switch {
		case !m.PrefixCaching() || t.MaxAdapterHitChange == 0:
		case was == nil:
			out = append(out, absent(n, "within", t.MaxAdapterHitChange, "max_adapter_hit_change", "the adapter has no engine-health window before the first sleep"))
		case math.IsNaN(was.PrefixHitRate) || math.IsNaN(a.PrefixHitRate):
			out = append(out, absent(n, "within", t.MaxAdapterHitChange, "max_adapter_hit_change", why(after, "the server exports no prefix-cache counters")))
		default:
			out = append(out, Evaluate(n, label, a.PrefixHitRate-was.PrefixHitRate, "within", t.MaxAdapterHitChange))
		}
	}
	return out
}
