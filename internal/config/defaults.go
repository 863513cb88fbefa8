//go:build !gpu

package config

// Without the gpu build tag the suite runs on vllmsim and its simulated GPU,
// with two tiny models: what `go test ./...` and CI run.
func backendDefaults(c *Config) {
	c.Command, c.Memory = "vllmsim", "sim"
	c.Models = []Model{
		{Label: "A", Name: "tiny-a", GPUMemoryUtilization: 0.45},
		{Label: "B", Name: "tiny-b", GPUMemoryUtilization: 0.45},
	}
}

// GPUTag reports whether this build has the gpu tag.
const GPUTag = false
