package harness

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
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

	assert.Contains(t, noGPU(true, cfg, noFile, noDriver), "has none: NVML init: libnvidia-ml.so.1 not found")
	assert.Empty(t, noGPU(false, cfg, noFile, noDriver), "without the gpu tag nothing is skipped")
	assert.Empty(t, noGPU(true, cfg, file, noDriver), "a config file asks for the run")
	assert.Empty(t, noGPU(true, cfg, noFile, broken), "a GPU runner with a broken driver fails")
	assert.Empty(t, noGPU(true, cfg, noFile, func() error { return nil }), "a GPU runner runs")
	cfg.Memory = "none"
	assert.Empty(t, noGPU(true, cfg, noFile, noDriver), "no NVML asked for")
}
