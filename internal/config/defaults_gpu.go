//go:build gpu

package config

// With the gpu build tag the servers are real `vllm serve`, memory comes
// from NVML, and the models are the reference run's unless the config file
// names others (gpuBackend).
func backendDefaults(c *Config) { gpuBackend(c) }

// GPUTag reports whether this build has the gpu tag.
const GPUTag = true
