package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/vllm"
)

// The steps of the level-0 and KV-only release cycles (issue 24; vLLM's
// RLHF router and PR #44890, docs/vllm-api.md §5–6). Each returns when its
// request was sent and the time to its answer, like SleepMode and WakeAt;
// the confirmations and metric checks come after the answer, outside it.
// A server that lacks the endpoint answers an error that
// errors.Is(err, vllm.ErrUnsupported): the cycle is then off for it (say
// so; do not fail). A level-0 pause is SleepMode(ctx, label, 0, mode).

// PauseAt is POST /pause?mode=…&clear_cache=… on label's server: the
// scheduler stops, nothing is freed; /is_sleeping is then true (vLLM's
// EngineCore.is_sleeping counts a paused scheduler). The pool then holds
// the model asleep (no inference is sent) until WakeAt or WakeKVCacheAt.
// The model's correctness reference is taken first (Oracle).
func (f *Pool) PauseAt(ctx context.Context, label, mode string, clearCache bool) (sent time.Time, d time.Duration, err error) {
	return f.asleepStep(ctx, label, "pause", []string{"scheduling"}, func(ctx context.Context, c *vllm.Client) error {
		return c.Pause(ctx, mode, clearCache)
	})
}

// ReleaseKVCacheAt is POST /release_kv_cache_memory on label's server,
// paused first (PauseAt or SleepMode level 0): the KV cache is discarded,
// the weights stay. vLLM refuses it (500) without a completed pause or with
// anything else asleep. WakeKVCacheAt restores it.
func (f *Pool) ReleaseKVCacheAt(ctx context.Context, label string) (sent time.Time, d time.Duration, err error) {
	return f.asleepStep(ctx, label, "release_kv_cache_memory", []string{"kv_cache", "scheduling"}, func(ctx context.Context, c *vllm.Client) error {
		return c.ReleaseKVCacheMemory(ctx)
	})
}

// CheckEngine reads label's sleep metrics after op (a call that failed as
// expected, say): an unknown resource or an operation still in flight is
// an error naming them (checkEngine).
func (f *Pool) CheckEngine(ctx context.Context, label, op string) error {
	return f.verifyEngine(ctx, label, op)
}

// SupportsPause reports whether label's server has vLLM's pause endpoints
// (GET /is_paused answers; a 404/405 is false). /release_kv_cache_memory
// came later (#44890): ReleaseKVCacheAt's vllm.ErrUnsupported says it is
// missing.
func (f *Pool) SupportsPause(ctx context.Context, label string) (bool, error) {
	m, err := f.s.model(label)
	if err != nil {
		return false, err
	}
	err = f.s.timeout(ctx, m, seconds(f.s.cfg.Timeouts.RequestS), func(ctx context.Context, c *vllm.Client) error {
		_, err := c.IsPaused(ctx)
		return err
	})
	if errors.Is(err, vllm.ErrUnsupported) {
		return false, nil
	}
	return err == nil, err
}

// asleepStep sends one call that leaves label's server not fully awake
// (op), confirms /is_sleeping and the sleep metrics after its answer, and
// marks the model asleep with slept added to what sleeps.
func (f *Pool) asleepStep(ctx context.Context, label, op string, slept []string, call func(context.Context, *vllm.Client) error) (sent time.Time, d time.Duration, err error) {
	m, err := f.s.model(label)
	if err != nil {
		return sent, 0, err
	}
	if err := f.Oracle().ensure(ctx, m); err != nil {
		return sent, 0, fmt.Errorf("%s %s: %w", op, label, err)
	}
	srv, _ := f.s.server(m)
	sent, d, err = f.s.askAsleep(ctx, m, op, call, nil)
	if err != nil {
		return sent, d, fmt.Errorf("%s %s: %w%s", op, label, err, f.unknownAfter(ctx, label, op))
	}
	f.s.mu.Lock()
	if m.srv != srv {
		f.s.mu.Unlock()
		return sent, d, fmt.Errorf("%s %s: the server was stopped meanwhile", op, label)
	}
	if !m.asleep {
		m.level = 0 // WakeAt sends a plain /wake_up: it restores everything
	}
	m.asleep = true
	for _, s := range slept {
		if !slices.Contains(m.slept, s) {
			m.slept = append(m.slept, s)
		}
	}
	f.s.changes++
	f.s.mu.Unlock()
	f.obs.event(record.Event{Time: sent, Label: label, Kind: op})
	if err := f.verifyEngine(ctx, label, op); err != nil {
		return sent, d, fmt.Errorf("%s %s: %w", op, label, err)
	}
	return sent, d, nil
}

// ResumeAt is POST /resume on label's server after PauseAt: the
// scheduler runs again (vLLM's RLHF router, docs/vllm-api.md §5). It is
// confirmed after its answer (wakeThen): /is_paused and /is_sleeping must
// be false. Only a pause with nothing else asleep can be resumed so.
func (f *Pool) ResumeAt(ctx context.Context, label string) (sent time.Time, d time.Duration, err error) {
	m, err := f.s.model(label)
	if err != nil {
		return sent, 0, err
	}
	f.s.mu.Lock()
	slept := m.slept
	f.s.mu.Unlock()
	if !slices.Equal(slept, []string{"scheduling"}) {
		return sent, 0, fmt.Errorf("resume %s: only a paused scheduler resumes; asleep: %v", label, slept)
	}
	return f.wakeThen(ctx, m, "resume "+label, "resume",
		func(ctx context.Context, c *vllm.Client) (string, func(context.Context) error, error) {
			return "resume", nil, c.Resume(ctx)
		},
		func(ctx context.Context, c *vllm.Client) (string, error) {
			if paused, err := c.IsPaused(ctx); err != nil || paused {
				return "is_paused", cmp.Or(err, errors.New("resume answered 200 but /is_paused is still true"))
			}
			if asleep, err := c.IsSleeping(ctx); err != nil || asleep {
				return "is_sleeping", cmp.Or(err, errors.New("resume answered 200 but /is_sleeping is still true"))
			}
			return "", nil
		}, nil)
}

// WakeKVCacheAt is WakeKVCacheThen with nothing to run before the
// verification.
func (f *Pool) WakeKVCacheAt(ctx context.Context, label string) (sent time.Time, d time.Duration, err error) {
	return f.WakeKVCacheThen(ctx, label, nil)
}

// WakeKVCacheThen is POST /wake_up?tags=kv_cache after ReleaseKVCacheAt:
// it restores the KV cache and resumes scheduling (docs/vllm-api.md §6).
// It is verified like WakeThen's last step, then running before the
// verification reads: "sleeping" is a failed wake naming what is still
// asleep, /is_sleeping must be false, and the sleep metrics show no
// unknown resource and no hung operation.
func (f *Pool) WakeKVCacheThen(ctx context.Context, label string, then func(context.Context)) (sent time.Time, d time.Duration, err error) {
	m, err := f.s.model(label)
	if err != nil {
		return sent, 0, err
	}
	f.s.mu.Lock()
	slept := m.slept
	f.s.mu.Unlock()
	name := "wake " + label + " kv_cache"
	sent, d, err = f.wakeThen(ctx, m, name, "wake kv_cache",
		func(ctx context.Context, c *vllm.Client) (string, func(context.Context) error, error) {
			a, err := c.WakeUpAnswer(ctx, "kv_cache")
			if err != nil {
				return "wake_up?tags=kv_cache", nil, err
			}
			return "wake_up?tags=kv_cache", func(ctx context.Context) error { return wakeVerdict(ctx, a, f.metricsOf(label), slept) }, nil
		},
		func(ctx context.Context, c *vllm.Client) (string, error) {
			return confirmAwake(ctx, c, f.metricsOf(label))
		}, then)
	return sent, d, f.engineAfterWake(ctx, label, name, err)
}
