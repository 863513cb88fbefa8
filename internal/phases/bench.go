package phases

import (
	"sync"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// Family is a bench.txt family a phase writes (report.BenchResults names
// its lines): the Benchmark<Base> lines whose sub-name key Key is Value
// (Key "": every line of Base). Their samples are taken in the phase's
// window: for the line's model (PerModel: the window <model>-<phase>, the
// model the name's model= key) or the phase's one window over every
// model. The regression gate reads a family's host load there (WindowOf)
// to tell a busy machine from a slower code. Units are the units its
// lines carry, each with what its value needs (TestOutputs holds every
// line of the run to its family's).
type Family struct {
	Base, Key, Value string
	PerModel         bool
	Units            []Unit
}

// ID is the family's name: Base, or Base/Key=Value.
func (f Family) ID() string {
	if f.Key == "" {
		return f.Base
	}
	return f.Base + "/" + f.Key + "=" + f.Value
}

// Unit is a unit of a family's lines (report.Unit*) and what its value
// needs beyond its phase having measured the line.
type Unit struct {
	Name  string
	Needs Needs
}

// Needs is what a unit's value needs of the run: nothing (0: every line
// of its kind carries it) or any of the flags.
type Needs uint8

const (
	// NeedsMemory: a memory source that lists the servers' processes
	// (NVML, vllmsim's device): residuals, what a pause freed, and the
	// energy counter read beside them.
	NeedsMemory Needs = 1 << iota
	// NeedsGPUs: a model across GPUs (the worst GPU's residual).
	NeedsGPUs
	// Sometimes: the line's own measurement has it or not (a request's
	// TPOT needs two output tokens; a Pod's times what the API server
	// reported): a line may carry it, none must.
	Sometimes
)

// Have is what a run had of what units need.
type Have struct{ Memory, GPUs bool }

// Possible is whether a run that had h can write u.
func (u Unit) Possible(h Have) bool {
	return (u.Needs&NeedsMemory == 0 || h.Memory) && (u.Needs&NeedsGPUs == 0 || h.GPUs)
}

// Required is whether a family's lines in a run that had h must carry u
// (on one line at least).
func (u Unit) Required(h Have) bool { return u.Possible(h) && u.Needs&Sometimes == 0 }

// Has is whether the family declares unit.
func (f Family) Has(unit string) bool {
	for _, u := range f.Units {
		if u.Name == unit {
			return true
		}
	}
	return false
}

// Possible is whether a run that had h can write a line of the family:
// one of its units can be written.
func (f Family) Possible(h Have) bool {
	for _, u := range f.Units {
		if u.Possible(h) {
			return true
		}
	}
	return false
}

// units are the named units, each needing n.
func units(n Needs, names ...string) []Unit {
	out := make([]Unit, len(names))
	for i, name := range names {
		out[i] = Unit{Name: name, Needs: n}
	}
	return out
}

// serve is a serving phase's family: its stage is its name. A round's
// tok/s, each request's TTFT, TPOT and output tokens over its time.
func serve(phase string) []Family {
	return []Family{{Base: "Serve", Key: "stage", Value: phase, PerModel: true,
		Units: units(0, report.UnitTPS, report.UnitTTFT, report.UnitTPOT, report.UnitReqTPS)}}
}

// sleepAt is the family of a phase's sleep cycles at level (bench.txt's
// level=, record.LevelKey): each cycle's sleep, wake and first token and
// its residual; at levels 1 and 2 the worst GPU's residual for a model
// across GPUs (a pause or a KV-only release reads the model's memory
// whole), level 0's held request and KV-only release's call with what
// each freed.
func sleepAt(level int) []Family {
	us := append(units(0, report.UnitSleep, report.UnitWake, report.UnitFirstToken), Unit{report.UnitResidual, NeedsMemory})
	switch level {
	case 0:
		us = append(us, Unit{report.UnitHeld, 0}, Unit{report.UnitFreed, NeedsMemory})
	case record.LevelKVRelease:
		us = append(us, Unit{report.UnitRelease2, 0}, Unit{report.UnitFreed, NeedsMemory})
	default:
		us = append(us, Unit{report.UnitResidualGPU, NeedsMemory | NeedsGPUs})
	}
	return []Family{{Base: "Sleep", Key: "level", Value: record.LevelKey(level), PerModel: true, Units: us}}
}

// Unwindowed are the bench.txt families of no one phase's window (WindowOf
// says none; each every line of its Base): a model's level-1 releases
// (sleep-level1, after-wake, the switch and the soak take them), the
// device's peak (summed from every sample when the run closes) and each
// window's host load.
func Unwindowed() []Family {
	return []Family{
		// Memory/model=<label>: each level-1 sleep's share released;
		// Memory/device: the peak, which TestOutputs's run has not summed
		// yet (the run's Close does).
		{Base: "Memory", Units: []Unit{{report.UnitRelease, NeedsMemory}, {report.UnitPeak, NeedsMemory | Sometimes}}},
		{Base: record.HostBench, Units: units(0, report.UnitOthersCPU, report.UnitWaitPerRun)},
	}
}

// elsewhere are the phases run outside List by tests of their own, as far
// as bench.txt goes: the Kubernetes phase (TestKubernetes, package
// kubephase) and its families; the soak (TestSoak) writes none.
func elsewhere() []Phase {
	return []Phase{{Name: record.PhaseKubernetes, Bench: []Family{
		{Base: "PodStart", Units: units(Sometimes, report.UnitFirstToken, report.UnitScheduled, report.UnitRoutable)},
		{Base: "PodRestart", Units: units(Sometimes, report.UnitReady, report.UnitFirstToken)},
		{Base: "PodSwitch", Units: units(Sometimes, report.UnitSleep, report.UnitWake, report.UnitFirstToken, report.UnitRoutable)},
	}}}
}

// WindowOf is the phase window a bench.txt benchmark's samples were taken
// in, as the phase that writes its family declares it (Phase.Bench): the
// window's model (its label; "" for a phase's one window over every
// model) and phase, as protocol.Env.Begin names windows
// (record.WindowName). ok is false for a benchmark of no one phase's
// window (the device's peak, a model's level-1 releases, which
// sleep-level1, after-wake, the switch and the soak take, the host lines)
// or of a per-model family without its model= key.
func WindowOf(name record.BenchName) (model, phase string, ok bool) {
	f, phase, ok := FamilyOf(name)
	if !ok || !f.PerModel {
		return "", phase, ok
	}
	model = name.Get("model")
	return model, phase, model != ""
}

// FamilyOf is the family a bench.txt benchmark is of and the phase that
// declares it (List's, or one run by a test of its own); ok is false for
// a benchmark no phase declares.
func FamilyOf(name record.BenchName) (f Family, phase string, ok bool) {
	for _, o := range owned() {
		if o.Base == name.Base && (o.Key == "" || name.Get(o.Key) == o.Value) {
			return o.Family, o.phase, true
		}
	}
	return Family{}, "", false
}

// LineFamily is the family of any bench.txt line: a phase's (FamilyOf,
// with the phase) or one of no phase's window (Unwindowed, phase ""); ok
// is false for a line of neither.
func LineFamily(name record.BenchName) (f Family, phase string, ok bool) {
	if f, phase, ok = FamilyOf(name); ok {
		return f, phase, true
	}
	for _, u := range Unwindowed() {
		if u.Base == name.Base {
			return u, "", true
		}
	}
	return Family{}, "", false
}

// owner is a family with the phase that declares it.
type owner struct {
	Family
	phase string
}

// owned is every phase's families (List's, then elsewhere's), in order,
// read from the phases once: the regression gate asks FamilyOf for each
// metric of each run it judges (make gate-power's tables judge thousands
// of runs), and building List for each call took 4.5 µs and 45
// allocations. The families depend on no config.
var owned = sync.OnceValue(func() []owner {
	var out []owner
	for _, p := range append(List(), elsewhere()...) {
		for _, f := range p.Bench {
			out = append(out, owner{f, p.Name})
		}
	}
	return out
})
