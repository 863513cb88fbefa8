package vllm

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a scrape of /metrics reduced to vLLM's own series: one value
// per series, keyed `name{label="value",…}` without the model_name and
// engine labels; histograms and summaries as name_sum and name_count.
type Metrics map[string]float64

// ParseMetrics parses Prometheus text exposition and keeps the vllm:* series.
func ParseMetrics(text []byte) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation) // a zero TextParser panics
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	out := Metrics{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "vllm:") {
			continue
		}
		for _, m := range f.GetMetric() {
			key := seriesKey(name, m.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[seriesKey(name+"_sum", m.GetLabel())] = m.GetHistogram().GetSampleSum()
				out[seriesKey(name+"_count", m.GetLabel())] = float64(m.GetHistogram().GetSampleCount())
			case dto.MetricType_SUMMARY:
				out[seriesKey(name+"_sum", m.GetLabel())] = m.GetSummary().GetSampleSum()
				out[seriesKey(name+"_count", m.GetLabel())] = float64(m.GetSummary().GetSampleCount())
			default:
				out[key] = m.GetUntyped().GetValue()
			}
		}
	}
	return out, nil
}

func seriesKey(name string, labels []*dto.LabelPair) string {
	kv := map[string]string{}
	for _, l := range labels {
		if l.GetName() == "model_name" || l.GetName() == "engine" {
			continue
		}
		kv[l.GetName()] = l.GetValue()
	}
	if len(kv) == 0 {
		return name
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, kv[k]))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// KVCacheUsage is vllm:kv_cache_usage_perc (1 = full), falling back to the
// pre-0.9 name vllm:gpu_cache_usage_perc.
func (m Metrics) KVCacheUsage() (float64, bool) {
	if v, ok := m["vllm:kv_cache_usage_perc"]; ok {
		return v, true
	}
	v, ok := m["vllm:gpu_cache_usage_perc"]
	return v, ok
}

// SleepState is the scrape's sleep state (SleepView.State): from
// vllm:engine_fully_awake and vllm:engine_sleep_resource_state where
// exported ("awake", "paused", "kv_released", "weights_offloaded",
// "discard_all", "partial", "unknown"), else the label the legacy
// vllm:engine_sleep_state marks 1 ("awake", "weights_offloaded",
// "discard_all") or "not fully awake" when all three are 0; "" when the
// server exports neither (before vLLM 0.11).
func (m Metrics) SleepState() string { return m.SleepView().State() }

// Counters are the engine's own counters an engine-health window takes the
// difference of (docs/metrics.md, "Engine health"): speculative decoding's
// drafts (vllm/v1/spec_decode/metrics.py SpecDecodingProm; exported only
// under --speculative-config), prefix-cache lookups in tokens
// (vllm/v1/metrics/loggers.py: vllm:prefix_cache_queries/hits, earlier
// releases vllm:gpu_prefix_cache_queries/hits, deprecated since), and the
// tokens generated with each finished request's decode time (first token
// → last, vllm/v1/metrics/stats.py update_from_finished_request). Has*
// say whether the server exports each family.
type Counters struct {
	HasSpec                                   bool
	SpecDrafts, SpecDraftTokens, SpecAccepted float64
	HasPrefix                                 bool
	PrefixQueries, PrefixHits                 float64
	HasDecode                                 bool
	// GenTokens is vllm:generation_tokens_total; DecodeS and Decoded the
	// sum and count of vllm:request_decode_time_seconds.
	GenTokens, DecodeS, Decoded float64
}

// Counters reads the scrape's engine counters.
func (m Metrics) Counters() Counters {
	var c Counters
	c.SpecDraftTokens, c.HasSpec = m["vllm:spec_decode_num_draft_tokens_total"]
	c.SpecDrafts = m["vllm:spec_decode_num_drafts_total"]
	c.SpecAccepted = m["vllm:spec_decode_num_accepted_tokens_total"]
	q, okQ := m["vllm:prefix_cache_queries_total"]
	h := m["vllm:prefix_cache_hits_total"]
	if !okQ {
		q, okQ = m["vllm:gpu_prefix_cache_queries_total"]
		h = m["vllm:gpu_prefix_cache_hits_total"]
	}
	c.HasPrefix, c.PrefixQueries, c.PrefixHits = okQ, q, h
	var okG, okS bool
	c.GenTokens, okG = m["vllm:generation_tokens_total"]
	c.DecodeS, okS = m["vllm:request_decode_time_seconds_sum"]
	c.Decoded = m["vllm:request_decode_time_seconds_count"]
	c.HasDecode = okG && okS
	return c
}

// Rates are an engine-health window's figures, from the counters at its
// start and end: NaN where the server exports no such counter or the
// window gave it nothing to count.
type Rates struct {
	// SpecAcceptance is accepted / draft tokens (vLLM's "Avg Draft
	// acceptance rate", SpecDecodingLogging.log); 0 where the counters
	// are exported and requests decoded past their first token but
	// nothing was drafted (a drafter gone).
	SpecAcceptance float64
	// PrefixHitRate is cached / queried prompt tokens.
	PrefixHitRate float64
	// DecodeTPS is the tokens generated past each request's first, per
	// second of the finished requests' decode time: a request's own
	// decode rate, averaged over tokens.
	DecodeTPS float64
}

// RatesOver are the figures of the window from a to b.
func RatesOver(a, b Counters) Rates {
	ratio := func(num, den float64, ok bool) float64 {
		if !ok || den <= 0 || num < 0 {
			return math.NaN()
		}
		return num / den
	}
	decoded := b.Decoded - a.Decoded
	acceptance := ratio(b.SpecAccepted-a.SpecAccepted, b.SpecDraftTokens-a.SpecDraftTokens, a.HasSpec && b.HasSpec)
	if a.HasSpec && b.HasSpec && b.SpecDraftTokens == a.SpecDraftTokens && b.GenTokens-a.GenTokens > decoded && decoded > 0 {
		acceptance = 0 // tokens decoded past each request's first, none drafted: speculation is off
	}
	return Rates{
		SpecAcceptance: acceptance,
		PrefixHitRate:  ratio(b.PrefixHits-a.PrefixHits, b.PrefixQueries-a.PrefixQueries, a.HasPrefix && b.HasPrefix),
		DecodeTPS:      ratio(b.GenTokens-a.GenTokens-decoded, b.DecodeS-a.DecodeS, a.HasDecode && b.HasDecode && decoded > 0),
	}
}
