package protocol

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/server"
)

// bumpCall is a sleep call during which the tree's RSS rises by bump for
// hold, as vLLM's level-1 sleep allocates its pinned backup and a
// transient copy buffer; rss is what a read sees.
func bumpCall(rss *atomic.Uint64, base, bump uint64, hold time.Duration) func() error {
	return func() error {
		rss.Store(base + bump)
		time.Sleep(hold)
		rss.Store(base)
		time.Sleep(hold / 4)
		return nil
	}
}

// TestSleepPeakFollowsTheAllocation: the transient host peak during a
// sleep call is the allocation the call makes (a bigger one shows bigger),
// and a read of the host memory 15× slower than the poll interval still
// finds it (the figure stays).
func TestSleepPeakFollowsTheAllocation(t *testing.T) {
	const base = 10 << 30
	for _, tc := range []struct {
		name  string
		bump  uint64
		delay time.Duration
	}{
		{"1 GiB", 1 << 30, 0},
		{"3 GiB", 3 << 30, 0},
		{"3 GiB, slow reads", 3 << 30, 75 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rss atomic.Uint64
			rss.Store(base)
			read := func() (server.HostMemory, error) {
				time.Sleep(tc.delay)
				return server.HostMemory{RSS: rss.Load()}, nil
			}
			peak, err := peakDuring(t.Context(), hostPoll, read, bumpCall(&rss, base, tc.bump, 300*time.Millisecond))
			require.NoError(t, err)
			assert.Equal(t, uint64(base+tc.bump), peak)
		})
	}
}

// TestPeakDuringStops: the poller ends with the call (no goroutine left
// reading) and returns the call's error.
func TestPeakDuringStops(t *testing.T) {
	var reads atomic.Int64
	read := func() (server.HostMemory, error) { reads.Add(1); return server.HostMemory{RSS: 1}, nil }
	_, err := peakDuring(t.Context(), time.Millisecond, read, func() error { time.Sleep(20 * time.Millisecond); return context.Canceled })
	assert.ErrorIs(t, err, context.Canceled)
	n := reads.Load()
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, n, reads.Load(), "no read after the call returned")
	assert.Positive(t, n)
}

// TestTransitionJ: the energy over exactly [start, end], whatever time the
// readings around it took: the same transition read at once or 400 ms
// before and after gives the same joules; more power during it, more.
func TestTransitionJ(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// A counter drawing 100 W before start, 300 W in [start, end] (2 s),
	// 50 W after.
	start, end := t0.Add(time.Second), t0.Add(3*time.Second)
	counter := func(t time.Time, during float64) energyReading {
		s := t.Sub(t0).Seconds()
		j := 100 * min(s, 1)
		if s > 1 {
			j += during * (min(s, 3) - 1)
		}
		if s > 3 {
			j += 50 * (s - 3)
		}
		return energyReading{t: t, j: []float64{j / 2, j / 2}} // two GPUs
	}
	tight := transitionJ(counter(start, 300), counter(end, 300), start, end, 100, 50)
	slow := transitionJ(counter(start.Add(-400*time.Millisecond), 300), counter(end.Add(400*time.Millisecond), 300), start, end, 100, 50)
	assert.InDelta(t, 600, tight, 1e-9)
	assert.InDelta(t, 600, slow, 1e-9, "the reads' 0.8 s are left out")
	assert.InDelta(t, 900, transitionJ(counter(start, 450), counter(end, 450), start, end, 100, 50), 1e-9)
	assert.True(t, isNaN(transitionJ(energyReading{}, counter(end, 1), start, end, 1, 1)), "no counter: absent, not 0")
}

func isNaN(x float64) bool { return x != x }
