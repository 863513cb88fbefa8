package protocol

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

// healthPromptWords is the engine-health burst's prompt after its tag:
// short words, about a token each in vLLM's tokenizers (and exactly one in
// vllmsim's). With the tag (9 tokens in vllmsim's count) the prompt is 73
// tokens: the last is computed again, and 72 ends half-way through a
// 16-token KV block, so a tokenizer's count a few tokens off still caches
// the same whole blocks (4): the hit rate is the same at every stage.
const healthPromptWords = 64

// words is a text of n short words.
func words(n int) string {
	w := strings.Fields("the cat sat on a mat and ate")
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w[i%len(w)])
	}
	return b.String()
}

// health runs label's engine-health burst (awake) and records it under
// stage: protocol.health_requests requests of health_max_tokens, one at a
// time, to the model, then as many to each LoRA adapter, all with one
// prompt whose tag is new to the burst (so its first request finds
// nothing cached, whatever came before); each part's figures are the
// difference of the server's /metrics counters across it. Off (nil, no
// record) when health_requests is 0. A failed request is the burst's
// error; an unreadable /metrics leaves the figures NaN with the note.
func (p *Env) health(ctx context.Context, label, stage string, logf Logf) error {
	n := p.cfg.Protocol.HealthRequests
	m, ok := p.cfg.Model(label)
	if n == 0 || !ok {
		return nil
	}
	// A tag of fixed length, new to the burst: its first request finds
	// nothing of it cached.
	prompt := fmt.Sprintf("[engine health %010d] %s", time.Now().UnixNano()%1e10, words(healthPromptWords))
	h := record.Health{Stage: stage, Requests: n, SpecAcceptance: math.NaN(), PrefixHitRate: math.NaN(), DecodeTPS: math.NaN()}
	window := func(model string) (spec, hit, decode float64, err error) {
		r, note, err := p.pool.Requests().HealthRates(ctx, label, model, prompt, p.cfg.Protocol.HealthMaxTokens, n)
		if err != nil {
			return r.SpecAcceptance, r.PrefixHitRate, r.DecodeTPS, fmt.Errorf("engine health %s, %s: %w", stage, model, err)
		}
		if h.Note == "" {
			h.Note = note
		}
		return r.SpecAcceptance, r.PrefixHitRate, r.DecodeTPS, nil
	}
	var err error
	if h.SpecAcceptance, h.PrefixHitRate, h.DecodeTPS, err = window(m.Name); err != nil {
		return err
	}
	for _, name := range m.Adapters() {
		_, hit, decode, err := window(name)
		if err != nil {
			return err
		}
		h.Adapters = append(h.Adapters, record.AdapterHealth{Name: name, PrefixHitRate: hit, DecodeTPS: decode})
	}
	p.w.Health.Add(label, h)
	logf("%s engine health %s: spec acceptance %.3f, prefix hit rate %.3f, decode %.1f tok/s%s", label, stage, h.SpecAcceptance, h.PrefixHitRate, h.DecodeTPS, noteSuffix(h.Note))
	return nil
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
}

// lostPrefixPrompt is the lost-prefix probe's prompt at level: about
// protocol.lost_prefix_tokens tokens (Protocol.LostPrefixLen) of short
// words behind a tag of its own; the probe is probe_max_tokens long.
func (p *Env) lostPrefixPrompt(label string, level int) string {
	return fmt.Sprintf("[lost prefix %s level %d] %s", label, level, words(p.cfg.Protocol.LostPrefixLen()-8))
}

// warmPrefix sends label's lost-prefix probe twice (awake, before the
// sleep): the second finds the prefix cached, its TTFT is the warm one,
// returned as the pair's warm half. nil when the probe is off.
func (p *Env) warmPrefix(ctx context.Context, label string, level int) (*record.LostPrefix, error) {
	if p.cfg.Protocol.LostPrefixLen() == 0 {
		return nil, nil
	}
	send := func() (time.Duration, int, error) {
		s, err := p.pool.Requests().Prompt(ctx, label, "", p.lostPrefixPrompt(label, level), p.cfg.Protocol.ProbeMaxTokens)
		if err != nil {
			return 0, 0, fmt.Errorf("lost-prefix probe, warm: %w", err)
		}
		return s.TTFT(), s.CachedTokens, nil
	}
	if _, _, err := send(); err != nil { // caches the prefix
		return nil, err
	}
	ttft, cached, err := send()
	if err != nil {
		return nil, err
	}
	return &record.LostPrefix{Level: level, WarmTTFTS: ttft.Seconds(), WarmCached: cached}, nil
}

// wokenPrefix sends the lost-prefix probe again as the first request
// after the wake and records the pair (its warm half from warmPrefix;
// nothing when that is nil).
func (p *Env) wokenPrefix(ctx context.Context, label string, level int, warm *record.LostPrefix, logf Logf) error {
	if warm == nil {
		return nil
	}
	s, err := p.pool.Requests().Prompt(ctx, label, "", p.lostPrefixPrompt(label, level), p.cfg.Protocol.ProbeMaxTokens)
	if err != nil {
		return fmt.Errorf("lost-prefix probe, first request after the wake: %w", err)
	}
	lp := *warm
	lp.PromptTokens, lp.WokenTTFTS, lp.WokenCached = s.PromptTokens, s.TTFT().Seconds(), s.CachedTokens
	p.w.LostPrefix.Add(label, lp)
	logf("%s lost prefix at level %d (%d tokens): warm %.3fs, first after the wake %.3fs: %.3fs more", label, level, lp.PromptTokens, lp.WarmTTFTS, lp.WokenTTFTS, lp.PriceS())
	return nil
}

// engineHealthChecks judges label's engine-health window of stage (the phase whose
// wake it followed: record.PhaseAfterWake, PhaseAfterWakeL2,
// PhaseKVRelease, PhaseSwitch) against its window before the first sleep
// (record.PhaseBaseline), for each feature the model's
// configuration turns on: speculative acceptance (--speculative-config),
// the prefix-cache hit rate (prefix caching on) as ratios after / before;
// the decode rate, a ratio too; each LoRA adapter's hit rate as a change
// either way. A figure the server does not export is NOT EVALUATED with
// why, required where the user set the threshold.
func engineHealthChecks(cfg config.Config, label, stage string, hs []record.Health) []record.Check {
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
			out = append(out, record.Evaluate(n, label, a/b, ">=", limit))
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
			out = append(out, record.Evaluate(n, label, a.PrefixHitRate-was.PrefixHitRate, "within", t.MaxAdapterHitChange))
		}
	}
	return out
}
