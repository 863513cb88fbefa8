package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/report"
)

// TestNoGPU: only a gpu-tag run with no config file on a machine without an
// NVIDIA driver is skipped; a config file, another memory source, or a
// driver that is there but fails lets the run go ahead (and fail).
func TestNoGPU(t *testing.T) {
	noDriver := func() error { return fmt.Errorf("NVML init: %w", backend.ErrNoNVML) }
	broken := func() error { return errors.New("NVML init: ERROR_DRIVER_NOT_LOADED") }
	noFile := func(string) string { return "" }
	file := func(k string) string { return map[string]string{config.EnvFile: "gpu.json"}[k] }
	cfg := config.SimDefault()
	cfg.Command, cfg.Memory = "vllm", "nvml"

	reason := noGPU(true, cfg, noFile, noDriver)
	assert.Contains(t, reason, "has none: NVML init: libnvidia-ml.so.1 not found")
	assert.Contains(t, reason, "install the NVIDIA driver", "says what to install")
	assert.Contains(t, reason, "go test -short -tags gpu", "and how to skip the hardware")
	assert.Empty(t, noGPU(false, cfg, noFile, noDriver), "without the gpu tag nothing is skipped")
	assert.Empty(t, noGPU(true, cfg, file, noDriver), "a config file asks for the run")
	assert.Empty(t, noGPU(true, cfg, noFile, broken), "a GPU runner with a broken driver fails")
	assert.Empty(t, noGPU(true, cfg, noFile, func() error { return nil }), "a GPU runner runs")
	cfg.Memory = "none"
	assert.Empty(t, noGPU(true, cfg, noFile, noDriver), "no NVML asked for")
}

// TestWriteNotRun: a run that cannot measure here leaves a NOT RUN report
// whose reason and summary say why, in place of an earlier run's outputs,
// so a CI step reading out/ never finds a stale PASS.
func TestWriteNotRun(t *testing.T) {
	cfg := config.SimDefault()
	cfg.OutDir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cfg.OutDir, "bench.txt"), []byte("BenchmarkOld 1 1 ns/op\n"), 0o644))
	require.NoError(t, WriteNotRun(cfg, "no NVIDIA driver here"))
	rep := readReport(t, cfg.OutDir)
	assert.Equal(t, report.StatusNotRun, rep.Status)
	assert.Equal(t, "no NVIDIA driver here", rep.NotRunReason)
	assert.Empty(t, rep.Failures)
	sum, err := os.ReadFile(filepath.Join(cfg.OutDir, "summary.md"))
	require.NoError(t, err)
	assert.Contains(t, string(sum), "# wakebench: NOT RUN")
	assert.Contains(t, string(sum), "Nothing was measured: no NVIDIA driver here")
	assert.NoFileExists(t, filepath.Join(cfg.OutDir, "bench.txt"), "an earlier run's outputs are gone")
}
