package protocol

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/record"
)

// KVRelease is the KV-only release phase (record.PhaseKVRelease):
// protocol.kv_release_cycles cycles on each model of pause (sleep level 0),
// /release_kv_cache_memory, hold settle_s and read the GiB freed,
// wake_up?tags=kv_cache, wake → first token, replay; first, once, a
// release without a pause, which vLLM must refuse. Off, and said so, on a
// vLLM without /release_kv_cache_memory.
type KVRelease struct{ *Env }

// Run measures label's KV-only release cycles and judges them
// (pauseChecks), with vLLM's refusal of a release without a pause.
func (p KVRelease) Run(ctx context.Context, label string, logf Logf) (Outcome[[]record.Cycle], error) {
	pr := &pauser{Env: p.Env}
	return pr.judged(ctx, record.PhaseKVRelease, label, record.LevelKVRelease, p.cfg.Protocol.KVReleaseCycles, logf, pr.kvCycle)
}

// refusedWithoutPause asks label's awake server to release its KV cache
// without a pause first: vLLM refuses (500, "requires a completed pause
// first"); a server that lacks the endpoint makes the cycle off (the
// returned why). One that accepts is an error: its engine released a KV
// cache a running scheduler uses (the cache is restored before returning).
func (p *pauser) refusedWithoutPause(ctx context.Context, label string) (off string, err error) {
	_, err = p.pool.Run(ctx, label, pool.ReleaseKV())
	switch {
	case pool.Unsupported(err):
		return "the server has no /release_kv_cache_memory (vLLM before PR #44890): the cycle is off", nil
	case err != nil && strings.Contains(err.Error(), "HTTP 500") && strings.Contains(err.Error(), "pause"):
		p.confirmed = true // "release_kv_cache_memory() requires a completed pause first"
		return "", p.pool.CheckEngine(ctx, label, "release_kv_cache_memory")
	case err != nil:
		return "", fmt.Errorf("a release without a pause failed, but not as vLLM refuses it (500, \"requires a completed pause first\"): %w", err)
	}
	if _, werr := p.pool.Run(ctx, label, pool.WakeKV()); werr != nil {
		return "", fmt.Errorf("released the KV cache of a running engine, and restoring it failed: %w", werr)
	}
	return "", errors.New("/release_kv_cache_memory answered 200 on a running engine: vLLM refuses it without a completed pause (PR #44890)")
}

// kvCycle is one KV-only release cycle of an awake model.
func (p *pauser) kvCycle(ctx context.Context, label string) (record.Cycle, string, error) {
	c := newCycle(record.LevelKVRelease)
	mark := p.pool.Engine().Mark(ctx, label) // before the pause: outside every interval of the cycle
	// The pause through /pause (mode abort, clear_cache: vLLM's defaults),
	// the RLHF router's way; level 0 has its own cycles.
	pt, err := p.pool.Run(ctx, label, pool.Pause())
	c.SleepS = pt.Took.Seconds()
	if err != nil {
		return c, "pause", err
	}
	ms, err := p.pool.Memory().Sleep(ctx, label, pool.ReleaseKV())
	if ms != nil {
		c.ReleaseS = ms.Took.Seconds()
	}
	if err != nil {
		return c, "release_kv_cache_memory", err
	}
	resid, err := p.finishSleep(ctx, ms) // settle_s after the release's answer (pool.MeasuredSleep.Finish)
	c.ResidualGiB, c.FreedGiB = resid, ms.ReleasedGiB
	if err != nil {
		return c, "memory read", err
	}
	wake, step, err := p.wakeToFirstToken(ctx, &c, label, pool.WakeKV())
	c.WakeAPIS = wake.Took.Seconds()
	if step == "wake" {
		step = "wake_up?tags=kv_cache"
	}
	if err != nil {
		return c, step, err
	}
	// The engine's account of the release and the wake (vLLM ≥ 0.32's
	// operation metrics, #52864: operation release_kv_cache_memory, then
	// wake), after the first token as a sleep cycle's.
	c.Engine = p.engine(ctx, []*pool.Transition{pt, ms.T}, wake, mark, mark, c.ReleaseS, c.WakeAPIS, ms.ReleasedGiB)
	if err := p.verify(ctx, record.PhaseKVRelease, label); err != nil {
		return c, "correctness replay", err
	}
	c.OK = true
	return c, "", nil
}
