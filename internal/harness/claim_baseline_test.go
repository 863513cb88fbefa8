package harness

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
)

// TestClaimKeepsTheBaseline (issue 48): a baseline inside out_dir is
// refused at config load, and the FAIL report of that refusal claimed
// out_dir too, deleting the bench.txt the message told its user to move.
// The baseline's files stay; the earlier run's other outputs go.
func TestClaimKeepsTheBaseline(t *testing.T) {
	out := t.TempDir()
	cfg := config.SimDefault()
	cfg.OutDir = out
	base := filepath.Join(out, "bench.txt")
	cfg.Baseline = base
	require.NoError(t, os.WriteFile(base, []byte("BenchmarkX 1 2 ns/op\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(out, "samples.csv"), []byte("stale\n"), 0o644))
	require.NoError(t, WriteAborted(cfg, "config", errors.New("baseline: inside out_dir")))
	b, err := os.ReadFile(base)
	require.NoError(t, err, "the baseline is kept")
	assert.Equal(t, "BenchmarkX 1 2 ns/op\n", string(b))
	assert.NoFileExists(t, filepath.Join(out, "samples.csv"), "the earlier run's other outputs are removed")
	assert.FileExists(t, filepath.Join(out, "report.json"))
}
