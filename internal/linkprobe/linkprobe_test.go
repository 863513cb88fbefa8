package linkprobe

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeLink copies at given rates: a run of count copies takes count × bytes over the rate of
// that run (the runs' rates in turn, the last repeating).
type fakeLink struct {
	bytes        uint64
	h2d, d2h     []float64 // GB/s per run of copies
	nh, nd       []int     // the count of each run asked for
	failD2HAfter int       // > 0: the run after this many device→host runs fails
}

func took(bytes uint64, count int, rates []float64, run int) time.Duration {
	r := rates[min(run, len(rates)-1)]
	return time.Duration(float64(bytes) * float64(count) / (r * 1e9) * float64(time.Second))
}
func (f *fakeLink) HtoD(count int) (time.Duration, error) {
	d := took(f.bytes, count, f.h2d, len(f.nh))
	f.nh = append(f.nh, count)
	return d, nil
}
func (f *fakeLink) DtoH(count int) (time.Duration, error) {
	if f.failD2HAfter > 0 && len(f.nd) >= f.failD2HAfter {
		return 0, errors.New("cuMemcpyDtoH_v2: CUDA_ERROR_ILLEGAL_ADDRESS (700)")
	}
	d := took(f.bytes, count, f.d2h, len(f.nd))
	f.nd = append(f.nd, count)
	return d, nil
}

// A hand computation: 64 MiB copies, 16 a trial, 3 trials. Host→device: the warm-up (one copy)
// at 1 GB/s, left out, then trials at 50, 40 and 55 GB/s: median 50, best 55. Device→host at a
// steady 25 GB/s after a 5 GB/s warm-up.
func TestMeasure(t *testing.T) {
	l := &fakeLink{bytes: DefaultBytes, h2d: []float64{1, 50, 40, 55}, d2h: []float64{5, 25}}
	r, err := Measure(context.Background(), l, Options{})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 16, 16, 16}, l.nh, "a warm-up copy, then three trials of 16")
	assert.Equal(t, []int{1, 16, 16, 16}, l.nd)
	assert.InDeltaSlice(t, []float64{50, 40, 55}, r.H2DTrialsGBps, 1e-4, "nanosecond rounding of the fake durations")
	assert.InEpsilon(t, 50, r.H2DGBps, 1e-5)
	assert.InEpsilon(t, 55, r.H2DBestGBps, 1e-5)
	assert.InEpsilon(t, 25, r.D2HGBps, 1e-5)
	assert.Equal(t, Result{Bytes: 64 << 20, LoopCount: 16, Trials: 3}, Result{Bytes: r.Bytes, LoopCount: r.LoopCount, Trials: r.Trials})
}

func TestMeasureFails(t *testing.T) {
	l := &fakeLink{bytes: 1 << 20, h2d: []float64{10}, d2h: []float64{10}, failD2HAfter: 3}
	_, err := Measure(context.Background(), l, Options{Bytes: 1 << 20})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "link probe, device to host: cuMemcpyDtoH_v2")

	_, err = Measure(context.Background(), &fakeLink{bytes: 0, h2d: []float64{1}, d2h: []float64{1}}, Options{Bytes: 1})
	assert.ErrorContains(t, err, "a trial took no time")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Measure(ctx, &fakeLink{bytes: 1, h2d: []float64{1}, d2h: []float64{1}}, Options{Bytes: 1})
	assert.ErrorIs(t, err, context.Canceled)
}
