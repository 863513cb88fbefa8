package vllm

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// A ServeOption is a `vllm serve` flag newer than some releases still in use:
// the release that first has it and the PR that added it
// (docs/vllm-api.md §0 and §10; each first release inferred from the
// merge date and the release branch points, as that file says).
type ServeOption struct {
	Flag, Since, PR string
}

// NewOptions are the sleep options merged after serveflags.tsv's commit.
var NewOptions = []ServeOption{
	{"--enable-nccl-comm-suspend", "v0.30", "#51485"},
	{"--sleep-preserve-parameter-names", "v0.31", "#57891"},
	{"--sleep-mode-offload-cudagraph", "v0.32", "#59160"},
}

// unrecognized is argparse's error for flags its parser does not have
// (exit 2): "vllm: error: unrecognized arguments: --foo --bar".
var unrecognized = regexp.MustCompile(`unrecognized arguments: (.*)`)

// Unrecognized names, from a server's log, each flag its argparse refused
// that a newer vLLM has: `--sleep-mode-offload-cudagraph is not in this
// vLLM (needs ≥ v0.32, vLLM #59160)`; "" when the log has no such
// refusal or names none of NewOptions.
func Unrecognized(log string) string {
	var out []string
	for _, m := range unrecognized.FindAllStringSubmatch(log, -1) {
		for _, arg := range strings.Fields(m[1]) {
			flag, _, _ := strings.Cut(arg, "=")
			flag = "--" + strings.ReplaceAll(strings.TrimPrefix(flag, "--"), "_", "-")
			for _, o := range NewOptions {
				if flag == o.Flag || flag == "--no-"+strings.TrimPrefix(o.Flag, "--") {
					s := fmt.Sprintf("%s is not in this vLLM (needs ≥ %s, vLLM %s)", o.Flag, o.Since, o.PR)
					if !slices.Contains(out, s) {
						out = append(out, s)
					}
				}
			}
		}
	}
	return strings.Join(out, "; ")
}
