package gpu

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type counting struct {
	n         atomic.Uint64
	failEvery uint64
}

func (c *counting) Describe() (string, error) { return "counter", nil }
func (c *counting) Read(context.Context) (Reading, error) {
	n := c.n.Add(1)
	if c.failEvery > 0 && n%c.failEvery == 0 {
		return Reading{}, errors.New("read failed")
	}
	return Reading{Used: n, Total: 100}, nil
}

func TestSamplerKeepsEverySampleInOrder(t *testing.T) {
	src := &counting{failEvery: 5}
	s := NewSampler(src, 2*time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()

	mark := time.Now()
	first, err := s.After(t.Context(), mark)
	require.NoError(t, err)
	assert.False(t, first.Time.Before(mark))
	now, err := s.SampleNow(t.Context())
	require.NoError(t, err)
	time.Sleep(30 * time.Millisecond)
	cancel()
	<-done

	all := s.Samples()
	require.NotEmpty(t, all)
	for i := 1; i < len(all); i++ {
		assert.False(t, all[i].Time.Before(all[i-1].Time), "samples sorted by time")
	}
	errs, last := s.Errors()
	assert.Positive(t, errs)
	assert.EqualError(t, last, "read failed")
	assert.Equal(t, int(src.n.Load())-errs, len(all), "every successful read is kept")
	b, ok := s.Before(now.Time)
	require.True(t, ok)
	assert.Equal(t, now.Used, b.Used)
	_, ok = s.Before(mark.Add(-time.Hour))
	assert.False(t, ok)

	_, err = s.After(t.Context(), time.Now().Add(time.Hour))
	assert.ErrorContains(t, err, "stopped", "waiting on a stopped sampler ends")
}

func TestAfterHonoursContext(t *testing.T) {
	s := NewSampler(&counting{}, time.Hour) // never run
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := s.After(ctx, time.Now())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
