package report_test

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
	"github.com/wakebench/wakebench/internal/phases"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// These tests read what packages above report make of its lines (the
// gate's benchmarks, the phases' families), so they are outside it: the
// phases name their units from report.

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
	traffic := report.SampleRaw()
	traffic.Traffic = &record.Traffic{Start: t0, SharedJ: 10, IdealJ: math.NaN(), Requests: []record.TrafficRequest{
		{Run: record.RunShared, Model: "A", Planned: t0, Issued: t0, TTFTS: 0.1, HasTPOT: true, TPOTS: 0.01, Good: true},
	}}
	k8s := report.SampleRaw()
	k8s.Kubernetes = report.SampleKubernetes()
	seen := map[string]bool{}
	for _, raw := range []record.Raw{report.GoldenRaw(), k8s, traffic} {
		var b bytes.Buffer
		require.NoError(t, report.WriteBench(&b, raw))
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

// TestLinesAreOfTheirFamilies: every line of every kind (the golden
// record's, level-0 and KV-only release cycles, a model across two GPUs,
// the Kubernetes phase's, traffic's) is of a family a phase declares
// or of one of no window (phases.LineFamily), and
// carries only units its family declares: TestOutputs holds a real run's
// lines to the same, but a run has no Kubernetes phase and one GPU.
func TestLinesAreOfTheirFamilies(t *testing.T) {
	seen := map[string]bool{}
	for _, raw := range report.EveryKindOfLine() {
		for _, r := range report.BenchResults(raw) {
			f, _, ok := phases.LineFamily(r.Name)
			if !assert.True(t, ok, "%s: of no family", r.Name) {
				continue
			}
			for _, v := range r.Result.Values {
				seen[f.ID()+" "+v.Unit] = true
				assert.True(t, f.Has(v.Unit), "%s: %s, which its family %s does not declare", r.Name, v.Unit, f.ID())
			}
		}
	}
	for _, want := range []string{"Sleep/level=0 sec/held", "Sleep/level=kv sec/release", "Sleep/level=1 GiB/residual-max-gpu", "PodStart sec/scheduled", "TrafficEnergy J", "Host %-others-cpu"} {
		assert.True(t, seen[want], "the records write %s (so the check above covers it)", want)
	}
}
