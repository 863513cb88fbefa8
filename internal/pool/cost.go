package pool

import (
	"context"
	"fmt"
	"math"

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
func (f *Pool) Energy(ctx context.Context) ([]float64, error) {
	if f.s.opt.Sampler == nil {
		return nil, fmt.Errorf("%w: no memory source", gpu.ErrNoEnergy)
	}
	return gpu.EnergyOf(ctx, f.s.opt.Sampler.Source())
}

// HostCapacity is what host memory the runner may use now (hostmem.Read
// of this process under Options.HostRoot): the cgroup's headroom in a
// container or Pod, else MemAvailable, with its source.
func (f *Pool) HostCapacity() (hostmem.Capacity, error) {
	root := f.s.opt.HostRoot
	if root == "" {
		root = "/"
	}
	return hostmem.Read(root, "self")
}

// GPUGiB is label's GPU memory now, per GPU (its processes' memory where
// the source lists them), and the device's free memory per GPU; nil per
// GPU where no memory source is set or the source lists none of its
// processes.
func (f *Pool) GPUGiB(ctx context.Context, label string) (perGPU, freeGPU []float64, err error) {
	m, err := f.s.model(label)
	if err != nil || f.s.opt.Sampler == nil {
		return nil, nil, err
	}
	f.s.refreshPIDs(m)
	smp, err := f.s.opt.Sampler.SampleNow(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range smp.PerDevice() {
		freeGPU = append(freeGPU, float64(freeBytes(d))/record.GiB)
	}
	if _, found := modelGiB(f.s.pids(m), smp); found {
		perGPU = modelGiBPerGPU(f.s.pids(m), smp)
	}
	return perGPU, freeGPU, nil
}

// BackupGiB is the pinned host copy a level-1 sleep of label makes: its
// weights, as its server logged loading them (vLLM's "Model loading took
// X GiB"; vLLM's CuMemAllocator backs up the allocations tagged "weights"
// to pinned CPU memory at level 1 and discards the rest,
// vllm/device_allocator/cumem.py sleep()), else its awake GPU memory less
// its KV cache (protocol.kv_gib: an upper bound, the CUDA context and
// graphs included), and how it was found; NaN when neither is known.
func (f *Pool) BackupGiB(label string) (gib float64, how string) {
	m, err := f.s.model(label)
	if err != nil {
		return math.NaN(), err.Error()
	}
	f.s.mu.Lock()
	w := m.weight
	f.s.mu.Unlock()
	if w != nil && w.GiB > 0 {
		return w.GiB, "weights, " + w.Source
	}
	var awake float64
	Memory{f: f}.state(label, func(st *memState) { awake = st.awakeGiB })
	if awake > 0 {
		kv := f.s.cfg.Protocol.KVGiB
		return max(0, awake-kv), fmt.Sprintf("awake GPU memory %.2f GiB less kv_gib %.2f", awake, kv)
	}
	return math.NaN(), "the model's weights are not known (no server log line, no memory source)"
}
