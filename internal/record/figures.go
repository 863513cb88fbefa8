package record

import (
	"math"
	"slices"

	"github.com/wakebench/wakebench/internal/stats"
)

// The figures a phase's threshold checks judge and report.json summarises
// are built by one function each (issue 51: "each median built once"),
// which both call, the check when its phase ends and report.Build at the
// run's: which samples make a sleep level's or a switch direction's
// figures (a cycle that failed, a residual not known) is decided in
// LevelOf and DirectionsOf, and one summariser turns them into the median
// and p95 that both read.

// Summary is how a run summarises its samples (stats.Summarize: n, median,
// min, max, p95 by nearest rank), the zero Summary (N 0) for none and for
// a series with a NaN in it (stats.Summarize refuses it): N 0 is "no
// figure".
func Summary(xs []float64) stats.Summary {
	s, err := stats.Summarize(xs)
	if err != nil {
		return stats.Summary{}
	}
	return s
}

// Trend is how a run fits a series' growth per sample (stats.FitTrend, its
// 95 % interval), nil for a series too short to fit (under 3).
func Trend(ys []float64) *stats.Trend {
	tr, err := stats.FitTrend(ys)
	if err != nil {
		return nil
	}
	return &tr
}

// AppendKnown appends x to xs unless it is NaN (a figure not known).
func AppendKnown(xs []float64, x float64) []float64 {
	if math.IsNaN(x) {
		return xs
	}
	return append(xs, x)
}

// LevelSeries are the figures of a model's successful cycles at one level,
// each in cycle order: every successful cycle's times, and the memory and
// pause figures of those where they are known.
type LevelSeries struct {
	Sleep, Wake, FirstToken []float64 // SleepS, WakeAPIS, ToFirstTokenS of each
	Residual                []float64 // ResidualGiB where known
	// WorstGPUResidual is each cycle's largest per-GPU residual, for a
	// model across GPUs (ResidualPerGPU of two or more).
	WorstGPUResidual []float64
	// Level 0 and the KV-only release: FreedGiB, ReleaseS, HeldS,
	// HeldPastWakeS where known (NaN: not known). A level-1 or level-2
	// cycle leaves them 0, not NaN: these series are of no meaning there.
	Freed, Release, Held, HeldPastWake []float64
	// ReleaseEach is every successful cycle's ReleaseS, known or not, and
	// Engines its engine account (nil where none): one for each cycle, as
	// Sleep and Wake, to be paired with them by index.
	ReleaseEach []float64
	Engines     []*Engine
}

// LevelOf is the series of cycles' successful ones at level (a model's
// cycles, of any level).
func LevelOf(cycles []Cycle, level int) LevelSeries {
	var s LevelSeries
	for _, c := range cycles {
		if c.Level != level || !c.OK {
			continue
		}
		s.Sleep, s.Wake, s.FirstToken = append(s.Sleep, c.SleepS), append(s.Wake, c.WakeAPIS), append(s.FirstToken, c.ToFirstTokenS)
		s.Residual = AppendKnown(s.Residual, c.ResidualGiB)
		if len(c.ResidualPerGPU) > 1 {
			s.WorstGPUResidual = append(s.WorstGPUResidual, slices.Max(c.ResidualPerGPU))
		}
		s.Freed, s.Release = AppendKnown(s.Freed, c.FreedGiB), AppendKnown(s.Release, c.ReleaseS)
		s.Held, s.HeldPastWake = AppendKnown(s.Held, c.HeldS), AppendKnown(s.HeldPastWake, c.HeldPastWakeS)
		s.ReleaseEach, s.Engines = append(s.ReleaseEach, c.ReleaseS), append(s.Engines, c.Engine)
	}
	return s
}

// DirectionSeries are the figures of the successful handoffs of one
// direction (DirectionKey), in order.
type DirectionSeries struct {
	FirstToken, Sleep, Wake []float64 // ToFirstTokenS, SleepS, WakeS of each
	EnergyJ                 []float64 // where known
	Engines                 []*Engine
}

// DirectionsOf are handoffs' successful ones (the initial activation left
// out) by direction.
func DirectionsOf(handoffs []Handoff) map[string]*DirectionSeries {
	out := map[string]*DirectionSeries{}
	for _, h := range handoffs {
		if h.Initial || !h.OK {
			continue
		}
		k := DirectionKey(h.From, h.To)
		d := out[k]
		if d == nil {
			d = &DirectionSeries{}
			out[k] = d
		}
		d.FirstToken, d.Sleep, d.Wake = append(d.FirstToken, h.ToFirstTokenS), append(d.Sleep, h.SleepS), append(d.Wake, h.WakeS)
		d.EnergyJ = AppendKnown(d.EnergyJ, h.EnergyJ)
		d.Engines = append(d.Engines, h.Engine)
	}
	return out
}
