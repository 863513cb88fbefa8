package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"

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
