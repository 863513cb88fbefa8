package statecost

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
