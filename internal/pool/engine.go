package pool

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/vllm"
)

// Engine reads the servers' own account of themselves: their log lines
// (vllm.ParseEngineLog) and their /metrics. It records nothing.
type Engine struct{ s *servers }

// EngineMark is where a server's log and sleep-mode metric stood before a
// sleep: Engine.Since reads what the server reported after it.
type EngineMark struct {
	label   string
	logFrom int64
	metrics vllm.Metrics // nil when /metrics could not be read
	wakes   int          // the model's wakes begun before the mark
}

// Metrics scrapes label's /metrics.
func (e Engine) Metrics(ctx context.Context, label string) (vllm.Metrics, error) {
	m, err := e.s.model(label)
	if err != nil {
		return nil, err
	}
	var out vllm.Metrics
	err = e.s.timeout(ctx, m, 10*time.Second, func(ctx context.Context, c *vllm.Client) error {
		text, err := c.Metrics(ctx)
		if err != nil {
			return err
		}
		out, err = vllm.ParseMetrics(text)
		return err
	})
	return out, err
}

// settleWait bounds how long a window waits for the server to count its
// finished requests: vLLM's frontend records an iteration's stats after it
// hands the iteration's outputs out (vllm/v1/engine/async_llm.py's output
// handler), so a read at a stream's end may miss its last iteration.
const settleWait = 2 * time.Second

// settled reads label's /metrics after a window of n requests that each
// decoded, until its decode-time count has grown by n since before (nil:
// not known) or settleWait passed: the last read either way.
func (e Engine) settled(ctx context.Context, label string, before vllm.Metrics, n int) (vllm.Metrics, error) {
	deadline := time.Now().Add(settleWait)
	a := before.Counters()
	for {
		m, err := e.Metrics(ctx, label)
		if err != nil || before == nil {
			return m, err
		}
		if b := m.Counters(); !b.HasDecode || b.Decoded-a.Decoded >= float64(n) || !time.Now().Before(deadline) {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return m, context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Mark marks label's log and metric now (outside any measured interval).
func (e Engine) Mark(ctx context.Context, label string) EngineMark {
	mk := EngineMark{label: label}
	if m, err := e.s.model(label); err == nil {
		e.s.mu.Lock()
		mk.wakes = m.wakes
		e.s.mu.Unlock()
	}
	if st, err := os.Stat(e.s.logPath(label)); err == nil {
		mk.logFrom = st.Size()
	}
	if ms, err := e.Metrics(ctx, label); err == nil {
		mk.metrics = ms
	}
	return mk
}

// Since is what label's server reported of its sleeps and wakes since
// mk: its log lines and its sleep-mode metric's growth. nil when it
// reported neither.
func (e Engine) Since(ctx context.Context, mk EngineMark) *record.Engine {
	if mk.label == "" { // no mark: no server
		return nil
	}
	out := record.Engine{SleepS: math.NaN(), WakeS: math.NaN(), FreedGiB: math.NaN(), InUseGiB: math.NaN(),
		MetricSleepS: math.NaN(), MetricWakeS: math.NaN(), MetricReleaseS: math.NaN()}
	foundLog, foundMetric := false, false
	e.s.late()
	if b, err := readFrom(e.s.logPath(mk.label), mk.logFrom); err == nil {
		foundLog = engineLog(&out, vllm.ParseEngineLog(b))
	}
	if mk.metrics != nil {
		if now, err := e.Metrics(ctx, mk.label); err == nil {
			foundMetric = engineMetric(&out, mk.metrics, now)
		}
	}
	if !foundLog && !foundMetric {
		return nil
	}
	if m, err := e.s.model(mk.label); err == nil {
		e.s.mu.Lock()
		if m.wakes > mk.wakes { // a wake since the mark: its /wake_up calls' time
			out.WakeCallsS = m.wakeCalls.Seconds()
		}
		e.s.mu.Unlock()
	}
	return &out
}

// engineLog puts the log's sleeps and wakes (summed) and its last memory
// in use into e; false when the log said nothing of them.
func engineLog(e *record.Engine, lg vllm.EngineLog) (found bool) {
	sum := func(xs []float64) float64 {
		if len(xs) == 0 {
			return math.NaN()
		}
		found = true
		t := 0.0
		for _, x := range xs {
			t += x
		}
		return t
	}
	// One sleep's lines: each worker logs its own GPU's freed and in-use
	// memory (tensor parallelism), so both are summed over the workers.
	e.SleepS, e.WakeS, e.FreedGiB = sum(lg.SleepS), sum(lg.WakeS), sum(lg.FreedGiB)
	if len(lg.InUseGiB) > 0 {
		e.InUseGiB = sum(lg.InUseGiB)
	}
	return found
}

// engineMetric puts the sleep-mode metric's growth from then to now into
// e; false when neither series grew.
func engineMetric(e *record.Engine, then, now vllm.Metrics) (found bool) {
	delta := func(op string) float64 {
		s1, c1, ok1 := now.SleepOp(op)
		s0, c0, _ := then.SleepOp(op) // a series not yet observed starts at 0
		if !ok1 || c1 <= c0 {
			return math.NaN()
		}
		found = true
		return s1 - s0
	}
	e.MetricSleepS, e.MetricWakeS, e.MetricReleaseS = delta("sleep"), delta("wake"), delta("release_kv_cache_memory")
	return found
}

// started is what a server logged of its start: its weight size ("Model
// loading took X GiB", for the physical limits; nil when not logged), its
// CUDA graphs' memory ("Graph capturing finished in N secs, took X GiB",
// for the host check of --sleep-mode-offload-cudagraph; nil when not
// logged) and whether it compiled its graphs or loaded them from the
// compile cache (vllm.CompileState).
type started struct {
	weight, graph *record.Weight
	compile       string
}

// startLog is what a server logged of its start since from.
func startLog(path string, from int64) (started, error) {
	b, err := readFrom(path, from)
	if err != nil {
		return started{}, err
	}
	out := started{compile: vllm.CompileState(b)}
	if gib, line, ok := vllm.WeightGiB(b); ok {
		out.weight = &record.Weight{GiB: gib, Source: "server log: " + line}
	}
	if gib, line, ok := vllm.GraphGiB(b); ok {
		out.graph = &record.Weight{GiB: gib, Source: "server log: " + line}
	}
	return out, nil
}

// readFrom reads a server log from offset on (the whole log if it is
// shorter than offset).
func readFrom(path string, offset int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && offset > st.Size() {
		offset = 0 // shorter than when marked: a new file, read it all
	}
	if _, err := fh.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(fh)
}

// logPath is label's server log.
func (s *servers) logPath(label string) string { return filepath.Join(s.cfg.OutDir, label+".log") }
