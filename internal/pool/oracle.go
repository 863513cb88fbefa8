package pool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/oracle"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/vllm"
)

// Oracle is the correctness reference of each model (its probe set's
// answers before its first sleep) and their replays after wakes, compared
// by package oracle; references are kept in its pool view's log
// (Collect), their requests told to its Observer, replays returned.
type Oracle struct{ f *Pool }

// probes is m's correctness probe set: its adapters in name order.
func probes(m *model) []oracle.Probe {
	return oracle.Set(m.cfg.Name, m.cfg.Adapters())
}

// on reports whether the correctness oracle runs.
func (o Oracle) on() bool { return o.f.s.cfg.Protocol.CorrectnessMaxTokens > 0 }

// generate answers the probe set once, counting each request.
func (o Oracle) generate(ctx context.Context, m *model) ([]vllm.Generation, time.Duration, error) {
	s, p := o.f.s, o.f.s.cfg.Protocol
	t0 := time.Now()
	var out []vllm.Generation
	for _, pr := range probes(m) {
		var g vllm.Generation
		err := s.timeout(ctx, m, seconds(s.cfg.Timeouts.RequestS), func(ctx context.Context, c *vllm.Client) error {
			var err error
			g, err = c.Generate(ctx, vllm.GenerateRequest{Model: pr.Model, Prompt: pr.Prompt,
				MaxTokens: p.CorrectnessMaxTokens, Logprobs: p.CorrectnessLogprobs})
			return err
		})
		o.f.obs.request(err == nil)
		var ae *vllm.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusBadRequest && strings.Contains(ae.Message, "maximum context length") {
			// vLLM's 400 for a prompt the context cannot hold ("This
			// model's maximum context length is N tokens…":
			// vllm/entrypoints/openai/serving_engine.py,
			// OpenAIServing._validate_prompt_and_tokenize; vllmsim's "Input
			// length (X) exceeds model's maximum context length (N)"): the
			// probe set is fixed, the context is the config's to change.
			return out, time.Since(t0), fmt.Errorf("correctness probe %q of %s does not fit protocol.context_tokens (%d): raise it, or set protocol.correctness_max_tokens to 0 to turn the correctness oracle off: %w",
				pr.Name, m.cfg.Label, p.ContextTokens, err)
		}
		if err != nil {
			return out, time.Since(t0), fmt.Errorf("correctness probe %q of %s: %w", pr.Name, m.cfg.Label, err)
		}
		out = append(out, g)
	}
	return out, time.Since(t0), nil
}

// EnsureReference answers label's probe set now if it is awake and its
// reference is not taken yet (every sleep takes it first): a caller that
// times the model's first sleep (the traffic phase's router) takes it
// beforehand.
func (o Oracle) EnsureReference(ctx context.Context, label string) error {
	m, err := o.f.s.model(label)
	if err != nil {
		return err
	}
	if srv, _ := o.f.s.server(m); srv == nil {
		return nil // not running: its first sleep comes after its start
	}
	return o.ensure(ctx, m)
}

// ensure answers m's probe set, once per model, while it is awake and
// has never slept: the reference every replay is held to (a restart keeps
// it: the same weights must give the same answers).
func (o Oracle) ensure(ctx context.Context, m *model) error {
	s := o.f.s
	s.mu.Lock()
	have, asleep := m.reference != nil, m.asleep
	s.mu.Unlock()
	if have || !o.on() || asleep {
		return nil
	}
	gens, d, err := o.generate(ctx, m)
	if err != nil {
		return fmt.Errorf("reference answers before the first sleep: %w", err)
	}
	var names []string
	for i, p := range probes(m) {
		if garbage(gens[i].Text) {
			return fmt.Errorf("reference probe %q of %s: %w: %.40q", p.Name, m.cfg.Label, ErrGarbage, gens[i].Text)
		}
		names = append(names, p.Name)
	}
	s.mu.Lock()
	m.reference = gens
	s.mu.Unlock()
	o.f.facts.reference(m.cfg.Label, record.Reference{Basis: oracle.Basis(gens[0]), Probes: names, Seconds: d.Seconds()})
	return nil
}

// Replay answers label's probe set again (after a wake) and compares each
// answer with the reference. It returns the replay under stage (the
// caller records it, which numbers it); the error is a replay that could
// not be made. With the oracle off,
// or no reference yet, it does nothing and returns nil.
func (o Oracle) Replay(ctx context.Context, label, stage string) (*record.Replay, error) {
	m, err := o.f.s.model(label)
	if err != nil {
		return nil, err
	}
	o.f.s.mu.Lock()
	ref := m.reference
	o.f.s.mu.Unlock()
	if !o.on() || ref == nil {
		return nil, nil
	}
	gens, d, err := o.generate(ctx, m)
	rp := record.Replay{Stage: stage, Seconds: d.Seconds()}
	if err != nil {
		rp.Err = err.Error()
		return &rp, err
	}
	for i, p := range probes(m) {
		r := oracle.Compare(ref[i], gens[i], o.f.s.cfg.Protocol.LogprobTolerance)
		rp.Results = append(rp.Results, record.ProbeResult{Probe: p.Name, Match: r.Match, Position: r.Position, Kind: r.Kind,
			Detail: r.Detail, Tie: r.Tie, MaxDelta: r.MaxDelta})
	}
	return &rp, nil
}
