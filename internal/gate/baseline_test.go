package gate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
)

// TestJudgeBoundsAHistory: a history of 10,000 runs (a baseline that ran
// the change-point search past 9.5 minutes) is judged against its newest
// HistoryMaxRuns runs only, and the verdict says so. The old runs' level
// (2 s, until run 5,000) is not seen: the newest hundred are flat at 1 s.
func TestJudgeBoundsAHistory(t *testing.T) {
	const n = 10_000
	jit := []float64{0, 0.008, -0.006, 0.004, -0.01, 0.005}
	hist := make([]Run, n)
	for i := range hist {
		m := 1.0
		if i < n/2 {
			m = 2
		}
		hist[i] = mkRun(t, i, map[string][]float64{wake: around(m*(1+jit[i%len(jit)]), 0.01, 3)})
	}
	vs, err := Judge(t.Context(), hist, mkRun(t, n, map[string][]float64{wake: around(1, 0.01, 3)}), 10, 0.05)
	require.NoError(t, err)
	v := verdict(t, vs, wake)
	assert.Equal(t, HistoryMaxRuns, v.Runs, "the newest %d runs, not %d", HistoryMaxRuns, n)
	assert.Empty(t, v.ChangePoints, "the step at run %d is older than the newest %d runs", n/2, HistoryMaxRuns)
	assert.InDelta(t, 1, v.Base, 0.01)
	assert.Contains(t, v.How, fmt.Sprintf("of a history of %d runs, the newest %d (gate.HistoryMaxRuns)", n, HistoryMaxRuns))
	assert.False(t, v.Regression)
}

// countdown is a context whose Err is nil for its first n calls and
// Canceled after: a cancellation that comes while the work runs, at a
// point fixed by the count, not by the clock.
type countdown struct {
	context.Context
	left, calls atomic.Int64
}

func (c *countdown) Err() error {
	c.calls.Add(1)
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestEDivisiveStopsWhenCancelled: a cancelled context stops the change-
// point search at its next check (before each O(n²) pass), with the cause;
// cancelled before it starts, it does no pass at all.
func TestEDivisiveStopsWhenCancelled(t *testing.T) {
	xs := make([]float64, 2000)
	for i := range xs {
		xs[i] = float64(i%7) / 100
		if i >= 1000 {
			xs[i] += 1
		}
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(record.Stopped{Reason: "go test -timeout 10m0s is near"})
	splits, err := EDivisive(ctx, xs, 0.05, 1)
	require.Error(t, err)
	assert.Nil(t, splits)
	var stopped record.Stopped
	assert.ErrorAs(t, err, &stopped, "the cause is kept: %v", err)
	assert.ErrorContains(t, err, "change points: go test -timeout 10m0s is near")

	// Cancelled after five passes of 200 per split: the sixth check stops it.
	cd := &countdown{Context: t.Context()}
	cd.left.Store(5)
	_, err = EDivisive(cd, xs, 0.05, 1)
	assert.ErrorIs(t, err, context.Canceled)
	// The sixth check sees the cancellation (context.Cause asks Err once
	// more); any further pass would have checked again.
	assert.LessOrEqual(t, cd.calls.Load(), int64(7), "no pass after the cancellation")
}

// TestJudgeStopsWhenCancelled: Judge returns the context's cause, with no
// verdicts, when cancelled before or while it searches a history.
func TestJudgeStopsWhenCancelled(t *testing.T) {
	var hist []Run
	for i := range 12 {
		hist = append(hist, mkRun(t, i, map[string][]float64{wake: around(1, 0.01, 5), ttft: around(0.1, 0.01, 5)}))
	}
	cur := mkRun(t, 20, map[string][]float64{wake: around(1, 0.01, 5), ttft: around(0.1, 0.01, 5)})
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(record.Stopped{Reason: "interrupted by interrupt"})
	vs, err := Judge(ctx, hist, cur, 10, 0.05)
	assert.Nil(t, vs)
	assert.ErrorContains(t, err, "interrupted by interrupt")

	// Cancelled part-way through the first metric's change-point search.
	cd := &countdown{Context: t.Context()}
	cd.left.Store(10)
	vs, err = Judge(cd, hist, cur, 10, 0.05)
	assert.Nil(t, vs)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "judge Serve/model=A/stage=after-wake/conc=4 sec/ttft: change points:")
	assert.LessOrEqual(t, cd.calls.Load(), int64(12), "no pass after the cancellation")
}

// writeFile writes text at path (its directories made) with mtime.
func writeFile(t *testing.T, path, text string, mtime time.Time) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	require.NoError(t, os.Chtimes(path, mtime, mtime))
}

// TestLoadBaselineKeepsTheNewest: of a directory of 1,000 runs, whose
// names sort against their started lines, the newest HistoryMaxRuns are
// read, oldest first, and the notes say how many were left out.
func TestLoadBaselineKeepsTheNewest(t *testing.T) {
	const n = 1000
	dir := t.TempDir()
	for i := range n {
		// run0000 is the newest: names and times sort the other way.
		writeFile(t, filepath.Join(dir, fmt.Sprintf("run%04d", i), "bench.txt"), benchText(t0.Add(time.Duration(n-i)*time.Hour), map[string][]float64{wake: {1}}), t0)
	}
	b, err := LoadBaseline(t.Context(), dir)
	require.NoError(t, err)
	assert.Equal(t, n, b.Found)
	require.Len(t, b.Runs, HistoryMaxRuns)
	for j, r := range b.Runs {
		assert.Equal(t, filepath.Join(dir, fmt.Sprintf("run%04d", HistoryMaxRuns-1-j), "bench.txt"), r.Path)
		assert.Equal(t, OrderStarted, r.Order)
	}
	require.Len(t, b.Notes(), 1)
	assert.True(t, strings.HasPrefix(b.Notes()[0], fmt.Sprintf("the baseline names %d runs: judged against the newest %d (gate.HistoryMaxRuns", n, HistoryMaxRuns)), b.Notes()[0])

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = LoadBaseline(ctx, dir)
	assert.ErrorIs(t, err, context.Canceled)

	// A report.json among a long history is refused by its first line.
	writeFile(t, filepath.Join(dir, "zz", "bench.txt"), `{"status": "PASS"}`+"\n", t0)
	_, err = LoadBaseline(t.Context(), dir)
	assert.ErrorContains(t, err, filepath.Join(dir, "zz", "bench.txt")+" looks like a report.json")
}

// TestReadRunRefusesWhatIsNoRegularFile: a FIFO is refused without being
// opened for a blocking read (which would wait for a writer for ever),
// /dev/zero without being read (it never ends), and a file over
// MaxBenchBytes by its size; as run files, and as a directory's runs.
func TestReadRunRefusesWhatIsNoRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := ReadRun(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		assert.EqualError(t, err, fifo+" is a FIFO (reading it waits for a writer): want a bench.txt file or a directory of runs")
	case <-time.After(time.Minute): // a safety net only: the FIFO has no writer, so any read blocks
		// Unblock the reader so the goroutine ends.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("ReadRun blocked on a FIFO")
	}

	_, err := ReadRun("/dev/zero")
	assert.EqualError(t, err, "/dev/zero is a character device: want a bench.txt file or a directory of runs")

	big := filepath.Join(dir, "big.bench.txt")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxBenchBytes+1)) // sparse: no disk used
	require.NoError(t, f.Close())
	_, err = ReadRun(big)
	assert.EqualError(t, err, fmt.Sprintf("%s holds %d bytes, beyond 64 MiB: not a bench.txt (a run's is kilobytes): want a bench.txt file or a directory of runs", big, MaxBenchBytes+1))

	runs := filepath.Join(dir, "runs")
	writeFile(t, filepath.Join(runs, "a", "bench.txt"), benchText(t0, map[string][]float64{wake: {1}}), t0)
	require.NoError(t, os.MkdirAll(filepath.Join(runs, "b"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(runs, "b", "bench.txt"), 0o644))
	_, err = LoadBaseline(t.Context(), runs)
	assert.ErrorContains(t, err, "baseline: "+filepath.Join(runs, "b", "bench.txt")+" is a FIFO (reading it waits for a writer)")
	require.NoError(t, os.Remove(filepath.Join(runs, "b", "bench.txt")))
	require.NoError(t, os.Mkdir(filepath.Join(runs, "b", "bench.txt"), 0o755))
	_, err = LoadBaseline(t.Context(), runs)
	assert.ErrorContains(t, err, "baseline: "+filepath.Join(runs, "b", "bench.txt")+" is a directory")
}

// TestCheckBaselineRefusesWhatCannotBeJudged: what the gate would refuse
// after the protocol ran, CheckBaseline refuses at once, naming the file.
func TestCheckBaselineRefusesWhatCannotBeJudged(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	writeFile(t, path("empty.txt"), "", t0)
	writeFile(t, path("garbage.txt"), "\x00\x01 not a benchmark\xff\xfe\nhello world\n", t0)
	writeFile(t, path("report.json"), "\n  {\"status\": \"PASS\", \"models\": {}}\n", t0)
	writeFile(t, path("other.txt"), "goos: linux\npkg: example.com/other\nBenchmarkParse-8   \t 1000\t  1234 ns/op\t  56 B/op\nBenchmarkEncode/small-8 \t 500\t 2000 ns/op\nPASS\n", t0)
	writeFile(t, path("good.bench.txt"), benchText(t0, map[string][]float64{wake: {1}}), t0)
	for _, c := range []struct{ spec, want string }{
		{path("empty.txt"), "baseline: " + path("empty.txt") + ": no benchmark results: want the bench.txt of a wakebench run"},
		{path("garbage.txt"), "baseline: " + path("garbage.txt") + ": no benchmark results: want the bench.txt of a wakebench run"},
		{path("report.json"), "baseline: " + path("report.json") + " looks like a report.json (JSON: summaries, not samples, so no difference can be tested): want the run's bench.txt"},
		{path("other.txt"), "baseline: " + path("other.txt") + ": none of its 2 benchmark(s) (BenchmarkEncode/small, BenchmarkParse) is wakebench's (BenchmarkRestart/…, BenchmarkSleep/…"},
		{path("good.bench.txt") + "," + path("other.txt"), "is wakebench's"},
		{"", "baseline: empty"},
		{path("nothing"), "baseline: stat " + path("nothing")},
	} {
		err := CheckBaseline(t.Context(), c.spec)
		assert.ErrorContains(t, err, c.want, c.spec)
	}
	assert.NoError(t, CheckBaseline(t.Context(), path("good.bench.txt")))
}

// TestParseRunNamesACutLastLine: a last line without its newline (a copy
// cut short) is not read, and the baseline's notes name it; the lines
// before it are read.
func TestParseRunNamesACutLastLine(t *testing.T) {
	text := benchText(t0, map[string][]float64{wake: {0.5}}) + "BenchmarkSleep/model=A/level=1 1 0.7 sec/wa"
	r, err := ParseRun([]byte(text), "runs/7/bench.txt", time.Time{})
	require.NoError(t, err)
	assert.Equal(t, []float64{0.5}, r.Bench.Values[BenchKey{"Sleep/model=A/level=1", "sec/wake"}])
	assert.NotContains(t, r.Bench.Values, BenchKey{"Sleep/model=A/level=1", "sec/wa"}, "the cut line's unit is not a metric")
	assert.Equal(t, []string{`baseline runs/7/bench.txt: last line cut (no newline at the end of the file): "BenchmarkSleep/model=A/level=1 1 0.7 sec/wa": not read`},
		Baseline{Runs: []Run{r}, Found: 1}.Notes())

	// The only line cut: nothing is left, and the error says why.
	_, err = ParseRun([]byte("BenchmarkSleep/model=A/level=1 1 0.7 sec/wake"), "one.txt", t0)
	assert.EqualError(t, err, `one.txt: no benchmark results (last line cut (no newline at the end of the file): "BenchmarkSleep/model=A/level=1 1 0.7 sec/wake": not read): `+wantBench)

	r, err = ParseRun([]byte(benchText(t0, map[string][]float64{wake: {0.5}})), "whole.txt", t0)
	require.NoError(t, err)
	assert.Empty(t, r.Warnings, "a file that ends with its newline")
}

// TestJudgeNamesMetricsTheBaselineLacks: a metric of this run that no
// baseline run has is a NOT EVALUATED verdict (it used to be dropped
// without a word); one that some baseline runs lack is judged on the
// others, and its Why names those that lack it.
func TestJudgeNamesMetricsTheBaselineLacks(t *testing.T) {
	base := []Run{
		mkRun(t, 0, map[string][]float64{wake: around(1, 0.01, 5)}),
		mkRun(t, 1, map[string][]float64{wake: around(1, 0.01, 5), ttft: around(0.1, 0.01, 5)}),
		mkRun(t, 2, map[string][]float64{wake: around(1, 0.01, 5), ttft: around(0.1, 0.01, 5)}),
	}
	cur := mkRun(t, 3, map[string][]float64{wake: around(1, 0.01, 5), ttft: around(0.1, 0.01, 5), rdy: around(3, 0.01, 5)})
	vs, err := Judge(t.Context(), base, cur, 10, 0.05)
	require.NoError(t, err)
	v := verdict(t, vs, rdy)
	assert.Equal(t, RuleNew, v.Rule)
	assert.False(t, v.Regression)
	assert.Equal(t, "NOT EVALUATED: in this run, in none of the 3 baseline run(s) (a phase, model or metric the baseline lacks): not judged", v.Why)
	v = verdict(t, vs, ttft)
	assert.Equal(t, RuleRuns, v.Rule)
	assert.Equal(t, 2, v.Runs)
	assert.Contains(t, v.Why, "not in 1 of the 3 baseline runs (run00/bench.txt): judged on the 2 that have it")
	assert.NotContains(t, verdict(t, vs, wake).Why, "not in")

	var out strings.Builder
	require.NoError(t, WriteVerdicts(&out, vs))
	assert.Regexp(t, `Restart/model=A/kind=warm +sec/ready +– +3 +– +new \(0\) +– +none +\(NOT EVALUATED: not in the baseline\)`, out.String())
}
