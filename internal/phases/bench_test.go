package phases

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/record"
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
		record.HostWindowBench + "A-sleep-level1":  {"", "", false},
	} {
		model, phase, ok := WindowOf(name)
		assert.Equal(t, want.ok, ok, name)
		if want.ok {
			assert.Equal(t, want.model, model, name)
			assert.Equal(t, want.phase, phase, name)
		}
	}
}

// TestFamiliesAreEachOnePhases: no two phases claim a bench.txt family
// (WindowOf takes the first), and no phase claims one twice.
func TestFamiliesAreEachOnePhases(t *testing.T) {
	owner := map[Family]string{}
	for _, p := range append(List(), elsewhere()...) {
		for _, f := range p.Bench {
			if o, ok := owner[f]; ok {
				t.Errorf("%s and %s both write %+v", o, p.Name, f)
			}
			owner[f] = p.Name
		}
	}
	for f, p := range owner {
		if f.Key == "" {
			continue
		}
		if o, ok := owner[Family{Base: f.Base, PerModel: f.PerModel}]; ok {
			t.Errorf("%s writes every %s line, %s those with %s=%s", o, f.Base, p, f.Key, f.Value)
		}
	}
	assert.NotEmpty(t, owner)
}
