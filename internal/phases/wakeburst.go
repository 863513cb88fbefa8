package phases

import (
	"context"
	"errors"
	"fmt"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
)

// WakeBurst is the opt-in phase of the requests that arrive during a
// level-1 wake (protocol.opt_in): a wake-on-demand router holds them while
// the model wakes and releases them together at the wake's answer. Each
// round here is such a wave: the model sleeps at level 1, wakes, and at the
// wake's answer exactly `concurrency` requests go out at once, before any
// other request (after-wake's serving follows a probe that has warmed the
// engine, and keeps `concurrency` requests in flight through the round).
// Its serving stage is its name: its figures are Serve/model=…/stage=
// wake-burst in bench.txt, beside baseline's in summary.md's serving table
// and judged by the regression gate (docs/metrics.md); it has no threshold
// of its own. No lower package names it: the phase is this file and its
// entry in List.
const WakeBurst = "wake-burst"

// wakeBurst runs the phase on the run's environment, writing its serving
// runs into perf (the record's Perf series).
type wakeBurst struct {
	env  *protocol.Env
	perf record.Series[record.PerfRun]
}

// Run measures label's waves: for each concurrency c, rounds × (a level-1
// sleep, settle_s, the wake, and at its answer one wave of c requests),
// recorded as one serving run of stage WakeBurst per concurrency (where a
// step fails, what the rounds done so far measured, against the whole
// plan). A sleep, a wake or a server that
// fails ends the phase; more failed requests than max_failed_requests at
// a concurrency is its failure, and the next concurrency runs.
func (p wakeBurst) Run(ctx context.Context, label string, logf protocol.Logf) (protocol.Outcome[[]record.PerfRun], error) {
	runs, err := p.run(ctx, label, logf)
	return protocol.Judged(runs, err, func() []record.Check { return nil })
}

func (p wakeBurst) run(ctx context.Context, label string, logf protocol.Logf) ([]record.PerfRun, error) {
	env, f := p.env, p.env.Pool()
	cfg := env.Config()
	defer env.Begin(ctx, WakeBurst, label)()
	if err := f.Activate(ctx, label); err != nil {
		return nil, env.Fail(WakeBurst, label, "activate", err)
	}
	limit := cfg.ThresholdsFor(label).MaxFailedRequests
	var out []record.PerfRun
	var errs []error
	for _, c := range cfg.Protocol.Concurrency {
		run, step, firstErr, err := p.waves(ctx, label, c)
		p.perf.Add(label, run)
		out = append(out, run)
		if err != nil {
			return out, errors.Join(append(errs, env.Fail(WakeBurst, label, step, err))...)
		}
		logf("%s %s conc=%d: %d/%d ok, rounds passed %d/%d", label, WakeBurst, c, run.Success, run.Planned, run.RoundsPassed, run.Rounds)
		if failed := run.Planned - run.Success; failed > limit {
			err := f.Procs().Explain(label, fmt.Errorf("%d of %d requests failed (max_failed_requests %d), first: %w", failed, run.Planned, limit, firstErr))
			errs = append(errs, env.Fail(WakeBurst, label, fmt.Sprintf("waves at concurrency %d", c), err))
		}
	}
	return out, errors.Join(errs...)
}

// waves runs the rounds at concurrency c and is their serving run; on
// error, the rounds done and the step that failed. Its rounds and planned
// requests are the whole plan's, as Serve's: requests a failure left
// unsent count as not served (report.json's planned_performance is the
// plan's).
func (p wakeBurst) waves(ctx context.Context, label string, c int) (run record.PerfRun, step string, firstErr, err error) {
	env, f := p.env, p.env.Pool()
	rounds := env.Config().Protocol.Rounds
	run = record.PerfRun{Stage: WakeBurst, Concurrency: c, Rounds: rounds, Planned: rounds * c}
	for r := range rounds {
		step = fmt.Sprintf("concurrency %d round %d", c, r+1)
		if ctx.Err() != nil { // the run's stop (a signal, the -timeout guard): its cause, not the model's failure
			return run, step, firstErr, context.Cause(ctx)
		}
		if _, err := f.Run(ctx, label, pool.Sleep(1)); err != nil {
			return run, step + ": sleep", firstErr, err
		}
		env.Settle(ctx)
		t, err := f.Do(ctx, label, pool.Wake())
		if err != nil {
			return run, step + ": wake", firstErr, err
		}
		wave, werr, err := env.ServeRun(ctx, label, WakeBurst, c, 1, c) // sent at the wake's answer
		run = appendRound(run, wave)
		if verr := t.Verify(ctx); verr != nil { // the harness's reads, after the wave
			return run, step + ": wake", firstErr, errors.Join(err, verr)
		}
		if firstErr == nil {
			firstErr = werr
		}
		if err != nil {
			return run, step, firstErr, f.Procs().Explain(label, err)
		}
	}
	return run, "", firstErr, nil
}

// appendRound is run with one more round's measurements (its rounds
// and planned requests are the plan's already).
func appendRound(run, round record.PerfRun) record.PerfRun {
	run.Success += round.Success
	run.RoundsPassed += round.RoundsPassed
	run.RoundTPS = append(run.RoundTPS, round.RoundTPS...)
	run.TTFT = append(run.TTFT, round.TTFT...)
	run.TPOT = append(run.TPOT, round.TPOT...)
	run.ReqTPS = append(run.ReqTPS, round.ReqTPS...)
	run.PromptTokens = append(run.PromptTokens, round.PromptTokens...)
	return run
}

// wakeBurstPlan: its wave stage (rounds waves of each concurrency), no
// other request.
func wakeBurstPlan(config.Config, Can) Plan { return Plan{Waves: []string{WakeBurst}} }
