package vllmsim

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/cuda"
	"github.com/wakebench/wakebench/internal/vllm"
)

// fakeGPU is a GPU for real-device mode's tests: allocations with a size and what they hold
// (a label, not bytes: a pool of GiBs needs no GiBs here), copies that move the label and
// count their bytes.
type fakeGPU struct {
	total uint64

	// mu guards everything below.
	mu       sync.Mutex
	next     uint64
	allocs   map[uint64]*fakeAlloc
	used     uint64
	htod     uint64 // bytes copied host → device
	dtoh     uint64 // device → host
	dtod     uint64 // device → device
	hostHeld uint64
	failNext bool // the next Alloc fails out of memory
	failHost bool // AllocHost fails
	closed   bool
}

type fakeAlloc struct {
	size    uint64
	content string
}

type fakeHost struct {
	size    uint64
	content string
}

func (h *fakeHost) Size() uint64 { return h.size }

func newFakeGPU(totalGiB float64) *fakeGPU {
	return &fakeGPU{total: uint64(totalGiB * GiB), next: 1 << 40, allocs: map[uint64]*fakeAlloc{}}
}

func (f *fakeGPU) open() (gpuMemory, error) { return f, nil }

// busyFake is a fake GPU of totalGiB of which another process holds heldGiB.
func busyFake(totalGiB, heldGiB float64) *fakeGPU {
	f := newFakeGPU(totalGiB)
	f.used = uint64(heldGiB * GiB)
	return f
}
func (f *fakeGPU) Describe() string { return "Fake GPU (test)" }
func (f *fakeGPU) MemInfo() (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total - f.used, f.total, nil
}
func (f *fakeGPU) Alloc(n uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext || f.used+n > f.total {
		f.failNext = false
		return 0, &cuda.Error{Call: "cuMemAlloc_v2", Code: cuda.ErrOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	}
	p := f.next
	f.next += n + 4096
	f.allocs[p] = &fakeAlloc{size: n, content: "uninitialised"}
	f.used += n
	return p, nil
}
func (f *fakeGPU) Free(p uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.allocs[p]
	if !ok {
		return fmt.Errorf("free of %#x: not allocated", p)
	}
	delete(f.allocs, p)
	f.used -= a.size
	return nil
}

// at is the allocation holding [p, p+n). Caller holds mu.
func (f *fakeGPU) at(p, n uint64) (*fakeAlloc, error) {
	for base, a := range f.allocs {
		if p >= base && p+n <= base+a.size {
			return a, nil
		}
	}
	return nil, fmt.Errorf("%#x+%d is outside every allocation", p, n)
}
func (f *fakeGPU) AllocHost(n uint64) (hostBuf, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failHost {
		return nil, &cuda.Error{Call: "cuMemAllocHost_v2", Code: cuda.ErrOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	}
	f.hostHeld += n
	return &fakeHost{size: n}, nil
}
func (f *fakeGPU) FreeHost(h hostBuf) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hostHeld -= h.Size()
	return nil
}
func (f *fakeGPU) CopyHtoD(dst uint64, h hostBuf, n uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.at(dst, n)
	if err != nil || n > h.Size() {
		return errors.Join(err, errors.New("host range"))
	}
	a.content = h.(*fakeHost).content
	f.htod += n
	return nil
}
func (f *fakeGPU) CopyDtoH(h hostBuf, src uint64, n uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.at(src, n)
	if err != nil || n > h.Size() {
		return errors.Join(err, errors.New("host range"))
	}
	h.(*fakeHost).content = a.content
	f.dtoh += n
	return nil
}
func (f *fakeGPU) CopyDtoD(dst, src uint64, n uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.at(src, n); err != nil {
		return err
	}
	if _, err := f.at(dst, n); err != nil {
		return err
	}
	f.dtod += n
	return nil
}
func (f *fakeGPU) Fill(p uint64, v uint32, n uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.at(p, n)
	if err != nil {
		return err
	}
	a.content = fmt.Sprintf("fill %#x", v)
	return nil
}
func (f *fakeGPU) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

// snapshot is what the fake holds now: device bytes, the weight pool's content (the
// allocation of weightBytes), and the copies' byte counts.
type fakeState struct {
	used, htod, dtoh, dtod, host uint64
	weights                      string
}

func (f *fakeGPU) snapshot(weightBytes uint64) fakeState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := fakeState{used: f.used, htod: f.htod, dtoh: f.dtoh, dtod: f.dtod, host: f.hostHeld, weights: "not held"}
	for _, a := range f.allocs {
		if a.size == weightBytes {
			st.weights = a.content
		}
	}
	return st
}

// The pools alone: what each state holds, what each transition copies, and what a failed
// allocation leaves.
func TestRealPools(t *testing.T) {
	f := newFakeGPU(16)
	p := Physics{Model: Model{WeightGiB: 2, ResidualGiB: 0.25}, KVBytes: 1 << 30, Real: true}
	r := newRealPools(f, p)
	w := p.WeightBytes()
	assert.Zero(t, f.snapshot(w).used, "the residual is the real CUDA context, not allocated again")

	awake := poolState{weights: true, kv: true}
	require.NoError(t, r.apply(awake))
	require.NoError(t, r.fillWeights())
	assert.Equal(t, fakeState{used: w + 1<<30, weights: "fill 0x3f803f80"}, f.snapshot(w))

	// A step reads every weight byte once, through the KV pool in pieces of its size.
	require.NoError(t, r.readWeights())
	assert.Equal(t, w, f.snapshot(w).dtod)

	// Level 1: the weights to pinned host memory, both pools freed.
	require.NoError(t, r.apply(poolState{level: 1}))
	st := f.snapshot(w)
	assert.Zero(t, st.used)
	assert.Equal(t, w, st.dtoh)
	assert.Equal(t, w, st.host, "the pinned backup is the weights' size")
	// Its wake: the weights come back as they were; the KV cache is fresh.
	require.NoError(t, r.apply(poolState{weights: true, level: 1}))
	st = f.snapshot(w)
	assert.Equal(t, "fill 0x3f803f80", st.weights)
	assert.Equal(t, w, st.htod)
	require.NoError(t, r.apply(awake))
	assert.Equal(t, w+1<<30, f.snapshot(w).used)

	// Level 2: freed without a copy; its wake brings memory, not the weights.
	require.NoError(t, r.apply(poolState{level: 2}))
	assert.Equal(t, w, f.snapshot(w).dtoh, "no copy at level 2")
	require.NoError(t, r.apply(poolState{weights: true, kv: true, level: 2}))
	st = f.snapshot(w)
	assert.Equal(t, "uninitialised", st.weights, "a level-2 wake's weights are undefined until reload_weights")
	assert.Equal(t, w, st.htod, "no copy back after level 2")
	assert.Equal(t, w, st.host, "the pinned backup is kept, as PyTorch's host allocator keeps it")

	// A wake that cannot allocate says so, and leaves the pools as they were.
	require.NoError(t, r.apply(poolState{level: 2}))
	f.mu.Lock()
	f.failNext = true
	f.mu.Unlock()
	err := r.apply(poolState{weights: true, kv: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CUDA_ERROR_OUT_OF_MEMORY")
	assert.Contains(t, err.Error(), "weight pool")
	st = f.snapshot(w)
	assert.Zero(t, st.used, "nothing half-allocated: the KV cache waits for the weights")
	require.NoError(t, r.apply(poolState{weights: true, kv: true}), "the next wake, with memory, succeeds")
	assert.Equal(t, w+1<<30, f.snapshot(w).used)

	// A level-1 sleep whose pinned backup cannot be allocated keeps the weights on the device
	// and says so (the server dies of it, as vLLM's engine does: errPinnedAlloc).
	require.NoError(t, r.releaseBackup())
	assert.Zero(t, f.snapshot(w).host)
	f.mu.Lock()
	f.failHost = true
	f.mu.Unlock()
	err = r.apply(poolState{level: 1})
	require.ErrorIs(t, err, errPinnedAlloc)
	assert.Equal(t, "uninitialised", f.snapshot(w).weights, "the weights stay on the device")
	f.mu.Lock()
	f.failHost = false
	f.mu.Unlock()
	require.NoError(t, r.apply(poolState{level: 2}))

	// Residual growth (a leak, NCCL's buffers) is allocated, once.
	require.NoError(t, r.apply(poolState{extra: 64 << 20}))
	require.NoError(t, r.apply(poolState{extra: 64 << 20}))
	assert.Equal(t, uint64(64<<20), f.snapshot(w).used)

	// A level-1 sleep, its KV cache woken alone, then a level-2 sleep: the weights' level-1
	// copy is not brought back by the next wake (level 2 discards, in vllmsim's model).
	require.NoError(t, r.apply(poolState{weights: true, kv: true, extra: 64 << 20}))
	require.NoError(t, r.fillWeights())
	htod := f.snapshot(w).htod
	require.NoError(t, r.apply(poolState{level: 1, extra: 64 << 20}))
	require.NoError(t, r.apply(poolState{kv: true, level: 1, extra: 64 << 20}))
	require.NoError(t, r.apply(poolState{level: 2, extra: 64 << 20}))
	require.NoError(t, r.apply(poolState{weights: true, kv: true, level: 2, extra: 64 << 20}))
	assert.Equal(t, htod, f.snapshot(w).htod, "no copy back after the level-2 sleep")
	assert.Equal(t, "uninitialised", f.snapshot(w).weights)

	r.close()
	st = f.snapshot(w)
	assert.Zero(t, st.used)
	assert.Zero(t, st.host)
	assert.True(t, f.closed)
}

// The server in real-device mode: the device's memory follows every state, a level-1 wake
// brings the weights back by copy, a level-2 wake and reload_weights write them again, each
// step reads them, and the freed lines are the device's own numbers.
func TestRealDeviceServer(t *testing.T) {
	f := newFakeGPU(16)
	logs := &SyncLog{}
	s := startSimOn(t, "tiny-a", map[string]string{EnvDevice: "cuda"}, logs, f.open)
	s.ready(t)
	ctx := t.Context()
	kv := uint64(1 << 30) // startSimOn's --kv-cache-memory-bytes
	m, _ := LookupProfile("tiny")
	w := uint64(m.Models["tiny-a"].WeightGiB * GiB)
	st := f.snapshot(w)
	assert.Equal(t, w+kv, st.used)
	assert.Equal(t, "fill 0x3f803f80", st.weights, "the load writes the weights")
	assert.Contains(t, logs.String(), "real GPU Fake GPU (test)")

	before := f.snapshot(w).dtod
	_, err := s.c.Complete(ctx, vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 4, IgnoreEOS: true})
	require.NoError(t, err)
	// One prefill and three decode steps after it (the first token is the prefill's one step
	// later here): each reads the weights once.
	assert.GreaterOrEqual(t, f.snapshot(w).dtod-before, 4*w)

	require.NoError(t, s.c.Sleep(ctx, 1))
	st = f.snapshot(w)
	assert.Zero(t, st.used, "level 1 frees both pools (the residual is the real context, not the fake's)")
	assert.Equal(t, w, st.dtoh)
	freed := regexp.MustCompile(`Sleep mode freed ([0-9.]+) GiB memory`).FindStringSubmatch(logs.String())
	require.NotNil(t, freed, logs.String())
	g, _ := strconv.ParseFloat(freed[1], 64)
	assert.InDelta(t, float64(w+kv)/GiB, g, 0.01, "the freed line is the device's free memory before and after")
	require.NoError(t, s.c.WakeUp(ctx))
	st = f.snapshot(w)
	assert.Equal(t, w+kv, st.used)
	assert.Equal(t, "fill 0x3f803f80", st.weights, "the weights came back by copy")
	assert.Equal(t, w, st.htod)

	require.NoError(t, s.c.Sleep(ctx, 2))
	assert.Equal(t, w, f.snapshot(w).dtoh, "level 2 copies nothing")
	require.NoError(t, s.c.WakeUp(ctx))
	assert.Equal(t, "uninitialised", f.snapshot(w).weights)
	_, err = s.c.CollectiveRPC(ctx, "reload_weights")
	require.NoError(t, err)
	assert.Equal(t, "fill 0x3f803f80", f.snapshot(w).weights, "reload_weights writes them on the device")
}

// VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY (proposed) frees the real pinned backup after a level-1
// wake; the next level-1 sleep allocates it again.
func TestRealDeviceReleasesHostMemory(t *testing.T) {
	f := newFakeGPU(16)
	s := startSimOn(t, "tiny-a", map[string]string{EnvDevice: "cuda", EnvEra: string(eraProposed), EnvReleaseHostMemory: "1"}, &SyncLog{}, f.open)
	s.ready(t)
	ctx := t.Context()
	m, _ := LookupProfile("tiny")
	w := uint64(m.Models["tiny-a"].WeightGiB * GiB)
	require.NoError(t, s.c.Sleep(ctx, 1))
	assert.Equal(t, w, f.snapshot(w).host)
	require.NoError(t, s.c.WakeUp(ctx))
	assert.Zero(t, f.snapshot(w).host, "released after the wake")
	assert.Equal(t, "fill 0x3f803f80", f.snapshot(w).weights)
	require.NoError(t, s.c.Sleep(ctx, 1))
	assert.Equal(t, w, f.snapshot(w).host, "allocated again")
}

// Real-device mode refuses what it cannot do, naming the thing to fix.
func TestRealDeviceRefusals(t *testing.T) {
	noDriver := func() (gpuMemory, error) {
		return nil, fmt.Errorf("%w (libcuda.so.1: cannot open shared object file)", cuda.ErrNoDriver)
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		open  func() (gpuMemory, error)
		extra []string
		want  string
	}{
		{"no driver", map[string]string{EnvDevice: "cuda"}, noDriver, nil, "VLLMSIM_DEVICE=cuda: the CUDA driver library libcuda.so.1 cannot be loaded: install the NVIDIA driver"},
		{"tensor parallel", map[string]string{EnvDevice: "cuda"}, newFakeGPU(16).open, []string{"--tensor-parallel-size", "2"}, "real-device mode runs a server on one GPU"},
		{"bad value", map[string]string{EnvDevice: "gpu"}, nil, nil, `VLLMSIM_DEVICE="gpu": want sim`},
		{"another process holds half", map[string]string{EnvDevice: "cuda"}, busyFake(1, 0.5).open, nil, "Free memory on device (0.50/1.00 GiB) on startup is less than desired"},
		{"weights do not fit", map[string]string{EnvDevice: "cuda"}, newFakeGPU(0.4).open, []string{"--gpu-memory-utilization", "0.1"}, "allocate the weight pool (0.50 GiB): cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"no room for the KV cache", map[string]string{EnvDevice: "cuda"}, newFakeGPU(1).open, nil, "CUDA out of memory allocating the KV cache (1.00 GiB, 0.50 GiB free)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSimOn(t, "tiny-a", tc.env, &SyncLog{}, tc.open, tc.extra...)
			code := <-s.done
			s.done <- code // for the cleanup
			assert.Equal(t, 1, code)
			assert.Contains(t, s.stderr.String(), tc.want)
		})
	}
}
