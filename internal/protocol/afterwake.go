package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

// AfterWake is an after-wake phase: record.PhaseAfterWake (Level 1) or
// record.PhaseAfterWakeL2 (Level 2). One sleep at the level and its wake, with
// the lost-prefix probe around them; then serving again, the engine's
// health and the correctness replay.
type AfterWake struct {
	*Env
	Level int // 1 or 2
}

// phase is the level's phase, which is its serving, engine-health and
// replay stage too.
func (p AfterWake) phase() string {
	if p.Level == 2 {
		return record.PhaseAfterWakeL2
	}
	return record.PhaseAfterWake
}

// Run measures label's serving after a wake and judges it against the
// baseline's tok/s, with the lost prefix's price, the engine's health
// against before the first sleep, the replay and the level-1 release.
func (p AfterWake) Run(ctx context.Context, label string, logf Logf) (Outcome[[]record.PerfRun], error) {
	runs, err := p.run(ctx, label, logf)
	return Judged(runs, err, func() []record.Check { return p.checks(label, runs) })
}

// checks: the baseline's serving checks and after-wake tok/s against the
// baseline's; the lost prefix's price at the level; the engine's health
// against before the first sleep; the replay; at level 1 the model's
// level-1 release again, with the after-wake sleep's.
func (p AfterWake) checks(label string, runs []record.PerfRun) []record.Check {
	phase := p.phase()
	var cs []record.Check
	p.rec.Read(func(raw *record.Raw) {
		cs = NoteCrowded(afterWakeChecks(p.cfg, label, phase, runs, raw.Perf[label]), ".tps_ratio", raw.Windows, record.WindowName(phase, label), record.WindowName(record.PhaseBaseline, label))
		cs = append(cs, replayChecks(label, phase, raw.Replays[label])...)
		cs = append(cs, lostPrefixChecks(p.cfg, label, p.Level, raw.LostPrefix[label])...)
		cs = append(cs, healthChecks(p.cfg, raw, label, phase, label)...)
		if p.Level == 1 {
			cs = append(cs, releaseChecks(p.cfg, raw, label)...)
		}
	})
	return p.Record(phase, cs...)
}

// run sends the lost-prefix probe twice (warm), puts label through one
// sleep at the level and its wake, sends the probe again as the first
// request, then measures serving, then the engine's health, then replays
// the correctness probes: serving comes straight after the wake and the
// probe (a replay would warm the engine).
func (p AfterWake) run(ctx context.Context, label string, logf Logf) ([]record.PerfRun, error) {
	phase := p.phase()
	defer p.Begin(ctx, phase, label)()
	if err := p.pool.Activate(ctx, label); err != nil {
		return nil, p.Fail(phase, label, "activate", err)
	}
	warm, err := p.warmPrefix(ctx, label, p.Level)
	if err != nil {
		return nil, p.Fail(phase, label, "lost-prefix probe", err)
	}
	if _, _, err := p.measureSleep(ctx, label, p.Level); err != nil {
		return nil, p.Fail(phase, label, "sleep", err)
	}
	if _, err := p.pool.Run(ctx, label, pool.Wake()); err != nil {
		return nil, p.Fail(phase, label, "wake", err)
	}
	if err := p.wokenPrefix(ctx, label, p.Level, warm, logf); err != nil {
		return nil, p.Fail(phase, label, "lost-prefix probe", err)
	}
	runs, err := p.Serve(ctx, label, phase, logf)
	if !p.pool.Running(label) || ctx.Err() != nil {
		return runs, err // nothing to probe or replay on
	}
	if herr := p.health(ctx, label, phase, logf); herr != nil {
		err = errors.Join(err, p.Fail(phase, label, "engine health", herr))
	}
	if verr := p.verify(ctx, phase, label); verr != nil {
		err = errors.Join(err, p.Fail(phase, label, "correctness replay", verr))
	}
	return runs, err
}

// afterWakeChecks is serveChecks' checks plus, when min_after_wake_tps_ratio is set,
// the median tok/s of stage (record.PhaseAfterWake, PhaseAfterWakeL2: a serving stage is its phase's name) against
// the baseline's (from all, the model's serving runs so far) for each
// concurrency that has a baseline.
func afterWakeChecks(cfg config.Config, label, stage string, runs, all []record.PerfRun) []record.Check {
	out := serveChecks(cfg, label, runs)
	min := cfg.ThresholdsFor(label).MinAfterWakeTPSRatio
	if min == 0 {
		return out
	}
	base := map[int]float64{}
	for _, p := range all {
		if s := record.Summary(p.RoundTPS); s.N > 0 && p.Stage == record.PhaseBaseline { // report.json's output_tps
			base[p.Concurrency] = s.Median
		}
	}
	for _, r := range runs {
		aw := record.Summary(r.RoundTPS)
		if b, ok := base[r.Concurrency]; ok && aw.N > 0 && b > 0 {
			out = append(out, record.Evaluate(fmt.Sprintf("%s.conc%d.tps_ratio", stage, r.Concurrency), label, aw.Median/b, ">=", min))
		}
	}
	return out
}

// lostPrefixChecks: the price of a lost prefix at level (the after-wake phase's
// probe: its first request after the wake, sent → first token, less the
// warm one's) within max_lost_prefix_s when set. NOT EVALUATED where
// nothing was cached to lose: the model's prefix caching is off, or the
// server said its warm request found nothing cached.
func lostPrefixChecks(cfg config.Config, label string, level int, lps []record.LostPrefix) []record.Check {
	limit := cfg.ThresholdsFor(label).MaxLostPrefixS
	if limit == 0 {
		return nil
	}
	name := fmt.Sprintf("lost_prefix.level%d.price_s", level)
	absent := func(why string) []record.Check {
		return []record.Check{{Name: name, Model: label, Op: "<=", Limit: limit, Verdict: record.NotEvaluated, Reason: why,
			Required: cfg.ThresholdSetByUser(label, "max_lost_prefix_s")}}
	}
	var out []record.Check
	for _, lp := range lps {
		if lp.Level != level {
			continue
		}
		m, _ := cfg.Model(label)
		switch {
		case !m.PrefixCaching():
			out = absent("prefix caching is off (--no-enable-prefix-caching): nothing cached to lose")
		case lp.WarmCached == 0:
			out = absent("the warm request found nothing cached (usage.prompt_tokens_details.cached_tokens 0)")
		default:
			out = []record.Check{record.Evaluate(name, label, lp.PriceS(), "<=", limit)}
		}
	}
	return out
}
