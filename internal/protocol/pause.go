package protocol

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

// The cycles of vLLM's newest sleep API (issue 24; docs/vllm-api.md): a
// level-0 sleep pauses the scheduler and frees nothing
// (vllm/entrypoints/serve/dev/sleep/api_router.py, EngineCore.sleep with
// level 0 → pause_scheduler); a KV-only release discards the KV cache of a
// paused engine and keeps the weights (POST /release_kv_cache_memory, PR
// #44890), and wake_up?tags=kv_cache restores it. A server without them
// (vLLM before the pause API, or before #44890) has its cycles off: said
// in the report, not failed.

// Level0 is the level-0 phase (record.PhaseSleepL0): protocol.sleep_l0_cycles
// cycles on each model of the pause (sleep level 0), a request sent while
// paused (what it meets: held until the wake), the GPU memory freed (none
// expected), the wake, wake → first token, and the correctness replay;
// then once /pause, a held probe, /resume. Off, and said so, on a vLLM
// without /pause.
type Level0 struct{ *Env }

// Run measures label's level-0 cycles and judges them (pauseChecks).
func (p Level0) Run(ctx context.Context, label string, logf Logf) (Outcome[[]record.Cycle], error) {
	pr := &pauser{Env: p.Env}
	return pr.judged(ctx, record.PhaseSleepL0, label, 0, p.cfg.Protocol.SleepL0Cycles, logf, pr.pauseCycle)
}

// pauser runs one model's cycles of vLLM's pause API (Level0, KVRelease)
// and remembers what its checks need beside the cycles.
type pauser struct {
	*Env
	// confirmed: at level 0, /pause held a request until /resume
	// (pauseResume); for the KV-only release, the server refused a release
	// without a pause, as vLLM must (refusedWithoutPause).
	confirmed bool
}

// judged runs the cycles (offOrCycles) and judges them (pauseChecks).
func (p *pauser) judged(ctx context.Context, phase, label string, level, n int, logf Logf,
	one func(context.Context, string) (record.Cycle, string, error)) (Outcome[[]record.Cycle], error) {
	cycles, err := p.offOrCycles(ctx, phase, label, level, n, logf, one)
	return Judged(cycles, err, func() []record.Check { return p.pauseChecks(phase, label, level, cycles) })
}

// offOrCycles activates label, finds whether its server has the endpoints
// the cycles need (off: recorded with why, no cycle run) and runs n cycles.
func (p *pauser) offOrCycles(ctx context.Context, phase, label string, level, n int, logf Logf,
	one func(context.Context, string) (record.Cycle, string, error)) (out []record.Cycle, err error) {
	defer p.Begin(ctx, phase, label)()
	if n == 0 {
		return nil, nil
	}
	p.rec.PlanCycles(label, level, n)
	if err := p.pool.Activate(ctx, label); err != nil {
		return nil, p.Fail(phase, label, "activate", err)
	}
	ok, err := p.pool.SupportsPause(ctx, label)
	if err != nil {
		return nil, p.Fail(phase, label, "GET /is_paused", err)
	}
	if !ok {
		p.rec.CyclesOff(label, level, "the server has no /pause, /is_paused (vLLM before the pause API): the cycle is off")
		logf("%s: %s off: no /is_paused", label, phase)
		return nil, nil
	}
	if level == record.LevelKVRelease {
		off, err := p.refusedWithoutPause(ctx, label)
		if err != nil {
			return nil, p.Fail(phase, label, "release without a pause", err)
		}
		if off != "" {
			p.rec.CyclesOff(label, level, off)
			logf("%s: %s off: %s", label, phase, off)
			return nil, nil
		}
	}
	defer func() {
		if err == nil && level == 0 && len(out) == n && out[n-1].OK {
			err = p.pauseResume(ctx, phase, label, logf)
		}
	}()
	for i := range n {
		c, step, err := one(ctx, label)
		out = append(out, c)
		p.w.Cycles.Add(label, c)
		if err != nil {
			return out, p.Fail(phase, label, fmt.Sprintf("cycle %d %s", i+1, step), err)
		}
		what := fmt.Sprintf("held request %.3fs", c.HeldS)
		if level == record.LevelKVRelease {
			what = fmt.Sprintf("release %.3fs", c.ReleaseS)
		}
		logf("%s %s cycle %d/%d: pause %.3fs, %s, wake %.3fs, first token %.3fs, freed %.3f GiB",
			label, phase, i+1, n, c.SleepS, what, c.WakeAPIS, c.ToFirstTokenS, c.FreedGiB)
		if i == 0 && level == record.LevelKVRelease { // the engine's health after a KV-only wake, once
			if err := p.health(ctx, label, record.PhaseKVRelease, logf); err != nil {
				return out, p.Fail(phase, label, "engine health after cycle 1", err)
			}
		}
		p.Settle(ctx)
	}
	return out, nil
}

// pauseResume pauses label through /pause, sends a probe (held), resumes
// through /resume and takes the probe's answer: the other way vLLM pauses
// (its RLHF router's), checked after the level-0 cycles; a failure is the
// phase's, recorded and returned. Its times are logged, not reported: the level-0 cycles are the
// pause's figures.
func (p *pauser) pauseResume(ctx context.Context, phase, label string, logf Logf) error {
	ok := false
	defer func() { p.confirmed = ok }()
	pt, err := p.pool.Run(ctx, label, pool.Pause())
	if err != nil {
		return p.Fail(phase, label, "pause", err)
	}
	accepted, collect, stop := p.holdProbe(ctx, label)
	defer stop() // an early return ends the held request
	accepted()
	rt, err := p.pool.Run(ctx, label, pool.Resume())
	sent := rt.Sent
	if err != nil {
		return p.Fail(phase, label, "resume", err)
	}
	h, err := collect()
	if err != nil {
		return p.Fail(phase, label, "request held by /pause", err)
	}
	switch {
	case h.err != nil:
		return p.Fail(phase, label, "request held by /pause", h.err)
	case !h.sent.Before(sent):
		return p.Fail(phase, label, "request held by /pause", fmt.Errorf("it was sent %.3f s after /resume (holdProbe waits for the request to be written first: a harness bug)", h.sent.Sub(sent).Seconds()))
	case h.first.Before(sent):
		return p.Fail(phase, label, "request held by /pause", fmt.Errorf("its first token came %.3f s before /resume was sent", sent.Sub(h.first).Seconds()))
	default:
		ok = true
		logf("%s: /pause %.3fs, /resume %.3fs, held request's first token %.3fs after /resume", label, pt.Took.Seconds(), rt.Took.Seconds(), h.first.Sub(sent).Seconds())
		return nil
	}
}

// pauseCycle is one level-0 cycle of an awake model.
func (p *pauser) pauseCycle(ctx context.Context, label string) (record.Cycle, string, error) {
	c := newCycle(0)
	ms, resid, err := p.measureSleep(ctx, label, 0)
	if ms != nil {
		c.SleepS, c.FreedGiB = ms.Took.Seconds(), ms.ReleasedGiB
	}
	c.ResidualGiB = resid
	if err != nil {
		return c, "pause (sleep level 0)", err
	}
	// A request while paused: vLLM holds it until the scheduler resumes.
	accepted, collect, stop := p.holdProbe(ctx, label)
	defer stop()
	accepted() // the wake goes out once the server holds the probe: nothing of the harness's inside held_request_s
	wake, step, err := p.wakeToFirstToken(ctx, &c, label, pool.Wake())
	tw := wake.Sent
	c.WakeAPIS = wake.Took.Seconds()
	if err != nil {
		return c, step, err
	}
	h, err := collect()
	if err != nil {
		return c, "request held while paused", err
	}
	if h.err != nil {
		return c, "request held while paused", h.err
	}
	if !h.sent.Before(tw) {
		return c, "request held while paused", fmt.Errorf("it was sent %.3f s after the wake (holdProbe waits for the request to be written first: a harness bug)", h.sent.Sub(tw).Seconds())
	}
	c.HeldS, c.HeldPastWakeS = h.first.Sub(h.sent).Seconds(), h.first.Sub(tw).Seconds()
	if h.first.Before(tw) {
		return c, "request held while paused", fmt.Errorf("its first token came %.3f s before the wake was sent: the paused scheduler served it", -c.HeldPastWakeS)
	}
	if err := p.verify(ctx, record.PhaseSleepL0, label); err != nil {
		return c, "correctness replay", err
	}
	c.OK = true
	return c, "", nil
}

// newCycle is a cycle at level with every optional figure unknown.
func newCycle(level int) record.Cycle {
	return record.Cycle{Level: level, ResidualGiB: math.NaN(), FreedGiB: math.NaN(), ReleaseS: math.NaN(), HeldS: math.NaN(), HeldPastWakeS: math.NaN()}
}

// pauseChecks: the level-0 cycles (or KV-only release cycles, level
// record.LevelKVRelease) as Sleep.checks has the others: every cycle
// succeeded, wake → first token within its limit, the correctness
// replays; NOT EVALUATED with the reason where the server lacks the
// endpoints. The KV release adds that vLLM refused it without a pause.
// phase (PhaseSleepL0 or PhaseKVRelease) is the replays' and the engine
// health window's stage too.
func (p *pauser) pauseChecks(phase, label string, level int, cycles []record.Cycle) []record.Check {
	var cs []record.Check
	p.rec.Read(func(raw *record.Raw) {
		cs = pauseCycleChecks(p.cfg, label, level, cycles, raw.CyclesOff[label][level], p.confirmed)
		if raw.CyclesOff[label][level] == "" {
			cs = append(cs, replayChecks(label, phase, raw.Replays[label])...)
			if level == record.LevelKVRelease && len(cycles) > 0 { // the cycles ran: the window after the first
				cs = append(cs, healthChecks(p.cfg, raw, label, phase, label)...)
			}
		}
	})
	return p.Record(phase, cs...)
}

// held is a probe sent while a model's scheduler was paused: when it was
// sent, its first token, or why it failed.
type held struct {
	first, sent time.Time
	err         error
}

// holdProbe sends a probe to paused label in the background
// (pool.Requests.ProbePaused): accepted waits until the client has
// written the request (net/http's WroteRequest without an error: handed to
// the connection, whose flush follows at once), or the probe ended (at
// most timeouts.request_s), or ctx's end, then until the server has taken
// it (its response headers arrived), at most settle_s more; collect
// waits for its answer (or ctx's end), stop ends it early; the caller
// defers stop. The first wait orders the events rather
// than timing them: on a loaded machine the probe's goroutine may not run
// for longer than settle_s, and a wake sent before the request would leave
// nothing held (the CI run of 435c656 under make stress: "sent 0.002 s
// after /resume").
//
// vLLM holds the request in its engine from right after those headers:
// its completion handler tokenizes the prompt and builds the engine's
// generator before it returns the streaming response, and Starlette
// iterates that generator, which adds the request to the engine, right
// after it sends the headers (vllm/entrypoints/openai/serving_completion.py
// in the code index at vllm@00463e62, a commit not tied here to a merged
// PR or a release, so unconfirmed: `_process_inputs`, then
// `engine_client.generate` returned unstarted in
// `completion_stream_generator`; docs/vllm-api.md). vllmsim submits
// before it writes them. A wake sent at the headers therefore reaches an
// engine that holds the request (issue 50: held_request_s held settle_s of
// the harness's own wait before). A server or proxy that sends no header
// while it holds the request gets the wake settle_s after the request was
// written.
func (p *pauser) holdProbe(ctx context.Context, label string) (accepted func(), collect func() (held, error), stop func()) {
	hc := make(chan held, 1) // buffered: the goroutine never blocks on an early return
	wrote, got, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var wroteOnce, gotOnce sync.Once
	hctx, cancel := context.WithCancel(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil { // a failed attempt's retry calls it again
				wroteOnce.Do(func() { close(wrote) })
			}
		},
		GotFirstResponseByte: func() { gotOnce.Do(func() { close(got) }) },
	}))
	go func() {
		defer close(done)
		s, sent, err := p.pool.Requests().ProbePaused(hctx, label)
		h := held{sent: sent, err: err}
		if err == nil && len(s.Tokens) > 0 {
			h.first = s.Tokens[0]
		}
		hc <- h
	}()
	accepted = func() {
		select {
		case <-wrote:
		case <-done: // it never reached the server: collect says why
			return
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(seconds(p.cfg.Protocol.SettleS))
		defer t.Stop()
		select {
		case <-got:
		case <-t.C:
		case <-done:
		case <-ctx.Done():
		}
	}
	return accepted, func() (held, error) {
		select {
		case h := <-hc:
			return h, nil
		case <-ctx.Done():
			return held{}, context.Cause(ctx)
		}
	}, cancel
}

// pauseCycleChecks: the level-0 cycles, or the KV-only release cycles (level
// record.LevelKVRelease), as Sleep has the others: every cycle succeeded
// and the p95 of wake → first token within its limit when set; where the
// server lacks the endpoints (off says why) the count is NOT EVALUATED,
// not failed. The KV release also needs vLLM to have refused a release
// without a pause, level 0 a /pause that held a request until /resume
// (confirmed).
func pauseCycleChecks(cfg config.Config, label string, level int, cycles []record.Cycle, off string, confirmed bool) []record.Check {
	t := cfg.ThresholdsFor(label)
	prefix, planned, maxFTT := "sleep.level0", cfg.Protocol.SleepL0Cycles, t.MaxL0WakeToFirstTokenS
	if level == record.LevelKVRelease {
		prefix, planned, maxFTT = "kv_release", cfg.Protocol.KVReleaseCycles, t.MaxKVWakeToFirstTokenS
	}
	if planned == 0 {
		return nil
	}
	if off != "" {
		out := []record.Check{{Name: prefix + ".successful_cycles", Model: label, Op: "==", Limit: float64(planned),
			Verdict: record.NotEvaluated, Reason: off}}
		key := map[string]string{"sleep.level0": "max_l0_wake_to_first_token_s", "kv_release": "max_kv_wake_to_first_token_s"}[prefix]
		if maxFTT > 0 && cfg.ThresholdSetByUser(label, key) { // the user's limit is not dropped: required, unevaluated
			out = append(out, record.Check{Name: prefix + ".to_first_token_s.p95", Model: label, Op: "<=", Limit: maxFTT,
				Verdict: record.NotEvaluated, Reason: off, Required: true})
		}
		return out
	}
	fig := record.LevelOf(cycles, level) // report.json's sleep.0 or sleep.kv reads the same
	ftt := fig.FirstToken
	out := []record.Check{record.Evaluate(prefix+".successful_cycles", label, float64(len(ftt)), "==", float64(planned))}
	if level == record.LevelKVRelease {
		out = append(out, record.Evaluate(prefix+".refused_without_pause", label, b2f(confirmed), "==", 1))
		// A release that freed nothing did not release: at least half the
		// KV cache vLLM was given (--kv-cache-memory-bytes = kv_gib).
		name, limit := prefix+".freed_gib.median", cfg.Protocol.KVGiB/2
		if s := record.Summary(fig.Freed); s.N > 0 {
			out = append(out, record.Evaluate(name, label, s.Median, ">=", limit))
		} else if len(ftt) > 0 {
			_, none := MemoryRequired(cfg, label, name) // the limit is half of protocol.kv_gib: only the "memory": "none" reason is taken
			out = append(out, record.Check{Name: name, Model: label, Op: ">=", Limit: limit, Verdict: record.NotEvaluated,
				Reason: cmp.Or(none, "no figure: memory was not sampled, or could not be attributed to the model (see memory.note)")})
		}
	} else {
		out = append(out, record.Evaluate(prefix+".pause_resume_held_a_request", label, b2f(confirmed), "==", 1))
	}
	if s := record.Summary(ftt); s.N > 0 && maxFTT > 0 {
		out = append(out, record.Evaluate(prefix+".to_first_token_s.p95", label, s.P95, "<=", maxFTT))
	}
	return out
}
