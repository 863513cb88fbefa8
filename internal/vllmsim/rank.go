package vllmsim

// Tensor parallelism (--tensor-parallel-size N): vLLM's multiprocess
// executor runs one worker process per rank, each on its own GPU
// (CUDA_VISIBLE_DEVICES' first N), each holding its shard of the weights,
// its share of the KV cache, its own CUDA context and NCCL's buffers
// (vllm/v1/executor/multiproc_executor.py: WorkerProc, one process per
// rank). vllmsim does the same with one simulated GPU directory per rank
// (VLLMSIM_GPU_DIR, a list separated by ':') and, for N > 1, one rank
// process per rank: the vllmsim binary again with VLLMSIM_WORKER_RANK set,
// which publishes its device memory under its own PID, so a memory source
// attributes it by process as NVML does vLLM's workers. The server process
// tells each rank what it holds over the rank's stdin and waits for its
// answer, so the device shows a sleep before the sleep answers; a rank
// whose server dies sees its stdin end and exits, freeing its memory.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wakebench/wakebench/internal/simgpu"
)

// EnvWorkerRank marks a rank process of a tensor-parallel server (set by
// the server itself, never by a user): the rank's index.
const EnvWorkerRank = "VLLMSIM_WORKER_RANK"

// commBytesPerRank is what each rank of a model across GPUs holds outside
// the sleep-mode pools for NCCL's communicators and buffers: it stays on
// the device asleep. Modelled (NCCL's default buffers over its channels),
// not read from vLLM or NCCL.
const commBytesPerRank = 256 << 20

// gpuDirs splits VLLMSIM_GPU_DIR into its directories, one per GPU the
// server may use, in CUDA_VISIBLE_DEVICES' order.
func gpuDirs(v string) []string {
	var dirs []string
	for _, d := range filepath.SplitList(v) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// rank is one GPU of the server: where its memory is published, and by
// which process (the server's own for one GPU, else the rank's worker).
type rank struct {
	index int
	dir   string
	info  simgpu.Device
	model string

	pid int       // the process the device lists
	cmd *exec.Cmd // the rank's worker process (nil: the server itself)

	mu  sync.Mutex // guards the worker's pipe: one command and its answer at a time
	in  io.WriteCloser
	out *bufio.Reader
}

// publish records used bytes on the rank's GPU, under the rank's process,
// and returns once the device shows it.
func (r *rank) publish(used uint64) error {
	if r.dir == "" { // real-device mode: the device itself shows what the process holds
		return nil
	}
	if r.cmd == nil {
		return simgpu.Publish(r.dir, simgpu.Process{PID: r.pid, Model: r.model, UsedBytes: used})
	}
	_, err := r.call("used", used)
	return err
}

// hold makes the rank's worker hold n bytes of host memory, its shard of
// backup b, page-locked where b is pinned (0 frees it); lockErr says why
// the pages are resident but not locked.
func (r *rank) hold(b backup, n uint64) (lockErr error, err error) {
	answer, err := r.call(b.command(), n)
	if err != nil {
		return nil, err
	}
	if why, ok := strings.CutPrefix(answer, "unlocked "); ok {
		return errors.New(why), nil
	}
	return nil, nil
}

// call sends one command to the rank's worker and returns what its "ok"
// answer says after it.
func (r *rank) call(cmd string, n uint64) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := fmt.Fprintf(r.in, "%s %d\n", cmd, n); err != nil {
		return "", fmt.Errorf("rank %d (pid %d): %w", r.index, r.pid, err)
	}
	line, err := r.out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("rank %d (pid %d) did not answer: %w", r.index, r.pid, err)
	}
	line = strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(line, "ok"); ok {
		return strings.TrimSpace(rest), nil
	}
	return "", fmt.Errorf("rank %d (pid %d): %s", r.index, r.pid, line)
}

// free is the rank's GPU memory not held by anyone.
func (r *rank) free() (uint64, error) {
	procs, err := simgpu.Processes(r.dir)
	if err != nil {
		return 0, fmt.Errorf("read simulated GPU %d: %w", r.index, err)
	}
	used := simgpu.Used(r.info, procs)
	if used >= r.info.TotalBytes {
		return 0, nil
	}
	return r.info.TotalBytes - used, nil
}

// stop ends the rank's worker (its memory entry goes with it) or removes
// the server's own entry.
func (r *rank) stop() {
	if r.cmd == nil {
		if r.dir != "" {
			simgpu.Remove(r.dir, r.pid)
		}
		return
	}
	r.in.Close() // the worker exits at the end of its input
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second): // a worker that does not go: kill it
		r.cmd.Process.Kill()
		<-done
	}
	simgpu.Remove(r.dir, r.pid)
}

// startRanks starts a worker process per rank on dirs (the first n), or
// for n = 1 gives the server's own process the one GPU.
func startRanks(dirs []string, n int, model string) ([]*rank, error) {
	if len(dirs) < n {
		return nil, fmt.Errorf("ValueError: --tensor-parallel-size %d needs %d GPUs, %d visible (%s lists %d simulated GPUs)", n, n, len(dirs), "VLLMSIM_GPU_DIR", len(dirs))
	}
	var ranks []*rank
	stopAll := func() {
		for _, r := range ranks {
			r.stop()
		}
	}
	for i := range n {
		info, err := simgpu.ReadDevice(dirs[i])
		if err != nil {
			stopAll()
			return nil, err
		}
		r := &rank{index: i, dir: dirs[i], info: info, model: model, pid: os.Getpid()}
		if n > 1 {
			if err := r.startWorker(); err != nil {
				stopAll()
				return nil, err
			}
		}
		ranks = append(ranks, r)
	}
	return ranks, nil
}

// startWorker starts the rank's worker: this program again, told its rank
// and GPU through the environment, dying with the server (Pdeathsig, and
// the end of its input).
func (r *rank) startWorker() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("rank %d: %w", r.index, err)
	}
	// Not bound to ctx: a SIGTERM ends the server's context first, and the
	// ranks must hold their memory until the server has stopped (stop ends
	// them; Pdeathsig if the server dies).
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), EnvWorkerRank+"="+strconv.Itoa(r.index), simgpu.EnvDir+"="+r.dir, "VLLMSIM_WORKER_MODEL="+r.model)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if r.in, err = cmd.StdinPipe(); err != nil {
		return fmt.Errorf("rank %d: %w", r.index, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("rank %d: %w", r.index, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start rank %d: %w", r.index, err)
	}
	r.cmd, r.pid, r.out = cmd, cmd.Process.Pid, bufio.NewReader(stdout)
	return nil
}

// Worker is a rank process (EnvWorkerRank set): it publishes, under its own
// PID on its GPU (VLLMSIM_GPU_DIR), the bytes each "used N" line on in
// names; on a backup's command ("pin N" the weights', "graph N" the CUDA
// graph pool's, "pageable N" the preserved parameters': backup.command)
// it holds N bytes of host memory, its shard of that backup, page-locked
// where the backup is pinned ("… 0" frees it); it answers each line "ok"
// (or "ok unlocked WHY", "error WHY") on out, and at the end of in frees
// everything and returns 0.
func Worker(getenv func(string) string, in io.Reader, out io.Writer) int {
	dir, model, pid := getenv(simgpu.EnvDir), getenv("VLLMSIM_WORKER_MODEL"), os.Getpid()
	defer simgpu.Remove(dir, pid)
	var backups [nBackups]*hostBuffer
	defer func() {
		for _, h := range backups {
			h.free()
		}
	}()
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		var n uint64
		err := errors.New("unknown command")
		if len(f) == 2 {
			n, err = strconv.ParseUint(f[1], 10, 64)
		}
		answer := "ok"
		if err == nil {
			if f[0] == "used" {
				err = simgpu.Publish(dir, simgpu.Process{PID: pid, Model: model, UsedBytes: n})
			} else if b, ok := backupNamed(f[0]); !ok {
				err = errors.New("unknown command")
			} else if n == 0 {
				err = backups[b].free()
				backups[b] = nil
			} else if backups[b] == nil { // else held already
				var lockErr error
				if backups[b], lockErr, err = allocHost(n, b.pinned()); lockErr != nil {
					answer = "ok unlocked " + lockErr.Error()
				}
			}
		}
		if err != nil {
			fmt.Fprintf(out, "error %v\n", err)
			continue
		}
		fmt.Fprintln(out, answer)
	}
	return 0
}
