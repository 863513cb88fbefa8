package main

import (
	"context"
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
	_, err := run(t.Context(), &out, foreign, good, 10, 0.05, true)
	assert.ErrorContains(t, err, "baseline: "+foreign+": none of its 1 benchmark(s) (BenchmarkParse) is wakebench's")
	_, err = run(t.Context(), &out, good, rep, 10, 0.05, true)
	assert.ErrorContains(t, err, "this run: "+rep+" looks like a report.json")
	_, err = run(t.Context(), &out, good, foreign, 10, 0.05, true)
	assert.ErrorContains(t, err, "this run: "+foreign+": none of its")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = run(ctx, &out, good, good, 10, 0.05, true)
	assert.ErrorIs(t, err, context.Canceled)

	n, err := run(t.Context(), &out, cut, good, 10, 0.05, true)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Contains(t, out.String(), "note: baseline "+cut+": last line cut (no newline at the end of the file): ")
}
