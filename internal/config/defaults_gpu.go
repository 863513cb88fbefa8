//go:build gpu

package config

// With the gpu build tag the servers are real `vllm serve` and memory comes
// from NVML. There are no default models: the config file names them.
func backendDefaults(c *Config) {
	c.Command, c.Memory = "vllm", "nvml"
	c.Models = nil
	c.Protocol.SettleS = 1
}

// GPUTag reports whether this build has the gpu tag.
const GPUTag = true
