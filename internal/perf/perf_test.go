package perf_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/perf"
)

const output = `goos: linux
goarch: amd64
pkg: github.com/wakebench/wakebench/internal/perf
cpu: AMD EPYC
BenchmarkStreamOverhead/c=1-2   	      61	  37935864 ns/op	      1952 chunks	        50.45 p50-µs	       80 p99-µs
BenchmarkStreamOverhead/c=1-2   	      61	  37935864 ns/op	      1952 chunks	        50.45 p50-µs	       120 p99-µs
BenchmarkStreamOverhead/c=1-2   	      61	  37935864 ns/op	      1952 chunks	        50.45 p50-µs	       90 p99-µs
BenchmarkStreamRead 	    6592	    336186 ns/op	      1308 ns/chunk
BenchmarkSampler/hz=50          	     100	  20000259 ns/op	         3 core-%
BenchmarkRequestRate/gen=wakebench 1 9000 req/s
BenchmarkRequestRate/gen=wrk 1 20000 req/s
BenchmarkRequestRate/gen=vegeta 1 12000 req/s
`

func TestTableJudgesEveryGoal(t *testing.T) {
	vals, cpu, err := perf.Read(strings.NewReader(output), "test")
	require.NoError(t, err)
	assert.Equal(t, "AMD EPYC", cpu)
	assert.Equal(t, []float64{80, 120, 90}, vals["StreamOverhead/c=1 p99-µs"], "the -GOMAXPROCS suffix is dropped")
	assert.Equal(t, []float64{1308}, vals["StreamRead ns/chunk"], "units as reported, not as benchfmt tidies them")

	goals := []perf.Goal{
		{Figure: "delay", Bench: "StreamOverhead/c=1", Unit: "p99-µs", Op: "<=", Limit: 100},
		{Figure: "sampler", Bench: "Sampler/hz=50", Unit: "core-%", Op: "<=", Limit: 2},
		{Figure: "rate", Bench: "RequestRate/gen=wakebench", Unit: "req/s", Op: ">=", Limit: 0.5,
			Peers: []string{"RequestRate/gen=wrk", "RequestRate/gen=vegeta"}},
		{Figure: "p50", Bench: "StreamOverhead/c=1", Unit: "p50-µs"},
		{Figure: "absent", Bench: "WakeResolution", Unit: "late-p99-ms", Op: "<=", Limit: 10},
		{Figure: "peer absent", Bench: "RequestRate/gen=wakebench", Unit: "req/s", Op: ">=", Limit: 0.5, Peers: []string{"RequestRate/gen=ab"}},
		{Figure: "gpu only", Bench: "SamplerNVML/hz=50", Unit: "core-%", Op: "<=", Limit: 2, GPUOnly: true},
	}
	rows := perf.Table(goals, vals)
	require.Len(t, rows, len(goals)-1, "a GPU-only figure not measured is left out")
	assert.Equal(t, 90.0, rows[0].Measured, "median of the three runs")
	assert.InDelta(t, 100.0/90, rows[0].Ratio, 1e-9, "≤ goal: limit / measured")
	assert.True(t, rows[0].Met)
	assert.InDelta(t, 2.0/3, rows[1].Ratio, 1e-9)
	assert.False(t, rows[1].Met, "3 % of a core misses ≤ 2 %")
	assert.Equal(t, 10000.0, rows[2].Limit, "0.5 × the best peer (wrk)")
	assert.InDelta(t, 0.9, rows[2].Ratio, 1e-9, "≥ goal: measured / limit")
	assert.False(t, rows[2].Met)
	assert.Contains(t, rows[2].Note, "RequestRate/gen=wrk")
	assert.True(t, rows[3].Met, "a figure without a goal is reported, not judged")
	assert.True(t, math.IsNaN(rows[4].Measured))
	assert.False(t, rows[4].Met, "not measured is not met")
	assert.False(t, rows[5].Met, "a missing peer leaves the goal unmet")
	assert.Contains(t, rows[5].Note, "peers not measured: RequestRate/gen=ab")
	assert.Equal(t, 1, perf.Unmeasured(rows), "only the absent figure is unmeasured: a missed goal and a missing peer have their figure")

	var sb strings.Builder
	missed, err := perf.Write(&sb, rows, "test box")
	require.NoError(t, err)
	assert.Equal(t, 4, missed)
	out := sb.String()
	assert.NotContains(t, out, "NaN", "an unmeasured figure reads —")
	for _, want := range []string{"figure", "goal", "measured", "ratio", "≤ 100 p99-µs", "90 p99-µs", "1.11", "PASS", "MISS",
		"≥ 0.5 × best peer = 10000 req/s", "info", "machine: test box"} {
		assert.Contains(t, out, want)
	}
}

func TestReadNamesMalformedLines(t *testing.T) {
	vals, _, err := perf.Read(strings.NewReader("BenchmarkRequestRate/gen=wrk 1  req/s\nBenchmarkRequestRate/gen=vegeta 1 9 req/s\n"), "peers.txt")
	require.Error(t, err, "a rate the script failed to extract")
	assert.Contains(t, err.Error(), "peers.txt:1")
	assert.Equal(t, []float64{9}, vals["RequestRate/gen=vegeta req/s"], "the rest is read")
}

func TestGoalsNameDistinctFigures(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range perf.Goals {
		require.NotEmpty(t, g.Bench, g.Figure)
		require.NotEmpty(t, g.Unit, g.Figure)
		assert.Contains(t, []string{"", "<=", ">="}, g.Op, g.Figure)
		assert.False(t, seen[g.Bench+" "+g.Unit], "figure listed twice: %s %s", g.Bench, g.Unit)
		seen[g.Bench+" "+g.Unit] = true
	}
}
