package vllmsim

import (
	"fmt"
	"path"
	"strings"
)

// The sleep options merged after serveflags.tsv's commit (docs/vllm-api.md
// §0 and §10), each modelled from its PR's own account; vllmsim's parser
// takes each from the era of its first release (extraFlags). What they
// change is in Physics (the bytes and the copies' time) and in the
// server's state (what a sleep left where); every figure below is
// modelled, not read from vLLM:
//
//   - --sleep-mode-offload-cudagraph (#59160, v0.32): "CUDA graphs are
//     captured into a cuMem pool that sleep backs up to CPU memory at both
//     levels and any wake restores in place, so graphs are replayed, not
//     recaptured … The cost is pinned host memory for the pool's backup,
//     also at level 2, and one extra copy per captured custom allreduce
//     (about 3% decode latency at batch size 1)" (the docs copy of
//     docs/features/sleep_mode.md, index 70266688388). With
//     --enforce-eager there are no graphs: no effect.
//   - --enable-nccl-comm-suspend (#51485, v0.30): a sleep releases the
//     NCCL communicators' memory (ncclCommSuspend) after the allocator's
//     pools, the weights' wake restores it (ncclCommResume): with more than
//     one rank, the communicator buffers vllmsim keeps outside the pools
//     (commBytesPerRank).
//   - --sleep-preserve-parameter-names PATTERN… (#57891, v0.31): "Level-2
//     sleep backs up selected GPU parameters to pageable CPU memory; weights
//     wake-up restores them in place and releases the backups … Level-1
//     behavior is unchanged"; "each pattern must match
//     model.named_parameters()" (a pattern matching none fails the start).

// graphPoolShare is the share of a model's residual (CUDA context, CUDA
// graphs, the memory outside the sleep pools) that is its CUDA graph pool:
// modelled.
const graphPoolShare = 0.4

// graphBytes is the CUDA graphs' memory a start of model captures, per
// rank (graphPoolShare of its residual).
func graphBytes(model Model) uint64 { return uint64(graphPoolShare * model.ResidualGiB * GiB) }

// allReduceDecodeCost is the offloaded graph pool's decode cost with a
// custom all-reduce (more than one rank): one extra copy per captured
// all-reduce, about 3 % of a batch-1 decode step (#59160's docs).
const allReduceDecodeCost = 0.03

// pageableShare is a pageable host copy's rate against a pinned one (the
// copy goes through a pinned bounce buffer): modelled.
const pageableShare = 0.5

// parameters are a simulated model's parameter names, as a decoder-only
// transformer's model.named_parameters() names them, each with its share
// of the weights' bytes: the embedding, the head, and per layer (layers of
// them, their share split evenly) attention, MLP and norms: modelled.
func parameters(layers int) []parameter {
	layers = max(1, layers)
	out := []parameter{{"model.embed_tokens.weight", 0.05}}
	for i := range layers {
		l := float64(layers)
		for _, p := range []parameter{
			{"input_layernorm.weight", 0}, {"self_attn.qkv_proj.weight", 0.20}, {"self_attn.o_proj.weight", 0.10},
			{"post_attention_layernorm.weight", 0}, {"mlp.gate_up_proj.weight", 0.40}, {"mlp.down_proj.weight", 0.15},
		} {
			out = append(out, parameter{fmt.Sprintf("model.layers.%d.%s", i, p.name), p.share / l})
		}
	}
	return append(out, parameter{"model.norm.weight", 0}, parameter{"lm_head.weight", 0.10})
}

// parameter is one parameter's name and share of the weights' bytes.
type parameter struct {
	name  string
	share float64
}

// preservedShare is the share of the weights' bytes the patterns name,
// each matched against every parameter name with path.Match (a * crosses
// dots, as fnmatch's does; no [!…] negation); a pattern that names no
// parameter is the start's error.
func preservedShare(patterns []string, layers int) (float64, error) {
	params := parameters(layers)
	matched := make([]bool, len(params))
	for _, pat := range patterns {
		hit := false
		for i, p := range params {
			ok, err := path.Match(pat, p.name)
			if err != nil {
				return 0, fmt.Errorf("ValueError: --sleep-preserve-parameter-names: bad pattern %q: %v", pat, err)
			}
			if ok {
				matched[i], hit = true, true
			}
		}
		if !hit {
			return 0, fmt.Errorf("ValueError: --sleep-preserve-parameter-names: pattern %q matches no parameter of the model (model.named_parameters(): model.embed_tokens.weight, model.layers.{0..%d}.{input_layernorm,self_attn.qkv_proj,self_attn.o_proj,post_attention_layernorm,mlp.gate_up_proj,mlp.down_proj}.weight, model.norm.weight, lm_head.weight)", pat, max(1, layers)-1)
		}
	}
	share := 0.0
	for i, p := range params {
		if matched[i] {
			share += p.share
		}
	}
	return min(1, share), nil
}

// sleepOptions sets phys's sleep options from the serve flags.
func sleepOptions(phys *Physics, args Args) error {
	if !args.EnableSleepMode { // no sleep mode, no sleep pools: the options do nothing (#59160's tests: "no-sleep")
		return nil
	}
	if args.OffloadCUDAGraph && !args.EnforceEager { // no graphs, no effect
		phys.GraphPoolBytes = graphBytes(phys.Model)
	}
	if args.NCCLCommSuspend && phys.ranks() > 1 {
		phys.SuspendBytes = commBytesPerRank
	}
	if len(args.SleepPreserveParams) > 0 {
		share, err := preservedShare(args.SleepPreserveParams, phys.Model.Layers)
		if err != nil {
			return err
		}
		phys.PreservedBytes = uint64(share * float64(phys.WeightBytes()))
	}
	return nil
}

// OptionSleep is what the options add to a sleep at level: the graph
// pool's copy to pinned host memory (both levels) and, at level 2, the
// preserved parameters' copy to pageable host memory.
func (p Physics) OptionSleep(level int) float64 { return p.optionCopies(level, p.GPU.PCIeD2HGBps) }

// OptionWake is what the options add to the weights' wake from level:
// the same copies back.
func (p Physics) OptionWake(fromLevel int) float64 {
	return p.optionCopies(fromLevel, p.GPU.PCIeH2DGBps)
}

// optionCopies is the options' copies of a sleep or wake at level over a
// link of pinned rate gbps (a pageable copy at pageableShare of it).
func (p Physics) optionCopies(level int, gbps float64) float64 {
	if p.Real {
		return 0
	}
	s := gb(float64(p.GraphPoolBytes)) / gbps
	if level == 2 {
		s += gb(float64(p.PreservedBytes)) / (gbps * pageableShare)
	}
	return s
}

// optionsNote is the start's log line of the options in force, "" with none.
func (p Physics) optionsNote() string {
	var on []string
	if p.GraphPoolBytes > 0 {
		on = append(on, fmt.Sprintf("--sleep-mode-offload-cudagraph: a sleep backs the %.3f GiB CUDA graph pool up to pinned host memory", float64(p.GraphPoolBytes)/GiB))
	}
	if p.SuspendBytes > 0 {
		on = append(on, fmt.Sprintf("--enable-nccl-comm-suspend: a sleep releases %.3f GiB of NCCL communicator memory a rank", float64(p.SuspendBytes)/GiB))
	}
	if p.PreservedBytes > 0 {
		on = append(on, fmt.Sprintf("--sleep-preserve-parameter-names: a level-2 sleep backs %.3f GiB of parameters up to pageable host memory", float64(p.PreservedBytes)/GiB))
	}
	if len(on) == 0 {
		return ""
	}
	return "vllmsim sleep options (modelled): " + strings.Join(on, "; ")
}

// sleepOptionsHost allocates the host memory a sleep at level backs the
// options' device memory up in (a simulated device only): the graph pool's
// pinned backup, once (kept for the process's lifetime, as the weights'
// pinned one), and at level 2 the preserved parameters' pageable one
// (released by the weights' wake). With more than one rank each rank's
// worker holds its shard of each, as each vLLM worker backs up its own
// graph pool and parameters (hostMemory). Real bytes are modelled bytes ×
// the host scale (VLLMSIM_HOST_SCALE), as the weights' backup. A failed
// allocation kills the engine, as the weights' does. Caller holds s.opMu.
func (s sleepMode) sleepOptionsHost(level int) *opError {
	if s.dev.real != nil {
		return nil
	}
	ranks := uint64(s.phys.ranks())
	if n := s.phys.GraphPoolBytes * ranks; n > 0 {
		fresh, lockErr, err := s.host.hold(graphBackup, n)
		if err != nil {
			return s.hostFailed(graphBackup, n, err)
		}
		if fresh {
			s.log.Printf("vllmsim --sleep-mode-offload-cudagraph: the CUDA graph pool backed up to %.3f GiB of pinned host memory (real %.3f GiB, %s), %s", float64(n)/GiB, float64(s.host.real(n))/GiB, s.host.where(), lockNote(lockErr))
		}
	}
	if n := s.phys.PreservedBytes * ranks; level == 2 && n > 0 {
		// A second level-2 sleep without a wake between keeps the one backup.
		fresh, _, err := s.host.hold(preservedBackup, n)
		if err != nil {
			return s.hostFailed(preservedBackup, n, err)
		}
		if fresh {
			s.log.Printf("vllmsim --sleep-preserve-parameter-names: %.3f GiB of parameters backed up to pageable host memory (real %.3f GiB, %s)", float64(n)/GiB, float64(s.host.real(n))/GiB, s.host.where())
		}
	}
	return nil
}

// freePreserved releases the preserved parameters' host backup, if any
// (the weights' wake restored them).
func (s sleepMode) freePreserved() {
	if _, err := s.host.release(preservedBackup); err != nil {
		s.log.Printf("ERROR %v", err)
	}
}
