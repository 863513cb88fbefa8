package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/vllm"
)

// Verify, don't assume (issue 24): a sleep or wake that answered 200 is
// checked against what the server says of itself, always after the
// interval's end event (the answer), never inside a measured interval.
//
//   - The last wake step must answer "awake" where the body says anything
//     (vLLM ≥ 0.32, #52864, docs/vllm-api.md §3; v0.31 and older answer
//     an empty body): "sleeping" is a failed wake naming the
//     resources still asleep, read from vllm:engine_sleep_resource_state
//     where exported, else from what the pool slept.
//   - After each sleep and wake, where the new metrics are exported
//     (docs/vllm-api.md §7, vLLM docs/design/engine_sleep_state.md and
//     .../serve/dev/sleep/metrics.py): a resource in state `unknown` (a
//     failed memory RPC: vLLM refuses every later sleep and wake until the
//     engine is rebuilt, state tests test_failed_rpc_is_unknown) fails by
//     name; an operation still in flight after the call returned, and
//     again after a short bounded wait, is a hung operation; and, where
//     the server counts its operations by status (vLLM ≥ 0.32, #52864:
//     vllm:rl_sleep_mode_operations_total{operation,status}), a failed
//     operation it counted since the last verification, though every
//     call since answered success, is an operation that errored (errored).

// metricsRead reads a server's /metrics.
type metricsRead func(context.Context) (vllm.Metrics, error)

// stillAsleep names what a wake that answered "sleeping" left asleep: the
// resources not running/resident where the server exports their state,
// else what the pool slept (slept).
func stillAsleep(ctx context.Context, read metricsRead, slept []string) string {
	if ms, err := read(ctx); err == nil {
		if v := ms.SleepView(); v.Exported {
			if nr := v.NotResident(); len(nr) > 0 {
				return strings.Join(nr, ", ")
			}
			return "none by vllm:engine_sleep_resource_state"
		}
	}
	return strings.Join(slept, ", ") + " (what the pool slept; the server exports no resource state)"
}

// wakeVerdict is nil unless a the last wake step's answer says the server
// is not fully awake: then an error naming what is still asleep.
func wakeVerdict(ctx context.Context, a vllm.WakeAnswer, read metricsRead, slept []string) error {
	if !a.Asleep() {
		return nil
	}
	tags := "none (wake everything)"
	if len(a.TagsWoken) > 0 {
		tags = strings.Join(a.TagsWoken, ", ")
	}
	return fmt.Errorf("answered {\"status\":\"sleeping\"} (tags woken: %s): not fully awake; still asleep: %s",
		tags, stillAsleep(ctx, read, slept))
}

// checkEngine reads the server's sleep metrics after op returned: an
// unknown resource or an operation still in flight (re-read once after
// 2 × poll, at least 100 ms) is an error naming label and what is wrong. A
// server that does not export the families passes: the call's own answer
// stands. A /metrics that cannot be read (an error status, garbage) is no
// pass: unverified says which verification could not be made and why, so
// the run reports it (Pool.Unverified) instead of hiding a hung operation.
// The last view read is returned (nil when none could be).
func checkEngine(ctx context.Context, label, op string, read metricsRead, poll time.Duration) (last *vllm.SleepView, unverified string, err error) {
	ms, err := read(ctx)
	if err != nil {
		return nil, unreadable(op, err), nil
	}
	v := ms.SleepView()
	if len(v.Unknown) > 0 {
		return &v, "", unknownErr(label, op, v)
	}
	if len(v.InFlight) == 0 {
		return &v, "", nil
	}
	wait := max(2*poll, 100*time.Millisecond)
	if err := sleepCtx(ctx, wait); err != nil {
		return &v, "", fmt.Errorf("model %s: after %s: %w", label, op, err)
	}
	if ms, err = read(ctx); err != nil {
		return &v, unreadable(op, err), nil
	}
	v = ms.SleepView()
	if len(v.Unknown) > 0 {
		return &v, "", unknownErr(label, op, v)
	}
	if len(v.InFlight) == 0 {
		return &v, "", nil
	}
	var hung []string
	for _, o := range slices.Sorted(maps.Keys(v.InFlight)) {
		hung = append(hung, fmt.Sprintf("%s (%g in flight)", o, v.InFlight[o]))
	}
	return &v, "", fmt.Errorf("model %s: hung sleep-mode operation %s: vllm:rl_sleep_mode_operations_in_flight (or branch code's unprefixed gauge) still above 0 %v after the %s call returned",
		label, strings.Join(hung, ", "), wait, op)
}

// errored is the error for the failed operations the server counted
// beyond base (its counts at the last verification; nil: zeros) though
// the op call (and every call since base) answered success; nil when none.
func errored(label, op string, base, now map[string]float64) error {
	var grew []string
	for _, o := range slices.Sorted(maps.Keys(now)) {
		if now[o] > base[o] {
			grew = append(grew, fmt.Sprintf(`%s (vllm:rl_sleep_mode_operations_total{operation=%q,status="error"} %g → %g)`, o, o, base[o], now[o]))
		}
	}
	if len(grew) == 0 {
		return nil
	}
	return fmt.Errorf("model %s: the server counted a failed sleep-mode operation %s, though the %s call (and every call since the last verification) answered success: the engine reports an operation that errored",
		label, strings.Join(grew, ", "), op)
}

// unreadable is the verification after op that a failed /metrics read
// (err) left undone.
func unreadable(op string, err error) string {
	return fmt.Sprintf("after %s: GET /metrics: %v (no check for an unknown resource, a hung operation or an errored one could be made)", op, err)
}

// verifyEngine is checkEngine on label's server after op; a verification
// it could not make is kept for Unverified. A failed operation the server
// counted since the last verification (or the count read after a failed
// call, opFailed) is an error too (errored); where that count could not
// be read, this one is only read anew.
func (s *servers) verifyEngine(ctx context.Context, label, op string) error {
	v, why, err := checkEngine(ctx, label, op, s.metricsOf(label), s.poll())
	s.mu.Lock()
	defer s.mu.Unlock()
	if why != "" {
		if s.unverified == nil {
			s.unverified = map[string][]string{}
		}
		s.unverified[label] = append(s.unverified[label], why)
	}
	m := s.models[label]
	if v == nil || m == nil || !v.OpsExported {
		return err
	}
	if !m.opErrorsStale && err == nil {
		err = errored(label, op, m.opErrors, v.OpErrors)
	}
	m.opErrors, m.opErrorsStale = v.OpErrors, false
	return err
}

// opFailed notes that a call to m's server failed, which the server may
// have counted (vLLM records an operation before it answers): the count
// is read now and becomes the next verification's base; where it cannot
// be read, the next verification reads it anew and judges nothing.
func (s *servers) opFailed(ctx context.Context, m *model) {
	ms, err := s.metricsOf(m.cfg.Label)(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		m.opErrorsStale = true
		return
	}
	m.opErrors, m.opErrorsStale = ms.SleepView().OpErrors, false
}

// Unverified is, label → why, every sleep-mode verification after a sleep,
// wake, pause or KV release that could not be made because the server's
// /metrics could not be read, in the order they were tried.
func (f *Pool) Unverified() map[string][]string {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	out := make(map[string][]string, len(f.s.unverified))
	for l, ws := range f.s.unverified {
		out[l] = slices.Clone(ws)
	}
	return out
}

func unknownErr(label, op string, v vllm.SleepView) error {
	return fmt.Errorf("model %s: resource %s in state unknown after %s (a failed memory RPC): vLLM refuses every later sleep and wake; only a restart recovers",
		label, strings.Join(v.Unknown, ", "), op)
}

// metricsOf is the read of label's /metrics.
func (s *servers) metricsOf(label string) metricsRead {
	return func(ctx context.Context) (vllm.Metrics, error) { return Engine{s: s}.Metrics(ctx, label) }
}

// poll is the config's poll interval.
func (s *servers) poll() time.Duration {
	return time.Duration(s.cfg.Timeouts.PollMS * float64(time.Millisecond))
}

// sleptBy is what a sleep at level puts to sleep, as vLLM's tags name it
// (level 0 pauses the scheduler only: docs/vllm-api.md §2).
func sleptBy(level int) []string {
	if level == 0 {
		return []string{"scheduling"}
	}
	return []string{"weights", "kv_cache", "scheduling"}
}

// confirmAwake verifies a wake whose answer said awake: /is_sleeping
// must be false and the sleep metrics must say fully awake
// (notFullyAwake). It names the step that failed.
func confirmAwake(ctx context.Context, c *vllm.Client, read metricsRead) (step string, err error) {
	asleep, err := c.IsSleeping(ctx)
	if err != nil {
		return "is_sleeping", err
	}
	if asleep {
		return "is_sleeping", errors.New("wake answered 200 but /is_sleeping is still true")
	}
	return "sleep metrics", notFullyAwake(ctx, read)
}

// notFullyAwake reads the server's sleep state after a wake and fails one
// that says it is not fully awake: engine_fully_awake 0 where the new
// families are exported, else engine_sleep_state with all three labels 0
// (docs/vllm-api.md §7: a pause, a released KV cache; a partial wake only
// in the proposed API, as a release records awake after any wake). A
// state that may trail the answer is read again once, a moment later. A
// server that exports neither, or a /metrics that cannot be read, passes.
func notFullyAwake(ctx context.Context, read metricsRead) error {
	var v vllm.SleepView
	for try := range 2 {
		if try > 0 {
			if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
		ms, err := read(ctx)
		if err != nil {
			return nil
		}
		v = ms.SleepView()
		if (v.Exported && v.FullyAwake) || (!v.Exported && v.Legacy != vllm.LegacyNotFullyAwake) {
			return nil
		}
	}
	if v.Exported {
		var not []string
		for _, r := range slices.Sorted(maps.Keys(v.Resources)) {
			if st := v.Resources[r]; st != "resident" && st != "running" {
				not = append(not, r+"="+st)
			}
		}
		return fmt.Errorf("the wake answered, but vllm:engine_fully_awake is 0: %s", strings.Join(not, ", "))
	}
	return errors.New("the wake answered, but vllm:engine_sleep_state has all three labels 0: not fully awake")
}
