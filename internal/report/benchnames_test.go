package report

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
)

// TestEveryGatedUnitHasADirection: every unit WriteBench writes says
// which way is better (its Unit line's better=), but the machine's load
// (shown, never gated): the regression gate gates no unit without one, so
// a unit written without it is a figure no baseline ever judges. The
// records hold every kind of line: the golden's (costs, energy), a level-0
// and a KV-only release cycle (GiB/freed, sec/held, sec/release), several
// GPUs, the Kubernetes phase and traffic.
func TestEveryGatedUnitHasADirection(t *testing.T) {
	better := map[string]bool{}
	for _, m := range BenchUnits() {
		if m.Key == "better" && (m.Value == "higher" || m.Value == "lower") {
			better[m.Unit] = true
		}
	}
	written := map[string]bool{}
	for _, raw := range everyKindOfLine() {
		for _, r := range BenchResults(raw) {
			for _, v := range r.Result.Values {
				written[v.Unit] = true
			}
		}
	}
	for _, u := range []string{UnitFreed, UnitHeld, UnitRelease2, UnitResidualGPU, UnitJ, UnitSwitchJ, UnitScheduled, UnitRoutable} {
		require.True(t, written[u], "the records write %s (so the check below covers it)", u)
	}
	for u := range written {
		if u == UnitOthersCPU || u == UnitWaitPerRun {
			assert.False(t, better[u], "%s: the machine's load is shown, never gated", u)
			continue
		}
		assert.True(t, better[u], "%s is written without better=higher or better=lower: the gate would never judge it", u)
	}
}

// everyKindOfLine are records that write every kind of bench.txt line:
// the golden's (costs, energy) with a level-0 and a KV-only release cycle
// (GiB/freed, sec/held, sec/release) and a level-1 cycle across two GPUs
// for each model, the Kubernetes phase's, and traffic's.
func everyKindOfLine() []record.Raw {
	nan := math.NaN()
	cycles := goldenRaw()
	for _, l := range []string{"A", "B"} {
		cycles.Cycles[l] = append(cycles.Cycles[l],
			record.Cycle{Level: 0, OK: true, SleepS: 0.01, WakeAPIS: 0.01, ToFirstTokenS: 0.02, ResidualGiB: 12, ReleaseS: nan, FreedGiB: 0, HeldS: 0.5, HeldPastWakeS: 0.1},
			record.Cycle{Level: record.LevelKVRelease, OK: true, SleepS: 0.01, WakeAPIS: 0.01, ToFirstTokenS: 0.02, ResidualGiB: 8, ReleaseS: 0.004, FreedGiB: 4, HeldS: nan, HeldPastWakeS: nan},
			record.Cycle{Level: 1, OK: true, SleepS: 1, WakeAPIS: 2, ToFirstTokenS: 2.1, ResidualGiB: 1, ResidualPerGPU: []float64{0.5, 0.5}})
	}
	t0 := time.Unix(1_700_000_000, 0)
	traffic := sampleRaw()
	traffic.Traffic = &record.Traffic{Start: t0, SharedJ: 10, IdealJ: 12, Requests: []record.TrafficRequest{
		{Run: record.RunShared, Model: "A", Planned: t0, Issued: t0, TTFTS: 0.1, HasTPOT: true, TPOTS: 0.01, Good: true},
	}}
	k8s := sampleRaw()
	k8s.Kubernetes = sampleKubernetes()
	return []record.Raw{cycles, k8s, traffic}
}

// TestBenchNamesSurviveTheFile: every line's name as bench.txt writes it
// is split back by a file's reader into the fields the run built it from (record.ParseBenchName), the device's peak (a part without a
// key) and the host windows included; so the gate reads a baseline's
// names as the run that wrote them built them.
func TestBenchNamesSurviveTheFile(t *testing.T) {
	bases := map[string]bool{}
	for _, raw := range everyKindOfLine() {
		for _, l := range BenchResults(raw) {
			bases[l.Name.Base] = true
			assert.Equal(t, l.Name, record.ParseBenchName(string(l.Result.Name)), "%s: split back", l.Result.Name)
			assert.NotEmpty(t, l.Name.Keys, "%s: a name with no key", l.Result.Name)
		}
	}
	for _, b := range []string{"Memory", record.HostBench, "Sleep", "Serve", "PodSwitch", "Traffic"} {
		assert.True(t, bases[b], "the records write %s lines (so the check above covers them)", b)
	}
}
