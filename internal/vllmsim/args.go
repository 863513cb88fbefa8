package vllmsim

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Args are the `vllm serve` arguments vllmsim understands.
type Args struct {
	Model             string
	ServedNames       []string
	Host              string
	Port              int
	EnableSleepMode   bool
	MaxModelLen       int
	KVCacheBytes      uint64 // 0 = derive from gpu_memory_utilization
	GPUMemUtilization float64
	APIKey            string
	EnforceEager      bool
	EnableLoRA        bool
	LoRAModules       []LoRAModule // --lora-modules
	// SleepModeBackend is --sleep-mode-backend ("" when not given: cumem,
	// vLLM's default and only built-in, vllm@0327d59d
	// vllm/device_allocator/sleep_mode_backend.py). An unknown name fails
	// at the first sleep or wake, where vLLM creates the backend.
	SleepModeBackend string
}

// LoRAModule is one adapter served beside the base model, requested by its name.
type LoRAModule struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Base string `json:"base_model_name"`
}

// Adapter returns the LoRA module served under name.
func (a Args) Adapter(name string) (LoRAModule, bool) {
	for _, m := range a.LoRAModules {
		if m.Name == name {
			return m, true
		}
	}
	return LoRAModule{}, false
}

// parseLoRAModules takes --lora-modules' values out of args: like vLLM's
// argparse (nargs='+'), the flag takes every following argument that is not
// a flag, each `name=path` or a JSON object {"name", "path",
// "base_model_name"}; given again, it replaces the list.
func parseLoRAModules(args []string) (rest []string, mods []LoRAModule, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		if name != "--lora-modules" {
			rest = append(rest, a)
			continue
		}
		var vals []string
		if hasVal {
			vals = append(vals, val)
		}
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			vals = append(vals, args[i])
		}
		if len(vals) == 0 {
			return nil, nil, errors.New("argument --lora-modules: expected at least one argument")
		}
		mods = nil
		for _, v := range vals {
			var m LoRAModule
			if strings.HasPrefix(strings.TrimSpace(v), "{") {
				if err := json.Unmarshal([]byte(v), &m); err != nil || m.Name == "" || m.Path == "" {
					return nil, nil, fmt.Errorf("argument --lora-modules: invalid JSON format %q: want {\"name\": …, \"path\": …}", v)
				}
			} else {
				n, p, ok := strings.Cut(v, "=")
				if !ok || n == "" || p == "" {
					return nil, nil, fmt.Errorf("argument --lora-modules: %q: want name=path", v)
				}
				m = LoRAModule{Name: n, Path: p}
			}
			mods = append(mods, m)
		}
	}
	return rest, mods, nil
}

// ServedName is the name responses carry: the first served name, else the model.
func (a Args) ServedName() string {
	if len(a.ServedNames) > 0 {
		return a.ServedNames[0]
	}
	return a.Model
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type humanInt struct{ v *int64 }

func (h humanInt) String() string {
	if h.v == nil {
		return ""
	}
	return strconv.FormatInt(*h.v, 10)
}
func (h humanInt) Set(s string) error {
	n, err := ParseHumanInt(s)
	if err != nil {
		return err
	}
	*h.v = n
	return nil
}

// ParseHumanInt parses an integer the way vLLM's human_readable_int does:
// lowercase k/m/g/t are decimal and may carry decimals (2.5g), uppercase
// K/M/G/T are binary and must be whole (4G = 4·2^30); anything else is int().
// "4GiB" is rejected, as vLLM rejects it.
func ParseHumanInt(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty value")
	}
	last := s[len(s)-1]
	num := s[:len(s)-1]
	dec := map[byte]float64{'k': 1e3, 'm': 1e6, 'g': 1e9, 't': 1e12}
	bin := map[byte]int64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}
	if mul, ok := dec[last]; ok {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("invalid literal %q", s)
		}
		return int64(f * mul), nil
	}
	if mul, ok := bin[last]; ok {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid literal %q (binary suffixes take whole numbers)", s)
		}
		return n * mul, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid literal for int() with base 10: %q", s)
	}
	return n, nil
}

// ParseArgs parses `serve MODEL [flags]` (flags may also come before MODEL, and
// --model may name it). Underscores and dashes in flag names are the same, as in vLLM.
func ParseArgs(argv []string, stderr io.Writer) (Args, error) {
	if len(argv) == 0 || argv[0] != "serve" {
		return Args{}, errors.New("usage: vllmsim serve MODEL [--port N] [--enable-sleep-mode] [other vllm serve flags]")
	}
	var a Args
	var maxLen, kv int64
	var names stringList
	fs := flag.NewFlagSet("vllm serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&a.Model, "model", "", "model name or path")
	fs.Var(&names, "served-model-name", "name(s) the server answers to")
	fs.StringVar(&a.Host, "host", "", "bind address (default: all interfaces)")
	fs.IntVar(&a.Port, "port", 8000, "port")
	fs.BoolVar(&a.EnableSleepMode, "enable-sleep-mode", false, "enable sleep mode")
	fs.Var(humanInt{&maxLen}, "max-model-len", "context length")
	fs.Var(humanInt{&kv}, "kv-cache-memory-bytes", "KV cache size in bytes")
	fs.Float64Var(&a.GPUMemUtilization, "gpu-memory-utilization", 0.92, "per-instance share of GPU memory")
	fs.StringVar(&a.APIKey, "api-key", "", "API key for /v1")
	fs.BoolVar(&a.EnforceEager, "enforce-eager", false, "no CUDA graphs")
	fs.BoolVar(&a.EnableLoRA, "enable-lora", false, "serve LoRA adapters")
	fs.StringVar(&a.SleepModeBackend, "sleep-mode-backend", "", "sleep-mode memory backend (cumem)")
	// Accepted and ignored: they change nothing vllmsim models.
	for _, n := range []string{"dtype", "tensor-parallel-size", "seed", "generation-config", "uvicorn-log-level", "load-format", "quantization", "kv-cache-dtype", "max-lora-rank", "max-loras"} {
		fs.String(n, "", "accepted, not modelled")
	}
	for _, n := range []string{"disable-log-stats", "trust-remote-code", "enable-log-requests", "no-enable-log-requests", "disable-uvicorn-access-log", "enable-prefix-caching"} {
		fs.Bool(n, false, "accepted, not modelled")
	}

	rest, loras, err := parseLoRAModules(normalize(argv[1:]))
	if err != nil {
		return Args{}, err
	}
	a.LoRAModules = loras
	var positional []string
	for {
		if err := fs.Parse(rest); err != nil {
			return Args{}, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch {
	case len(positional) > 1:
		return Args{}, fmt.Errorf("unrecognized arguments: %s", strings.Join(positional[1:], " "))
	case len(positional) == 1 && a.Model != "" && a.Model != positional[0]:
		return Args{}, fmt.Errorf("model given twice: %q and --model %q", positional[0], a.Model)
	case len(positional) == 1:
		a.Model = positional[0]
	}
	if a.Model == "" {
		return Args{}, errors.New("the following arguments are required: model_tag")
	}
	a.ServedNames = names
	a.MaxModelLen = int(maxLen)
	if kv < 0 || maxLen < 0 {
		return Args{}, errors.New("--kv-cache-memory-bytes and --max-model-len must not be negative")
	}
	a.KVCacheBytes = uint64(kv)
	if a.GPUMemUtilization <= 0 || a.GPUMemUtilization > 1 {
		return Args{}, fmt.Errorf("--gpu-memory-utilization must be in (0, 1], got %v", a.GPUMemUtilization)
	}
	if a.Port < 0 || a.Port > 65535 {
		return Args{}, fmt.Errorf("--port %d out of range", a.Port)
	}
	return a, nil
}

// normalize turns --max_model_len into --max-model-len (flag names only, never values).
func normalize(args []string) []string {
	out := make([]string, len(args))
	for i, s := range args {
		if strings.HasPrefix(s, "-") {
			name, val, hasVal := strings.Cut(s, "=")
			name = strings.ReplaceAll(name, "_", "-")
			if hasVal {
				s = name + "=" + val
			} else {
				s = name
			}
		}
		out[i] = s
	}
	return out
}
