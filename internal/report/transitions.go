package report

import (
	"bytes"
	"encoding/csv"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// FirstCycle is the first cycle of a series (a level's cycles, a
// direction's handoffs, a model's soak sleeps), kept apart from the steady
// state: vLLM's first level-1 sleep of a process allocates its pinned host
// buffer (pinned by cumem.py, cached by PyTorch's host allocator: pytorch/pytorch#275) and can take ten times the steady state.
type FirstCycle struct {
	SleepS        float64 `json:"sleep_s"`
	WakeS         float64 `json:"wake_s"` // the wake API time (wake_api_s of a level)
	ToFirstTokenS float64 `json:"to_first_token_s"`
}

// Steady is the series without its first cycle.
type Steady struct {
	N             int           `json:"n"`
	SleepS        stats.Summary `json:"sleep_s"`
	WakeS         stats.Summary `json:"wake_s"`
	ToFirstTokenS stats.Summary `json:"to_first_token_s"`
}

// firstSteady splits a series of (sleep, wake, first token) triples.
func firstSteady(sleep, wake, ftt []float64) (*FirstCycle, *Steady) {
	if len(sleep) == 0 {
		return nil, nil
	}
	f := &FirstCycle{SleepS: sleep[0], WakeS: wake[0], ToFirstTokenS: ftt[0]}
	return f, &Steady{N: len(sleep) - 1, SleepS: record.Summary(sleep[1:]), WakeS: record.Summary(wake[1:]), ToFirstTokenS: record.Summary(ftt[1:])}
}

// FirstSleep is a model's first sleep of each server process (level 1
// ones), whichever step made it (often an unmeasured sleep that made room
// for another model), against the level-1 steady state.
type FirstSleep struct {
	Processes          int           `json:"processes"`
	L1SleepS           stats.Summary `json:"level1_sleep_s"`
	SteadyL1SleepS     *float64      `json:"steady_level1_sleep_s"` // median of the level-1 cycles after the first; null without them
	RatioToSteadyState *float64      `json:"ratio_to_steady_state"` // median first / steady median; null when the steady one is absent or 0
}

// Correctness is a model's correctness oracle: its probe set and, per
// stage, what the replays after each wake found.
type Correctness struct {
	Basis      string                       `json:"basis"` // "token ids + logprobs", "token ids" or "text"
	Probes     []string                     `json:"probes"`
	ReferenceS float64                      `json:"reference_s"` // the probe set's wall time before the first sleep
	Stages     map[string]*CorrectnessStage `json:"stages"`      // by phase: "sleep-level1", "sleep-level2", "after-wake", "switch", "soak", …
}

// CorrectnessStage is the replays of one stage.
type CorrectnessStage struct {
	Replays         int           `json:"replays"`
	Probes          int           `json:"probes"`     // probes compared, all replays
	Mismatches      int           `json:"mismatches"` // probes that diverged
	Ties            int           `json:"ties"`       // probes that took the other side of a near-tie (not mismatches)
	Errors          int           `json:"errors"`     // replays that could not be made
	MaxLogprobDelta float64       `json:"max_logprob_delta"`
	ReplayS         stats.Summary `json:"replay_s"` // the oracle's cost per wake
	FirstDivergence *Divergence   `json:"first_divergence,omitempty"`
}

// Divergence is where a replay first differed from its reference.
type Divergence struct {
	Cycle    int    `json:"cycle"` // the stage's wake, 1-based
	Probe    string `json:"probe"`
	Position int    `json:"position"` // 1-based generated token
	Kind     string `json:"kind"`     // "token", "logprob", "length", "text"
	Detail   string `json:"detail"`
}

// correctness summarises a model's reference and replays; nil without a reference.
func correctness(ref record.Reference, ok bool, replays []record.Replay) *Correctness {
	if !ok {
		return nil
	}
	c := &Correctness{Basis: ref.Basis, Probes: ref.Probes, ReferenceS: ref.Seconds, Stages: map[string]*CorrectnessStage{}}
	costs := map[string][]float64{}
	for _, rp := range replays {
		st := c.Stages[rp.Stage]
		if st == nil {
			st = &CorrectnessStage{}
			c.Stages[rp.Stage] = st
		}
		st.Replays++
		if rp.Err != "" {
			st.Errors++
			continue
		}
		costs[rp.Stage] = append(costs[rp.Stage], rp.Seconds)
		for _, r := range rp.Results {
			st.Probes++
			st.MaxLogprobDelta = max(st.MaxLogprobDelta, r.MaxDelta)
			if r.Tie > 0 {
				st.Ties++
			}
			if !r.Match {
				st.Mismatches++
				if st.FirstDivergence == nil {
					st.FirstDivergence = &Divergence{Cycle: rp.Cycle, Probe: r.Probe, Position: r.Position, Kind: r.Kind, Detail: r.Detail}
				}
			}
		}
	}
	for k, xs := range costs {
		c.Stages[k].ReplayS = record.Summary(xs)
	}
	return c
}

// EngineFigures is the servers' own account of a series of sleeps and
// wakes beside the harness's: their log lines ("It took X seconds to fall
// asleep", "… to wake up tags", "Sleep mode freed X GiB") and their
// vllm:sleep_mode_operation_duration_seconds, and the HTTP time around
// each (overhead = HTTP − engine log).
type EngineFigures struct {
	Cycles       int           `json:"cycles"` // cycles with any engine figure
	SleepS       stats.Summary `json:"sleep_s"`
	WakeS        stats.Summary `json:"wake_s"`
	MetricSleepS stats.Summary `json:"metric_sleep_s"`
	MetricWakeS  stats.Summary `json:"metric_wake_s"`
	// MetricReleaseS is a KV-only release cycle's release, by the same
	// metric (operation release_kv_cache_memory); absent at the other
	// levels.
	MetricReleaseS    *stats.Summary `json:"metric_release_s,omitempty"`
	SleepOverheadS    stats.Summary  `json:"sleep_http_overhead_s"`
	WakeOverheadS     stats.Summary  `json:"wake_http_overhead_s"`
	FreedGiB          stats.Summary  `json:"freed_gib"`
	Disagreements     int            `json:"disagreements"`
	FirstDisagreement string         `json:"first_disagreement,omitempty"`
}

// engineFigures summarises engines against the HTTP sleep and wake times
// of the same cycles; nil when no cycle has an engine figure.
func engineFigures(engines []*record.Engine, httpSleep, httpWake []float64) *EngineFigures {
	var f EngineFigures
	var sl, wk, msl, mwk, mrl, osl, owk, fr []float64
	for i, e := range engines {
		if e == nil {
			continue
		}
		f.Cycles++
		sl, wk = record.AppendKnown(sl, e.SleepS), record.AppendKnown(wk, e.WakeS)
		msl, mwk, mrl = record.AppendKnown(msl, e.MetricSleepS), record.AppendKnown(mwk, e.MetricWakeS), record.AppendKnown(mrl, e.MetricReleaseS)
		wake := httpWake[i] // the wake's API time; its /wake_up calls' where known (level 2 has two more steps)
		if e.WakeCallsS > 0 {
			wake = e.WakeCallsS
		}
		osl, owk = record.AppendKnown(osl, httpSleep[i]-e.SleepS), record.AppendKnown(owk, wake-e.WakeS)
		fr = record.AppendKnown(fr, e.FreedGiB)
		if len(e.Disagreements) > 0 {
			f.Disagreements++
			if f.FirstDisagreement == "" {
				f.FirstDisagreement = "cycle " + strconv.Itoa(i+1) + ": " + e.Disagreements[0]
			}
		}
	}
	if f.Cycles == 0 {
		return nil
	}
	f.SleepS, f.WakeS, f.MetricSleepS, f.MetricWakeS = record.Summary(sl), record.Summary(wk), record.Summary(msl), record.Summary(mwk)
	if len(mrl) > 0 {
		s := record.Summary(mrl)
		f.MetricReleaseS = &s
	}
	f.SleepOverheadS, f.WakeOverheadS, f.FreedGiB = record.Summary(osl), record.Summary(owk), record.Summary(fr)
	return &f
}

// Soak is the soak phase.
type Soak struct {
	PlannedCycles int                   `json:"planned_cycles"`
	Cycles        int                   `json:"cycles"`
	Successful    int                   `json:"successful"`
	Level         int                   `json:"level"`
	Models        map[string]*SoakModel `json:"models"`
	// Headroom is the free memory before each wake less the woken model's
	// awake footprint: its minimum, its trend per cycle, and where the
	// trend is falling the cycles until it reaches zero (an OOM on wake).
	MinHeadroomGiB       float64      `json:"min_headroom_gib"`
	HeadroomTrendGiB     *stats.Trend `json:"headroom_trend_gib_per_cycle"` // null under 3 cycles
	ProjectedCyclesToOOM *float64     `json:"projected_cycles_to_oom"`      // null: headroom is not falling
	// EnergyNote says why the cycles have no energy (no counter); "" when they have.
	EnergyNote string `json:"energy_note,omitempty"`
}

// SoakModel is one model's sleeps in the soak.
type SoakModel struct {
	Sleeps         int           `json:"sleeps"`
	ResidualGiB    stats.Summary `json:"residual_gib"`
	ResidualSlope  *stats.Trend  `json:"residual_slope_mib_per_cycle"` // per sleep of this model, CI 95 %; null under 3 sleeps
	ReleasePercent stats.Summary `json:"release_percent"`
	RSSGiB         stats.Summary `json:"rss_gib"`
	RSSSlope       *stats.Trend  `json:"rss_slope_mib_per_cycle"`
	// The host memory of the slept model's process tree (read after the
	// woken model's first token, as the residual): RSSGiB with its locked
	// and pinned parts; HostSlope is RSSGiB's fitted slope per sleep of
	// this model in GiB (as the residual's: stats.FitTrend, CI 95 %, null
	// under 3), PinnedSlope the pinned part's.
	LockedGiB   stats.Summary `json:"locked_gib"`
	PinnedGiB   stats.Summary `json:"pinned_gib"`
	HostSlope   *stats.Trend  `json:"host_slope_gib_per_cycle"`
	PinnedSlope *stats.Trend  `json:"pinned_slope_gib_per_cycle"`
	// EnergyJ is the GPU energy of each of this model's cycles, /sleep
	// sent → the woken model's first token; EnergySlope its fitted slope
	// per cycle (J/cycle); n 0 and null without a counter.
	EnergyJ     stats.Summary  `json:"energy_j"`
	EnergySlope *stats.Trend   `json:"energy_slope_j_per_cycle"`
	First       *FirstCycle    `json:"first_cycle"`
	Steady      *Steady        `json:"steady_state"`
	Engine      *EngineFigures `json:"engine,omitempty"`
}

// soak summarises the soak cycles; nil when no soak was planned.
func soak(raw record.Raw) *Soak {
	if raw.SoakPlanned == 0 && len(raw.Soak) == 0 {
		return nil
	}
	s := &Soak{PlannedCycles: raw.SoakPlanned, Cycles: len(raw.Soak), Level: raw.SoakLevel, Models: map[string]*SoakModel{}}
	type series struct {
		resid, rel, rss, sleep, wake, ftt []float64
		locked, pinned, energy            []float64
		engines                           []*record.Engine
	}
	by := map[string]*series{}
	var headroom []float64
	for _, c := range raw.Soak {
		headroom = record.AppendKnown(headroom, c.HeadroomGiB)
		if !c.OK {
			continue
		}
		s.Successful++
		m := by[c.From]
		if m == nil {
			m = &series{}
			by[c.From] = m
		}
		m.resid, m.rel, m.rss = record.AppendKnown(m.resid, c.ResidualGiB), record.AppendKnown(m.rel, c.ReleasePct), record.AppendKnown(m.rss, c.RSSGiB)
		m.sleep, m.wake, m.ftt = append(m.sleep, c.SleepS), append(m.wake, c.WakeS), append(m.ftt, c.ToFirstTokenS)
		m.locked, m.pinned, m.energy = record.AppendKnown(m.locked, c.LockedGiB), record.AppendKnown(m.pinned, c.PinnedGiB), record.AppendKnown(m.energy, c.EnergyJ)
		if s.EnergyNote == "" {
			s.EnergyNote = c.EnergyNote
		}
		m.engines = append(m.engines, c.Engine)
	}
	residuals := record.ResidualSeriesMiB(raw.Soak)
	for _, l := range slices.Sorted(maps.Keys(by)) {
		m := by[l]
		sm := &SoakModel{Sleeps: len(m.sleep), ResidualGiB: record.Summary(m.resid),
			ReleasePercent: record.Summary(m.rel), RSSGiB: record.Summary(m.rss)}
		sm.ResidualSlope = record.Trend(residuals[l])
		mib := make([]float64, len(m.rss))
		for i, x := range m.rss {
			mib[i] = x * 1024
		}
		sm.RSSSlope = record.Trend(mib)
		sm.LockedGiB, sm.PinnedGiB, sm.EnergyJ = record.Summary(m.locked), record.Summary(m.pinned), record.Summary(m.energy)
		sm.HostSlope, sm.PinnedSlope, sm.EnergySlope = record.Trend(m.rss), record.Trend(m.pinned), record.Trend(m.energy)
		sm.First, sm.Steady = firstSteady(m.sleep, m.wake, m.ftt)
		sm.Engine = engineFigures(m.engines, m.sleep, m.wake)
		s.Models[l] = sm
	}
	if len(headroom) > 0 {
		s.MinHeadroomGiB = slices.Min(headroom)
	}
	if tr := record.Trend(headroom); tr != nil {
		s.HeadroomTrendGiB = tr
		if tr.Slope < 0 && tr.CIHigh < 0 && tr.Last > 0 {
			n := math.Ceil(tr.Last / -tr.Slope)
			s.ProjectedCyclesToOOM = &n
		}
	}
	return s
}

// WriteSoakCSV writes soak.csv: one row per soak cycle, every figure raw
// (NaN where unknown), with the simulated column of samples.csv. A run
// streams the same rows as its cycles end (SoakCSVHeader, SoakCSVRow).
func WriteSoakCSV(w io.Writer, raw record.Raw) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(soakColumns)
	for _, c := range raw.Soak {
		_ = cw.Write(soakFields(c, raw.Simulated != nil))
	}
	cw.Flush()
	return cw.Error()
}

var soakColumns = []string{"cycle", "from", "to", "level", "ok", "sleep_s", "wake_s", "to_first_token_s", "residual_gib", "release_percent",
	"free_gib", "need_gib", "headroom_gib", "rss_gib", "locked_gib", "pinned_gib", "energy_j", "engine_sleep_s", "engine_wake_s", "engine_freed_gib", "disagreements", "error", "simulated"}

func soakFields(c record.SoakCycle, simulated bool) []string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 8, 64) }
	es, ew, ef, dis := math.NaN(), math.NaN(), math.NaN(), 0
	if e := c.Engine; e != nil {
		es, ew, ef, dis = e.SleepS, e.WakeS, e.FreedGiB, len(e.Disagreements)
	}
	return []string{strconv.Itoa(c.Cycle), c.From, c.To, strconv.Itoa(c.Level), strconv.FormatBool(c.OK),
		f(c.SleepS), f(c.WakeS), f(c.ToFirstTokenS), f(c.ResidualGiB), f(c.ReleasePct),
		f(c.FreeGiB), f(c.NeedGiB), f(c.HeadroomGiB), f(c.RSSGiB), f(c.LockedGiB), f(c.PinnedGiB), f(c.EnergyJ), f(es), f(ew), f(ef), strconv.Itoa(dis), c.Err, strconv.FormatBool(simulated)}
}

// csvLine is fields as one CSV line.
func csvLine(fields []string) []byte {
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	_ = cw.Write(fields) // into memory: cannot fail
	cw.Flush()
	return b.Bytes()
}

// SoakCSVHeader is soak.csv's header line.
func SoakCSVHeader() []byte { return csvLine(soakColumns) }

// SoakCSVRow is cycle c's line of soak.csv.
func SoakCSVRow(c record.SoakCycle, simulated bool) []byte { return csvLine(soakFields(c, simulated)) }
