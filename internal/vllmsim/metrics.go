package vllmsim

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics exposes the vLLM metric names a harness scrapes (vllm-api.md §6),
// labelled model_name and engine as vLLM labels them.
type metrics struct {
	reg       *prometheus.Registry
	running   prometheus.Gauge
	waiting   prometheus.Gauge
	kvUsage   prometheus.Gauge
	ttftHist  prometheus.Observer
	promptTok prometheus.Counter
	genTok    prometheus.Counter
	success   *prometheus.CounterVec
	// Prefix caching, in tokens (vLLM V1's PrometheusStatLogger,
	// vllm/v1/metrics/loggers.py: vllm:prefix_cache_queries and
	// vllm:prefix_cache_hits, "in terms of number of queried/cached
	// tokens"), and each finished request's decode time (first token →
	// last, vllm/v1/metrics/stats.py update_from_finished_request).
	prefixQueries prometheus.Counter
	prefixHits    prometheus.Counter
	decodeHist    prometheus.Observer
	// Speculative decoding (vllm/v1/spec_decode/metrics.py
	// SpecDecodingProm, per-position counters since PR #16665, merged):
	// registered only under --speculative-config, as vLLM does. nil
	// without it. prometheus_client appends _total to a Counter's name on
	// the wire; client_golang does not, so the names here carry it.
	specDrafts, specDraftTokens, specAccepted prometheus.Counter
	specPerPos                                []prometheus.Counter
	sleepState                                *prometheus.GaugeVec // nil: not exported (VLLM_USE_RUST_FRONTEND=1)
	sleepOps                                  *prometheus.HistogramVec
	kvUsageOf                                 func(running int) float64

	// Era proposed only (nil in releases): vLLM's proposed resource-state telemetry
	// (docs/design/engine_sleep_state.md, vllm-api.md §7.1).
	fullyAwake *prometheus.GaugeVec
	resState   *prometheus.GaugeVec
	// Eras d and proposed (nil before): the operation gauge (PR #52864,
	// serve/dev/sleep/metrics.py, §7.3).
	inFlight *prometheus.GaugeVec
	// opsTotal counts each call by operation and status ("success",
	// "error"): in the merged rl_ names (nil in the branch's plain ones).
	opsTotal *prometheus.CounterVec

	opMu  sync.Mutex     // guards ops and stuck
	ops   map[string]int // operation → calls in flight
	stuck map[string]bool
}

// metricsOpts say which sleep metrics a server exports.
type metricsOpts struct {
	newest bool // era proposed: resource state, fully awake
	ops    bool // eras d and proposed: the operation histogram, gauge and (rl_ names) counter
	legacy bool // vllm:engine_sleep_state (not with the Rust frontend)
	// plainOps: the operation metrics as unmerged branch code named them
	// (vllm@47e7f394: vllm:sleep_mode_…, no counter), not as #52864 merged
	// them (vllm:rl_…, with a calls counter; docs/vllm-api.md §7.3).
	plainOps bool
	// specTokens > 0: the spec-decode counters, with that many positions.
	specTokens int
}

// Resources and their states (vllm-api.md §7.1).
var resourceStates = map[string][]string{
	"scheduler": {"running", "paused"},
	"weights":   {"resident", "offloaded", "discarded", "unknown"},
	"kv_cache":  {"resident", "released", "unknown"},
}

func newMetrics(model string, kvUsage func(running int) float64, o metricsOpts) *metrics {
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
	m.prefixQueries = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:prefix_cache_queries_total", Help: "Prefix cache queries, in terms of number of queried tokens.", ConstLabels: labels})
	m.prefixHits = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:prefix_cache_hits_total", Help: "Prefix cache hits, in terms of number of cached tokens.", ConstLabels: labels})
	dh := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:request_decode_time_seconds", Help: "Histogram of time spent in DECODE phase for request.", ConstLabels: labels,
		Buckets: []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}})
	m.decodeHist = dh
	for _, c := range []prometheus.Collector{m.running, m.waiting, m.kvUsage, h, m.promptTok, m.genTok, m.success, m.prefixQueries, m.prefixHits, dh} {
		f(c)
	}
	if o.specTokens > 0 {
		m.specDrafts = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:spec_decode_num_drafts_total", Help: "Number of spec decoding drafts.", ConstLabels: labels})
		m.specDraftTokens = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:spec_decode_num_draft_tokens_total", Help: "Number of draft tokens.", ConstLabels: labels})
		m.specAccepted = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:spec_decode_num_accepted_tokens_total", Help: "Number of accepted tokens.", ConstLabels: labels})
		perPos := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:spec_decode_num_accepted_tokens_per_pos_total", Help: "Accepted tokens per draft position.", ConstLabels: labels}, []string{"position"})
		for i := range o.specTokens {
			m.specPerPos = append(m.specPerPos, perPos.WithLabelValues(strconv.Itoa(i)))
		}
		for _, c := range []prometheus.Collector{m.specDrafts, m.specDraftTokens, m.specAccepted, perPos} {
			f(c)
		}
	}
	if o.legacy {
		m.sleepState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:engine_sleep_state", Help: "Engine sleep state; awake = 0 means engine is sleeping.", ConstLabels: labels}, []string{"sleep_state"})
		f(m.sleepState)
	}
	if o.ops {
		// vLLM's frontend metrics of sleep-mode calls (PR #52864, "Align
		// sleep-mode API responses and operation metrics", merged about
		// 2026-09-30; vllm@d26ebba4 vllm/entrypoints/serve/dev/sleep/metrics.py):
		// vllm:rl_…, a counter by outcome; the plain names without a counter
		// are branch code's (vllm@47e7f394).
		prefix := "vllm:rl_"
		if o.plainOps {
			prefix = "vllm:"
		} else {
			m.opsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "sleep_mode_operations_total", Help: "Sleep-mode operations by outcome."}, []string{"operation", "status"})
			f(m.opsTotal)
		}
		m.sleepOps = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: prefix + "sleep_mode_operation_duration_seconds", Help: "Duration of one sleep-mode operation.",
			Buckets: []float64{0.01, 0.1, 1, 10, 30, 60, 120, 300, 600}}, []string{"operation"})
		m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: prefix + "sleep_mode_operations_in_flight", Help: "Sleep-mode operations in flight."}, []string{"operation"})
		f(m.sleepOps)
		f(m.inFlight)
		m.ops, m.stuck = map[string]int{}, map[string]bool{}
	}
	if o.newest {
		m.fullyAwake = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:engine_fully_awake", Help: "1 when the scheduler runs and every sleep-mode resource is resident.", ConstLabels: labels}, nil)
		m.resState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:engine_sleep_resource_state", Help: "Sleep-mode state of each engine resource.", ConstLabels: labels}, []string{"resource", "state"})
		f(m.fullyAwake)
		f(m.resState)
	}
	m.setState(sleepSnapshot{scheduler: "running", weights: "resident", kv: "resident"}, legacyRecord{}, false)
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

// prefixLookup counts a request's prefix-cache lookup: its prompt tokens
// queried, cached of them hit.
func (m *metrics) prefixLookup(queried, cached int) {
	m.prefixQueries.Add(float64(queried))
	m.prefixHits.Add(float64(cached))
}

// decodeTime observes a finished request's first token → last token.
func (m *metrics) decodeTime(d time.Duration) { m.decodeHist.Observe(d.Seconds()) }

// draft counts one draft of k tokens of which accepted were accepted
// (SpecDecodingStats.observe_draft: positions 0 … accepted−1 each once).
func (m *metrics) draft(k, accepted int) {
	if m.specDrafts == nil {
		return
	}
	m.specDrafts.Inc()
	m.specDraftTokens.Add(float64(k))
	m.specAccepted.Add(float64(accepted))
	for i := range min(accepted, len(m.specPerPos)) {
		m.specPerPos[i].Inc()
	}
}

func (m *metrics) finished(reason string) {
	m.success.WithLabelValues(reason).Inc()
}

// opStart counts a sleep-mode call of operation op ("sleep", "wake",
// "release_kv_cache_memory") in flight (era proposed; no release has them).
func (m *metrics) opStart(op string) {
	if m.inFlight == nil {
		return
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.ops[op]++
	m.publishOp(op)
}

// opEnd ends a call opStart counted, observing its seconds (on success and
// on error, as vLLM's router does) and, in the rl_ variant, counting it by
// outcome (ok); stuck keeps the gauge at 1 for good afterwards (fault
// stuck-op).
func (m *metrics) opEnd(op string, seconds float64, stuck, ok bool) {
	if m.inFlight == nil {
		return
	}
	m.sleepOps.WithLabelValues(op).Observe(seconds)
	if m.opsTotal != nil {
		status := "success"
		if !ok {
			status = "error"
		}
		m.opsTotal.WithLabelValues(op, status).Inc()
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.ops[op]--
	if stuck {
		m.stuck[op] = true
	}
	m.publishOp(op)
}

// publishOp sets op's in-flight gauge. Caller holds opMu.
func (m *metrics) publishOp(op string) {
	n := m.ops[op]
	if m.stuck[op] {
		n = max(n, 1)
	}
	m.inFlight.WithLabelValues(op).Set(float64(n))
}

func b2f(c bool) float64 {
	if c {
		return 1
	}
	return 0
}

// legacyRecord is what released vLLM last recorded on
// vllm:engine_sleep_state: record_sleep_state(sleep, level), called with
// (1, level) by every sleep and with
// (0, 0) by every wake, a partial one included
// (vllm/v1/metrics/loggers.py PrometheusStatLogger.record_sleep_state;
// its callers in vllm/v1/engine/async_llm.py; PR #24176, merged).
type legacyRecord struct {
	asleep bool
	level  int
}

// setState publishes the sleep state s. derived: vllm:engine_sleep_state
// as the proposed state design derives it from the resource states
// (vllm-api.md §7.2): awake only when fully awake, weights_offloaded when
// the weights are offloaded, discard_all when they are discarded and the
// KV cache released, all three 0 after a level-0 pause, a partial wake, a
// KV-only release or an unknown. Else as released vLLM records it (rec):
// awake after any wake, weights_offloaded after level 1, discard_all after
// level 2, all three 0 after any other level (0, 3) or a KV-only release.
func (m *metrics) setState(s sleepSnapshot, rec legacyRecord, derived bool) {
	if m.sleepState != nil {
		awake, off, all := s.fullyAwake(), s.weights == "offloaded", s.weights == "discarded" && s.kv == "released"
		if !derived {
			awake, off, all = !rec.asleep, rec.asleep && rec.level == 1, rec.asleep && rec.level == 2
		}
		m.sleepState.WithLabelValues("awake").Set(b2f(awake))
		m.sleepState.WithLabelValues("weights_offloaded").Set(b2f(off))
		m.sleepState.WithLabelValues("discard_all").Set(b2f(all))
	}
	if m.resState == nil {
		return
	}
	m.fullyAwake.WithLabelValues().Set(b2f(s.fullyAwake()))
	now := map[string]string{"scheduler": s.scheduler, "weights": s.weights, "kv_cache": s.kv}
	for res, states := range resourceStates {
		for _, st := range states {
			m.resState.WithLabelValues(res, st).Set(b2f(now[res] == st))
		}
	}
}
