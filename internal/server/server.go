// Package server starts and stops model servers (`vllm serve …` or vllmsim)
// as child processes in their own process group, captures their output to a
// log file, detects early exits, measures the host RSS of the whole process
// tree, and stops them with SIGTERM then SIGKILL, so none is left behind.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Spec is how to start one server.
type Spec struct {
	Label   string
	Path    string   // program to run
	Args    []string // arguments after the program name
	Env     []string // added to the harness's environment
	LogPath string   // stdout and stderr are appended here
}

// Server is one running server process group.
type Server struct {
	spec    Spec
	cmd     *exec.Cmd
	log     *os.File
	Spawned time.Time

	done    chan struct{} // closed when the process has exited
	waitErr error

	mu      sync.Mutex
	rssPeak uint64
}

// Start spawns the server. The process leads a new process group, so Stop
// reaches every process it starts (vLLM's engine core is a child process).
func Start(spec Spec) (*Server, error) {
	lf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: log file: %w", spec.Label, err)
	}
	fmt.Fprintf(lf, "=== wakebench: %s start at %s: %s %v\n", spec.Label, time.Now().Format(time.RFC3339Nano), spec.Path, spec.Args)
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// Pdeathsig: if the harness itself dies, the kernel kills the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s := &Server{spec: spec, cmd: cmd, log: lf, done: make(chan struct{})}
	s.Spawned = time.Now()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Label, err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		lf.Close()
		close(s.done)
	}()
	return s, nil
}

// PID is the server's process id (and process group id).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Label is the server's label (Spec.Label).
func (s *Server) Label() string { return s.spec.Label }

// Done is closed when the process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// ExitErr describes how the process ended, with the last lines of its log;
// nil while it runs.
func (s *Server) ExitErr() error {
	select {
	case <-s.done:
	default:
		return nil
	}
	tail := ""
	if t := logTail(s.spec.LogPath, 3); t != "" {
		tail = "; last log lines: " + t
	}
	if s.waitErr != nil { // wrapped: callers read the exit status (*exec.ExitError)
		return fmt.Errorf("server %s exited: %w (log %s)%s", s.spec.Label, s.waitErr, s.spec.LogPath, tail)
	}
	return fmt.Errorf("server %s exited: with status 0 (log %s)%s", s.spec.Label, s.spec.LogPath, tail)
}

// logTail returns the last n non-empty lines of a log (from its last 4 KiB), joined by " | ".
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(0, st.Size()-4096)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(buf), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "=== wakebench:") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// Alive runs f with a context that is cancelled if the process exits; the
// exit is then the error. Use it around every call that waits on the server.
func (s *Server) Alive(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-s.done:
			cancel(s.ExitErr())
		case <-stop:
		}
	}()
	err := f(ctx)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && ctx.Err() != nil {
			return fmt.Errorf("%w (while: %v)", cause, err)
		}
	}
	return err
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits for the leader to exit. Safe to call more than once.
func (s *Server) Stop(grace time.Duration) error {
	pgid := s.cmd.Process.Pid
	select {
	case <-s.done:
		// The leader is gone; make sure nothing of its group lingers.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return nil
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.done:
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // children that ignored SIGTERM
		return nil
	case <-t.C:
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-s.done:
		return fmt.Errorf("stop %s: did not exit within %v of SIGTERM; killed", s.spec.Label, grace)
	case <-time.After(5 * time.Second):
		return fmt.Errorf("stop %s: pid %d survived SIGKILL", s.spec.Label, pgid)
	}
}

// FreePort is a TCP port free on host now, for a server to listen on.
func FreePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("free port on %s: %w", host, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Kill kills the process group at once, as a crash or an OOM kill would,
// and waits for the leader to exit.
func (s *Server) Kill() error {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-s.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("kill %s: pid %d survived SIGKILL", s.spec.Label, s.cmd.Process.Pid)
	}
}

// PIDs lists the processes of the server's process group.
func (s *Server) PIDs() ([]int, error) {
	procs, err := groupProcs(s.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.PID
	}
	return pids, nil
}

// RSS is the resident memory of every process in the server's group, in
// bytes; it also raises the recorded peak.
func (s *Server) RSS() (uint64, error) {
	procs, err := groupProcs(s.cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	var sum uint64
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // exited meanwhile
		}
		sum += uint64(st.ResidentMemory())
	}
	s.mu.Lock()
	s.rssPeak = max(s.rssPeak, sum)
	s.mu.Unlock()
	return sum, nil
}

// HostMemory is the host memory of a process tree, in bytes, as the kernel
// counts it in /proc/PID/status (proc(5)), summed over its processes.
type HostMemory struct {
	RSS uint64 // VmRSS: resident pages (anonymous, file-backed and shared)
	// Locked is VmLck: pages mlock()ed, which the kernel may not swap out.
	Locked uint64
	// Pinned is VmPin: pages pinned in place for device access (the
	// kernel's mm->pinned_vm: RDMA, io_uring, VFIO). Whether a GPU
	// driver's pinned host buffers (cudaHostAlloc) show here or in Locked
	// depends on that driver; neither is a figure for them by itself.
	Pinned uint64
	// Swap is VmSwap: the tree's anonymous pages swapped out.
	Swap uint64
}

// Host is the host memory of every process in the server's group: RSS,
// and the locked and pinned parts where the kernel reports them. It
// raises the peak RSS like RSS does.
func (s *Server) Host() (HostMemory, error) {
	procs, err := groupProcs(s.cmd.Process.Pid)
	if err != nil {
		return HostMemory{}, err
	}
	m := treeMemory(procs)
	s.mu.Lock()
	s.rssPeak = max(s.rssPeak, m.RSS)
	s.mu.Unlock()
	return m, nil
}

// ProcessMemory is the host memory of the processes pids (those that have
// exited meanwhile are left out).
func ProcessMemory(pids ...int) (HostMemory, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return HostMemory{}, fmt.Errorf("open /proc: %w", err)
	}
	var procs []procfs.Proc
	for _, pid := range pids {
		p, err := fs.Proc(pid)
		if err != nil {
			continue // exited
		}
		procs = append(procs, p)
	}
	return treeMemory(procs), nil
}

func treeMemory(procs []procfs.Proc) HostMemory {
	var m HostMemory
	for _, p := range procs {
		st, err := p.NewStatus()
		if err != nil {
			continue // exited meanwhile
		}
		m.RSS += st.VmRSS
		m.Locked += st.VmLck
		m.Pinned += st.VmPin
		m.Swap += st.VmSwap
	}
	return m
}

// PeakRSS is the largest RSS seen by RSS.
func (s *Server) PeakRSS() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rssPeak
}

func groupProcs(pgid int) ([]procfs.Proc, error) {
	all, err := procfs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []procfs.Proc
	for _, p := range all {
		st, err := p.Stat()
		if err != nil || st.PGRP != pgid {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// GroupAlive reports whether any process of group pgid still runs. A
// zombie does not count: it is dead, and whether it is reaped at once is up
// to whoever inherited it (PID 1 in a container may take its time).
func GroupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	procs, err := groupProcs(pgid)
	if err != nil {
		return true // cannot tell: say alive
	}
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.State != "Z" && st.State != "X" {
			return true
		}
	}
	return false
}
