package gate

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// TestRunOfIsTheRunItsBenchTxtHolds: the gate judges a run's own samples
// in memory (RunOf, BenchOf) exactly as it would judge the bench.txt they
// are written to (ParseRun): the same values per benchmark and unit, the
// same better directions, names' fields, start and order. A value the file rounded, a
// unit benchfmt tidied or a line the writer dropped would differ here.
func TestRunOfIsTheRunItsBenchTxtHolds(t *testing.T) {
	rec := record.New([]string{"A", "B"}, nil)
	rec.SetSetup(record.Setup{GPU: "1 × test GPU", Runtime: "vLLM 0.0 (test)", Simulated: &record.Simulated{Profile: "tiny", TimeScale: 0.1}})
	rec.Writers().Restarts.Add("A", record.Restart{ReadyS: 1.25, FirstTokenS: 1.5})
	rec.Writers().Restarts.Add("A", record.Restart{Warm: true, ReadyS: 0.75, FirstTokenS: 1.0 / 3})
	rec.PlanCycles("A", 1, 2)
	for _, s := range []float64{0.1, 0.2 / 3} {
		rec.Writers().Cycles.Add("A", record.Cycle{Level: 1, OK: true, SleepS: s, WakeAPIS: 2 * s, ToFirstTokenS: 3 * s, ResidualGiB: math.Pi})
	}
	rec.Writers().Perf.Add("B", record.PerfRun{Stage: record.PhaseBaseline, Concurrency: 4, Rounds: 1, Planned: 2, Success: 2, RoundsPassed: 1,
		RoundTPS: []float64{123.456789}, TTFT: []float64{0.01, 0.02}, ReqTPS: []float64{30.1, 29.9}})
	rec.Writers().Handoffs.Add(record.Handoff{From: "A", To: "B", OK: true, SleepS: 0.3, WakeS: 0.4, ToFirstTokenS: 0.9, EnergyJ: math.NaN()})
	rec.Finish([]float64{1, 2.5, 2}, nil, time.Date(2026, 12, 4, 15, 0, 0, 123456789, time.UTC))
	raw := rec.Raw()
	require.False(t, raw.Started.IsZero(), "the record knows when the run started")

	var buf bytes.Buffer
	require.NoError(t, report.WriteBench(&buf, raw))
	fromFile, err := ParseRun(buf.Bytes(), "this run", time.Time{})
	require.NoError(t, err)
	inMemory, err := RunOf(BenchOf(report.BenchUnits(), report.BenchResults(raw)), "this run", raw.Started)
	require.NoError(t, err)

	require.NotEmpty(t, fromFile.Bench.Values)
	assert.Equal(t, fromFile.Bench.Values, inMemory.Bench.Values)
	assert.Equal(t, fromFile.Bench.Names, inMemory.Bench.Names, "the names' fields the file's reader splits are those the run built")
	assert.Equal(t, fromFile.Bench.Simulated, inMemory.Bench.Simulated)
	for k := range fromFile.Bench.Values {
		assert.Equal(t, fromFile.Bench.Meta.GetBetter(k.Unit), inMemory.Bench.Meta.GetBetter(k.Unit), k.Unit)
	}
	assert.True(t, fromFile.Started.Equal(inMemory.Started), "%v vs %v", fromFile.Started, inMemory.Started)
	assert.Equal(t, fromFile.Order, inMemory.Order)

	_, err = RunOf(BenchOf(report.BenchUnits(), nil), "this run", raw.Started)
	assert.ErrorContains(t, err, "this run: no benchmark results")
}

// TestFileNameDropsGoTestsSuffix: a name of go test -bench output ends in
// its -GOMAXPROCS suffix, which FileName drops before it splits the name:
// level=1-16 is level 1, as bench.txt writes it.
func TestFileNameDropsGoTestsSuffix(t *testing.T) {
	n := FileName(benchfmt.Name("Sleep/model=A/level=1-16"))
	assert.Equal(t, record.NewBenchName("Sleep", "model", "A", "level", "1"), n)
	assert.Equal(t, "Memory", FileName(benchfmt.Name("Memory/device-2")).Base)
	assert.Equal(t, "device", FileName(benchfmt.Name("Memory/device-2")).Keys[0].Value)
}
