package fleet

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/oracle"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/vllm"
)

// probes is label's correctness probe set: its adapters in name order.
func (f *Fleet) probes(m *model) []oracle.Probe {
	return oracle.Set(m.cfg.Name, slices.Sorted(maps.Keys(m.cfg.LoRAModules)))
}

// generate answers the probe set once, counting each request.
func (f *Fleet) generate(ctx context.Context, m *model) ([]vllm.Generation, time.Duration, error) {
	p := f.cfg.Protocol
	t0 := time.Now()
	var out []vllm.Generation
	for _, pr := range f.probes(m) {
		var g vllm.Generation
		err := f.timeout(ctx, m, seconds(f.cfg.Timeouts.RequestS), func(ctx context.Context) error {
			var err error
			g, err = m.client.Generate(ctx, vllm.GenerateRequest{Model: pr.Model, Prompt: pr.Prompt,
				MaxTokens: p.CorrectnessMaxTokens, Logprobs: p.CorrectnessLogprobs})
			return err
		})
		f.rec.Request(err == nil)
		if err != nil {
			return out, time.Since(t0), fmt.Errorf("correctness probe %q of %s: %w", pr.Name, m.cfg.Label, err)
		}
		out = append(out, g)
	}
	return out, time.Since(t0), nil
}

// oracleOn reports whether the correctness oracle runs.
func (f *Fleet) oracleOn() bool { return f.cfg.Protocol.CorrectnessMaxTokens > 0 }

// EnsureReference answers label's probe set now if it is awake and its
// reference is not taken yet (ensureReference): a caller that times the
// model's first sleep (the traffic phase's router) takes it beforehand.
func (f *Fleet) EnsureReference(ctx context.Context, label string) error {
	m, err := f.model(label)
	if err != nil {
		return err
	}
	if m.srv == nil {
		return nil // not running: its first sleep comes after its start
	}
	return f.ensureReference(ctx, m)
}

// ensureReference answers label's probe set, once per model, while it is
// awake and has never slept: the reference every replay is held to (a
// restart keeps it: the same weights must give the same answers).
func (f *Fleet) ensureReference(ctx context.Context, m *model) error {
	f.mu.Lock()
	have := m.reference != nil
	f.mu.Unlock()
	if have || !f.oracleOn() || m.asleep {
		return nil
	}
	gens, d, err := f.generate(ctx, m)
	if err != nil {
		return fmt.Errorf("reference answers before the first sleep: %w", err)
	}
	var names []string
	for i, p := range f.probes(m) {
		if garbage(gens[i].Text) {
			return fmt.Errorf("reference probe %q of %s: %w: %.40q", p.Name, m.cfg.Label, ErrGarbage, gens[i].Text)
		}
		names = append(names, p.Name)
	}
	f.mu.Lock()
	m.reference = gens
	f.mu.Unlock()
	f.rec.SetReference(m.cfg.Label, record.Reference{Basis: oracle.Basis(gens[0]), Probes: names, Seconds: d.Seconds()})
	return nil
}

// Replay answers label's probe set again (after a wake) and compares each
// answer with the reference. It records the replay under stage and returns
// it; the error is a replay that could not be made. With the oracle off,
// or no reference yet, it does nothing and returns nil.
func (f *Fleet) Replay(ctx context.Context, label, stage string) (*record.Replay, error) {
	m, err := f.model(label)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	ref := m.reference
	f.mu.Unlock()
	if !f.oracleOn() || ref == nil {
		return nil, nil
	}
	gens, d, err := f.generate(ctx, m)
	rp := record.Replay{Stage: stage, Seconds: d.Seconds()}
	if err != nil {
		rp.Err = err.Error()
		rp = f.rec.AddReplay(label, rp)
		return &rp, err
	}
	for i, p := range f.probes(m) {
		r := oracle.Compare(ref[i], gens[i], f.cfg.Protocol.LogprobTolerance)
		rp.Results = append(rp.Results, record.ProbeResult{Probe: p.Name, Match: r.Match, Position: r.Position, Kind: r.Kind,
			Detail: r.Detail, Tie: r.Tie, MaxDelta: r.MaxDelta})
	}
	rp = f.rec.AddReplay(label, rp)
	return &rp, nil
}

// EngineMark is where a server's log and sleep-mode metric stood before a
// sleep: EngineSince reads what the server reported after it.
type EngineMark struct {
	label   string
	logFrom int64
	metrics vllm.Metrics // nil when /metrics could not be read
}

// MarkEngine marks label's log and metric now (outside any measured interval).
func (f *Fleet) MarkEngine(ctx context.Context, label string) EngineMark {
	mk := EngineMark{label: label}
	if st, err := os.Stat(f.logPath(label)); err == nil {
		mk.logFrom = st.Size()
	}
	if ms, err := f.Metrics(ctx, label); err == nil {
		mk.metrics = ms
	}
	return mk
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

func (f *Fleet) logPath(label string) string { return filepath.Join(f.cfg.OutDir, label+".log") }

// EngineSince is what label's server reported of its sleeps and wakes since
// mk: its log lines and its sleep-mode metric's growth. nil when it
// reported neither.
func (f *Fleet) EngineSince(ctx context.Context, mk EngineMark) *record.Engine {
	if mk.label == "" { // no mark: no server
		return nil
	}
	e := record.Engine{SleepS: math.NaN(), WakeS: math.NaN(), FreedGiB: math.NaN(), InUseGiB: math.NaN(),
		MetricSleepS: math.NaN(), MetricWakeS: math.NaN()}
	found := false
	if b, err := readFrom(f.logPath(mk.label), mk.logFrom); err == nil {
		lg := vllm.ParseEngineLog(b)
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
		e.SleepS, e.WakeS, e.FreedGiB = sum(lg.SleepS), sum(lg.WakeS), sum(lg.FreedGiB)
		if n := len(lg.InUseGiB); n > 0 {
			e.InUseGiB = lg.InUseGiB[n-1]
		}
	}
	if mk.metrics != nil {
		if now, err := f.Metrics(ctx, mk.label); err == nil {
			delta := func(op string) float64 {
				s1, c1, ok1 := now.SleepOp(op)
				s0, c0, _ := mk.metrics.SleepOp(op) // a series not yet observed starts at 0
				if !ok1 || c1 <= c0 {
					return math.NaN()
				}
				found = true
				return s1 - s0
			}
			e.MetricSleepS, e.MetricWakeS = delta("sleep"), delta("wake")
		}
	}
	if !found {
		return nil
	}
	return &e
}

// Headroom is the device's free memory now and label's awake footprint
// (the memory it held before its last measured sleep, else its footprint
// after its start), in GiB; need is NaN when not known.
func (f *Fleet) Headroom(ctx context.Context, label string) (free, need float64, err error) {
	m, err := f.model(label)
	if err != nil {
		return math.NaN(), math.NaN(), err
	}
	if f.opt.Sampler == nil {
		return math.NaN(), math.NaN(), nil
	}
	s, err := f.opt.Sampler.SampleNow(ctx)
	if err != nil {
		return math.NaN(), math.NaN(), err
	}
	f.mu.Lock()
	need = m.awakeGiB
	f.mu.Unlock()
	if need == 0 {
		need = math.NaN()
	}
	return float64(freeBytes(s.Reading)) / record.GiB, need, nil
}

func freeBytes(r gpu.Reading) uint64 {
	if r.Used >= r.Total {
		return 0
	}
	return r.Total - r.Used
}

// RSSGiB is the host RSS of label's process tree now (NaN when not running).
func (f *Fleet) RSSGiB(label string) float64 {
	f.mu.Lock()
	m := f.models[label]
	f.mu.Unlock()
	if m == nil || m.srv == nil {
		return math.NaN()
	}
	b, err := m.srv.RSS()
	if err != nil {
		return math.NaN()
	}
	return float64(b) / record.GiB
}
