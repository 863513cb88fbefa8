package vllmsim

import (
	_ "embed"
	"strings"
)

// serveflags.tsv is every option of `vllm serve`'s parser, one row per
// option string (short aliases included), with how many values it takes,
// read from vLLM's source: its header names the commit and files
// (vllm/entrypoints/openai/cli_args.py make_arg_parser,
// vllm/engine/arg_utils.py EngineArgs.add_cli_args, vllm/config/*.py) and
// marks the flags newer than v0.11.
//
//go:embed serveflags.tsv
var serveFlagsTSV string

// flagKind is how many values an option takes.
type flagKind string

const (
	kindValue     flagKind = "value"   // one value: --x V or --x=V
	kindBool      flagKind = "bool"    // store_true: no value
	kindBoolOpt   flagKind = "boolopt" // BooleanOptionalAction: --x or --no-x
	kindNargsPlus flagKind = "nargs+"  // one or more values
	kindNargsOpt  flagKind = "nargs?"  // zero or one value
)

// serveFlag is one option of vLLM's parser.
type serveFlag struct {
	name        string // the long name an alias stands for (--tensor-parallel-size for -tp)
	kind        flagKind
	newSince011 bool // not in vLLM 0.11's parser
	since       era  // the first era whose parser has it ("": every era's)
}

// serveFlags is serveflags.tsv by option string.
var serveFlags = parseServeFlags(serveFlagsTSV)

// extraFlags are options vllmsim accepts beyond serveflags.tsv's commit:
// --sleep-mode-backend, ModelConfig.sleep_mode_backend of PR #44074
// (merged 2026-05-30; its thread: "auto-exposed as --sleep-mode-backend").
var extraFlags = map[string]serveFlag{
	"--sleep-mode-backend": {name: "--sleep-mode-backend", kind: kindValue, newSince011: true, since: eraC},
}

func parseServeFlags(tsv string) map[string]serveFlag {
	out := map[string]serveFlag{}
	for _, line := range strings.Split(tsv, "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 2 || strings.HasPrefix(line, "#") || f[0] == "flag" {
			continue
		}
		sf := serveFlag{name: f[0], kind: flagKind(f[1])}
		if len(f) > 2 {
			sf.newSince011 = strings.Contains(f[2], "NEW since v0.11")
			if long, ok := strings.CutPrefix(f[2], "alias of "); ok {
				sf.name, _, _ = strings.Cut(long, ";")
				sf.name = strings.TrimSpace(sf.name)
			}
		}
		out[f[0]] = sf
	}
	for k, v := range extraFlags {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}
