package gate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadBench: go test output and bench.txt read alike (the -N suffix
// dropped, units as written); a malformed line is an error naming file and
// line, and the rest is still read.
func TestReadBench(t *testing.T) {
	in := "cpu: Some CPU\nBenchmarkSleep/model=A/level=1-8 1 0.5 sec/wake\nBenchmarkX 1 200 ns/op\nBenchmarkBad 1 x tok/s\nBenchmarkSleep/model=A/level=1 1 0.7 sec/wake\n"
	b, err := ReadBench(strings.NewReader(in), "old.txt")
	require.Error(t, err)
	assert.ErrorContains(t, err, "old.txt:4")
	assert.Equal(t, "Some CPU", b.CPU)
	assert.Equal(t, []float64{0.5, 0.7}, b.Values[BenchKey{"Sleep/model=A/level=1", "sec/wake"}])
	assert.Equal(t, []float64{200}, b.Values[BenchKey{"X", "ns/op"}], "units as written, not tidied")

	_, err = ReadBench(strings.NewReader(`{"status": "PASS"}`), "report.json")
	assert.ErrorContains(t, err, "report.json looks like a report.json (JSON")
}
