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
