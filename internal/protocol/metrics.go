package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/vllm"
)

// metricsLog appends /metrics scrapes to metrics.jsonl, one JSON object a line.
type metricsLog struct {
	mu  sync.Mutex
	f   *os.File
	enc *json.Encoder
}

type scrape struct {
	UnixS   float64      `json:"unix_s"`
	Model   string       `json:"model"`
	Phase   string       `json:"phase"`
	When    string       `json:"when"` // before or after
	Error   string       `json:"error,omitempty"`
	Metrics vllm.Metrics `json:"metrics,omitempty"`
	// Derived, with vLLM's renames handled.
	SleepState   string   `json:"sleep_state,omitempty"`
	KVCacheUsage *float64 `json:"kv_cache_usage,omitempty"`
}

func openMetricsLog(path string) (*metricsLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("metrics log: %w", err)
	}
	return &metricsLog{f: f, enc: json.NewEncoder(f)}, nil
}

func (l *metricsLog) write(s scrape) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.enc.Encode(s) // auxiliary data: a full disk shows in report.json's own write
}

func (l *metricsLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// scrape records /metrics of every running model among labels.
func (h *Harness) scrape(ctx context.Context, phase, when string, labels []string) {
	for _, l := range labels {
		if !h.running(l) {
			continue
		}
		m := h.models[l]
		s := scrape{UnixS: float64(time.Now().UnixNano()) / 1e9, Model: l, Phase: phase, When: when}
		err := h.timeout(ctx, m, 10*time.Second, func(ctx context.Context) error {
			text, err := m.client.Metrics(ctx)
			if err != nil {
				return err
			}
			s.Metrics, err = vllm.ParseMetrics(text)
			return err
		})
		if err != nil {
			s.Error = err.Error()
		} else {
			s.SleepState = s.Metrics.SleepState()
			if v, ok := s.Metrics.KVCacheUsage(); ok {
				s.KVCacheUsage = &v
			}
		}
		h.metrics.write(s)
	}
}

// begin starts a phase for labels: it is listed in the report, /metrics is
// scraped, and the returned end scrapes again and records the phase window
// (named <label>-<phase>, or the labels joined for several).
func (h *Harness) begin(ctx context.Context, phase string, labels ...string) (end func()) {
	h.phaseRan(phase)
	h.scrape(ctx, phase, "before", labels)
	start := time.Now()
	return func() {
		h.Rec.Window(join(labels)+"-"+phase, start, time.Now(), seconds(h.cfg.Protocol.WindowPadS))
		h.scrape(ctx, phase, "after", labels)
	}
}
