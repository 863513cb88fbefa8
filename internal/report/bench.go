package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/record"

	"golang.org/x/perf/benchfmt"
)

// Benchmark units. Times are "sec/…" (benchfmt's base unit for time), so
// benchstat scales them (e.g. 218ms).
const (
	UnitReady      = "sec/ready"
	UnitFirstToken = "sec/first-token"
	UnitSleep      = "sec/sleep"
	UnitWake       = "sec/wake"
	UnitTTFT       = "sec/ttft"
	UnitTPOT       = "sec/tpot"
	UnitTPS        = "tok/s"
	UnitReqTPS     = "req-tok/s" // one request's output tokens / its sent → done time
	UnitResidual   = "GiB/residual"
	// UnitResidualGPU is, for a model across GPUs, its residual on the GPU
	// that kept the most (vllm#32714: 16 GB a GPU asleep at TP 4).
	UnitResidualGPU = "GiB/residual-max-gpu"
	UnitFreed       = "GiB/freed"   // level 0, KV-only release: GiB the model gave back
	UnitRelease2    = "sec/release" // /release_kv_cache_memory sent → answered
	UnitHeld        = "sec/held"    // level 0: a request sent while paused, sent → first token
	UnitRelease     = "%-released"
	UnitPeak        = "GiB/peak"
	UnitScheduled   = "sec/scheduled" // Pod created → scheduled
	UnitRoutable    = "sec/routable"  // Pod created, or handoff begun → ready in its EndpointSlice
	UnitPower       = "W"             // the state-cost phase: GPU power held in a state
	UnitHostGiB     = "host-GiB"      // host memory of the server's process tree in a state
	// UnitHostLockedGiB is host-GiB's mlock'ed part (VmLck). On vllmsim
	// that is its pinned backups (it mlocks them, where RLIMIT_MEMLOCK or
	// CAP_IPC_LOCK allows); whether a GPU driver's cudaHostAlloc pages show
	// in VmLck is unverified (docs/cost.md), so on vLLM it may read 0.
	UnitHostLockedGiB = "host-locked-GiB"
	UnitWakeJ         = "J/wake"   // energy of a wake: sent → first token
	UnitSleepJ        = "J/sleep"  // energy of a sleep: sent → answered
	UnitStartJ        = "J/start"  // energy of a cold start: spawn → first token
	UnitSwitchJ       = "J/switch" // energy of a handoff: /sleep sent → the woken model's first token
	UnitJ             = "J"        // energy of a traffic run: first planned arrival → last request done
	// The machine's load over a phase window (record.HostLoad): shown,
	// never gated (no better=); the regression gate reads them to tell a
	// crowded phase from a slower code.
	UnitOthersCPU  = record.UnitOthersCPU
	UnitWaitPerRun = record.UnitWaitPerRun
)

// unitMeta is what benchstat should assume about each unit.
var unitMeta = []struct{ unit, key, value string }{
	{UnitTPS, "better", "higher"},
	{UnitReqTPS, "better", "higher"},
	{UnitRelease, "better", "higher"},
	{UnitFreed, "better", "higher"}, // what a pause or a KV-only release gave back
	{UnitReady, "better", "lower"},
	{UnitFirstToken, "better", "lower"},
	{UnitSleep, "better", "lower"},
	{UnitWake, "better", "lower"},
	{UnitTTFT, "better", "lower"},
	{UnitTPOT, "better", "lower"},
	{UnitResidual, "better", "lower"},
	{UnitResidualGPU, "better", "lower"},
	{UnitRelease2, "better", "lower"},
	{UnitHeld, "better", "lower"},
	{UnitPeak, "better", "lower"},
	{UnitScheduled, "better", "lower"},
	{UnitRoutable, "better", "lower"},
	{UnitPower, "better", "lower"},
	{UnitHostGiB, "better", "lower"},
	{UnitHostLockedGiB, "better", "lower"},
	{UnitWakeJ, "better", "lower"},
	{UnitSleepJ, "better", "lower"},
	{UnitStartJ, "better", "lower"},
	{UnitSwitchJ, "better", "lower"},
	{UnitJ, "better", "lower"},
}

// WriteUnitMetadata writes the unit metadata lines (Unit tok/s better=higher, …).
func WriteUnitMetadata(w io.Writer) error {
	bw := benchfmt.NewWriter(w)
	for _, m := range BenchUnits() {
		if err := bw.Write(m); err != nil {
			return err
		}
	}
	return nil
}

// BenchUnits are bench.txt's unit metadata lines, as records.
func BenchUnits() []*benchfmt.UnitMetadata {
	var out []*benchfmt.UnitMetadata
	for _, m := range unitMeta {
		out = append(out, &benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: m.unit, Key: m.key}, OrigUnit: m.unit, Value: m.value})
	}
	return out
}

// WriteBench writes raw as benchfmt: config lines (gpu, runtime,
// model-<label> in lower case, simulated), unit metadata, then one
// result line per sample (each cycle, round, request, handoff), named with
// sub-name keys so `benchstat -col /stage` or `-col /level` compare them:
//
//	BenchmarkRestart/model=A/kind=warm
//	BenchmarkSleep/model=A/level=1 (0, 1, 2, kv: a KV-only release)
//	BenchmarkServe/model=A/stage=baseline/conc=4 (a serving phase's stage, its name: baseline, after-wake, after-wake-l2, wake-burst)
//	BenchmarkSwitch/dir=A→B
//	BenchmarkTraffic/model=A/run=shared/found=asleep (one line per request: issued → first token, TPOT), BenchmarkTrafficEnergy/run=shared (J)
//	BenchmarkMemory/model=A
//	BenchmarkCost/model=A/state=asleep-l1 (W, host-GiB, host-locked-GiB), BenchmarkEnergy/model=A/op=wake-l1 (J/wake, J/sleep, J/start)
//	BenchmarkPodStart/model=A/kind=cold, BenchmarkPodRestart/model=A, BenchmarkPodSwitch/dir=A→B (the Kubernetes phase)
//	BenchmarkHost/window=A-sleep-level1 (the machine's load over a phase window: %-others-cpu, wait/run; no better=)
func WriteBench(w io.Writer, raw record.Raw) error {
	return WriteBenchResults(w, raw.Started, BenchResults(raw))
}

// WriteBenchResults writes bench.txt from a run's result lines
// (BenchResults, built once by the caller that also hands them to
// report.html), the run's start first.
func WriteBenchResults(w io.Writer, started time.Time, results []BenchLine) error {
	bw := benchfmt.NewWriter(w)
	if !started.IsZero() {
		// The gate orders a history of runs by this line. Not a config
		// line: one that differs in every run would make benchstat split
		// two runs into two tables.
		if _, err := fmt.Fprintf(w, "%s%s\n", record.BenchStartedPrefix, started.UTC().Format(time.RFC3339Nano)); err != nil {
			return err
		}
	}
	if err := WriteUnitMetadata(w); err != nil {
		return err
	}
	for _, r := range results {
		if err := bw.Write(r.Result); err != nil {
			return err
		}
	}
	return nil
}

// BenchLine is one bench.txt result line of a run: its name as fields
// and the result benchfmt writes (its Name that name's String).
type BenchLine struct {
	Name   record.BenchName
	Result *benchfmt.Result
}

// BenchResults are raw's bench.txt result lines, in order, with their
// config: what the regression gate judges of this run and report.html
// draws, each with its name's fields, without reading back the file.
func BenchResults(raw record.Raw) []BenchLine {
	cfg := benchConfig(raw)
	var out []BenchLine
	line := func(name record.BenchName, vals ...benchfmt.Value) {
		if len(vals) == 0 {
			return
		}
		out = append(out, BenchLine{name, &benchfmt.Result{Config: cfg, Name: benchfmt.Name(name.String()), Iters: 1, Values: vals}})
	}
	for _, l := range raw.Labels {
		modelBench(raw, l, line)
	}
	for _, h := range raw.Handoffs {
		if h.Initial || !h.OK {
			continue
		}
		vals := []benchfmt.Value{val(h.SleepS, UnitSleep), val(h.WakeS, UnitWake), val(h.ToFirstTokenS, UnitFirstToken)}
		if !math.IsNaN(h.EnergyJ) { // absent without a counter
			vals = append(vals, val(h.EnergyJ, UnitSwitchJ))
		}
		line(record.NewBenchName("Switch", "dir", record.DirectionKey(h.From, h.To)), vals...)
	}
	trafficBench(raw.Traffic, line)
	kubernetesBench(raw.Kubernetes, line)
	if peak := record.Summary(raw.DeviceUsedGiB); peak.N > 0 {
		line(record.BenchName{Base: "Memory", Keys: []record.NameKey{{Value: "device"}}}, val(peak.Max, UnitPeak))
	}
	for _, w := range slices.Sorted(maps.Keys(raw.Windows)) {
		if h := raw.Windows[w].Host; h != nil {
			line(record.HostWindowName(w), val(h.OthersCPUPct, UnitOthersCPU), val(h.WaitPerRun, UnitWaitPerRun))
		}
	}
	return out
}

// benchConfig is bench.txt's config lines: the GPU, the runtime, each
// model's name and whether the run was simulated.
func benchConfig(raw record.Raw) []benchfmt.Config {
	cfg := []benchfmt.Config{
		{Key: "gpu", Value: []byte(raw.GPU), File: true},
		{Key: "runtime", Value: []byte(raw.Runtime), File: true},
	}
	for _, l := range raw.Labels {
		// benchfmt config keys may hold no upper-case letter: "model-a", not "model-A".
		cfg = append(cfg, benchfmt.Config{Key: "model-" + strings.ToLower(l), Value: []byte(raw.Names[l]), File: true})
	}
	sim := "no"
	if raw.Simulated != nil {
		sim = "yes (" + raw.Simulated.Label() + ")"
	}
	cfg = append(cfg, benchfmt.Config{Key: "simulated", Value: []byte(sim), File: true})
	return cfg
}

// modelBench writes model l's result lines: restarts, sleep cycles,
// serving rounds and requests, level-1 releases.
func modelBench(raw record.Raw, l string, line func(record.BenchName, ...benchfmt.Value)) {
	for _, rs := range raw.Restarts[l] {
		kind := "initial"
		if rs.Warm {
			kind = "warm"
		}
		line(record.NewBenchName("Restart", "model", l, "kind", kind), val(rs.ReadyS, UnitReady), val(rs.FirstTokenS, UnitFirstToken))
	}
	for _, c := range raw.Cycles[l] {
		if !c.OK {
			continue
		}
		vals := []benchfmt.Value{val(c.SleepS, UnitSleep), val(c.WakeAPIS, UnitWake), val(c.ToFirstTokenS, UnitFirstToken)}
		if !math.IsNaN(c.ResidualGiB) {
			vals = append(vals, val(c.ResidualGiB, UnitResidual))
		}
		if len(c.ResidualPerGPU) > 1 {
			vals = append(vals, val(slices.Max(c.ResidualPerGPU), UnitResidualGPU))
		}
		if c.Level <= 0 { // level 0, KV-only release: their own figures
			for _, f := range []struct {
				x    float64
				unit string
			}{{c.ReleaseS, UnitRelease2}, {c.FreedGiB, UnitFreed}, {c.HeldS, UnitHeld}} {
				if !math.IsNaN(f.x) {
					vals = append(vals, val(f.x, f.unit))
				}
			}
		}
		line(record.NewBenchName("Sleep", "model", l, "level", record.LevelKey(c.Level)), vals...)
	}
	for _, p := range raw.Perf[l] {
		name := record.NewBenchName("Serve", "model", l, "stage", p.Stage, "conc", strconv.Itoa(p.Concurrency))
		for _, tps := range p.RoundTPS {
			line(name, val(tps, UnitTPS))
		}
		for i := range p.TTFT {
			vals := []benchfmt.Value{val(p.TTFT[i], UnitTTFT)}
			if i < len(p.TPOT) {
				vals = append(vals, val(p.TPOT[i], UnitTPOT))
			}
			if i < len(p.ReqTPS) {
				vals = append(vals, val(p.ReqTPS[i], UnitReqTPS))
			}
			line(name, vals...)
		}
	}
	for _, pct := range raw.Release[l] {
		line(record.NewBenchName("Memory", "model", l), val(pct, UnitRelease))
	}

	costBench(raw, l, line)
}

// trafficBench writes a line per counted, successful traffic request.
func trafficBench(t *record.Traffic, line func(record.BenchName, ...benchfmt.Value)) {
	if t == nil {
		return
	}
	for _, r := range t.Requests {
		if r.WarmUp || r.Err != "" {
			continue
		}
		found := "awake"
		if r.Waited {
			found = "asleep"
		}
		vals := []benchfmt.Value{val(r.TTFTS, UnitFirstToken)}
		if r.HasTPOT {
			vals = append(vals, val(r.TPOTS, UnitTPOT))
		}
		line(record.NewBenchName("Traffic", "model", r.Model, "run", r.Run, "found", found), vals...)
	}
	for _, run := range []struct {
		name string
		j    float64
	}{{record.RunShared, t.SharedJ}, {record.RunIdeal, t.IdealJ}} {
		if !math.IsNaN(run.j) { // absent without a counter (or an ideal run)
			line(record.NewBenchName("TrafficEnergy", "run", run.name), val(run.j, UnitJ))
		}
	}
}

// val is one value of a result line.
func val(x float64, unit string) benchfmt.Value { return benchfmt.Value{Value: x, Unit: unit} }
