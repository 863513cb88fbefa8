package linkprobe

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeLink copies at given rates on a clock of its own: each copy advances it by the bytes
// over the rate of that trial.
type fakeLink struct {
	now          time.Time
	bytes        uint64
	h2d, d2h     []float64 // GB/s per copy, in turn (the last repeats)
	nh, nd       int
	failD2HAfter int // > 0: the copy after this many device→host ones fails
}

func (f *fakeLink) advance(rates []float64, n int) {
	r := rates[min(n, len(rates)-1)]
	f.now = f.now.Add(time.Duration(float64(f.bytes) / (r * 1e9) * float64(time.Second)))
}
func (f *fakeLink) CopyHtoD() error { f.advance(f.h2d, f.nh); f.nh++; return nil }
func (f *fakeLink) CopyDtoH() error {
	if f.failD2HAfter > 0 && f.nd >= f.failD2HAfter {
		return errors.New("cuMemcpyDtoH_v2: CUDA_ERROR_ILLEGAL_ADDRESS (700)")
	}
	f.advance(f.d2h, f.nd)
	f.nd++
	return nil
}

// A hand computation: 64 MiB copies, 16 a trial, 3 trials. Host→device: the warm-up at 1
// GB/s (left out), then trials at 50, 40 and 55 GB/s: median 50, best 55. Device→host at a
// steady 25 GB/s after a 5 GB/s warm-up.
func TestMeasure(t *testing.T) {
	l := &fakeLink{now: time.Unix(0, 0), bytes: DefaultBytes}
	var h2d, d2h []float64
	h2d = append(h2d, 1)
	for _, r := range []float64{50, 40, 55} {
		for range 16 {
			h2d = append(h2d, r)
		}
	}
	d2h = []float64{5, 25}
	l.h2d, l.d2h = h2d, d2h
	r, err := Measure(context.Background(), l, Options{Now: func() time.Time { return l.now }})
	require.NoError(t, err)
	assert.Equal(t, 1+3*16, l.nh)
	assert.Equal(t, 1+3*16, l.nd)
	assert.InDeltaSlice(t, []float64{50, 40, 55}, r.H2DTrialsGBps, 1e-3, "nanosecond rounding of the fake clock")
	assert.InEpsilon(t, 50, r.H2DGBps, 1e-6)
	assert.InEpsilon(t, 55, r.H2DBestGBps, 1e-6)
	assert.InEpsilon(t, 25, r.D2HGBps, 1e-6)
	assert.Equal(t, Result{Bytes: 64 << 20, LoopCount: 16, Trials: 3}, Result{Bytes: r.Bytes, LoopCount: r.LoopCount, Trials: r.Trials})
}

func TestMeasureFails(t *testing.T) {
	l := &fakeLink{now: time.Unix(0, 0), bytes: 1 << 20, h2d: []float64{10}, d2h: []float64{10}, failD2HAfter: 3}
	_, err := Measure(context.Background(), l, Options{Bytes: 1 << 20, Now: func() time.Time { return l.now }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "link probe, device to host: cuMemcpyDtoH_v2")

	stopped := func() time.Time { return time.Unix(0, 0) }
	_, err = Measure(context.Background(), &fakeLink{bytes: 1, h2d: []float64{1}, d2h: []float64{1}}, Options{Bytes: 1, Now: stopped})
	assert.ErrorContains(t, err, "clock did not advance")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Measure(ctx, &fakeLink{bytes: 1, h2d: []float64{1}, d2h: []float64{1}}, Options{Bytes: 1})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
}
