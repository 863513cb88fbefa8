package pool

import (
	"context"
	"errors"

	"github.com/wakebench/wakebench/internal/vllm"
)

// The level-0 and KV-only release cycles' steps (issue 24; vLLM's RLHF
// router and PR #44890, docs/vllm-api.md §5–6) are transitions (Pause,
// ReleaseKV, Resume, WakeKV; a level-0 pause is Sleep(0)). A server that
// lacks an endpoint answers an error that errors.Is(err,
// vllm.ErrUnsupported): the cycle is then off for it (say so; do not fail).

// Unsupported reports whether err, a transition's or another sleep-API
// call's, says the server lacks the endpoint (vllm.ErrUnsupported: a 404
// or 405 from an optional one, /pause, /release_kv_cache_memory): a cycle
// that needs it is off for that server, not failed.
func Unsupported(err error) bool { return errors.Is(err, vllm.ErrUnsupported) }

// CheckEngine reads label's sleep metrics after op (a call that failed as
// expected, say): an unknown resource or an operation still in flight is
// an error naming them (checkEngine); after a failed call the server's
// count of failed operations is read anew, not judged (opFailed).
func (f *Pool) CheckEngine(ctx context.Context, label, op string) error {
	return f.s.verifyEngine(ctx, label, op)
}

// SupportsPause reports whether label's server has vLLM's pause endpoints
// (GET /is_paused answers; a 404/405 is false). /release_kv_cache_memory
// came later (#44890): a ReleaseKV transition's vllm.ErrUnsupported says
// it is missing.
func (f *Pool) SupportsPause(ctx context.Context, label string) (bool, error) {
	m, err := f.s.model(label)
	if err != nil {
		return false, err
	}
	err = f.s.timeout(ctx, m, seconds(f.s.cfg.Timeouts.RequestS), func(ctx context.Context, c *vllm.Client) error {
		_, err := c.IsPaused(ctx)
		return err
	})
	if Unsupported(err) {
		return false, nil
	}
	return err == nil, err
}
