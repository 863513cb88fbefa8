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
	until       era  // the last era whose parser has it ("": every era's since)
	since       era  // the first era whose parser has it ("": every era's)
}

// serveFlags is serveflags.tsv by option string.
var serveFlags = parseServeFlags(serveFlagsTSV)

// extraFlags are options vllmsim accepts beyond serveflags.tsv's commit:
// --sleep-mode-backend, in era proposed only. PR #44074 (merged
// 2026-05-30) added ModelConfig.sleep_mode_backend and its thread says
// "auto-exposed as --sleep-mode-backend", but main at 63344913
// (2026-08-13), after the merge, registers no such option (EngineArgs has
// no field for it): a release's parser refuses it.
//
// And the sleep options merged after that commit, each from the era of
// the first release that has it (docs/vllm-api.md §10):
// --enable-nccl-comm-suspend (#51485, merged about 2026-09-04, v0.30.0:
// era b stands for v0.25, so vllmsim has it from c),
// --sleep-preserve-parameter-names (#57891, merged about 2026-09-25,
// v0.31.0 by the merge date) and --sleep-mode-offload-cudagraph (#59160,
// merged about 2026-10-04, v0.32.0 by the merge date), each from a
// third-party merged-PR record, the PR threads unread.
var extraFlags = map[string]serveFlag{
	"--sleep-mode-backend":             {name: "--sleep-mode-backend", kind: kindValue, newSince011: true, since: eraProposed},
	"--enable-nccl-comm-suspend":       {name: "--enable-nccl-comm-suspend", kind: kindBoolOpt, newSince011: true, since: eraC},
	"--sleep-preserve-parameter-names": {name: "--sleep-preserve-parameter-names", kind: kindNargsPlus, newSince011: true, since: eraC},
	"--sleep-mode-offload-cudagraph":   {name: "--sleep-mode-offload-cudagraph", kind: kindBoolOpt, newSince011: true, since: eraD},
}

// goneSince011 are the options of vLLM 0.11's parser (main of 2025-10-03)
// that main at 63344913 no longer has (serveflags.tsv's header): era a
// accepts them, later eras refuse them. -O, then an alias of
// --compilation-config (remapped by PR #29557), is not among them.
var goneSince011 = map[string]flagKind{
	"--task": kindValue, "--rope-scaling": kindValue, "--rope-theta": kindValue, "--swap-space": kindValue,
	"--cuda-graph-sizes": kindNargsPlus, "--disable-log-requests": kindBool, "--disable-frontend-multiprocessing": kindBool,
	"--disable-mm-preprocessor-cache": kindBool, "--enable-lora-bias": kindBoolOpt, "--lora-extra-vocab-size": kindValue,
	"--enable-multimodal-encoder-data-parallel": kindBool, "--logits-processor-pattern": kindValue,
	"--num-lookahead-slots": kindValue, "--override-pooler-config": kindValue, "--num-redundant-experts": kindValue,
	"--eplb-window-size": kindValue, "--eplb-step-interval": kindValue, "--eplb-log-balancedness": kindBoolOpt,
	"--calculate-kv-scales": kindBoolOpt, "--max-num-partial-prefills": kindValue, "--max-long-partial-prefills": kindValue,
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
	for k, kind := range goneSince011 {
		if _, ok := out[k]; !ok {
			out[k] = serveFlag{name: k, kind: kind, until: eraA}
		}
	}
	return out
}
