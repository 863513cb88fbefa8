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
// level-1 wake (protocol.opt_in): a wake-on-demand router holds them
// while the model wakes and releases them together at the wake's answer
// (package router does). Each serving round here is such a burst: the
// model sleeps at level 1, wakes, and the round's requests are sent at
// once at the wake's answer, before any other request (after-wake's
// serving follows a probe that has warmed the engine first). Its serving
// stage is its name, so its figures are Serve/model=…/stage=wake-burst
// against baseline's (docs/metrics.md). No lower package names it: the
// phase is this file and its entry in List.
const WakeBurst = "wake-burst"

// wakeBurst runs the phase on the run's environment.
type wakeBurst struct{ env *protocol.Env }

// Run measures label's bursts: for each concurrency c, rounds rounds, each
// a level-1 sleep, the wake, and at its answer c requests at a time
// (requests_per_round in all), recorded as one serving run of stage
// WakeBurst per concurrency. More failed requests than
// max_failed_requests at a concurrency is the phase's failure; a sleep or
// wake that fails ends it.
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
	for _, c := range cfg.Protocol.Concurrency {
		run := record.PerfRun{Stage: WakeBurst, Concurrency: c}
		var firstErr error
		for r := range cfg.Protocol.Rounds {
			step := fmt.Sprintf("concurrency %d round %d", c, r+1)
			if _, err := f.Run(ctx, label, pool.Sleep(1)); err != nil {
				return out, env.Fail(WakeBurst, label, step+": sleep", err)
			}
			env.Settle(ctx)
			t, err := f.Do(ctx, label, pool.Wake())
			if err != nil {
				return out, env.Fail(WakeBurst, label, step+": wake", err)
			}
			round, rerr, err := env.ServeRun(ctx, label, WakeBurst, c, 1) // sent at the wake's answer
			if verr := t.Verify(ctx); verr != nil {                       // the harness's reads, after the burst
				err = errors.Join(err, verr)
			}
			run = appendRound(run, round)
			if firstErr == nil {
				firstErr = rerr
			}
			if err != nil {
				env.Writers().Perf.Add(label, run)
				return append(out, run), env.Fail(WakeBurst, label, step, err)
			}
		}
		env.Writers().Perf.Add(label, run)
		out = append(out, run)
		logf("%s %s conc=%d: %d/%d ok, rounds passed %d/%d", label, WakeBurst, c, run.Success, run.Planned, run.RoundsPassed, run.Rounds)
		if failed := run.Planned - run.Success; failed > limit {
			return out, env.Fail(WakeBurst, label, fmt.Sprintf("serve at concurrency %d", c),
				fmt.Errorf("%d of %d requests failed (max_failed_requests %d), first: %w", failed, run.Planned, limit, firstErr))
		}
	}
	return out, nil
}

// appendRound is run with one more round's measurements.
func appendRound(run, round record.PerfRun) record.PerfRun {
	run.Rounds += round.Rounds
	run.Planned += round.Planned
	run.Success += round.Success
	run.RoundsPassed += round.RoundsPassed
	run.RoundTPS = append(run.RoundTPS, round.RoundTPS...)
	run.TTFT = append(run.TTFT, round.TTFT...)
	run.TPOT = append(run.TPOT, round.TPOT...)
	run.ReqTPS = append(run.ReqTPS, round.ReqTPS...)
	run.PromptTokens = append(run.PromptTokens, round.PromptTokens...)
	return run
}

// wakeBurstPlan: every request of its serving stage (a round per
// concurrency and round, as baseline's), no other.
func wakeBurstPlan(config.Config, Can) Plan { return Plan{Serving: []string{WakeBurst}} }
