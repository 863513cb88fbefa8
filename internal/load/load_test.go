package load

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/vllm"
)

// fake answers after a fixed delay with n tokens spaced gap apart; it
// records the highest number of requests in flight at once.
type fake struct {
	delay, gap time.Duration
	tokens     int
	failEvery  int
	calls      atomic.Int64
	inflight   atomic.Int64
	mu         sync.Mutex
	peak       int64
}

func (f *fake) Complete(ctx context.Context, r vllm.CompletionRequest) (*vllm.Stream, error) {
	n := f.calls.Add(1)
	cur := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	f.mu.Lock()
	f.peak = max(f.peak, cur)
	f.mu.Unlock()
	s := &vllm.Stream{Sent: time.Now(), PromptTokens: 7}
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return s, ctx.Err()
	}
	if f.failEvery > 0 && n%int64(f.failEvery) == 0 {
		return s, errors.New("boom")
	}
	t := s.Sent.Add(f.delay)
	for range f.tokens {
		s.Tokens = append(s.Tokens, t)
		t = t.Add(f.gap)
	}
	s.OutputTokens = f.tokens
	return s, nil
}

// TestRunRespectsConcurrencyAndCounts runs on synctest's clock, which the
// test controls: time moves only by the fake server's delays, so a round's
// wall time is known in advance (7 requests at concurrency 3: three waves
// of the server's delay) and so is its tok/s, from the tokens the fake
// sends; a server twice as slow halves it.
func TestRunRespectsConcurrencyAndCounts(t *testing.T) {
	for _, delay := range []time.Duration{20 * time.Millisecond, 40 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{delay: delay, gap: time.Millisecond, tokens: 10}
				res := Run(t.Context(), f, Plan{Concurrency: 3, Rounds: 2, RequestsPerRound: 7})
				assert.Equal(t, int64(14), f.calls.Load())
				assert.Equal(t, int64(3), f.peak, "never more than the concurrency in flight")
				require.Len(t, res.Rounds, 2)
				require.Len(t, res.Requests, 14)
				assert.Equal(t, 14, res.Success())
				wall := 3 * delay               // three waves: 3 + 3 + 1 requests
				want := 7 * 10 / wall.Seconds() // 7 requests of 10 tokens each
				for _, r := range res.Rounds {
					assert.True(t, r.Passed())
					assert.Equal(t, 70, r.OutputTokens)
					assert.Equal(t, wall, r.End.Sub(r.Start), "first sent → last finished")
					assert.InDelta(t, want, r.TPS, 1e-9, "tok/s")
				}
				// In send order, wave after wave: the regression gate reads a
				// stage's first wave as its first Concurrency requests
				// (gate.serveWaves), through bench.txt's order.
				for i, q := range res.Requests {
					wave := i % 7 / 3
					assert.Equal(t, time.Duration(wave)*delay, q.Sent.Sub(res.Rounds[i/7].Start), "request %d of round %d: sent in wave %d", i%7, i/7, wave)
				}
				for _, q := range res.Requests {
					assert.Equal(t, delay, q.TTFT)
					assert.True(t, q.HasTPOT)
					assert.Equal(t, time.Millisecond, q.TPOT)
					assert.Equal(t, 7, q.PromptTokens)
				}
			})
		})
	}
}

func TestRunRecordsFailuresAndValidation(t *testing.T) {
	f := &fake{delay: time.Millisecond, gap: time.Millisecond, tokens: 4, failEvery: 4}
	res := Run(t.Context(), f, Plan{Concurrency: 1, Rounds: 2, RequestsPerRound: 4,
		Validate: func(s *vllm.Stream) error {
			if s.OutputTokens != 4 {
				return errors.New("short")
			}
			return nil
		}})
	assert.Equal(t, 6, res.Success())
	for _, r := range res.Rounds {
		assert.False(t, r.Passed())
		assert.Equal(t, 1, r.Failed)
		assert.Equal(t, 12, r.OutputTokens, "failed requests' tokens do not count")
	}

	res = Run(t.Context(), f, Plan{Concurrency: 2, Rounds: 1, RequestsPerRound: 2,
		Validate: func(*vllm.Stream) error { return errors.New("garbage output") }})
	assert.Equal(t, 0, res.Success())
	assert.ErrorContains(t, res.Requests[0].Err, "garbage output")
}

func TestRunTimesOutEachRequest(t *testing.T) {
	f := &fake{delay: time.Second, tokens: 2}
	start := time.Now()
	res := Run(t.Context(), f, Plan{Concurrency: 2, Rounds: 1, RequestsPerRound: 2, Timeout: 30 * time.Millisecond})
	assert.Less(t, time.Since(start), f.delay, "each request ends at its 30 ms timeout, not at the answer")
	assert.Equal(t, 0, res.Success())
	assert.ErrorIs(t, res.Requests[1].Err, context.DeadlineExceeded)
}

func TestRunStopsWhenCancelled(t *testing.T) {
	f := &fake{delay: time.Millisecond, tokens: 2}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := Run(ctx, f, Plan{Concurrency: 1, Rounds: 2, RequestsPerRound: 3})
	assert.Equal(t, int64(0), f.calls.Load())
	assert.Len(t, res.Requests, 6)
	assert.Equal(t, 0, res.Success())
}
