package vllmsim

// Physics turns a GPU and a model into the durations (seconds, unscaled) and
// byte counts vllmsim simulates. Every formula here is documented in docs/vllmsim.md
// ("What vllmsim models").
type Physics struct {
	GPU   GPU
	Model Model
	// KVBytes is the KV-cache pool size (--kv-cache-memory-bytes or derived)
	// of one rank.
	KVBytes uint64
	// Ranks is --tensor-parallel-size: the weights are split evenly over
	// this many GPUs, each rank its own process; every byte figure here
	// but TotalWeightBytes is one rank's, every duration one rank's (the
	// ranks copy their shards at once). 0 is 1.
	Ranks int
	// ExtraResidualBytes is what each rank holds beyond its CUDA context
	// outside the sleep-mode pools: NCCL's buffers with more than one
	// rank, and fault tp-residual's.
	ExtraResidualBytes uint64
	// The sleep options (sleepopts.go), per rank: GraphPoolBytes, the CUDA
	// graph pool a sleep backs up to pinned host memory
	// (--sleep-mode-offload-cudagraph, part of the residual); SuspendBytes,
	// the NCCL memory a sleep releases (--enable-nccl-comm-suspend, part of
	// ExtraResidualBytes); PreservedBytes, the parameters a level-2 sleep
	// backs up to pageable host memory (--sleep-preserve-parameter-names).
	GraphPoolBytes, SuspendBytes, PreservedBytes uint64
	// GraphBytes is the CUDA graphs' memory the start captured, per rank
	// (part of the residual; 0 with --enforce-eager), which the start logs
	// as vLLM's model runner does: modelled as GraphPoolBytes is.
	GraphBytes uint64
	// Real is real-device mode (VLLMSIM_DEVICE=cuda): what the device does (a sleep's and a
	// wake's copies and frees, the pinned buffer's allocation, a step's read of the weights)
	// takes the device's own time, so none of it is modelled here; the host's and the CPU's
	// parts (fixed costs, launches, compute, checkpoint reads) still are.
	Real bool
}

func gb(bytes float64) float64 { return bytes / 1e9 }

// WeightBytes is the size of one rank's weight pool: its shard.
func (p Physics) WeightBytes() uint64 { return p.TotalWeightBytes() / uint64(p.ranks()) }

// TotalWeightBytes is the model's weights over every rank.
func (p Physics) TotalWeightBytes() uint64 { return uint64(p.Model.WeightGiB * GiB) }

func (p Physics) ranks() int { return max(1, p.Ranks) }

// ResidualBytes is the memory that stays on each rank's device while
// asleep: its CUDA context and what lies outside the pools.
func (p Physics) ResidualBytes() uint64 { return p.ContextBytes() + p.ExtraResidualBytes }

// ContextBytes is one rank's CUDA context, there from the process's first
// moment (the rest of the residual comes with start-up).
func (p Physics) ContextBytes() uint64 { return uint64(p.Model.ResidualGiB * GiB) }

// flopsPerToken is 2·P over the ranks: each rank computes its shard's
// share at once (the allreduce between them is not modelled).
func (p Physics) flopsPerToken() float64 { return 2 * p.Model.ParamsB * 1e9 / float64(p.ranks()) }

// weightPass is one read of every weight from device memory plus the per-layer launch cost.
func (p Physics) weightPass() float64 {
	launch := float64(p.Model.Layers) * p.GPU.LayerLaunchS
	if p.Real {
		return launch
	}
	return gb(float64(p.WeightBytes()))/p.GPU.HBMGBps + launch
}

// DecodeStep is one decode step with batch sequences running: memory-bound on
// the weights, plus a compute share per sequence.
func (p Physics) DecodeStep(batch int) float64 {
	step := p.decodeStep(batch)
	if p.GraphPoolBytes > 0 && p.ranks() > 1 { // the offloaded graph pool's extra all-reduce copy (sleepopts.go)
		step += allReduceDecodeCost * p.decodeStep(1)
	}
	return step
}

// decodeStep is DecodeStep without the sleep options' cost.
func (p Physics) decodeStep(batch int) float64 {
	return p.weightPass() + float64(batch)*p.flopsPerToken()/(p.GPU.DecodeTFLOPS[p.Model.Dtype]*1e12)
}

// Prefill is one prefill step over tokens prompt tokens (all newly admitted sequences together).
func (p Physics) Prefill(tokens int) float64 {
	return p.weightPass() + float64(tokens)*p.flopsPerToken()/(p.GPU.PrefillTFLOPS[p.Model.Dtype]*1e12)
}

// Sleep is the duration of /sleep at level 1 (weights copied to host) or 2 (discarded).
func (p Physics) Sleep(level int) float64 {
	w := gb(float64(p.WeightBytes()))
	if p.Real {
		return p.GPU.SleepFixedS
	}
	if level == 1 {
		return p.GPU.SleepFixedS + w/p.GPU.PCIeD2HGBps
	}
	return p.GPU.SleepFixedS + w/p.GPU.ReleaseGBps
}

// PinAlloc is the extra cost of the first level-1 sleep of a process:
// allocating the pinned host buffer the weights are copied to.
func (p Physics) PinAlloc() float64 {
	if p.GPU.PinAllocGBps <= 0 || p.Real {
		return 0
	}
	return gb(float64(p.WeightBytes())) / p.GPU.PinAllocGBps
}

// WakeWeights is waking the weight pool: a host→device copy after level 1,
// a bare re-mapping (contents undefined) after level 2.
func (p Physics) WakeWeights(fromLevel int) float64 {
	if fromLevel == 1 && !p.Real {
		return p.GPU.WakeFixedS + gb(float64(p.WeightBytes()))/p.GPU.PCIeH2DGBps
	}
	return p.GPU.WakeFixedS
}

// WakeKV is re-mapping the KV-cache pool (its contents are discarded either way).
func (p Physics) WakeKV() float64 { return p.GPU.WakeFixedS }

// Reload is collective_rpc reload_weights: the checkpoint read again from host storage.
func (p Physics) Reload() float64 {
	return p.GPU.ReloadFixedS + gb(float64(p.WeightBytes()))/p.GPU.LoadGBps
}

// StartCost is start-up without the weight load: process, imports,
// profiling, compilation (initial only) and CUDA-graph capture.
func (p Physics) StartCost(warm bool) float64 {
	if warm {
		return p.Model.StartWarmS
	}
	return p.Model.StartInitialS
}

// LoadWeights is reading the checkpoint once from host storage.
func (p Physics) LoadWeights() float64 { return gb(float64(p.WeightBytes())) / p.GPU.LoadGBps }

// Start is spawn → ready: the start-up cost plus reading the weights once.
func (p Physics) Start(warm bool) float64 { return p.StartCost(warm) + p.LoadWeights() }
