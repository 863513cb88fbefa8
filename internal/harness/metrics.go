package harness

import (
	"encoding/json"
	"sync"

	"github.com/wakebench/wakebench/internal/vllm"
)

// metricsLog appends /metrics scrapes to metrics.jsonl, one JSON object a line.
type metricsLog struct {
	mu sync.Mutex
	lf *lineFile
}

type scrape struct {
	UnixS float64 `json:"unix_s"`
	Model string  `json:"model"`
	Phase string  `json:"phase"`
	When  string  `json:"when"` // before or after
	// Simulated: the server is vllmsim, its figures modelled.
	Simulated bool         `json:"simulated,omitempty"`
	Error     string       `json:"error,omitempty"`
	Metrics   vllm.Metrics `json:"metrics,omitempty"`
	// Derived, with vLLM's renames handled. SleepState is
	// vllm.Metrics.SleepState: from vllm:engine_fully_awake and
	// vllm:engine_sleep_resource_state where exported ("awake", "paused",
	// "kv_released", "weights_offloaded", "discard_all", "partial",
	// "unknown"), else the legacy vllm:engine_sleep_state's label, "not
	// fully awake" when its three labels are all 0 (docs/vllm-api.md §7;
	// the resource-state families are proposed, no release exports them).
	SleepState   string   `json:"sleep_state,omitempty"`
	KVCacheUsage *float64 `json:"kv_cache_usage,omitempty"`
}

func openMetricsLog(path string) (*metricsLog, error) {
	lf, err := createLineFile(path, "metrics.jsonl")
	if err != nil {
		return nil, err
	}
	return &metricsLog{lf: lf}, nil
}

// write appends one scrape as a whole line (or, on a full disk, nothing:
// Close says how many were lost).
func (l *metricsLog) write(s scrape) {
	b, err := json.Marshal(s)
	if err != nil {
		return // a scrape is plain data: cannot happen
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lf.write(append(b, '\n'))
}

func (l *metricsLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lf.Close()
}
