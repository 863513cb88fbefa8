package vllm

import (
	"context"
	"errors"
	"strconv"
)

// ServeOptions are the settings of one `vllm serve` process.
type ServeOptions struct {
	Model                string // served under this name too
	Host                 string
	Port                 int
	MaxModelLen          int
	KVCacheBytes         uint64
	GPUMemoryUtilization float64
	Extra                []string // appended as given
}

// ServeArgs is the `serve` command line, exactly as vLLM takes it
// (../shared/vllm-api.md §1): sleep mode on, the KV cache as a plain byte
// count (vLLM rejects "4GiB"), no removed flags.
func ServeArgs(o ServeOptions) []string {
	args := []string{"serve", o.Model,
		"--served-model-name", o.Model,
		"--host", o.Host,
		"--port", strconv.Itoa(o.Port),
		"--enable-sleep-mode",
		"--max-model-len", strconv.Itoa(o.MaxModelLen),
		"--kv-cache-memory-bytes", strconv.FormatUint(o.KVCacheBytes, 10),
		"--gpu-memory-utilization", strconv.FormatFloat(o.GPUMemoryUtilization, 'f', -1, 64),
	}
	return append(args, o.Extra...)
}

// ServerEnv is the environment every server needs: the development
// endpoints (/sleep, /wake_up, …) exist only with VLLM_SERVER_DEV_MODE=1
// (vLLM parses it with int(): 1, never true). An API key goes in
// VLLM_API_KEY, which vLLM reads like --api-key, so it never shows on a
// command line or in a log.
func ServerEnv(apiKey string) []string {
	env := []string{"VLLM_SERVER_DEV_MODE=1"}
	if apiKey != "" {
		env = append(env, "VLLM_API_KEY="+apiKey)
	}
	return env
}

// WakeSteps are the calls that wake a server asleep at level, in vLLM's
// documented order. Level 1: one /wake_up. Level 2 (the weights were
// discarded): wake_up?tags=weights, collective_rpc reload_weights,
// wake_up?tags=kv_cache, reset_prefix_cache — without the reload the model
// answers from uninitialised weights.
func WakeSteps(level int) []string {
	if level == 2 {
		return []string{"wake_up?tags=weights", "collective_rpc reload_weights", "wake_up?tags=kv_cache", "reset_prefix_cache"}
	}
	return []string{"wake_up"}
}

// Wake wakes a server asleep at level with WakeSteps(level). On error it
// returns the step that failed.
func (c *Client) Wake(ctx context.Context, level int) (step string, err error) {
	for _, step := range WakeSteps(level) {
		switch step {
		case "wake_up":
			err = c.WakeUp(ctx)
		case "wake_up?tags=weights":
			err = c.WakeUp(ctx, "weights")
		case "collective_rpc reload_weights":
			_, err = c.CollectiveRPC(ctx, "reload_weights")
		case "wake_up?tags=kv_cache":
			err = c.WakeUp(ctx, "kv_cache")
		case "reset_prefix_cache":
			err = c.ResetPrefixCache(ctx)
		default:
			err = errors.New("unknown wake step")
		}
		if err != nil {
			return step, err
		}
	}
	return "", nil
}
