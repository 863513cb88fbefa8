//go:build !gpu

package config

// Without the gpu build tag the suite runs on vllmsim (simBackend).
func backendDefaults(c *Config) { simBackend(c) }

// GPUTag reports whether this build has the gpu tag.
const GPUTag = false
