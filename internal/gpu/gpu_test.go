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

// TestSamplerStaysBounded: past its limit the sampler thins its older
// samples, keeping the peak and the recent samples exact, so a soak of
// days holds a bounded number of samples.
func TestSamplerStaysBounded(t *testing.T) {
	src := &counting{}
	s := NewSampler(src, time.Hour)
	s.limit = 100
	var peakAt time.Time
	for i := range 10_000 {
		x, err := s.SampleNow(t.Context())
		require.NoError(t, err)
		if i == 500 {
			peakAt = x.Time
		}
	}
	kept := s.Samples()
	assert.LessOrEqual(t, len(kept), 100)
	assert.Greater(t, len(kept), 50)
	assert.Equal(t, 10_000-len(kept), s.Thinned())
	for i := 1; i < len(kept); i++ {
		assert.True(t, kept[i].Time.After(kept[i-1].Time), "still in time order")
	}
	assert.Equal(t, uint64(10_000), kept[len(kept)-1].Used, "the newest sample is kept")
	assert.Equal(t, uint64(9_999), kept[len(kept)-2].Used, "recent samples at full resolution")
	assert.Equal(t, uint64(1), kept[0].Used, "the run's first sample stays")
	_, ok := s.Before(peakAt)
	assert.True(t, ok, "an old time still finds a sample before it")
}

// TestThinKeepsThePeak: thinning keeps the larger of each pair, so the
// device's peak survives any amount of it.
func TestThinKeepsThePeak(t *testing.T) {
	s := NewSampler(&counting{}, time.Hour)
	t0 := time.Unix(1_700_000_000, 0)
	for i, used := range []uint64{1, 9, 2, 3, 50, 4, 5, 6, 7, 8} {
		s.samples = append(s.samples, Sample{Time: t0.Add(time.Duration(i) * time.Second), Reading: Reading{Used: used}})
	}
	s.thin()
	var used []uint64
	for _, x := range s.samples {
		used = append(used, x.Used)
	}
	assert.Equal(t, []uint64{1, 9, 50, 4, 5, 6, 7, 8}, used, "the first stays; pairs of the older half keep their larger")
	assert.Equal(t, 2, s.Thinned())
}

// BenchmarkSamplerMemory: the bytes a sampler holds after b.N samples with
// a few processes each; flat once past MaxKept.
func BenchmarkSamplerMemory(b *testing.B) {
	s := NewSampler(&counting{}, time.Hour)
	for b.Loop() {
		if _, err := s.SampleNow(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(s.Samples())), "samples-kept")
}
