package pool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/vllm"
)

// Engine reads the servers' own account of themselves: their log lines
// (vllm.ParseEngineLog) and their /metrics. It records nothing.
type Engine struct{ s *servers }

// EngineMark is where a server's sleep-mode metric stood before a sleep
// or wake: Engine.Account reads its growth since. (The log's lines are
// each transition's own: Transition.Engine.)
type EngineMark struct {
	label   string
	metrics vllm.Metrics // nil when /metrics could not be read
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

// Mark marks label's sleep-mode metric now (outside any measured
// interval: it reads /metrics).
func (e Engine) Mark(ctx context.Context, label string) EngineMark {
	mk := EngineMark{label: label}
	if ms, err := e.Metrics(ctx, label); err == nil {
		mk.metrics = ms
	}
	return mk
}

// Account is the servers' own account of a sleep and the wake after it:
// asleep are the transitions that put the model to sleep (a KV-only
// release cycle's pause and release; none: a handoff's first activation),
// wake the wake (nil: none, the model was awake); from and to mark the
// sleeping and the waking server's metric before them (one mark where one
// server slept and woke). Its sleep figures (the log's sleep time, memory
// freed and still in use; the metric's sleep and release times) are the
// sleeping server's, its wake figures (the log's and the metric's wake
// time, the /wake_up calls' time) the waking one's; one server's log
// lines over all its transitions give both (a sleep's line can land after
// its answer). Read it after what the caller times: it reads /metrics. nil
// when neither server reported anything.
func (e Engine) Account(ctx context.Context, asleep []*Transition, wake *Transition, from, to EngineMark) *record.Engine {
	e.s.late()
	var sleepLog, wakeLog vllm.EngineLog
	for _, t := range asleep {
		if lg, ok := t.Engine(); ok {
			sleepLog = joinLogs(sleepLog, lg)
		}
	}
	if wake != nil {
		if lg, ok := wake.Engine(); ok {
			wakeLog = lg
		}
	}
	if from.label == to.label {
		return e.side(ctx, joinLogs(sleepLog, wakeLog), from, wake)
	}
	out, w := e.side(ctx, sleepLog, from, nil), e.side(ctx, wakeLog, to, wake)
	switch {
	case out == nil:
		out = w
		if out != nil {
			out.SleepS, out.FreedGiB, out.InUseGiB, out.MetricSleepS, out.MetricReleaseS = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
		}
	case w != nil:
		out.WakeS, out.MetricWakeS, out.WakeCallsS = w.WakeS, w.MetricWakeS, w.WakeCallsS
	default:
		out.WakeS, out.MetricWakeS, out.WakeCallsS = math.NaN(), math.NaN(), 0
	}
	return out
}

// side is one server's account: its log lines lg, its metric's growth
// since mk, and the /wake_up calls' time of its wake (nil: none). nil when
// it reported nothing, or mk marks no server.
func (e Engine) side(ctx context.Context, lg vllm.EngineLog, mk EngineMark, wake *Transition) *record.Engine {
	if mk.label == "" {
		return nil
	}
	out := record.Engine{SleepS: math.NaN(), WakeS: math.NaN(), FreedGiB: math.NaN(), InUseGiB: math.NaN(),
		MetricSleepS: math.NaN(), MetricWakeS: math.NaN(), MetricReleaseS: math.NaN()}
	found := engineLog(&out, lg)
	if mk.metrics != nil {
		if now, err := e.Metrics(ctx, mk.label); err == nil && engineMetric(&out, mk.metrics, now) {
			found = true
		}
	}
	if !found {
		return nil
	}
	if wake != nil {
		out.WakeCallsS = wake.Calls.Seconds()
	}
	return &out
}

// joinLogs is a's lines then b's.
func joinLogs(a, b vllm.EngineLog) vllm.EngineLog {
	return vllm.EngineLog{SleepS: slices.Concat(a.SleepS, b.SleepS), WakeS: slices.Concat(a.WakeS, b.WakeS),
		FreedGiB: slices.Concat(a.FreedGiB, b.FreedGiB), InUseGiB: slices.Concat(a.InUseGiB, b.InUseGiB)}
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
	b, err := readBetween(path, from, -1)
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

// readBetween reads a server log's lines that begin at or after offset
// from and before offset to (to < 0: to its end), whole: a window's bounds
// are file sizes read while the server may be writing, so a line belongs
// to the window its first byte is in. The whole log, to its end, if it is
// shorter than from (a new file).
func readBetween(path string, from, to int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && from > st.Size() {
		from, to = 0, -1
	}
	if to >= 0 && to < from {
		to = -1
	}
	skipHead := false // the line at from began before it: the window before's
	if from > 0 {
		var prev [1]byte
		if _, err := fh.ReadAt(prev[:], from-1); err != nil {
			return nil, err
		}
		skipHead = prev[0] != '\n'
	}
	if _, err := fh.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	var r io.Reader = fh
	if to >= 0 {
		r = io.LimitReader(fh, to-from)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if to >= 0 && len(b) > 0 && b[len(b)-1] != '\n' { // the line at to began before it: this window's, whole
		rest, err := bufio.NewReader(fh).ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		b = append(b, rest...)
	}
	if skipHead {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		} else {
			b = nil
		}
	}
	return b, nil
}

// logSize is where label's server log ends now (0 when it cannot be
// read: a window from there reads the whole log).
func (s *servers) logSize(label string) int64 {
	if st, err := os.Stat(s.logPath(label)); err == nil {
		return st.Size()
	}
	return 0
}

// logPath is label's server log.
func (s *servers) logPath(label string) string { return filepath.Join(s.cfg.OutDir, label+".log") }
