package report

import (
	"bytes"
	"flag"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from this code")

// goldenRaw is sampleRaw with fixed times, checks, a failure and the
// physical-limit inputs, so every writer has something to write.
func goldenRaw() record.Raw {
	raw := sampleRaw()
	raw.Started, raw.Finished = time.Unix(1_700_000_000, 0), time.Unix(1_700_000_600, 500_000_000)
	raw.Checks = []record.Check{
		gate.Evaluate("restart.starts", "A", 3, "==", 3),
		gate.Evaluate("sleep.level1.to_first_token_s.p95", "A", 4.1, "<=", 3),
	}
	raw.Failures = []record.Failure{{Phase: "sleep-level1", Model: "A", Step: "cycle 2 wake", Error: "wake A from level 1: wake_up: no answer"}}
	raw.MemorySource = "sim"
	raw.Phases = []string{"restart", "baseline", "sleep-level1"}
	raw.GPUFacts = &record.GPUFacts{Name: "G (simulated)", MemoryGiB: 48, PCIeGen: 4, PCIeWidth: 16, MaxPCIeGen: 4, MaxPCIeWidth: 16,
		PCIeGBps: 32, MemBusWidthBits: 384, MaxMemClockMHz: 9001, MemoryGBps: 864.1, Simulated: true}
	raw.Weights = map[string]record.Weight{"A": {GiB: 8, Source: "server log: Model loading took 8.0 GiB"}}
	return raw
}

// TestGoldenOutputs holds report.json, bench.txt and summary.md of a fixed
// record to the files in testdata/golden: a change to any writer shows in
// the diff. go test ./internal/report -run Golden -update rewrites them.
func TestGoldenOutputs(t *testing.T) {
	raw := goldenRaw()
	rep := Build(raw)
	for name, write := range map[string]func(io.Writer) error{
		"report.json": func(w io.Writer) error { return WriteJSON(w, rep) },
		"bench.txt":   func(w io.Writer) error { return WriteBench(w, raw) },
		"summary.md":  func(w io.Writer) error { return WriteSummary(w, rep) },
	} {
		t.Run(name, func(t *testing.T) {
			var got bytes.Buffer
			require.NoError(t, write(&got))
			path := filepath.Join("testdata", "golden", name)
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, got.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "no golden file: run go test ./internal/report -run Golden -update and review the diff")
			assert.Equal(t, string(want), got.String(), "%s differs from %s (if the change is meant, rerun with -update and review the diff)", name, path)
		})
	}
}
