package vllmsim

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// EnvHostScale names vllmsim's host-memory scale: the host bytes the
// server really allocates are the modelled bytes × this factor (default
// 1; 0 allocates nothing). A test or a small machine scales a profile's
// 27 GiB backup down and still sees its shape in /proc.
const EnvHostScale = "VLLMSIM_HOST_SCALE"

// stagingFraction is the transient host buffer of a level-1 sleep, as a
// fraction of the weight bytes: allocated and touched when the copy
// starts, freed before /sleep answers. It is vllmsim's model, not read
// from vLLM's source: vLLM's CuMemAllocator.sleep copies each offloaded
// allocation into a CPU tensor (vllm/device_allocator/cumem.py), and
// hosts report the sleep call itself needing host RAM beyond the backup
// (ls1intum/edutelligence#583); a quarter gives that peak a size to measure.
const stagingFraction = 0.25

// hostBuffer is real host memory of the server process: an anonymous
// mapping with every page written, so the kernel counts it in VmRSS, and
// locked (VmLck) when RLIMIT_MEMLOCK allows, as vLLM's pinned buffer is
// page-locked by cudaHostAlloc.
type hostBuffer struct {
	b      []byte
	locked bool
}

// allocHost maps n bytes and touches every page; with lock it tries to
// lock them too: a lock refused (RLIMIT_MEMLOCK) leaves the buffer
// resident but unlocked, lockErr says why. n = 0 is an empty buffer.
func allocHost(n uint64, lock bool) (h *hostBuffer, lockErr error, err error) {
	h = &hostBuffer{}
	if n == 0 {
		return h, nil, nil
	}
	if n > uint64(int(^uint(0)>>1)) {
		return nil, nil, fmt.Errorf("host buffer of %d bytes: too large", n)
	}
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("map %d bytes of host memory: %w", n, err)
	}
	page := os.Getpagesize()
	for i := 0; i < len(b); i += page {
		b[i] = 1
	}
	h.b = b
	if !lock {
		return h, nil, nil
	}
	if err := unix.Mlock(b); err != nil {
		lockErr = fmt.Errorf("mlock %.3f GiB: %w (RLIMIT_MEMLOCK %s)", float64(n)/GiB, err, memlockLimit())
	} else {
		h.locked = true
	}
	return h, lockErr, nil
}

// size is the buffer's bytes.
func (h *hostBuffer) size() uint64 {
	if h == nil {
		return 0
	}
	return uint64(len(h.b))
}

// free unmaps the buffer (its pages leave VmRSS at once); a nil or freed
// buffer is a no-op.
func (h *hostBuffer) free() error {
	if h == nil || h.b == nil {
		return nil
	}
	b := h.b
	h.b, h.locked = nil, false
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("unmap %.3f GiB of host memory: %w", float64(len(b))/GiB, err)
	}
	return nil
}

func memlockLimit() string {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		return "unknown"
	}
	if rl.Cur == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return fmt.Sprintf("%d KiB", rl.Cur/1024)
}

// backup is one of the host backups a sleep allocates.
type backup int

const (
	weightsBackup   backup = iota // a level-1 sleep's pinned copy of the weights
	graphBackup                   // --sleep-mode-offload-cudagraph's pinned copy of the CUDA graph pool (both levels)
	preservedBackup               // --sleep-preserve-parameter-names' pageable copy of the matched parameters (level 2)
	stagingBackup                 // a level-1 sleep's transient staging buffer, freed before its answer
	nBackups
)

// command is the rank worker's command that holds the backup's shard
// (Worker).
func (b backup) command() string { return [nBackups]string{"pin", "graph", "pageable", "staging"}[b] }

// pinned reports whether the backup is page-locked (cudaHostAlloc), not
// pageable.
func (b backup) pinned() bool { return b == weightsBackup || b == graphBackup }

// String is what a log line or an error calls the backup.
func (b backup) String() string {
	return [nBackups]string{"the level-1 weight backup", "the CUDA graph pool's backup", "the preserved parameters' backup", "the level-1 sleep's staging buffer"}[b]
}

// backupNamed is the backup a worker command holds.
func backupNamed(command string) (backup, bool) {
	for b := range nBackups {
		if b.command() == command {
			return b, true
		}
	}
	return 0, false
}

// hostMemory is the server's host memory for its sleeps' backups: the
// pinned backup of the weights, kept for the process's lifetime once the
// first level-1 sleep allocated it (pinned by cumem.py, cached by
// PyTorch's host allocator: pytorch/pytorch#275), or freed after the
// weights wake under VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY; a level-1
// sleep's staging buffer; and the sleep options' (sleepopts.go). With
// more than one rank each rank's worker holds its shard of each, as each
// vLLM worker process backs up its own shard (the allocator and the graph
// pool are per worker), the ranks at once.
type hostMemory struct {
	scale float64 // VLLMSIM_HOST_SCALE
	// ranks, for a model across GPUs, hold the backups: each rank's worker
	// its shard's; nil: this process.
	ranks []*rank

	mu     sync.Mutex            // guards own, held and closed
	own    [nBackups]*hostBuffer // this process's backups; nil until a sleep allocates one
	held   [nBackups]bool        // the ranks hold their shards of the backup
	closed bool                  // releaseAll ran: the server is ending, nothing more is allocated
}

// real is modelled bytes scaled to what the server really allocates.
func (h *hostMemory) real(modelled uint64) uint64 { return uint64(float64(modelled) * h.scale) }

// sharded reports whether the ranks' workers hold the backups.
func (h *hostMemory) sharded() bool { return len(h.ranks) > 1 }

// where says who holds the backups, for a log line.
func (h *hostMemory) where() string {
	if h.sharded() {
		return fmt.Sprintf("held by each of the %d ranks' workers, its shard", len(h.ranks))
	}
	return "held by the server process"
}

// hold allocates backup b of modelled bytes (every rank's together)
// unless it is held; fresh reports a new allocation. Once the server is
// ending (releaseAll) a sleep that outlived its end allocates nothing.
func (h *hostMemory) hold(b backup, modelled uint64) (fresh bool, lockErr error, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false, nil, nil
	}
	if h.sharded() {
		if h.held[b] {
			return false, nil, nil
		}
		// Each rank's worker maps its shard at the same time, as the ranks
		// copy theirs.
		lockErrs, errs := make([]error, len(h.ranks)), make([]error, len(h.ranks))
		var wg sync.WaitGroup
		for i, r := range h.ranks {
			wg.Go(func() { lockErrs[i], errs[i] = r.hold(b, h.real(modelled)/uint64(len(h.ranks))) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			for i, r := range h.ranks { // the shards held go too
				if errs[i] == nil {
					r.hold(b, 0)
				}
			}
			return false, nil, err
		}
		h.held[b] = true
		return true, errors.Join(lockErrs...), nil
	}
	if h.own[b] != nil {
		return false, nil, nil
	}
	buf, lockErr, err := allocHost(h.real(modelled), b.pinned())
	if err != nil {
		return false, nil, err
	}
	h.own[b] = buf
	return true, lockErr, nil
}

// release frees backup b, if held, and returns the bytes this process
// freed (the ranks' shards go with their workers' answers).
func (h *hostMemory) release(b backup) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[b] {
		var errs []error
		for _, r := range h.ranks {
			_, err := r.hold(b, 0)
			errs = append(errs, err)
		}
		h.held[b] = false
		return 0, errors.Join(errs...)
	}
	n := h.own[b].size()
	err := h.own[b].free()
	h.own[b] = nil
	return n, err
}

// releaseAll frees every backup when the server ends; a later hold
// allocates nothing.
func (h *hostMemory) releaseAll() error {
	var errs []error
	for b := range nBackups {
		_, err := h.release(b)
		errs = append(errs, err)
	}
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	return errors.Join(errs...)
}

// lockNote is what a start log line says of a pinned buffer's lock:
// "locked", or why not (VmLck will not show it).
func lockNote(lockErr error) string {
	if lockErr != nil {
		return "NOT locked, VmLck will not show it: " + lockErr.Error()
	}
	return "locked"
}

// errHostOOM is the injected host-memory allocation failure (fault host-oom).
var errHostOOM = errors.New("injected fault host-oom")

// engineDeadMessage is vLLM's EngineDeadError text with its detail
// (vllm/v1/engine/exceptions.py: "EngineCore encountered an issue. See
// stack trace (above) for the root cause." then "EngineCore fatal
// detail:" and the detail).
func engineDeadMessage(detail string) string {
	return "EngineCore encountered an issue. See stack trace (above) for the root cause.\nEngineCore fatal detail:\n" + detail
}

// hostFailed is a sleep whose host backup b of modelled bytes could not be allocated: the
// engine core prints why as it dies, then the API server's EngineDeadError (see handleSleep
// for the answer); the error is fatal.
func (s sleepMode) hostFailed(b backup, bytes uint64, err error) *opError {
	kind := "pinned"
	if !b.pinned() {
		kind = "pageable"
	}
	detail := fmt.Sprintf("failed to allocate %.2f GiB of %s host memory for %s: out of host memory (%v)", float64(bytes)/GiB, kind, b, err)
	s.log.Printf("ERROR EngineCore failed: %s", detail)
	s.log.Printf("ERROR AsyncLLM output_handler failed: EngineDeadError: %s", engineDeadMessage(detail))
	return &opError{status: http.StatusInternalServerError, typ: "EngineDeadError", msg: engineDeadMessage(detail), fatal: true}
}

// sleepHost is a level-1 sleep's host memory before its copy: the pinned
// backup (the first time, or again after a release) and the transient
// staging buffer (stagingBackup), which the caller releases when the sleep
// answers. A failed allocation (fault host-oom, or the kernel refusing the
// mapping) kills the engine: the error is fatal, its answer ends the
// process.
func (s sleepMode) sleepHost() *opError {
	weights := s.phys.TotalWeightBytes() // every rank's shard
	if s.faults.HostOOM {
		return s.hostFailed(weightsBackup, weights, errHostOOM)
	}
	fresh, lockErr, err := s.host.hold(weightsBackup, weights)
	if err != nil {
		return s.hostFailed(weightsBackup, weights, err)
	}
	staging := uint64(float64(weights) * stagingFraction)
	if _, _, err := s.host.hold(stagingBackup, staging); err != nil {
		return s.hostFailed(stagingBackup, staging, err)
	}
	if fresh {
		s.log.Printf("vllmsim allocated the pinned host backup: %.3f GiB real for %.2f GiB of weights (scale %g, %s), %s",
			float64(s.host.real(weights))/GiB, float64(weights)/GiB, s.host.scale, s.host.where(), lockNote(lockErr))
	}
	return nil
}
