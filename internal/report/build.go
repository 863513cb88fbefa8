package report

import (
	"math"
	"slices"
	"time"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// GiB is 2^30 bytes.
const GiB = record.GiB

func unix(t time.Time) float64 { return record.Unix(t) }

// Build summarises raw into the report. Status is PASS only when there is no
// failure and no failed check; the caller adds test failures as Failures.
func Build(raw record.Raw) Report {
	rep := newReport(raw)
	for _, l := range raw.Labels {
		m, planned := buildModel(raw, l)
		rep.Models[l] = m
		rep.Requests.PlannedPerformance += planned
	}
	rep.Switch = switching(raw.Handoffs)
	rep.Memory = memory(raw)
	rep.Soak = soak(raw)
	rep.Traffic = traffic(raw.Traffic)
	kubernetes(&rep, raw.Labels, raw.Kubernetes)
	costs(&rep, raw)
	rep.Status = status(rep)
	return rep
}

// newReport is the report's run-wide part, copied from raw: setup,
// windows, phases, checks and failures (empty lists, never null), times.
func newReport(raw record.Raw) Report {
	rep := Report{
		Runtime: raw.Runtime, GPU: raw.GPU, ContextTokens: raw.ContextTokens, KVGiB: raw.KVGiB,
		Models: map[string]*Model{}, Requests: raw.Requests, PercentileMethod: stats.PercentileMethod,
		RestartBaseline: RestartBaseline{Summary: "same host, warm local caches, servers started one at a time; not a cold node or container start"},
		Windows:         raw.Windows, Simulated: raw.Simulated, GPUFacts: raw.GPUFacts, LinkProbe: raw.Links, LinkNote: raw.LinkNote,
		Phases: raw.Phases, Checks: raw.Checks, Failures: raw.Failures, NotRunReason: raw.NotRun,
		Started: unix(raw.Started), Finished: unix(raw.Finished), Gate: raw.Gate,
	}
	if raw.Finished.IsZero() {
		rep.Finished = unix(time.Now())
	}
	rep.GPUPlacement = raw.GPUPlacement
	if raw.RestartBaseline != "" {
		rep.RestartBaseline.Summary = raw.RestartBaseline
	}
	if rep.Checks == nil {
		rep.Checks = []record.Check{}
	}
	if rep.Failures == nil {
		rep.Failures = []record.Failure{}
	}
	if rep.Phases == nil {
		rep.Phases = []string{}
	}
	if rep.Windows == nil {
		rep.Windows = map[string]record.Window{}
	}
	return rep
}

// buildModel summarises the model labelled l: restarts, both sleep levels,
// serving, physical limits, first sleep and correctness; planned is the
// serving requests it planned.
func buildModel(raw record.Raw, l string) (m *Model, planned int) {
	m = &Model{Name: raw.Names[l], Sleep: map[string]*SleepLevel{}, Performance: []Perf{}}
	var ini, warm, iniReady, warmReady []float64
	for _, rs := range raw.Restarts[l] {
		if rs.Warm {
			warm, warmReady = append(warm, rs.FirstTokenS), append(warmReady, rs.ReadyS)
		} else {
			ini, iniReady = append(ini, rs.FirstTokenS), append(iniReady, rs.ReadyS)
		}
	}
	m.RestartInitial, m.RestartWarm = record.Summary(ini), record.Summary(warm)
	m.RestartReadyInitial, m.RestartReadyWarm = record.Summary(iniReady), record.Summary(warmReady)
	for _, level := range []int{1, 2} {
		m.Sleep[record.LevelKey(level)] = sleepLevel(raw, l, level)
	}
	// Level 0 and the KV-only release (issue 24), where planned: keys
	// "0" and "kv" beside the reference report's "1" and "2".
	for _, level := range []int{0, record.LevelKVRelease} {
		if raw.Planned[l][level] > 0 {
			m.Sleep[record.LevelKey(level)] = pauseLevel(raw, l, level)
		}
	}
	for _, p := range raw.Perf[l] {
		counts := slices.Compact(slices.Sorted(slices.Values(p.PromptTokens)))
		if counts == nil {
			counts = []int{}
		}
		m.Performance = append(m.Performance, Perf{
			Stage: p.Stage, Concurrency: p.Concurrency, Rounds: p.Rounds, Planned: p.Planned,
			Success: p.Success, RoundsPassed: p.RoundsPassed,
			OutputTPS: record.Summary(p.RoundTPS), TTFTS: record.Summary(p.TTFT), TPOTS: record.Summary(p.TPOT),
			PromptTokenCounts: counts,
		})
		planned += p.Planned
	}
	m.PhysicalLimits = limits(raw, l, m)
	m.FirstSleep = firstSleep(raw.FirstSleeps[l], m.Sleep[record.LevelKey(1)])
	ref, ok := raw.References[l]
	m.Correctness = correctness(ref, ok, raw.Replays[l])
	m.Health, m.LostPrefix = health(raw.Health[l]), lostPrefix(raw.LostPrefix[l])
	return m, planned
}

// sleepLevel summarises the successful sleep/wake cycles of the model
// labelled l at level.
func sleepLevel(raw record.Raw, l string, level int) *SleepLevel {
	sl := &SleepLevel{PlannedCycles: raw.Planned[l][level]}
	s := record.LevelOf(raw.Cycles[l], level) // the figures the phase's checks judge
	sleep, wake, ftt := s.Sleep, s.Wake, s.FirstToken
	sl.SuccessfulCycles = len(ftt)
	// The call the engine's sleep account answers to, cycle by cycle as
	// s.Engines: /sleep, or a KV-only release cycle's
	// /release_kv_cache_memory (not its pause).
	asleep := sleep
	if level == record.LevelKVRelease {
		asleep = s.ReleaseEach
	}
	sl.SleepS, sl.WakeAPIS, sl.ToFirstTokenS, sl.ResidualGiB = record.Summary(sleep), record.Summary(wake), record.Summary(ftt), record.Summary(s.Residual)
	sl.FirstCycle, sl.SteadyState = firstSteady(sleep, wake, ftt)
	sl.Engine = engineFigures(s.Engines, asleep, wake)
	sl.ResidualGiBPerGPU = perGPU(raw.Cycles[l], level)
	return sl
}

// switching summarises the switch phase's handoffs by direction; the
// initial activation is counted, not summarised.
func switching(handoffs []record.Handoff) Switch {
	sw := Switch{Directions: map[string]*Direction{}}
	for _, h := range handoffs {
		if h.Initial {
			sw.InitialActivation++
			continue
		}
		sw.Handoffs++
		sw.SleepLevel = h.Level
		if !h.OK {
			continue
		}
		sw.Success++
		if sw.EnergyNote == "" {
			sw.EnergyNote = h.EnergyNote
		}
	}
	for k, d := range record.DirectionsOf(handoffs) { // the figures the switch's checks judge
		dir := &Direction{N: len(d.FirstToken), ToFirstTokenS: record.Summary(d.FirstToken), SleepS: record.Summary(d.Sleep), WakeS: record.Summary(d.Wake), EnergyJ: record.Summary(d.EnergyJ)}
		dir.FirstCycle, dir.SteadyState = firstSteady(d.Sleep, d.Wake, d.FirstToken)
		dir.Engine = engineFigures(d.Engines, d.Sleep, d.Wake)
		sw.Directions[k] = dir
	}
	return sw
}

// memory summarises the GPU memory figures: the device peak (per GPU too),
// each model's RSS peak and level-1 release, where the figures came from.
func memory(raw record.Raw) Memory {
	mem := Memory{PhysicalPeakGiB: record.Summary(raw.DeviceUsedGiB), RSSPeakGiB: map[string]float64{},
		L1ReleaseFraction: map[string]stats.Summary{}, Source: raw.MemorySource, Note: raw.MemoryNote}
	if len(raw.Attribution) > 0 {
		mem.Attribution = raw.Attribution
	}
	mem.PhysicalPeakGiBPerGPU = columns(raw.DeviceUsedGiBPerGPU)
	for l, sleeps := range raw.ReleasePerGPU {
		if mem.L1ReleaseFractionPerGPU == nil {
			mem.L1ReleaseFractionPerGPU = map[string][]stats.Summary{}
		}
		mem.L1ReleaseFractionPerGPU[l] = columns(sleeps)
	}
	for _, l := range raw.Labels {
		mem.RSSPeakGiB[l] = float64(raw.RSSPeak[l]) / GiB
		mem.L1ReleaseFraction[l] = record.Summary(raw.Release[l])
	}
	return mem
}

// pauseLevel is sleepLevel for a level-0 or KV-only release level, with
// its own figures: the GiB freed, the release call, the request held
// while paused, and why the cycles were off.
func pauseLevel(raw record.Raw, l string, level int) *SleepLevel {
	sl := sleepLevel(raw, l, level)
	sl.Off = raw.CyclesOff[l][level]
	s := record.LevelOf(raw.Cycles[l], level) // the figures the phase's checks judge
	some := func(xs []float64) *stats.Summary {
		if len(xs) == 0 {
			return nil
		}
		s := record.Summary(xs)
		return &s
	}
	sl.FreedGiB, sl.ReleaseS, sl.HeldS, sl.HeldPastWakeS = some(s.Freed), some(s.Release), some(s.Held), some(s.HeldPastWake)
	return sl
}

// StatusNotRun is the status of a run in which no phase ran and nothing
// failed (a -run filter that matched no phase, or benchmarks only): it
// measured nothing to pass, so it is not PASS.
const StatusNotRun = "NOT RUN"

// status is FAIL on any failure or failed check, NOT RUN when no phase ran,
// else PASS.
func status(rep Report) string {
	if len(rep.Failures) > 0 {
		return "FAIL"
	}
	for _, c := range rep.Checks {
		if c.Fails() {
			return "FAIL"
		}
	}
	if len(rep.Phases) == 0 {
		return StatusNotRun
	}
	return "PASS"
}

// perGPU summarises the successful cycles' per-GPU residuals at level, one
// summary per GPU; nil on a run of one GPU.
func perGPU(cycles []record.Cycle, level int) []stats.Summary {
	var rows [][]float64
	for _, c := range cycles {
		if c.Level == level && c.OK && len(c.ResidualPerGPU) > 1 {
			rows = append(rows, c.ResidualPerGPU)
		}
	}
	return columns(rows)
}

// columns summarises rows (one per sample, a value per GPU) by column.
func columns(rows [][]float64) []stats.Summary {
	var out []stats.Summary
	for g := 0; len(rows) > 0 && g < len(rows[0]); g++ {
		var xs []float64
		for _, r := range rows {
			if g < len(r) && !math.IsNaN(r[g]) {
				xs = append(xs, r[g])
			}
		}
		out = append(out, record.Summary(xs))
	}
	return out
}

// firstSleep summarises the level-1 first sleeps of label's processes
// against its level-1 steady state; nil when none slept at level 1 first.
func firstSleep(fs []record.FirstSleep, l1 *SleepLevel) *FirstSleep {
	var xs []float64
	for _, f := range fs {
		if f.Level == 1 {
			xs = append(xs, f.SleepS)
		}
	}
	if len(xs) == 0 {
		return nil
	}
	out := &FirstSleep{Processes: len(xs), L1SleepS: record.Summary(xs)}
	if l1 != nil && l1.SteadyState != nil && l1.SteadyState.SleepS.N > 0 {
		steady := l1.SteadyState.SleepS.Median
		out.SteadyL1SleepS = &steady
		if steady > 0 {
			ratio := out.L1SleepS.Median / steady
			out.RatioToSteadyState = &ratio
		}
	}
	return out
}
