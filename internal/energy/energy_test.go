package energy

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripted is an energy counter that returns its values in turn.
type scripted struct{ vals [][]float64 }

func (s *scripted) read(context.Context) ([]float64, error) {
	v := s.vals[0]
	s.vals = s.vals[1:]
	return v, nil
}

// TestMeterNamesACounterThatMisbehaves: a counter that goes backwards (a
// reset, a wrap) or stands still for a second is an anomaly: every figure
// across it is NaN with the reason, never a value (a cut of 5000 J once
// read as -2483.6 W and passed max_sleeping_power_w); figures on either
// side of it stay values.
func TestMeterNamesACounterThatMisbehaves(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name string
		j    [][]float64
		dt   []float64 // each reading's time
		want string
	}{
		{"backwards", [][]float64{{100}, {5200}, {200}, {300}}, []float64{0, 2, 4, 6}, "went backwards on GPU 0 (5200.000 J, then 200.000 J"},
		{"wrap on the second GPU", [][]float64{{1, 100}, {2, 200}, {3, 50}, {4, 150}}, []float64{0, 2, 4, 6}, "went backwards on GPU 1"},
		{"stalled", [][]float64{{100}, {300}, {300}, {500}}, []float64{0, 2, 4, 6}, "stalled on GPU 0 (300.000 J for 2.000 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &scripted{vals: tc.j}
			i := 0
			m := &Meter{read: src.read, clock: func() time.Time { i++; return at(tc.dt[i-1]) }}
			var rs []Reading
			for range tc.j {
				r, err := m.Now(t.Context())
				require.NoError(t, err)
				rs = append(rs, r)
			}
			// Readings 1 → 2 span the anomaly; 0 → 1 and 2 → 3 do not.
			assert.Contains(t, m.bad, tc.want)
			assert.False(t, math.IsNaN(Joules(rs[0], rs[1])), "before it: a value")
			assert.False(t, math.IsNaN(Joules(rs[2], rs[3])), "after it: a value")
			for _, span := range [][2]int{{1, 2}, {0, 3}, {0, 2}} {
				a, b := rs[span[0]], rs[span[1]]
				assert.True(t, math.IsNaN(Joules(a, b)), "across it (%d → %d): unreadable", span[0], span[1])
				assert.True(t, math.IsNaN(PowerOver(a, b)))
				assert.True(t, math.IsNaN(TransitionJ(a, b, a.t, b.t, 1, 1)))
				j, why := IntervalJ(a, b, b.t, m)
				assert.True(t, math.IsNaN(j))
				assert.Equal(t, m.bad, why, "its reason is the anomaly")
			}
			j, why := IntervalJ(rs[2], rs[3], rs[3].t, m)
			assert.Empty(t, why)
			want := 0.0
			for g := range tc.j[3] {
				want += tc.j[3][g] - tc.j[2][g]
			}
			assert.InDelta(t, want, j, 1e-9, "after it: the counter's difference")
		})
	}
}

// TestMeterMovingCounter: a counter that moves, however slowly, and
// readings closer than a second with no change (a counter between its
// power samples) are no anomaly; one that stays put for a second over
// many close readings (a trace's, 50 ms apart) is stalled.
func TestMeterMovingCounter(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	run := func(vals [][]float64, dt float64) (*Meter, []Reading) {
		i := 0
		m := &Meter{read: (&scripted{vals: vals}).read, clock: func() time.Time { i++; return at(float64(i) * dt) }}
		var rs []Reading
		for range vals {
			r, err := m.Now(t.Context())
			require.NoError(t, err)
			rs = append(rs, r)
		}
		return m, rs
	}
	m, rs := run([][]float64{{100}, {100}, {100.001}, {150}}, 0.3)
	assert.Empty(t, m.bad)
	assert.InDelta(t, 50, Joules(rs[0], rs[3]), 1e-9)

	flat := [][]float64{{100}}
	for range 30 { // 30 readings 50 ms apart, all 100 J: 1.5 s without a change
		flat = append(flat, []float64{100})
	}
	m, rs = run(flat, 0.05)
	assert.Contains(t, m.bad, "stalled on GPU 0 (100.000 J for 1.000 s")
	assert.True(t, math.IsNaN(Joules(rs[0], rs[len(rs)-1])), "a run over a stalled counter is unreadable, not 0 J")
}

// TestTraceAcrossACut: the traffic phase's trace interpolates between
// readings; an interval whose interpolation crosses the anomaly is NaN
// with why, one that lies after it is a value.
func TestTraceAcrossACut(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := &Meter{bad: "the GPU energy counter went backwards on GPU 0"}
	tr := &Trace{m: m, pts: []Reading{
		{t: t0, j: []float64{100}}, {t: t0.Add(time.Second), j: []float64{200}},
		{t: t0.Add(2 * time.Second), j: []float64{10}, gen: 1}, {t: t0.Add(3 * time.Second), j: []float64{110}, gen: 1},
	}}
	j, why := tr.Between(t0.Add(500*time.Millisecond), t0.Add(2500*time.Millisecond))
	assert.True(t, math.IsNaN(j))
	assert.Equal(t, m.bad, why)
	j, why = tr.Between(t0.Add(1500*time.Millisecond), t0.Add(1900*time.Millisecond))
	assert.True(t, math.IsNaN(j), "interpolated between the readings either side of the cut")
	assert.NotEmpty(t, why)
	j, why = tr.Between(t0.Add(2100*time.Millisecond), t0.Add(2900*time.Millisecond))
	assert.Empty(t, why)
	assert.InDelta(t, 80, j, 1e-9, "after the cut: 100 J/s × 0.8 s")
}

// TestTransitionJ: the energy over exactly [start, end], whatever time the
// readings around it took: the same transition read at once or 400 ms
// before and after gives the same joules; more power during it, more.
func TestTransitionJ(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// A counter drawing 100 W before start, 300 W in [start, end] (2 s),
	// 50 W after.
	start, end := t0.Add(time.Second), t0.Add(3*time.Second)
	counter := func(t time.Time, during float64) Reading {
		s := t.Sub(t0).Seconds()
		j := 100 * min(s, 1)
		if s > 1 {
			j += during * (min(s, 3) - 1)
		}
		if s > 3 {
			j += 50 * (s - 3)
		}
		return Reading{t: t, j: []float64{j / 2, j / 2}} // two GPUs
	}
	tight := TransitionJ(counter(start, 300), counter(end, 300), start, end, 100, 50)
	slow := TransitionJ(counter(start.Add(-400*time.Millisecond), 300), counter(end.Add(400*time.Millisecond), 300), start, end, 100, 50)
	assert.InDelta(t, 600, tight, 1e-9)
	assert.InDelta(t, 600, slow, 1e-9, "the reads' 0.8 s are left out")
	assert.InDelta(t, 900, TransitionJ(counter(start, 450), counter(end, 450), start, end, 100, 50), 1e-9)
	assert.True(t, isNaN(TransitionJ(Reading{}, counter(end, 1), start, end, 1, 1)), "no counter: absent, not 0")
}

func isNaN(x float64) bool { return x != x }

// TestWithout: a switch's 50 J (200 W over its 0.25 s of /sleep and
// wake) drawn around a 1 s span the harness spends reading at 40 W: the
// span's reading a comes 0.2 s after the sleep's answer (its own latency),
// b as the span ends. By hand: the span's 0.8 s measured hold 32 J; at
// that mean power its whole 1 s holds 40 J; 90 J − 40 J = 50 J.
func TestWithout(t *testing.T) {
	t0 := time.Unix(1000, 0)
	answer := t0.Add(100 * time.Millisecond)
	at := func(d time.Duration, j float64) Reading { return Reading{t: answer.Add(d), j: []float64{j}} }
	a, b := at(200*time.Millisecond, 1000+0.2*40), at(time.Second, 1000+40)
	j, why := Without(90, "", a, b, answer, &Meter{})
	assert.Empty(t, why)
	assert.InDelta(t, 50, j, 1e-9)
	j, _ = Without(math.NaN(), "no counter", a, b, answer, &Meter{})
	assert.True(t, isNaN(j), "an unknown interval stays unknown")
	j, _ = Without(90, "", Reading{}, b, answer, &Meter{})
	assert.True(t, isNaN(j), "an unknown span leaves the interval unknown, never the whole 90 J")
}
