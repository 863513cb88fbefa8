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
	// TensorParallelSize is --tensor-parallel-size (-tp): the GPUs the
	// model is split over, a rank process on each (default 1).
	TensorParallelSize int
	// Unmodelled are the flags given that vLLM has and vllmsim accepts
	// without modelling ("--name value…"), logged at start.
	Unmodelled []string
	// EnablePrefixCaching is --enable-prefix-caching / --no-enable-prefix-caching
	// (on by default, as in vLLM V1).
	EnablePrefixCaching bool
	// EnablePromptTokensDetails adds usage.prompt_tokens_details.cached_tokens.
	EnablePromptTokensDetails bool
	// EnableServerLoadTracking counts the requests in flight on GET /load.
	EnableServerLoadTracking bool
	// Speculative is --speculative-config (nil: no speculative decoding).
	Speculative *SpecConfig
	// The sleep options (sleepopts.go): --sleep-mode-offload-cudagraph,
	// --enable-nccl-comm-suspend, --sleep-preserve-parameter-names.
	OffloadCUDAGraph    bool
	NCCLCommSuspend     bool
	SleepPreserveParams []string
}

// SpecConfig is what vllmsim models of --speculative-config's JSON
// (vLLM's SpeculativeConfig, vllm/config/speculative.py): the method
// ("eagle3", "mtp", "ngram", "draft_model", …; any is accepted) and the
// draft tokens proposed per step (num_speculative_tokens; 1 when absent,
// as an MTP model with one prediction layer has).
type SpecConfig struct {
	Method    string `json:"method"`
	Model     string `json:"model"`
	NumTokens int    `json:"num_speculative_tokens"`
}

// specTokens is the draft tokens a step proposes (0: no speculative decoding).
func (a Args) specTokens() int {
	if a.Speculative == nil {
		return 0
	}
	return a.Speculative.NumTokens
}

// parseSpecConfig reads --speculative-config's value as vLLM does
// (json.loads into SpeculativeConfig's fields).
func parseSpecConfig(v string) (*SpecConfig, error) {
	var c SpecConfig
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return nil, fmt.Errorf("argument --speculative-config: invalid loads value: '%s'", v)
	}
	if c.NumTokens < 0 {
		return nil, fmt.Errorf("argument --speculative-config: num_speculative_tokens must be > 0, got %d", c.NumTokens)
	}
	if c.NumTokens == 0 {
		c.NumTokens = 1
	}
	return &c, nil
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

// parseLoRAModuleValues reads --lora-modules' values as vLLM's
// LoRAParserAction does: each `name=path` or a JSON object {"name",
// "path", "base_model_name"}; given again, the flag replaces the list.
func parseLoRAModuleValues(vals []string) ([]LoRAModule, error) {
	var mods []LoRAModule
	for _, v := range vals {
		var m LoRAModule
		if strings.HasPrefix(strings.TrimSpace(v), "{") {
			if err := json.Unmarshal([]byte(v), &m); err != nil || m.Name == "" || m.Path == "" {
				return nil, fmt.Errorf("argument --lora-modules: invalid JSON format %q: want {\"name\": …, \"path\": …}", v)
			}
		} else {
			n, p, ok := strings.Cut(v, "=")
			if !ok || n == "" || p == "" {
				return nil, fmt.Errorf("argument --lora-modules: %q: want name=path", v)
			}
			m = LoRAModule{Name: n, Path: p}
		}
		mods = append(mods, m)
	}
	return mods, nil
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

// ParseArgs parses `serve MODEL [flags]` as the newest release's `vllm
// serve` does (ParseArgsEra with era c).
func ParseArgs(argv []string, stderr io.Writer) (Args, error) {
	return parseArgs(argv, eraC, stderr)
}

// parseArgs parses `serve MODEL [flags]` as `vllm serve` of era e parses it
// (flags may also come before MODEL, and --model may name it; underscores
// and dashes in flag names are the same; --x=V and --x V; every flag of
// vLLM's parser, serveflags.tsv). The flags vllmsim models set Args; the
// others are accepted and kept in Args.Unmodelled (Main logs them); a flag
// vLLM's parser does not have, or one newer than era a's vLLM for era a,
// is refused as argparse refuses it.
func parseArgs(argv []string, e era, stderr io.Writer) (Args, error) {
	if len(argv) == 0 || argv[0] != "serve" {
		return Args{}, errors.New("usage: vllmsim serve MODEL [--port N] [--enable-sleep-mode] [other vllm serve flags]")
	}
	a := Args{Port: 8000, GPUMemUtilization: 0.92, TensorParallelSize: 1, EnablePrefixCaching: true}
	var maxLen, kv int64
	var positional, unknown []string
	args := normalize(argv[1:])
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "-h" || arg == "--help" {
			fmt.Fprintln(stderr, "usage: vllm serve [model_tag] [options] (vllmsim: every flag of vLLM's parser is accepted; see docs/vllmsim.md)")
			return Args{}, flag.ErrHelp
		}
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			positional = append(positional, arg)
			continue
		}
		name, val, hasVal := strings.Cut(arg, "=")
		negated := false
		f, ok := serveFlags[name]
		if !ok && strings.HasPrefix(name, "--no-") {
			if f, ok = serveFlags["--"+strings.TrimPrefix(name, "--no-")]; ok && f.kind == kindBoolOpt {
				negated = true
			} else {
				ok = false
			}
		}
		if ok && ((e == eraA && f.newSince011) || !e.since(f.since) || (f.until != "" && e != f.until && e.since(f.until))) {
			ok = false // vLLM 0.11's parser (or the era's) did not have it
		}
		if !ok {
			unknown = append(unknown, arg)
			continue
		}
		var vals []string
		switch f.kind {
		case kindBool, kindBoolOpt:
			if hasVal {
				return Args{}, fmt.Errorf("argument %s: ignored explicit argument '%s'", name, val)
			}
			vals = []string{strconv.FormatBool(!negated)}
		case kindValue:
			switch {
			case hasVal:
				vals = []string{val}
			case i+1 < len(args) && (!strings.HasPrefix(args[i+1], "-") || isNumber(args[i+1])):
				i++
				vals = []string{args[i]}
			default:
				return Args{}, fmt.Errorf("argument %s: expected one argument", f.name)
			}
		case kindNargsPlus, kindNargsOpt:
			if hasVal {
				vals = append(vals, val)
			}
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && (f.kind == kindNargsPlus || len(vals) == 0) {
				i++
				vals = append(vals, args[i])
			}
			if len(vals) == 0 && f.kind == kindNargsPlus {
				return Args{}, fmt.Errorf("argument %s: expected at least one argument", f.name)
			}
		}
		if err := a.set(f.name, vals, &maxLen, &kv); err != nil {
			return Args{}, err
		}
	}
	if len(unknown) > 0 {
		return Args{}, fmt.Errorf("unrecognized arguments: %s", strings.Join(unknown, " "))
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
	a.MaxModelLen = int(maxLen)
	if kv < 0 || maxLen < 0 {
		return Args{}, errors.New("--kv-cache-memory-bytes and --max-model-len must not be negative")
	}
	a.KVCacheBytes = uint64(kv)
	if a.GPUMemUtilization <= 0 || a.GPUMemUtilization > 1 {
		return Args{}, fmt.Errorf("--gpu-memory-utilization must be in (0, 1], got %v", a.GPUMemUtilization)
	}
	if a.TensorParallelSize < 1 {
		return Args{}, fmt.Errorf("--tensor-parallel-size must be at least 1, got %d", a.TensorParallelSize)
	}
	if a.Port < 0 || a.Port > 65535 {
		return Args{}, fmt.Errorf("--port %d out of range", a.Port)
	}
	return a, nil
}

// isNumber reports whether s is a negative number (argparse takes one as a
// value, not as a flag).
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// set gives Args the value(s) of the flag named name (its long name), or
// keeps a flag vllmsim does not model in Unmodelled.
func (a *Args) set(name string, vals []string, maxLen, kv *int64) error {
	v := vals[0]
	boolean := func(to *bool) error {
		*to = v == "true"
		return nil
	}
	integer := func(to *int) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("argument %s: invalid int value: '%s'", name, v)
		}
		*to = n
		return nil
	}
	human := func(to *int64) error {
		n, err := ParseHumanInt(v)
		if err != nil {
			return fmt.Errorf("argument %s: %w", name, err)
		}
		*to = n
		return nil
	}
	switch name {
	case "--model":
		a.Model = v
	case "--served-model-name":
		a.ServedNames = vals
	case "--host":
		a.Host = v
	case "--port":
		return integer(&a.Port)
	case "--enable-sleep-mode":
		return boolean(&a.EnableSleepMode)
	case "--max-model-len":
		return human(maxLen)
	case "--kv-cache-memory-bytes":
		return human(kv)
	case "--gpu-memory-utilization":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("argument %s: invalid float value: '%s'", name, v)
		}
		a.GPUMemUtilization = f
	case "--api-key":
		a.APIKey = v // the first key; vllmsim checks one
	case "--enforce-eager":
		return boolean(&a.EnforceEager)
	case "--enable-lora":
		return boolean(&a.EnableLoRA)
	case "--lora-modules":
		mods, err := parseLoRAModuleValues(vals)
		if err != nil {
			return err
		}
		a.LoRAModules = mods
	case "--sleep-mode-backend":
		a.SleepModeBackend = v
	case "--tensor-parallel-size":
		return integer(&a.TensorParallelSize)
	case "--enable-prefix-caching":
		return boolean(&a.EnablePrefixCaching)
	case "--enable-prompt-tokens-details":
		return boolean(&a.EnablePromptTokensDetails)
	case "--enable-server-load-tracking":
		return boolean(&a.EnableServerLoadTracking)
	case "--sleep-mode-offload-cudagraph":
		return boolean(&a.OffloadCUDAGraph)
	case "--enable-nccl-comm-suspend":
		return boolean(&a.NCCLCommSuspend)
	case "--sleep-preserve-parameter-names":
		a.SleepPreserveParams = vals
	case "--speculative-config", "-sc":
		c, err := parseSpecConfig(v)
		if err != nil {
			return err
		}
		a.Speculative = c
	default:
		a.Unmodelled = append(a.Unmodelled, name+" "+strings.Join(vals, " "))
	}
	return nil
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
