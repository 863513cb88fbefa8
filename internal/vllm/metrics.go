package vllm

import (
	"bytes"
	"fmt"
	"maps"
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
