package record

import (
	"maps"
	"slices"
)

// Health is one engine-health window of a model (docs/metrics.md, "Engine
// health"): a fixed burst of requests sent one at a time, each feature's
// figure from the difference of the server's own /metrics counters
// across it. Stage is the phase it was taken in, which names the wake it
// follows: PhaseBaseline before the model's first sleep; PhaseAfterWake,
// PhaseAfterWakeL2, PhaseKVRelease (after the first KV-only release's
// wake) or PhaseSwitch (after the first handoff to the model).
type Health struct {
	Stage    string
	Requests int // the burst's base-model requests (each adapter has as many)
	// SpecAcceptance is accepted / draft tokens; PrefixHitRate cached /
	// queried prompt tokens; DecodeTPS the tokens past each request's
	// first per second of decode time. NaN where the server exports no
	// such counter or the window counted nothing.
	SpecAcceptance, PrefixHitRate, DecodeTPS float64
	// Adapters are the same figures over each LoRA adapter's requests
	// (sent after the base model's, the same prompts).
	Adapters []AdapterHealth
	// Note says why the window has no figures (its /metrics unreadable).
	Note string
}

// AdapterHealth is a LoRA adapter's part of a Health window.
type AdapterHealth struct {
	Name                     string
	PrefixHitRate, DecodeTPS float64
}

// LostPrefix is the price of a lost prefix at one sleep level: a prompt of
// PromptTokens sent twice before the sleep (the second warm: its prefix
// cached) and again as the first request after the wake.
type LostPrefix struct {
	Level        int
	PromptTokens int     // usage.prompt_tokens of the probe
	WarmTTFTS    float64 // the warm request: sent → first token
	WokenTTFTS   float64 // the first request after the wake: sent → first token
	// Cached are the prompt tokens the server reported cached
	// (usage.prompt_tokens_details.cached_tokens; -1 where it does not say).
	WarmCached, WokenCached int
}

// PriceS is the lost prefix's price: the woken request's TTFT less the warm one's.
func (l LostPrefix) PriceS() float64 { return l.WokenTTFTS - l.WarmTTFTS }

// cloneHealth deep-copies the health windows and lost prefixes into c.
func cloneHealth(c *Raw, r Raw) {
	c.Health = nil
	if r.Health != nil {
		c.Health = make(map[string][]Health, len(r.Health))
		for k, hs := range r.Health {
			out := slices.Clone(hs)
			for i := range out {
				out[i].Adapters = slices.Clone(out[i].Adapters)
			}
			c.Health[k] = out
		}
	}
	c.LostPrefix = nil
	if r.LostPrefix != nil {
		c.LostPrefix = maps.Clone(r.LostPrefix)
		for k, v := range c.LostPrefix {
			c.LostPrefix[k] = slices.Clone(v)
		}
	}
}
