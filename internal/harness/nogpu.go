package harness

import (
	"errors"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
)

// NoGPU says why the run cfg describes needs hardware this machine lacks:
// a gpu-tag build with no config file (its defaults read NVML) where the
// NVIDIA driver is missing. Then `go test -tags gpu ./...` FAILs with this
// reason and a NOT RUN report (WriteNotRun): a gate must never be green
// on a GPU runner whose driver did not load. With -short (hardware tests
// skipped, as Go tests skip long or hardware-bound work) it is skipped.
// "" where the run goes ahead: a config file was given (its failures are
// the user's to see), the memory source is not NVML, or NVML loads (a GPU
// runner, where a broken driver fails the run).
func NoGPU(cfg config.Config, getenv func(string) string) string {
	return noGPU(config.GPUTag, cfg, getenv, func() error { return backend.ProbeSystemNVML() })
}

func noGPU(gpuTag bool, cfg config.Config, getenv func(string) string, probe func() error) string {
	if !gpuTag || getenv(config.EnvFile) != "" || cfg.Memory != "nvml" {
		return ""
	}
	if err := probe(); errors.Is(err, backend.ErrNoNVML) {
		return "-tags gpu with no " + config.EnvFile + " runs the reference protocol on this machine's GPU, and it has none: " + err.Error() +
			"; install the NVIDIA driver, whose libnvidia-ml.so.1 NVML needs (in a container, run it with the NVIDIA Container Toolkit), " +
			"or run go test -short -tags gpu ./... to skip the hardware tests"
	}
	return ""
}
