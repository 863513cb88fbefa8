package pool

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/vllm"
)

// Requests are the inference requests the pool sends its servers: the
// probes, single streams and serving rounds, each counted through the
// view's Observer and checked for garbage output.
type Requests struct{ f *Pool }

// Probe sends one short streaming request (protocol.probe_max_tokens
// output tokens) and checks its output; it counts as an executed request.
func (q Requests) Probe(ctx context.Context, label string) (*vllm.Stream, error) {
	return q.probe(ctx, label, q.f.s.cfg.Protocol.ProbeMaxTokens, nil)
}

// Probing is a probe in flight (StartProbe), read up to its first token:
// First returns that token's receive time while the stream waits, and
// Rest reads the rest. What must happen at the first token (a switch's and
// a soak cycle's closing energy reading) happens between them, so that no
// decode step after the first token is read before it (issue 50: read
// after the whole 8-token probe, at the interval's mean power while the
// GPU decoded at several times it, a handoff's J was about 7 % high),
// while the probe keeps its tokens for the garbage check. Rest must be
// called (it ends the probe's goroutine).
type Probing struct {
	first  chan time.Time // the first token's receive time, or closed without one
	resume chan struct{}  // closed by Rest: the reading goes on
	done   chan struct{}  // closed once s and err are set
	stop   sync.Once      // closes resume
	s      *vllm.Stream
	err    error
	// took receives from first once; at and ok are what it received.
	took sync.Once
	at   time.Time
	ok   bool
}

// StartProbe sends the probe (Probe's) on its own goroutine and returns at
// once.
func (q Requests) StartProbe(ctx context.Context, label string) *Probing {
	p := &Probing{first: make(chan time.Time, 1), resume: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		got := false
		p.s, p.err = q.probe(ctx, label, q.f.s.cfg.Protocol.ProbeMaxTokens, func(at time.Time) {
			got = true
			p.first <- at
			select { // the next chunks wait for the caller's step at the first token
			case <-p.resume:
			case <-ctx.Done():
			}
		})
		if !got {
			close(p.first)
		}
	}()
	return p
}

// First waits for the probe's first token and returns its receive time;
// ok is false when the probe ended without one (Rest says why). A later
// call returns the same.
func (p *Probing) First() (at time.Time, ok bool) {
	p.took.Do(func() { p.at, p.ok = <-p.first })
	return p.at, p.ok
}

// Rest lets the probe read on to its end and returns it, as Probe would.
func (p *Probing) Rest() (*vllm.Stream, error) {
	p.stop.Do(func() { close(p.resume) })
	<-p.done
	return p.s, p.err
}

// FirstToken sends a one-token probe and checks its output; it counts as
// an executed request. Its stream ends at its first token, so an energy
// reading taken right after it ends a transition's interval there (the
// state-cost phase's transitions).
func (q Requests) FirstToken(ctx context.Context, label string) (*vllm.Stream, error) {
	return q.probe(ctx, label, 1, nil)
}

func (q Requests) probe(ctx context.Context, label string, tokens int, atFirst func(time.Time)) (*vllm.Stream, error) {
	m, err := q.f.s.model(label)
	if err != nil {
		return nil, err
	}
	s, err := q.Stream(ctx, label, vllm.CompletionRequest{Model: m.cfg.Name, Prompt: q.f.s.cfg.Protocol.Prompt,
		MaxTokens: tokens, IgnoreEOS: true, OnFirstToken: atFirst})
	if err != nil {
		return s, fmt.Errorf("probe %s: %w", label, err)
	}
	return s, nil
}

// Stream sends one streaming request to label's server (its model name
// filled in when empty) and checks its output; it counts as an executed
// request. A model the pool believes asleep gets none.
func (q Requests) Stream(ctx context.Context, label string, r vllm.CompletionRequest) (*vllm.Stream, error) {
	s, sent, err := q.f.s.stream(ctx, label, r)
	if sent {
		q.f.obs.request(err == nil)
	}
	return s, err
}

// Prompt streams prompt to label's server, to model (its served model
// when empty, or one of its LoRA adapters), exactly maxTokens tokens long
// (EOS ignored): Stream with the request every phase's own prompt sends.
func (q Requests) Prompt(ctx context.Context, label, model, prompt string, maxTokens int) (*vllm.Stream, error) {
	return q.Stream(ctx, label, vllm.CompletionRequest{Model: model, Prompt: prompt, MaxTokens: maxTokens, IgnoreEOS: true})
}

// HealthRates is one part of an engine-health burst (docs/metrics.md: the
// model's part, or one LoRA adapter's) on label's awake server: n streamed
// requests of maxTokens tokens each (EOS ignored), one at a time, to model
// (the served model or the adapter) with prompt, and the figures of the
// server's /metrics counters across them (vllm.RatesOver, Engine.Metrics).
// Its requests count as executed, as Stream's. A failed request is its
// error; an unreadable /metrics leaves every figure NaN and says why in
// note.
func (q Requests) HealthRates(ctx context.Context, label, model, prompt string, maxTokens, n int) (r vllm.Rates, note string, err error) {
	e := Engine{s: q.f.s}
	r = vllm.Rates{SpecAcceptance: math.NaN(), PrefixHitRate: math.NaN(), DecodeTPS: math.NaN()}
	before, merr := e.Metrics(ctx, label)
	for range n {
		if _, err := q.Prompt(ctx, label, model, prompt, maxTokens); err != nil {
			return r, "", err
		}
	}
	after, err := e.settled(ctx, label, before, n)
	if merr == nil {
		merr = err
	}
	if merr != nil {
		return r, fmt.Sprintf("/metrics unreadable: %v", merr), nil
	}
	return vllm.RatesOver(before.Counters(), after.Counters()), "", nil
}

// StreamAbortable is Stream for a request the caller will have the server
// abort (a sleep in pause mode abort while it decodes): if the server ends
// it with finish_reason abort, it is counted as aborted by design, not as
// a failure. The error is Stream's all the same.
func (q Requests) StreamAbortable(ctx context.Context, label string, r vllm.CompletionRequest) (*vllm.Stream, error) {
	s, sent, err := q.f.s.stream(ctx, label, r)
	switch {
	case !sent:
	case s != nil && s.FinishReason == "abort":
		q.f.obs.abortedByDesign()
	default:
		q.f.obs.request(err == nil)
	}
	return s, err
}

// ProbePaused sends the probe to label while only its scheduler is
// paused (a level-0 sleep or /pause: nothing freed, slept is just
// "scheduling"): vLLM holds it until the scheduler resumes (the engine's
// pause_scheduler keeps new requests waiting, docs/vllm-api.md). sent is
// when it was sent. It is refused where memory sleeps: there a request
// may hang or meet garbage.
func (q Requests) ProbePaused(ctx context.Context, label string) (s *vllm.Stream, sent time.Time, err error) {
	m, err := q.f.s.model(label)
	if err != nil {
		return nil, sent, err
	}
	q.f.s.mu.Lock()
	pausedOnly := m.asleep && slices.Equal(m.slept, []string{"scheduling"})
	q.f.s.mu.Unlock()
	if !pausedOnly {
		return nil, sent, fmt.Errorf("probe %s while paused: not paused at level 0 (memory asleep, or awake)", label)
	}
	err = q.f.s.timeout(ctx, m, seconds(q.f.s.cfg.Timeouts.RequestS), func(ctx context.Context, c *vllm.Client) error {
		sent = time.Now()
		var err error
		s, err = c.Complete(ctx, vllm.CompletionRequest{Model: m.cfg.Name, Prompt: q.f.s.cfg.Protocol.Prompt,
			MaxTokens: q.f.s.cfg.Protocol.ProbeMaxTokens, IgnoreEOS: true})
		if err == nil {
			err = checkOutput(s)
		}
		return err
	})
	q.f.obs.request(err == nil)
	if err != nil {
		return s, sent, fmt.Errorf("probe %s while paused: %w", label, err)
	}
	return s, sent, nil
}

// stream sends r to label's server unless the pool believes it asleep
// (sent false: nothing was sent) and checks its output.
func (s *servers) stream(ctx context.Context, label string, r vllm.CompletionRequest) (st *vllm.Stream, sent bool, err error) {
	m, err := s.model(label)
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	asleep := m.asleep
	s.mu.Unlock()
	if asleep {
		return nil, false, fmt.Errorf("%s: the harness believes it is asleep; refusing to send inference", label)
	}
	if r.Model == "" {
		r.Model = m.cfg.Name
	}
	err = s.timeout(ctx, m, seconds(s.cfg.Timeouts.RequestS), func(ctx context.Context, c *vllm.Client) error {
		var err error
		st, err = c.Complete(ctx, r)
		if err == nil {
			err = checkOutput(st)
		}
		return err
	})
	return st, true, err
}

// plan is the protocol's serving load on m: rounds rounds of perRound
// requests at concurrency c, fixed-length outputs (ignore_eos), each
// checked for garbage.
func (s *servers) plan(m *model, c, rounds, perRound int) load.Plan {
	p := s.cfg.Protocol
	return load.Plan{Concurrency: c, Rounds: rounds, RequestsPerRound: perRound,
		Request:  vllm.CompletionRequest{Model: m.cfg.Name, Prompt: p.Prompt, MaxTokens: p.MaxTokens, IgnoreEOS: true},
		Timeout:  seconds(s.cfg.Timeouts.RequestS),
		Validate: checkOutput}
}

// Serve runs rounds rounds of perRound requests each at concurrency c
// (the protocol's request: prompt, max_tokens, ignore_eos) on an awake
// label and counts each request sent; perRound = c is one wave, every
// request sent at once, as a router releases the requests it held. The
// error is the server's (it died, or the whole plan overran); failed
// requests are in the result.
func (q Requests) Serve(ctx context.Context, label string, c, rounds, perRound int) (load.Result, error) {
	m, err := q.f.s.model(label)
	if err != nil {
		return load.Result{}, err
	}
	q.f.s.mu.Lock()
	awake := !m.asleep && m.srv != nil
	q.f.s.mu.Unlock()
	if !awake {
		return load.Result{}, fmt.Errorf("model %s is not awake; refusing to send inference (a request to a sleeping vLLM hangs)", label)
	}
	plan := q.f.s.plan(m, c, rounds, perRound)
	var res load.Result
	err = q.f.s.timeout(ctx, m, time.Duration(plan.Planned()+1)*plan.Timeout, func(ctx context.Context, cl *vllm.Client) error {
		res = load.Run(ctx, cl, plan)
		return nil
	})
	for _, r := range res.Requests {
		if !r.Sent.IsZero() || r.Err == nil {
			q.f.obs.request(r.Err == nil)
		}
	}
	return res, err
}

// checkOutput fails a response whose text is garbage.
func checkOutput(s *vllm.Stream) error {
	if garbage(s.Text) {
		return fmt.Errorf("%w: %.40q", ErrGarbage, s.Text)
	}
	return nil
}

// garbage reports whether text is what vLLM emits from uninitialised weights
// (a level-2 wake without reload_weights): one character repeated, e.g. "!!!!".
func garbage(text string) bool {
	t := strings.Join(strings.Fields(text), "")
	if len([]rune(t)) < 4 {
		return false
	}
	r := []rune(t)
	for _, c := range r[1:] {
		if c != r[0] {
			return false
		}
	}
	return true
}
