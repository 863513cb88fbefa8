package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const bench = "# wakebench run started 2026-01-02T03:04:05Z\nUnit sec/wake better=lower\n" +
	"BenchmarkSleep/model=A/level=1 1 1.00 sec/wake\nBenchmarkSleep/model=A/level=1 1 1.01 sec/wake\nBenchmarkSleep/model=A/level=1 1 0.99 sec/wake\n"

// TestRunChecksAsTheProtocolGateDoes: wakegate refuses what the protocol's
// gate refuses (another project's bench file, a report.json as the run),
// stops on a cancelled context, and prints the notes of a cut last line.
func TestRunChecksAsTheProtocolGateDoes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	good := write("good.txt", bench)
	foreign := write("other.txt", "BenchmarkParse-8 1000 1234 ns/op\n")
	rep := write("report.json", `{"status": "PASS"}`+"\n")
	cut := write("cut.txt", bench+"BenchmarkSleep/model=A/level=1 1 0.5 sec/wa")

	var out strings.Builder
	_, err := run(t.Context(), &out, foreign, good, 10, 0.05, 0, true)
	assert.ErrorContains(t, err, "baseline: "+foreign+": none of its 1 benchmark(s) (BenchmarkParse) is wakebench's")
	_, err = run(t.Context(), &out, good, rep, 10, 0.05, 0, true)
	assert.ErrorContains(t, err, "this run: "+rep+" looks like a report.json")
	_, err = run(t.Context(), &out, good, foreign, 10, 0.05, 0, true)
	assert.ErrorContains(t, err, "this run: "+foreign+": none of its")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = run(ctx, &out, good, good, 10, 0.05, 0, true)
	assert.ErrorIs(t, err, context.Canceled)

	fails, err := run(t.Context(), &out, cut, good, 10, 0.05, 0, true)
	require.NoError(t, err)
	assert.False(t, fails)
	assert.Contains(t, out.String(), "note: baseline "+cut+": last line cut (no newline at the end of the file): ")
}

// TestRunFailsAsTheProtocolGateDoes: wakegate fails (exit 1) where the
// protocol's gate fails the run: on a regression, and where it judged
// fewer metrics than -min-judged (three wakes a run in one baseline run:
// none judged, NOT EVALUATED) unless that is 0; it says what it judged
// either way. A baseline sample the gate cannot judge is an error (exit
// 2) naming its file and line.
func TestRunFailsAsTheProtocolGateDoes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	lines := func(xs ...float64) string {
		s := "Unit sec/wake better=lower\n"
		for _, x := range xs {
			s += fmt.Sprintf("BenchmarkSleep/model=A/level=1 1 %g sec/wake\n", x)
		}
		return s
	}
	three, threeSlow := write("three.txt", lines(1, 1.01, 0.99)), write("three-slow.txt", lines(14, 14.1, 13.9))
	five, fiveSlow := write("five.txt", lines(1, 1.01, 0.99, 1.02, 0.98)), write("five-slow.txt", lines(2, 2.01, 1.99, 2.02, 1.98))

	var out strings.Builder
	fails, err := run(t.Context(), &out, three, threeSlow, 10, 0.05, 1, true)
	require.NoError(t, err)
	assert.True(t, fails, "+1300 %% on a metric no rule judges: not a pass")
	assert.Contains(t, out.String(), "NOT EVALUATED: judged 0 of 1 metrics, fewer than thresholds.regression_min_judged (1) asks")
	assert.Contains(t, out.String(), "worst change among them Sleep/model=A/level=1 sec/wake +1300.0 %")
	assert.Contains(t, out.String(), "regressions against baseline, limit == 0: NOT EVALUATED (judged 0 of 1 metrics")

	out.Reset()
	fails, err = run(t.Context(), &out, three, threeSlow, 10, 0.05, 0, true)
	require.NoError(t, err)
	assert.False(t, fails, "-min-judged 0 accepts a gate that judged nothing")
	assert.Contains(t, out.String(), "judged 0 of 1 metrics (thresholds.regression_min_judged: 0)")

	out.Reset()
	fails, err = run(t.Context(), &out, five, five, 10, 0.05, 1, true)
	require.NoError(t, err)
	assert.False(t, fails)
	assert.Contains(t, out.String(), "judged 1 of 1 metrics (thresholds.regression_min_judged: 1)")
	fails, err = run(t.Context(), &out, five, fiveSlow, 10, 0.05, 1, true)
	require.NoError(t, err)
	assert.True(t, fails, "twice as slow, five cycles a run")
	assert.Contains(t, out.String(), "REGRESSION Sleep/model=A/level=1 sec/wake +100.0 %")

	inf := write("inf.txt", lines(1, 1.01)+"BenchmarkSleep/model=A/level=1 1 +Inf sec/wake\n")
	_, err = run(t.Context(), &out, inf, five, 10, 0.05, 1, true)
	assert.ErrorContains(t, err, "baseline: "+inf+":4: BenchmarkSleep/model=A/level=1: +Inf sec/wake: not a finite number")
}
