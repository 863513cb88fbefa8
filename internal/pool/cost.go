package pool

import (
	"context"
	"fmt"
	"math"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/hostmem"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/server"
)

// What the state-cost phase reads beside the pool's own measurements
// (docs/cost.md): the host memory of a server's process tree, the GPU's
// energy counter, the host memory the runner may use, and each model's
// GPU memory per GPU.

// Host is the host memory of label's running server's process tree (RSS,
// locked, pinned, swapped; server.HostMemory), through Options.HostMemory
// where set; an error when no server runs.
func (p Procs) Host(label string) (server.HostMemory, error) {
	m, err := p.s.model(label)
	if err != nil {
		return server.HostMemory{}, err
	}
	srv, _ := p.s.server(m)
	if srv == nil {
		return server.HostMemory{}, fmt.Errorf("host memory of %s: no server runs", label)
	}
	p.s.late()
	if p.s.opt.HostMemory == nil {
		return srv.Host()
	}
	pids, err := srv.PIDs()
	if err != nil {
		return server.HostMemory{}, fmt.Errorf("host memory of %s: %w", label, err)
	}
	return p.s.opt.HostMemory(pids...)
}

// Energy is each GPU's energy counter in joules (gpu.EnergyOf the memory
// source), an error wrapping gpu.ErrNoEnergy where there is none (no
// memory source, or one without a counter).
func (mm Memory) Energy(ctx context.Context) ([]float64, error) {
	if mm.f.s.opt.Sampler == nil {
		return nil, fmt.Errorf("%w: no memory source", gpu.ErrNoEnergy)
	}
	return gpu.EnergyOf(ctx, mm.f.s.opt.Sampler.Source())
}

// HostCapacity is what host memory the runner may use now (hostmem.Read
// of this process under Options.HostRoot): the cgroup's headroom in a
// container or Pod, else MemAvailable, with its source.
func (p Procs) HostCapacity() (hostmem.Capacity, error) {
	p.s.late()
	root := p.s.opt.HostRoot
	if root == "" {
		root = "/"
	}
	return hostmem.Read(root, "self")
}

// GPUGiB is label's GPU memory now, per GPU (its processes' memory where
// the source lists them), and the device's free memory per GPU; nil per
// GPU where no memory source is set or the source lists none of its
// processes.
func (mm Memory) GPUGiB(ctx context.Context, label string) (perGPU, freeGPU []float64, err error) {
	m, err := mm.f.s.model(label)
	if err != nil || mm.f.s.opt.Sampler == nil {
		return nil, nil, err
	}
	mm.f.s.refreshPIDs(m)
	smp, err := mm.f.s.opt.Sampler.SampleNow(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range smp.PerDevice() {
		freeGPU = append(freeGPU, float64(freeBytes(d))/record.GiB)
	}
	if _, found := modelGiB(mm.f.s.pids(m), smp); found {
		perGPU = modelGiBPerGPU(mm.f.s.pids(m), smp)
	}
	return perGPU, freeGPU, nil
}

// BackupGiB is the pinned host copy a level-1 sleep of label makes, over
// all its tensor-parallel workers (each backs up its own shard): its
// weights, as its server logged loading them (vLLM's "Model loading took
// X GiB", one worker's share, × the workers; vLLM's CuMemAllocator backs
// up the allocations tagged "weights" to pinned CPU memory at level 1 and
// discards the rest, vllm/device_allocator/cumem.py sleep()), else its
// awake GPU memory (every worker's process) less its KV cache
// (protocol.kv_gib, per GPU as vLLM's --kv-cache-memory-bytes is:
// vllm/config/cache.py, × the workers; an upper bound, the CUDA contexts
// and graphs included), and how it was found; NaN when neither is known.
func (mm Memory) BackupGiB(label string) (gib float64, how string) {
	m, err := mm.f.s.model(label)
	if err != nil {
		return math.NaN(), err.Error()
	}
	mm.f.s.mu.Lock()
	w := m.weight
	mm.f.s.mu.Unlock()
	var awake float64
	mm.state(label, func(st *memState) { awake = st.awakeGiB })
	tp, ok := config.TensorParallel(m.cfg.ExtraArgs)
	if !ok || tp < 1 {
		tp = 1
	}
	return pinnedBackup(w, awake, mm.f.s.cfg.Protocol.KVGiB, tp)
}

// GraphBackupGiB is the pinned host copy of label's CUDA graph pool that
// its server's sleeps make with --sleep-mode-offload-cudagraph, at both
// levels, over all its tensor-parallel workers: the graphs' memory its
// start logged capturing ("Graph capturing finished in N secs, took X
// GiB", vllm/v1/worker/gpu_model_runner.py, one worker's), × the workers,
// and how it was found. 0 without the option (or with --enforce-eager, no
// graphs: the option does nothing); NaN with the option where the start
// logged no size (an older vLLM's line has none). vLLM's docs for the
// option (docs/features/sleep_mode.md, #59160): "The cost is pinned host
// memory for the pool's backup, also at level 2".
func (mm Memory) GraphBackupGiB(label string) (gib float64, how string) {
	m, err := mm.f.s.model(label)
	if err != nil {
		return math.NaN(), err.Error()
	}
	switch {
	case !config.BoolFlag(m.cfg.ExtraArgs, "--sleep-mode-offload-cudagraph"):
		return 0, "no --sleep-mode-offload-cudagraph"
	case config.BoolFlag(m.cfg.ExtraArgs, "--enforce-eager"):
		return 0, "--enforce-eager: no CUDA graphs, nothing for --sleep-mode-offload-cudagraph to back up"
	}
	mm.f.s.mu.Lock()
	g := m.graph
	mm.f.s.mu.Unlock()
	if g == nil {
		return math.NaN(), "--sleep-mode-offload-cudagraph's graph pool: its size not in the server log (no \"Graph capturing finished in N secs, took X GiB\" line)"
	}
	tp, ok := config.TensorParallel(m.cfg.ExtraArgs)
	if !ok || tp < 1 {
		tp = 1
	}
	how = "the CUDA graph pool (--sleep-mode-offload-cudagraph), " + g.Source
	if tp > 1 {
		how += fmt.Sprintf(" × %d tensor-parallel workers", tp)
	}
	return g.GiB * float64(tp), how
}

// pinnedBackup is BackupGiB from what is known: the weight line w (nil or
// 0 GiB: none), the model's awake GPU memory over all its workers (0:
// not read), kv_gib per GPU and tp workers.
func pinnedBackup(w *record.Weight, awakeGiB, kvGiB float64, tp int) (gib float64, how string) {
	workers := ""
	if tp > 1 {
		workers = fmt.Sprintf(" × %d tensor-parallel workers", tp)
	}
	if w != nil && w.GiB > 0 {
		return w.GiB * float64(tp), "weights, " + w.Source + workers
	}
	if awakeGiB > 0 {
		kv := kvGiB * float64(tp)
		return max(0, awakeGiB-kv), fmt.Sprintf("awake GPU memory %.2f GiB (every worker's) less kv_gib %.2f%s", awakeGiB, kvGiB, workers)
	}
	return math.NaN(), "the model's weights are not known (no server log line, no memory source)"
}
