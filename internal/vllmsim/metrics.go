package vllmsim

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics exposes the vLLM metric names a harness scrapes (vllm-api.md §6),
// labelled model_name and engine as vLLM labels them.
type metrics struct {
	reg        *prometheus.Registry
	running    prometheus.Gauge
	waiting    prometheus.Gauge
	kvUsage    prometheus.Gauge
	ttftHist   prometheus.Observer
	promptTok  prometheus.Counter
	genTok     prometheus.Counter
	success    *prometheus.CounterVec
	sleepState *prometheus.GaugeVec
	sleepOps   *prometheus.HistogramVec
	kvUsageOf  func(running int) float64
}

func newMetrics(model string, kvUsage func(running int) float64) *metrics {
	labels := prometheus.Labels{"model_name": model, "engine": "0"}
	reg := prometheus.NewRegistry()
	m := &metrics{reg: reg, kvUsageOf: kvUsage}
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m.running = prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm:num_requests_running", Help: "Number of requests in model execution batches.", ConstLabels: labels})
	m.waiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm:num_requests_waiting", Help: "Number of requests waiting to be processed.", ConstLabels: labels})
	m.kvUsage = prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm:kv_cache_usage_perc", Help: "KV-cache usage. 1 means 100 percent usage.", ConstLabels: labels})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds", Help: "Histogram of time to first token in seconds.", ConstLabels: labels,
		Buckets: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}})
	m.ttftHist = h
	m.promptTok = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:prompt_tokens_total", Help: "Number of prefill tokens processed.", ConstLabels: labels})
	m.genTok = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:generation_tokens_total", Help: "Number of generation tokens processed.", ConstLabels: labels})
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total", Help: "Count of successfully processed requests.", ConstLabels: labels}, []string{"finished_reason"})
	m.sleepState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:engine_sleep_state", Help: "Engine sleep state; awake = 0 means engine is sleeping.", ConstLabels: labels}, []string{"sleep_state"})
	// vLLM's frontend histogram of sleep-mode calls (serve/dev/sleep/metrics.py).
	m.sleepOps = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:sleep_mode_operation_duration_seconds", Help: "Duration of one sleep-mode operation.",
		Buckets: []float64{0.01, 0.1, 1, 10, 30, 60, 120, 300, 600}}, []string{"operation"})
	for _, c := range []prometheus.Collector{m.running, m.waiting, m.kvUsage, h, m.promptTok, m.genTok, m.success, m.sleepState, m.sleepOps} {
		f(c)
	}
	m.setSleepState(0)
	return m
}

func (m *metrics) handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

func (m *metrics) setQueue(running, waiting int) {
	m.running.Set(float64(running))
	m.waiting.Set(float64(waiting))
	m.kvUsage.Set(m.kvUsageOf(running))
}

func (m *metrics) ttft(d time.Duration) { m.ttftHist.Observe(d.Seconds()) }
func (m *metrics) prompt(n int)         { m.promptTok.Add(float64(n)) }
func (m *metrics) generated()           { m.genTok.Inc() }
func (m *metrics) finished(reason string) {
	m.success.WithLabelValues(reason).Inc()
}

// sleepOp observes one sleep-mode call ("sleep" or "wake") of seconds.
func (m *metrics) sleepOp(op string, seconds float64) {
	m.sleepOps.WithLabelValues(op).Observe(seconds)
}

// setSleepState sets awake (level 0), weights_offloaded (1) or discard_all (2).
func (m *metrics) setSleepState(level int) {
	b := func(c bool) float64 {
		if c {
			return 1
		}
		return 0
	}
	m.sleepState.WithLabelValues("awake").Set(b(level == 0))
	m.sleepState.WithLabelValues("weights_offloaded").Set(b(level == 1))
	m.sleepState.WithLabelValues("discard_all").Set(b(level == 2))
}
