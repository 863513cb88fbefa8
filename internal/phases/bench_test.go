package phases

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// TestWindowOfByHand: each of bench.txt's families (report.WriteBench's
// doc lists the names) in the window of the phase that writes it, worked out
// by hand from docs/protocol.md, and the lines of no one window.
func TestWindowOfByHand(t *testing.T) {
	for name, want := range map[string]struct {
		model, phase string
		ok           bool
	}{
		"Restart/model=A/kind=warm":                {"A", "restart", true},
		"Serve/model=A/stage=baseline/conc=4":      {"A", "baseline", true},
		"Serve/model=B/stage=after-wake/conc=1":    {"B", "after-wake", true},
		"Serve/model=A/stage=after-wake-l2/conc=1": {"A", "after-wake-l2", true},
		"Serve/model=A/stage=wake-burst/conc=4":    {"A", "wake-burst", true},
		"Serve/model=A/stage=no-such/conc=4":       {"", "", false},
		"Sleep/model=A/level=1":                    {"A", "sleep-level1", true},
		"Sleep/model=B/level=2":                    {"B", "sleep-level2", true},
		"Sleep/model=A/level=0":                    {"A", "sleep-level0", true},
		"Sleep/model=A/level=kv":                   {"A", "kv-release", true},
		"Sleep/level=1":                            {"", "sleep-level1", false}, // a per-model family without its model
		"Cost/model=A/state=asleep-l1":             {"A", "state-cost", true},
		"Energy/model=B/op=wake-l1":                {"B", "state-cost", true},
		"Switch/dir=A→B":                           {"", "switch", true},
		"Traffic/model=A/run=shared/found=asleep":  {"", "traffic", true}, // one window over every model
		"TrafficEnergy/run=ideal":                  {"", "traffic", true},
		"PodStart/model=A/kind=cold":               {"", "kubernetes", true},
		"PodSwitch/dir=A→B":                        {"", "kubernetes", true},
		"Memory/model=A":                           {"", "", false}, // level-1 releases: sleep-level1's, after-wake's and switch's
		"Memory/device":                            {"", "", false},
		"Host/window=A-sleep-level1":               {"", "", false},
	} {
		model, phase, ok := WindowOf(record.ParseBenchName(name))
		assert.Equal(t, want.ok, ok, name)
		if want.ok {
			assert.Equal(t, want.model, model, name)
			assert.Equal(t, want.phase, phase, name)
		}
	}
}

// TestFamiliesAreEachOnePhases: no two phases claim a bench.txt family
// (WindowOf takes the first), no phase claims one twice, and no family of
// no window (Unwindowed) is a phase's.
func TestFamiliesAreEachOnePhases(t *testing.T) {
	owner := map[string]string{}
	for _, p := range append(List(), elsewhere()...) {
		for _, f := range p.Bench {
			if o, ok := owner[f.ID()]; ok {
				t.Errorf("%s and %s both write %s", o, p.Name, f.ID())
			}
			owner[f.ID()] = p.Name
		}
	}
	for id, p := range owner {
		base, _, keyed := strings.Cut(id, "/")
		if !keyed {
			continue
		}
		if o, ok := owner[base]; ok {
			t.Errorf("%s writes every %s line, %s those of %s", o, base, p, id)
		}
	}
	for _, f := range Unwindowed() {
		for id, p := range owner {
			if id == f.Base || strings.HasPrefix(id, f.Base+"/") {
				t.Errorf("%s is of no phase's window, and %s writes %s", f.Base, p, id)
			}
		}
	}
	assert.NotEmpty(t, owner)
}

// TestFamiliesDeclareEveryUnit: each unit a family declares is one
// bench.txt gives metadata for (report.BenchUnits: which way is better) or
// a host-load unit (never gated, so without), once per family, and each
// such unit is some family's: a unit added to the bench lines without its
// family's declaring it fails TestOutputs, and one declared nowhere fails
// here.
func TestFamiliesDeclareEveryUnit(t *testing.T) {
	known := map[string]bool{report.UnitOthersCPU: true, report.UnitWaitPerRun: true}
	for _, m := range report.BenchUnits() {
		known[m.Unit] = true
	}
	declared := map[string]bool{}
	for _, f := range append(families(), Unwindowed()...) {
		assert.NotEmpty(t, f.Units, "%s declares no unit", f.ID())
		var names []string
		for _, u := range f.Units {
			assert.True(t, known[u.Name], "%s: unit %q has no metadata in bench.txt (report.BenchUnits)", f.ID(), u.Name)
			names = append(names, u.Name)
			declared[u.Name] = true
		}
		assert.Len(t, slices.Compact(slices.Sorted(slices.Values(names))), len(names), "%s declares a unit twice: %v", f.ID(), names)
	}
	for u := range known {
		assert.True(t, declared[u], "unit %s: no family declares it", u)
	}
}

// TestUnitNeeds: which units a run writes, by hand. Without a memory
// source a level-1 cycle has its sleep, wake and first token and no
// residual; with one, its residual but not the worst GPU's unless a model
// spans GPUs; a Sometimes unit is never required; a family of memory
// figures alone (Energy) has no line without a memory source.
func TestUnitNeeds(t *testing.T) {
	sl := sleepAt(1)[0]
	required := func(f Family, h Have) (out []string) {
		for _, u := range f.Units {
			if u.Required(h) {
				out = append(out, u.Name)
			}
		}
		return out
	}
	assert.Equal(t, []string{"sec/sleep", "sec/wake", "sec/first-token"}, required(sl, Have{}))
	assert.Equal(t, []string{"sec/sleep", "sec/wake", "sec/first-token", "GiB/residual"}, required(sl, Have{Memory: true}))
	assert.Equal(t, []string{"sec/sleep", "sec/wake", "sec/first-token", "GiB/residual", "GiB/residual-max-gpu"}, required(sl, Have{Memory: true, GPUs: true}))
	assert.Equal(t, []string{"sec/sleep", "sec/wake", "sec/first-token"}, required(sl, Have{GPUs: true}), "the worst GPU's residual needs a memory source too")
	tpot := Unit{Name: "sec/tpot", Needs: Sometimes}
	assert.True(t, tpot.Possible(Have{}))
	assert.False(t, tpot.Required(Have{Memory: true, GPUs: true}))
	energy, ok := familyNamed("Energy")
	require.True(t, ok)
	assert.False(t, energy.Possible(Have{GPUs: true}))
	assert.True(t, energy.Possible(Have{Memory: true}))
}

// families is every phase's families (List's, then elsewhere's).
func families() []Family {
	var out []Family
	for _, o := range owned() {
		out = append(out, o.Family)
	}
	return out
}

// familyNamed is the phases' family of that ID.
func familyNamed(id string) (Family, bool) {
	for _, f := range families() {
		if f.ID() == id {
			return f, true
		}
	}
	return Family{}, false
}

// TestLineFamily: a phase's line is of its phase's family; the level-1
// releases, the device's peak and the host load of no phase's; a line of
// neither of none.
func TestLineFamily(t *testing.T) {
	for name, want := range map[string]struct {
		id, phase string
		ok        bool
	}{
		"Sleep/model=A/level=1":              {"Sleep/level=1", "sleep-level1", true},
		"PodSwitch/dir=A→B":                  {"PodSwitch", "kubernetes", true},
		"Memory/model=A":                     {"Memory", "", true},
		"Memory/device":                      {"Memory", "", true},
		"Host/window=A-sleep-level1":         {record.HostBench, "", true},
		"Serve/model=A/stage=no-such/conc=4": {"", "", false},
		"Nope/model=A":                       {"", "", false},
	} {
		f, phase, ok := LineFamily(record.ParseBenchName(name))
		assert.Equal(t, want.ok, ok, name)
		if want.ok {
			assert.Equal(t, want.id, f.ID(), name)
			assert.Equal(t, want.phase, phase, name)
		}
	}
}
