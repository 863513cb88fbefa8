package vllm

import (
	"context"
	"strconv"
	"time"
)

// ServeOptions are the settings of one `vllm serve` process.
type ServeOptions struct {
	Model                string // served under this name too
	Host                 string
	Port                 int
	MaxModelLen          int
	KVCacheBytes         uint64
	GPUMemoryUtilization float64
	LoRA                 []LoRA   // adapters served beside the model (--enable-lora --lora-modules)
	Extra                []string // appended as given
}

// LoRA is an adapter: requests name it as their model.
type LoRA struct {
	Name string
	Path string
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
	if len(o.LoRA) > 0 {
		// One --lora-modules with every adapter: vLLM's argparse takes the
		// flag's values as a list (nargs='+') and a repeated flag replaces it.
		args = append(args, "--enable-lora", "--lora-modules")
		for _, l := range o.LoRA {
			args = append(args, l.Name+"="+l.Path)
		}
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

// wakeStep is one call of a wake, named as errors name it; a /wake_up
// step returns its answer.
type wakeStep struct {
	name string
	call func(*Client, context.Context) (*WakeAnswer, error)
}

func wakeUp(tags ...string) func(*Client, context.Context) (*WakeAnswer, error) {
	return func(c *Client, ctx context.Context) (*WakeAnswer, error) {
		a, err := c.WakeUpAnswer(ctx, tags...)
		return &a, err
	}
}

// wakeSteps are the calls that wake a server asleep at level, in vLLM's
// documented order. Level 1: one /wake_up. Level 2 (the weights were
// discarded): wake_up?tags=weights, collective_rpc reload_weights,
// wake_up?tags=kv_cache, reset_prefix_cache — without the reload the model
// answers from uninitialised weights. In the proposed API the first step
// answers "sleeping" and the kv_cache step "awake" (docs/vllm-api.md §8);
// a release answers both with an empty body.
func wakeSteps(level int) []wakeStep {
	if level == 2 {
		return []wakeStep{
			{"wake_up?tags=weights", wakeUp("weights")},
			{"collective_rpc reload_weights", func(c *Client, ctx context.Context) (*WakeAnswer, error) {
				_, err := c.CollectiveRPC(ctx, "reload_weights")
				return nil, err
			}},
			{"wake_up?tags=kv_cache", wakeUp("kv_cache")},
			{"reset_prefix_cache", func(c *Client, ctx context.Context) (*WakeAnswer, error) {
				return nil, c.ResetPrefixCache(ctx)
			}},
		}
	}
	return []wakeStep{{"wake_up", wakeUp()}}
}

// Wake wakes a server asleep at level with vLLM's sequence for it (see
// wakeSteps). On error it returns the step that failed.
func (c *Client) Wake(ctx context.Context, level int) (step string, err error) {
	_, _, step, err = c.WakeSequence(ctx, level)
	return step, err
}

// WakeSequence is Wake, also returning the answer of its last /wake_up
// step (the one that must say "awake" where the server says anything)
// and the time its /wake_up calls took, sent → answered, summed: the
// HTTP time the engine's "It took … to wake up" lines account for (level
// 2's reload_weights and reset_prefix_cache are not /wake_up calls).
func (c *Client) WakeSequence(ctx context.Context, level int) (last WakeAnswer, calls time.Duration, step string, err error) {
	for _, s := range wakeSteps(level) {
		t := time.Now()
		a, err := s.call(c, ctx)
		if err != nil {
			return last, calls, s.name, err
		}
		if a != nil { // a /wake_up step
			last = *a
			calls += time.Since(t)
		}
	}
	return last, calls, "", nil
}
