package vllmsim

// Real-device mode (VLLMSIM_DEVICE=cuda): the memory vllmsim models is allocated on a real
// GPU, and the copies a sleep and a wake make are made there, so that NVML sees real
// per-process memory and the energy counter real power, and a sleep's and a wake's time is
// the device's own. The server holds, on CUDA device 0 of what CUDA_VISIBLE_DEVICES leaves it
// (the driver applies CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, as it does for vLLM's
// worker, whose cuda:0 is the same device):
//   - the residual: the CUDA context the driver really creates (the profile's residual_gib is
//     not allocated on top of it), NCCL's and fault tp-residual's bytes, and fault
//     leak-per-cycle's growth;
//   - the weight pool, filled with a pattern at load and by reload_weights;
//   - the KV-cache pool.
// A level-1 sleep copies the weight pool into page-locked host memory (allocated by the first
// level-1 sleep and kept, as PyTorch's pinned allocator keeps it) and frees both pools; a
// level-2 sleep frees them without a copy; a wake allocates them again and, after level 1,
// copies the weights back. Each prefill and decode step reads the weight pool once on the
// device: a device-to-device copy into the KV-cache pool, which moves each byte twice (a read
// and a write), so a step's weight pass takes about twice the time a kernel reading the
// weights would. What is not the device's stays modelled at the time scale: start-up, the
// checkpoint read from host storage, per-layer launches and the compute share of a step.

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/wakebench/wakebench/internal/cuda"
	"github.com/wakebench/wakebench/internal/simgpu"
)

// EnvDevice selects where vllmsim's device memory lives: "" or "sim", the simulated GPU
// directory; "cuda", a real GPU through the CUDA driver (real-device mode).
const EnvDevice = "VLLMSIM_DEVICE"

const (
	deviceSim  = "sim"
	deviceCUDA = "cuda"
)

// parseDevice reads EnvDevice.
func parseDevice(v string) (string, error) {
	switch v {
	case "", deviceSim:
		return deviceSim, nil
	case deviceCUDA:
		return deviceCUDA, nil
	}
	return "", fmt.Errorf("%s=%q: want sim (the simulated GPU, the default) or cuda (a real GPU: device memory and copies real)", EnvDevice, v)
}

// hostBuf is page-locked host memory.
type hostBuf interface{ Size() uint64 }

// gpuMemory is what real-device mode needs of a GPU: package cuda's Device, or a test's fake.
// Every copy returns once its bytes are there.
type gpuMemory interface {
	Describe() string
	MemInfo() (free, total uint64, err error)
	Alloc(n uint64) (uint64, error)
	Free(p uint64) error
	AllocHost(n uint64) (hostBuf, error)
	FreeHost(h hostBuf) error
	CopyHtoD(dst uint64, h hostBuf, n uint64) error
	CopyDtoH(h hostBuf, src uint64, n uint64) error
	CopyDtoD(dst, src uint64, n uint64) error
	Fill(p uint64, v uint32, n uint64) error
	Close()
}

// cudaMemory is a real GPU's gpuMemory.
type cudaMemory struct{ d *cuda.Device }

// openCUDA opens CUDA device 0 of what CUDA_VISIBLE_DEVICES leaves the process.
func openCUDA() (gpuMemory, error) {
	d, err := cuda.Open(0)
	if err != nil {
		return nil, err
	}
	return cudaMemory{d}, nil
}

func (c cudaMemory) Describe() string {
	return fmt.Sprintf("%s (CUDA device 0, PCI bus %s, CUDA driver API %s)", c.d.Name, c.d.BusID, cuda.DriverVersion(c.d.Driver))
}
func (c cudaMemory) MemInfo() (uint64, uint64, error) { return c.d.MemInfo() }
func (c cudaMemory) Alloc(n uint64) (uint64, error) {
	p, err := c.d.Alloc(n)
	return uint64(p), err
}
func (c cudaMemory) Free(p uint64) error { return c.d.Free(cuda.Ptr(p)) }
func (c cudaMemory) AllocHost(n uint64) (hostBuf, error) {
	h, err := c.d.AllocHost(n)
	if err != nil {
		return nil, err
	}
	return h, nil
}
func (c cudaMemory) FreeHost(h hostBuf) error { return c.d.FreeHost(h.(*cuda.Host)) }
func (c cudaMemory) CopyHtoD(dst uint64, h hostBuf, n uint64) error {
	return c.d.CopyHtoD(cuda.Ptr(dst), h.(*cuda.Host), 0, n)
}
func (c cudaMemory) CopyDtoH(h hostBuf, src uint64, n uint64) error {
	return c.d.CopyDtoH(h.(*cuda.Host), 0, cuda.Ptr(src), n)
}
func (c cudaMemory) CopyDtoD(dst, src uint64, n uint64) error {
	return c.d.CopyDtoD(cuda.Ptr(dst), cuda.Ptr(src), n)
}
func (c cudaMemory) Fill(p uint64, v uint32, n uint64) error { return c.d.Fill(cuda.Ptr(p), v, n) }
func (c cudaMemory) Close()                                  { c.d.Close() }

// errPinnedAlloc is the pinned host backup's allocation failing (the engine dies of it).
var errPinnedAlloc = errors.New("allocate pinned host memory")

// poolState is what the server's state asks the device to hold.
type poolState struct {
	weights bool   // the weight pool is on the device
	kv      bool   // the KV-cache pool is on the device
	extra   uint64 // residual bytes beyond the context: NCCL's, tp-residual's, leaked
	level   int    // the level of the sleep the weights are asleep from (1: a host copy)
	// graphOff is the CUDA graph pool a sleep backed up off the device
	// (--sleep-mode-offload-cudagraph; the simulated device only).
	graphOff uint64
}

// weightPattern fills the weight pool at load and at reload_weights: what a wake after level 1
// must bring back.
const weightPattern = 0x3f803f80 // two bf16 1.0s

// realPools is the server's memory on a real GPU.
type realPools struct {
	mem                 gpuMemory
	weightBytes, kvSize uint64

	// mu guards everything below: one change of the device's memory at a time, and no step's
	// weight read while the pools change.
	mu       sync.Mutex
	weights  uint64   // device address of the weight pool, 0 when not held
	kv       uint64   // the KV-cache pool's, 0 when not held
	residual []uint64 // the residual's allocations beyond the context (each extra)
	extra    uint64   // bytes of residual held beyond the context
	backup   hostBuf  // the pinned host copy of the weights (kept once allocated)
	backed   bool     // backup holds the weights of the last level-1 sleep
}

// newRealPools is the server's pools on mem, none allocated yet. The profile's residual_gib
// (vLLM's CUDA context, graphs and memory outside the pools) is not allocated: the CUDA
// context the driver really created is the residual here, and allocating the modelled one on
// top would count a context twice.
func newRealPools(mem gpuMemory, p Physics) *realPools {
	return &realPools{mem: mem, weightBytes: align4(p.WeightBytes()), kvSize: align4(p.KVBytes)}
}

// align4 rounds n down to whole 32-bit words (cuMemsetD32 fills words).
func align4(n uint64) uint64 { return n &^ 3 }

// apply makes the device hold what st asks, copying the weights to the host and back where a
// level-1 sleep and its wake move them.
func (r *realPools) apply(st poolState) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if st.extra > r.extra { // the residual only grows (leaks, NCCL's buffers once mapped)
		n := align4(st.extra - r.extra)
		if n > 0 {
			p, err := r.mem.Alloc(n)
			if err != nil {
				errs = append(errs, fmt.Errorf("allocate %.2f GiB of residual: %w", float64(n)/GiB, err))
			} else {
				r.residual = append(r.residual, p)
				r.extra += n
			}
		}
	}
	if r.kv != 0 && !st.kv {
		errs = append(errs, r.freePool(&r.kv, "KV cache"))
	}
	if !st.weights && st.level != 1 {
		// Asleep at a level that discards (level 2, or 3 and the like on a release): whatever
		// an earlier level-1 sleep backed up is not brought back, as vllmsim's model has it.
		r.backed = false
	}
	switch {
	case r.weights != 0 && !st.weights:
		if st.level == 1 {
			if err := r.backupWeights(); err != nil {
				return errors.Join(append(errs, err)...) // the weights stay: nothing is lost
			}
		}
		errs = append(errs, r.freePool(&r.weights, "weights"))
	case r.weights == 0 && st.weights:
		p, err := r.mem.Alloc(r.weightBytes)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("allocate the weight pool (%.2f GiB): %w", float64(r.weightBytes)/GiB, err))...)
		}
		r.weights = p
		if r.backed {
			if err := r.mem.CopyHtoD(p, r.backup, r.weightBytes); err != nil {
				errs = append(errs, fmt.Errorf("copy the weights back to the device: %w", err))
			}
		}
	}
	if r.kv == 0 && st.kv {
		p, err := r.mem.Alloc(r.kvSize)
		if err != nil {
			errs = append(errs, fmt.Errorf("allocate the KV cache (%.2f GiB): %w", float64(r.kvSize)/GiB, err))
		} else {
			r.kv = p
		}
	}
	return errors.Join(errs...)
}

// backupWeights copies the weight pool into the pinned host buffer, allocated the first time.
// Caller holds mu.
func (r *realPools) backupWeights() error {
	if r.backup == nil {
		h, err := r.mem.AllocHost(r.weightBytes)
		if err != nil {
			return fmt.Errorf("%w: %.2f GiB for the weights: %w", errPinnedAlloc, float64(r.weightBytes)/GiB, err)
		}
		r.backup = h
	}
	if err := r.mem.CopyDtoH(r.backup, r.weights, r.weightBytes); err != nil {
		return fmt.Errorf("copy the weights to the host: %w", err)
	}
	r.backed = true
	return nil
}

// releaseBackup frees the pinned host copy of the weights (VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY,
// proposed: after a level-1 wake); the next level-1 sleep allocates it again.
func (r *realPools) releaseBackup() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.backup == nil {
		return nil
	}
	err := r.mem.FreeHost(r.backup)
	r.backup, r.backed = nil, false
	return err
}

// freePool frees one pool. Caller holds mu.
func (r *realPools) freePool(p *uint64, what string) error {
	err := r.mem.Free(*p)
	*p = 0
	if err != nil {
		return fmt.Errorf("free the %s: %w", what, err)
	}
	return nil
}

// fillWeights writes the pattern over the weight pool: a load from the checkpoint as the
// device sees it (the read from host storage is modelled).
func (r *realPools) fillWeights() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.weights == 0 {
		return errors.New("the weight pool is not on the device")
	}
	return r.mem.Fill(r.weights, weightPattern, r.weightBytes)
}

// readWeights reads the weight pool once on the device, as a step does: copied into the KV
// pool, in pieces of its size when it is the smaller; nothing while either is not held.
func (r *realPools) readWeights() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.weights == 0 || r.kv == 0 || r.kvSize == 0 {
		return nil
	}
	for off := uint64(0); off < r.weightBytes; off += r.kvSize {
		n := min(r.kvSize, r.weightBytes-off)
		if err := r.mem.CopyDtoD(r.kv, r.weights+off, n); err != nil {
			return fmt.Errorf("read the weights: %w", err)
		}
	}
	return nil
}

// free is the device's free memory.
func (r *realPools) free() (uint64, error) {
	f, _, err := r.mem.MemInfo()
	return f, err
}

// close frees everything and lets the device go.
func (r *realPools) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range []*uint64{&r.weights, &r.kv} {
		if *p != 0 {
			r.mem.Free(*p)
			*p = 0
		}
	}
	for _, p := range r.residual {
		r.mem.Free(p)
	}
	r.residual = nil
	if r.backup != nil {
		r.mem.FreeHost(r.backup)
		r.backup = nil
	}
	r.mem.Close()
}

// openRealDevice opens real-device mode's GPU with open (openCUDA: the driver's device 0 of
// what CUDA_VISIBLE_DEVICES leaves), plans the server's memory on it and allocates the
// residual.
func openRealDevice(args Args, st Settings, model Model, open func() (gpuMemory, error)) (*device, Physics, string, error) {
	if open == nil {
		open = openCUDA
	}
	if args.TensorParallelSize > 1 {
		return nil, Physics{}, "", fmt.Errorf("%s=cuda: --tensor-parallel-size %d: real-device mode runs a server on one GPU (a rank process per GPU is simulated only)", EnvDevice, args.TensorParallelSize)
	}
	mem, err := open()
	if err != nil {
		return nil, Physics{}, "", fmt.Errorf("%s=cuda: %w", EnvDevice, err)
	}
	_, total, err := mem.MemInfo()
	if err != nil {
		mem.Close()
		return nil, Physics{}, "", fmt.Errorf("%s=cuda: %w", EnvDevice, err)
	}
	where := "real GPU " + mem.Describe()
	info := simgpu.Device{Name: where, TotalBytes: total}
	phys, err := planMemory(args, st, model, info)
	if err != nil {
		mem.Close()
		return nil, phys, "", err
	}
	phys.Real = true
	pools := newRealPools(mem, phys)
	r := &rank{index: 0, info: info, model: args.ServedName(), pid: os.Getpid()}
	return &device{ranks: []*rank{r}, info: info, real: pools}, phys, where, nil
}
