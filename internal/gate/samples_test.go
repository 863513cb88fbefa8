package gate

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBaselineRefusesSamplesItCannotJudge is issue 47's fourth item: one
// +Inf, NaN or negative sample in a baseline run made its metric's median
// infinite or wrong (shown −100 %) and un-gated it without a word. Each
// is refused where the baseline is checked (CheckBaseline, at config
// load; LoadBaseline, ReadRun for wakegate's own run), naming the file,
// the line and the sample; a share released or an energy below zero is a
// measurement (a model that held more asleep than awake; a counter's
// difference less the reads around it) and is read.
func TestBaselineRefusesSamplesItCannotJudge(t *testing.T) {
	dir := t.TempDir()
	head := "Unit sec/wake better=lower\n"
	for _, c := range []struct {
		name, line, want string
	}{
		{"inf", "BenchmarkSleep/model=A/level=1 1 +Inf sec/wake", ":3: BenchmarkSleep/model=A/level=1: +Inf sec/wake: not a finite number"},
		{"nan", "BenchmarkSleep/model=A/level=1 1 NaN sec/wake", ":3: BenchmarkSleep/model=A/level=1: NaN sec/wake: not a finite number"},
		{"negative", "BenchmarkSleep/model=A/level=1 1 -0.2 sec/wake", ":3: BenchmarkSleep/model=A/level=1: -0.2 sec/wake: negative, which a sec/wake cannot be"},
		{"negative memory", "BenchmarkSleep/model=A/level=1 1 0.2 sec/wake -1 GiB/residual", ":3: BenchmarkSleep/model=A/level=1: -1 GiB/residual: negative"},
		{"negative load", "BenchmarkHost/window=A-sleep-level1 1 -3 %-others-cpu 0.1 wait/run", ":3: BenchmarkHost/window=A-sleep-level1: -3 %-others-cpu: negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".bench.txt")
			writeFile(t, path, head+"BenchmarkSleep/model=A/level=1 1 0.5 sec/wake\n"+c.line+"\nBenchmarkSleep/model=A/level=1 1 0.6 sec/wake\n", t0)
			err := CheckBaseline(t.Context(), path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "baseline: "+path+c.want)
			assert.Contains(t, err.Error(), "the gate cannot judge a run with it")
			_, err = ReadRun(path)
			assert.ErrorContains(t, err, path+c.want, "wakegate's own run is read alike")
		})
	}

	// Several bad samples: each named, with its line.
	path := filepath.Join(dir, "two.bench.txt")
	writeFile(t, path, head+"BenchmarkSleep/model=A/level=1 1 +Inf sec/wake\nBenchmarkSleep/model=A/level=1 1 0.5 sec/wake\nBenchmarkSleep/model=A/level=2 1 -1 sec/wake\n", t0)
	err := CheckBaseline(t.Context(), path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+":2: BenchmarkSleep/model=A/level=1: +Inf sec/wake")
	assert.Contains(t, err.Error(), path+":4: BenchmarkSleep/model=A/level=2: -1 sec/wake")

	// Signed units, and a zero, are read.
	ok := filepath.Join(dir, "signed.bench.txt")
	writeFile(t, ok, "BenchmarkMemory/model=A 1 -4.5 %-released\nBenchmarkEnergy/model=A/op=wake-l1 1 -0.3 J/wake\nBenchmarkSwitch/dir=A→B 1 0.1 sec/wake -2 J/switch\nBenchmarkSleep/model=A/level=0 1 0 GiB/freed\n", t0)
	require.NoError(t, CheckBaseline(t.Context(), ok))
	r, err := ReadRun(ok)
	require.NoError(t, err)
	assert.Equal(t, []float64{-4.5}, r.Bench.Values[BenchKey{"Memory/model=A", "%-released"}])
	assert.Equal(t, []float64{-2}, r.Bench.Values[BenchKey{"Switch/dir=A→B", "J/switch"}])

	// ReadBench, the one benchfmt reader of other tools (perf, the figure
	// test), reads every value as written.
	b, err := ReadBench(strings.NewReader("BenchmarkX 1 -1 late-p50-ms\nBenchmarkX 1 +Inf ns/op\n"), "go-test")
	require.NoError(t, err)
	assert.Equal(t, []float64{-1}, b.Values[BenchKey{"X", "late-p50-ms"}])
	assert.True(t, math.IsInf(b.Values[BenchKey{"X", "ns/op"}][0], 1))
}
