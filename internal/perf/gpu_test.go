//go:build gpu

package perf_test

import (
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/wakebench/wakebench/internal/backend"
)

// BenchmarkSamplerNVML is BenchmarkSampler on the real device 0 through
// NVML (gpu tag, on a GPU runner: `make perf PERF_TAGS=gpu`).
func BenchmarkSamplerNVML(b *testing.B) {
	src, err := backend.OpenNVML(nvml.New(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	for _, hz := range []int{50, 200} {
		b.Run(fmt.Sprintf("hz=%d", hz), func(b *testing.B) { benchSampler(b, src, hz) })
	}
}
