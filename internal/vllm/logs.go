package vllm

import (
	"bytes"
	"regexp"
	"strconv"
)

// modelLoading is the line vLLM's model runner logs once the weights are on
// the device, with the memory the load took: "Model loading took %.4f GiB
// and %.6f seconds" (gpu_model_runner.py), or in older versions "Loading
// model weights took %.4f GB" (the same 2^30-byte unit, named GB).
var modelLoading = regexp.MustCompile(`(?:Model loading took|Loading model weights took) ([0-9]+(?:\.[0-9]+)?) Gi?B`)

// graphCapture is the line vLLM's model runner logs once it captured the
// CUDA graphs, with the device memory the capture took (free memory
// before less after): "Graph capturing finished in %.0f secs, took %.2f
// GiB" (vllm/v1/worker/gpu_model_runner.py capture_model; a served log
// reads "[gpu_model_runner.py:3480] Graph capturing finished in 8 secs,
// took 0.31 GiB"). Older releases logged no size ("… in %.0f secs."),
// and an --enforce-eager server captures nothing.
var graphCapture = regexp.MustCompile(`Graph capturing finished in [0-9]+ secs?, took ([0-9]+(?:\.[0-9]+)?) GiB`)

// WeightGiB finds the last such line in a server log
// (the most recent start), and returns X and the line. With tensor
// parallelism each worker logs its own share; the first of the last start's
// lines is one GPU's.
func WeightGiB(log []byte) (gib float64, line string, ok bool) { return lastGiB(modelLoading, log) }

// GraphGiB finds the last graph-capture line in a server log (the most
// recent start) and returns the GiB the capture took and the line: the
// CUDA graph pool's size, which --sleep-mode-offload-cudagraph backs up
// to pinned host memory at every sleep. With tensor parallelism each
// worker logs its own.
func GraphGiB(log []byte) (gib float64, line string, ok bool) { return lastGiB(graphCapture, log) }

// lastGiB is the last match of re (its first group a positive number of
// GiB) in log, and its whole line.
func lastGiB(re *regexp.Regexp, log []byte) (gib float64, line string, ok bool) {
	locs := re.FindAllSubmatchIndex(log, -1)
	if len(locs) == 0 {
		return 0, "", false
	}
	loc := locs[len(locs)-1]
	v, err := strconv.ParseFloat(string(log[loc[2]:loc[3]]), 64)
	if err != nil || v <= 0 {
		return 0, "", false
	}
	start := bytes.LastIndexByte(log[:loc[0]], '\n') + 1
	end := len(log)
	if i := bytes.IndexByte(log[loc[1]:], '\n'); i >= 0 {
		end = loc[1] + i
	}
	return v, string(bytes.TrimSpace(log[start:end])), true
}

// Compile states of a start, from vLLM's torch.compile log lines
// (backends.py).
const (
	Compiled        = "compiled"          // "Compiling a graph for … takes X s": the caches were cold
	LoadedFromCache = "loaded from cache" // "Directly load the compiled graph(s) for … from the cache"
)

var compileLine = regexp.MustCompile(`Compiling a graph for [^\n]* takes|Directly load the compiled graph\(s\) for [^\n]* from the cache`)

// CompileState reads a start's log (what the server logged since it was
// spawned) and says whether it compiled its graphs or loaded them from the
// compile cache; "" when it logged neither (no torch.compile: eager mode).
func CompileState(log []byte) string {
	locs := compileLine.FindAllIndex(log, -1)
	if len(locs) == 0 {
		return ""
	}
	if bytes.HasPrefix(log[locs[0][0]:], []byte("Compiling")) {
		return Compiled
	}
	return LoadedFromCache
}
