package report

import (
	"bytes"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
)

// TestGateKnowsEveryBenchmark holds gate.Benchmarks, by which the gate
// refuses another project's bench file as a baseline, to what WriteBench
// writes: every name its doc comment lists, and every result's first name
// element in the golden, Kubernetes and traffic records.
func TestGateKnowsEveryBenchmark(t *testing.T) {
	src, err := os.ReadFile("bench.go")
	require.NoError(t, err)
	doc := string(src)[strings.Index(string(src), "// WriteBench writes"):strings.Index(string(src), "func WriteBench(")]
	var listed []string
	for _, m := range regexp.MustCompile(`Benchmark([A-Za-z]+)/`).FindAllStringSubmatch(doc, -1) {
		listed = append(listed, m[1])
	}
	listed = append(listed, "TrafficEnergy") // written by trafficBench, with the traffic phase's energy counter
	slices.Sort(listed)
	assert.Equal(t, slices.Compact(listed), slices.Sorted(slices.Values(gate.Benchmarks)), "WriteBench's doc comment and gate.Benchmarks")

	t0 := time.Unix(1_700_000_000, 0)
	traffic := sampleRaw()
	traffic.Traffic = &record.Traffic{Start: t0, SharedJ: 10, IdealJ: math.NaN(), Requests: []record.TrafficRequest{
		{Run: record.RunShared, Model: "A", Planned: t0, Issued: t0, TTFTS: 0.1, HasTPOT: true, TPOTS: 0.01, Good: true},
	}}
	k8s := sampleRaw()
	k8s.Kubernetes = sampleKubernetes()
	seen := map[string]bool{}
	for _, raw := range []record.Raw{goldenRaw(), k8s, traffic} {
		var b bytes.Buffer
		require.NoError(t, WriteBench(&b, raw))
		rd := benchfmt.NewReader(&b, "bench.txt")
		for rd.Scan() {
			if r, ok := rd.Result().(*benchfmt.Result); ok {
				first, _, _ := strings.Cut(string(r.Name), "/")
				seen[first] = true
				assert.Contains(t, gate.Benchmarks, first, "Benchmark%s", r.Name)
			}
		}
		require.NoError(t, rd.Err())
	}
	for _, n := range []string{"Restart", "Sleep", "Serve", "Switch", "Traffic", "TrafficEnergy", "PodStart"} {
		assert.True(t, seen[n], "the records write Benchmark%s (so the check above covers it)", n)
	}
}

// TestEveryGatedUnitHasADirection: every unit WriteBench writes says
// which way is better (its Unit line's better=), but the machine's load
// (shown, never gated): the regression gate gates no unit without one, so
// a unit written without it is a figure no baseline ever judges. The
// records hold every kind of line: the golden's (costs, energy), a level-0
// and a KV-only release cycle (GiB/freed, sec/held, sec/release), several
// GPUs, the Kubernetes phase and traffic.
func TestEveryGatedUnitHasADirection(t *testing.T) {
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
	better := map[string]bool{}
	for _, m := range BenchUnits() {
		if m.Key == "better" && (m.Value == "higher" || m.Value == "lower") {
			better[m.Unit] = true
		}
	}
	written := map[string]bool{}
	for _, raw := range []record.Raw{cycles, k8s, traffic} {
		for _, r := range BenchResults(raw) {
			for _, v := range r.Values {
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
