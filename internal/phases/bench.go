package phases

import (
	"sync"

	"github.com/wakebench/wakebench/internal/record"
)

// Family is a bench.txt family a phase writes (report.BenchResults names
// its lines): the Benchmark<Base> lines whose sub-name key Key is Value
// (Key "": every line of Base). Their samples are taken in the phase's
// window: for the line's model (PerModel: the window <model>-<phase>, the
// model the name's model= key) or the phase's one window over every
// model. The regression gate reads a family's host load there (WindowOf)
// to tell a busy machine from a slower code.
type Family struct {
	Base, Key, Value string
	PerModel         bool
}

// serve is a serving phase's family: its stage is its name.
func serve(phase string) []Family {
	return []Family{{Base: "Serve", Key: "stage", Value: phase, PerModel: true}}
}

// sleepAt is the family of a phase's sleep cycles at level (bench.txt's
// level=, record.LevelKey).
func sleepAt(level int) []Family {
	return []Family{{Base: "Sleep", Key: "level", Value: record.LevelKey(level), PerModel: true}}
}

// elsewhere are the phases run outside List by tests of their own, as far
// as bench.txt goes: the Kubernetes phase (TestKubernetes, package
// kubephase) and its families; the soak (TestSoak) writes none.
func elsewhere() []Phase {
	return []Phase{{Name: record.PhaseKubernetes, Bench: []Family{{Base: "PodStart"}, {Base: "PodRestart"}, {Base: "PodSwitch"}}}}
}

// WindowOf is the phase window a bench.txt benchmark's samples were taken
// in, as the phase that writes its family declares it (Phase.Bench): the
// window's model (its label; "" for a phase's one window over every
// model) and phase, as protocol.Env.Begin names windows
// (record.WindowName). ok is false for a benchmark of no one phase's
// window (the device's peak, a model's level-1 releases, which
// sleep-level1, after-wake, the switch and the soak take, the host lines)
// or of a per-model family without its model= key.
func WindowOf(name string) (model, phase string, ok bool) {
	f, phase, ok := FamilyOf(name)
	if !ok || !f.PerModel {
		return "", phase, ok
	}
	_, keys := record.BenchKeys(name)
	return keys["model"], phase, keys["model"] != ""
}

// FamilyOf is the family a bench.txt benchmark is of and the phase that
// declares it (List's, or one run by a test of its own); ok is false for
// a benchmark no phase declares.
func FamilyOf(name string) (f Family, phase string, ok bool) {
	base, keys := record.BenchKeys(name)
	for _, o := range owned() {
		if o.Base == base && (o.Key == "" || keys[o.Key] == o.Value) {
			return o.Family, o.phase, true
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
