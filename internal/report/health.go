package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/wakebench/wakebench/internal/record"
)

// Health is one engine-health window in report.json
// (models.<label>.health[]): the burst's stage and, per feature, the
// figure from the server's own counters (docs/metrics.md, "Engine
// health"); null where the server exports no such counter.
type Health struct {
	Stage          string          `json:"stage"`
	Requests       int             `json:"requests"`
	SpecAcceptance *float64        `json:"spec_acceptance"`
	PrefixHitRate  *float64        `json:"prefix_hit_rate"`
	DecodeTPS      *float64        `json:"decode_tps"`
	Adapters       []AdapterHealth `json:"adapters,omitempty"`
	Note           string          `json:"note,omitempty"`
}

// AdapterHealth is a LoRA adapter's part of a window.
type AdapterHealth struct {
	Name          string   `json:"name"`
	PrefixHitRate *float64 `json:"prefix_hit_rate"`
	DecodeTPS     *float64 `json:"decode_tps"`
}

// LostPrefix is the lost-prefix probe at one level
// (models.<label>.lost_prefix.<level>): the warm request's TTFT, the
// first request's after the wake, and their difference, the price.
type LostPrefix struct {
	PromptTokens int     `json:"prompt_tokens"`
	WarmTTFTS    float64 `json:"warm_ttft_s"`
	WokenTTFTS   float64 `json:"woken_ttft_s"`
	PriceS       float64 `json:"price_s"`
	// The prompt tokens the server reported cached (null where it does
	// not say: vLLM without --enable-prompt-tokens-details).
	WarmCached  *int `json:"warm_cached_tokens"`
	WokenCached *int `json:"woken_cached_tokens"`
}

// health is model l's engine-health windows in the order taken; nil without any.
func health(hs []record.Health) []Health {
	var out []Health
	for _, h := range hs {
		r := Health{Stage: h.Stage, Requests: h.Requests, SpecAcceptance: Opt(h.SpecAcceptance), PrefixHitRate: Opt(h.PrefixHitRate),
			DecodeTPS: Opt(h.DecodeTPS), Note: h.Note}
		for _, a := range h.Adapters {
			r.Adapters = append(r.Adapters, AdapterHealth{Name: a.Name, PrefixHitRate: Opt(a.PrefixHitRate), DecodeTPS: Opt(a.DecodeTPS)})
		}
		out = append(out, r)
	}
	return out
}

// lostPrefix is model l's lost-prefix probes by level ("1", "2"; the last
// at each); nil without any.
func lostPrefix(lps []record.LostPrefix) map[string]*LostPrefix {
	if len(lps) == 0 {
		return nil
	}
	cached := func(n int) *int {
		if n < 0 {
			return nil
		}
		return &n
	}
	out := map[string]*LostPrefix{}
	for _, lp := range lps {
		out[strconv.Itoa(lp.Level)] = &LostPrefix{PromptTokens: lp.PromptTokens, WarmTTFTS: lp.WarmTTFTS, WokenTTFTS: lp.WokenTTFTS,
			PriceS: lp.PriceS(), WarmCached: cached(lp.WarmCached), WokenCached: cached(lp.WokenCached)}
	}
	return out
}

// writeHealth writes summary.md's engine-health table: each model's
// windows in the order taken, each feature's figure ("–" where the
// server exports none), and its lost-prefix price by level.
func writeHealth(d *Doc, rep Report, labels []string) {
	var rows [][]string
	f := func(x *float64, format string) string {
		if x == nil {
			return "–"
		}
		return fmt.Sprintf(format, *x)
	}
	for _, l := range labels {
		m := rep.Models[l]
		for _, h := range m.Health {
			var adapters []string
			for _, a := range h.Adapters {
				adapters = append(adapters, fmt.Sprintf("%s: hit %s, %s tok/s", a.Name, f(a.PrefixHitRate, "%.3f"), f(a.DecodeTPS, "%.4g")))
			}
			ad := strings.Join(adapters, "; ")
			if ad == "" {
				ad = "–"
			}
			rows = append(rows, []string{l, h.Stage, f(h.SpecAcceptance, "%.3f"), f(h.PrefixHitRate, "%.3f"), f(h.DecodeTPS, "%.4g"), ad})
		}
	}
	if len(rows) > 0 {
		d.Heading(2, "health", "Engine health (the server's own counters over a burst of requests: before the first sleep, then after each kind of wake)")
		d.Table([]string{"model", "stage", "spec acceptance", "prefix hit rate", "decode tok/s", "adapters"}, rows)
	}
	rows = nil
	for _, l := range labels {
		lp := rep.Models[l].LostPrefix
		for _, k := range slices.Sorted(maps.Keys(lp)) {
			x := lp[k]
			rows = append(rows, []string{l, k, strconv.Itoa(x.PromptTokens), fmt.Sprintf("%.4g", x.WarmTTFTS), fmt.Sprintf("%.4g", x.WokenTTFTS), fmt.Sprintf("%.4g", x.PriceS)})
		}
	}
	if len(rows) > 0 {
		d.Heading(2, "lost-prefix", "Lost prefix (a long prompt warm, then as the first request after a wake; seconds to the first token)")
		d.Table([]string{"model", "level", "prompt tokens", "warm", "after the wake", "price"}, rows)
	}
}
