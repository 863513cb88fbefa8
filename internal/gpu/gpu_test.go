package gpu

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/simgpu"
)

func TestSimSourceReadsTheDevice(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, simgpu.Create(dir, simgpu.Device{Name: "NVIDIA L20", TotalBytes: 48 << 30, ReservedBytes: 1 << 29}))
	require.NoError(t, simgpu.Publish(dir, simgpu.Process{PID: os.Getpid(), UsedBytes: 10 << 30}))
	src := NewSimSource(dir)
	name, err := src.Describe()
	require.NoError(t, err)
	assert.Equal(t, "NVIDIA L20 (simulated)", name)
	r, err := src.Read(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(48<<30), r.Total)
	assert.Equal(t, uint64(10<<30+1<<29), r.Used)
	assert.Equal(t, uint64(10<<30), ProcsUsed(r, []int{os.Getpid(), 999999}))
}

// counting yields Used = 1, 2, 3, … and fails every failEvery-th read.
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

// BenchmarkSimSourceRead is one read of the simulated GPU with two
// processes (the work of a sample, without the wake-up around it).
func BenchmarkSimSourceRead(b *testing.B) {
	dir := b.TempDir()
	require.NoError(b, simgpu.Create(dir, simgpu.Device{Name: "Sim", TotalBytes: 16 << 30}))
	for i, pid := range []int{os.Getpid(), os.Getppid()} {
		require.NoError(b, simgpu.Publish(dir, simgpu.Process{PID: pid, Model: "m", UsedBytes: uint64(i+1) << 30}))
	}
	src := NewSimSource(dir)
	b.ReportAllocs()
	for b.Loop() {
		r, err := src.Read(b.Context())
		if err != nil || len(r.Procs) != 2 {
			b.Fatal(r, err)
		}
	}
}
