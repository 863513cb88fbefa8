package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/wakebench/wakebench/internal/record"
)

// Serve runs the serving measurement at every configured concurrency on an
// awake label (others asleep) and records it under stage. A failed request
// is one failed request: its round finishes, every concurrency runs and is
// recorded, and thresholds.max_failed_requests decides; a concurrency with
// more failures than that is a failure naming the first error. Only a
// server that dies (or a plan that overruns) ends the phase early.
func (p *Env) Serve(ctx context.Context, label, stage string, logf Logf) ([]record.PerfRun, error) {
	if !p.pool.Running(label) || p.pool.Asleep(label) {
		return nil, p.Fail(stage, label, "serve", fmt.Errorf("model %s is not awake; refusing to send inference (a request to a sleeping vLLM hangs)", label))
	}
	pc := p.cfg.Protocol
	limit := p.cfg.ThresholdsFor(label).MaxFailedRequests
	var out []record.PerfRun
	var errs []error
	for _, c := range pc.Concurrency {
		step := fmt.Sprintf("serve at concurrency %d", c)
		run, firstErr, err := p.ServeRun(ctx, label, stage, c, pc.Rounds, pc.RequestsPerRound)
		p.w.Perf.Add(label, run)
		out = append(out, run)
		logf("%s %s conc=%d: %d/%d ok, rounds passed %d/%d, tok/s %v", label, stage, c, run.Success, run.Planned, run.RoundsPassed, run.Rounds, round2(run.RoundTPS))
		failed := run.Planned - run.Success
		if err == nil && firstErr != nil {
			reqErr := p.pool.Procs().Explain(label, fmt.Errorf("%d of %d requests failed, first: %w", failed, run.Planned, firstErr))
			switch {
			case !p.pool.Running(label) || ctx.Err() != nil:
				err = reqErr // the server died or the run was stopped: nothing more to measure
			case failed > limit:
				errs = append(errs, p.Fail(stage, label, step, fmt.Errorf("%w (max_failed_requests %d)", reqErr, limit)))
			default:
				logf("%s %s conc=%d: %v (within max_failed_requests %d)", label, stage, c, reqErr, limit)
			}
		}
		if err != nil {
			return out, errors.Join(append(errs, p.Fail(stage, label, step, err))...)
		}
	}
	return out, errors.Join(errs...)
}

// ServeRun runs rounds serving rounds of perRound requests each at
// concurrency c on label (pool.Requests.Serve; perRound = c: each round
// one wave, every request sent at once) and is what they measured as the
// report keeps it (stage's record.PerfRun: the rounds' tok/s, each
// answered request's TTFT, TPOT and tok/s), with the first failed
// request's error and the server's. It records nothing: Serve, a phase of
// its own package (through the Perf series it is handed) and the serving benchmark
// (Steps.ServeRound) read the same figures from it.
func (p *Env) ServeRun(ctx context.Context, label, stage string, c, rounds, perRound int) (run record.PerfRun, firstErr, err error) {
	res, err := p.pool.Requests().Serve(ctx, label, c, rounds, perRound)
	run = record.PerfRun{Stage: stage, Concurrency: c, Rounds: rounds, Planned: rounds * perRound, Success: res.Success()}
	for _, q := range res.Requests {
		if q.Err != nil {
			if firstErr == nil {
				firstErr = q.Err
			}
			continue
		}
		run.TTFT = append(run.TTFT, q.TTFT.Seconds())
		if d := q.Done.Sub(q.Sent); d > 0 {
			run.ReqTPS = append(run.ReqTPS, float64(q.OutputTokens)/d.Seconds())
		}
		if q.HasTPOT {
			run.TPOT = append(run.TPOT, q.TPOT.Seconds())
		}
		run.PromptTokens = append(run.PromptTokens, q.PromptTokens)
	}
	for _, r := range res.Rounds {
		run.RoundTPS = append(run.RoundTPS, r.TPS)
		if r.Passed() {
			run.RoundsPassed++
		}
	}
	return run, firstErr, err
}
