// Package server starts and stops model servers (`vllm serve …` or vllmsim)
// as child processes in their own process group, captures their output to a
// log file, detects early exits, measures the host RSS of the whole process
// tree, and stops them with SIGTERM then SIGKILL, so none is left behind;
// a watchdog beside the harness kills what they left if the harness dies.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/wakebench/wakebench/internal/vllm"
)

// Spec is how to start one server.
type Spec struct {
	Label   string
	Path    string   // program to run
	Args    []string // arguments after the program name
	Env     []string // added to the harness's environment
	LogPath string   // stdout and stderr are appended here
	// Watchdog, where set, kills the server's group and every process seen
	// in its tree if the harness dies before Stop (the run's one watchdog).
	Watchdog *Watchdog
}

// Server is one running server process group.
type Server struct {
	spec    Spec
	cmd     *exec.Cmd
	log     *os.File
	Spawned time.Time

	done    chan struct{} // closed when the process has exited
	waitErr error

	// mu guards rssPeak, seen and walks.
	mu      sync.Mutex
	rssPeak uint64
	walks   int // liveTree's calls: every scanEvery-th is treeProcs's scan
	// seen is every process seen in the server's tree while it ran (PID →
	// its start time, clock ticks after boot: a PID reused by another
	// process does not match), so that Stop finds a descendant that left
	// the process group (setsid) even once its parent is gone.
	seen map[int]uint64
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
	s := &Server{spec: spec, cmd: cmd, log: lf, done: make(chan struct{}), seen: map[int]uint64{}}
	s.Spawned = time.Now()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Label, err)
	}
	spec.Watchdog.watchGroup(cmd.Process.Pid, spec.LogPath)
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
	// A serve flag this vLLM's argparse refused that a newer release has
	// is named with the release it needs, before the exit status.
	why := ""
	if u := vllm.Unrecognized(logTail(s.spec.LogPath, 20)); u != "" {
		why = u + ": "
	}
	if s.waitErr != nil { // wrapped: callers read the exit status (*exec.ExitError)
		return fmt.Errorf("server %s exited: %s%w (log %s)%s", s.spec.Label, why, s.waitErr, s.spec.LogPath, tail)
	}
	return fmt.Errorf("server %s exited: %swith status 0 (log %s)%s", s.spec.Label, why, s.spec.LogPath, tail)
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
// waits for the leader to exit; then it kills every descendant that left
// the group (a setsid grandchild), naming each in the log (killEscaped).
// Safe to call more than once.
func (s *Server) Stop(grace time.Duration) error {
	_, _ = s.treeProcs() // the tree as it stands, before its parents go
	err := errors.Join(s.stopGroup(grace), s.killEscaped())
	if !GroupAlive(s.cmd.Process.Pid) {
		s.spec.Watchdog.forget(s.cmd.Process.Pid)
	}
	return err
}

// stopGroup is Stop's part for the process group.
func (s *Server) stopGroup(grace time.Duration) error {
	pgid := s.cmd.Process.Pid
	select {
	case <-s.done:
		// The leader is gone; make sure nothing of its group lingers.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		waitGroupGone(pgid)
		return nil
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.done:
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // children that ignored SIGTERM
		waitGroupGone(pgid)
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

// waitGroupGone waits, at most 5 s, until no process of group pgid runs:
// a SIGKILL is sent, not yet done, and a worker that inherited the
// server's listening socket would hold its port for the next start
// (which refuses a port another process holds).
func waitGroupGone(pgid int) {
	for deadline := time.Now().Add(5 * time.Second); GroupAlive(pgid) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// killEscaped kills, after the group's stop, every process seen in the
// server's tree that still runs (a descendant outside the process group:
// setsid, or its own group), each named in the server's log; one that
// could not be killed is named in the error.
func (s *Server) killEscaped() error {
	s.mu.Lock()
	seen := maps.Clone(s.seen)
	s.mu.Unlock()
	var errs []error
	for _, pid := range slices.Sorted(maps.Keys(seen)) {
		if st, ok := living(pid, seen[pid]); !ok || st.PGRP == s.cmd.Process.Pid {
			continue // gone, or of the group, which had its SIGKILL
		}
		p := Process{PID: pid, Cmdline: cmdline(pid)}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			if !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("stop %s: %s, started by the server outside its process group, could not be killed: %w", s.spec.Label, p, err))
			}
			continue
		}
		s.note("killed %s: started by the server, it had left its process group and outlived the stop", p)
		if !waitGone(pid, seen[pid]) {
			errs = append(errs, fmt.Errorf("stop %s: %s, started by the server outside its process group, survived SIGKILL", s.spec.Label, p))
		}
	}
	return errors.Join(errs...)
}

// living is pid's stat while it is still the process that started at
// start and has not died (a zombie is dead).
func living(pid int, start uint64) (procfs.ProcStat, bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, false
	}
	st, err := p.Stat()
	return st, err == nil && st.Starttime == start && st.State != "Z" && st.State != "X"
}

// waitGone waits up to 5 s for the process pid (started at start) to die.
func waitGone(pid int, start uint64) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := living(pid, start); !ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// note appends a line of wakebench's own to the server's log.
func (s *Server) note(format string, args ...any) {
	f, err := os.OpenFile(s.spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== wakebench: %s %s: %s\n", s.spec.Label, time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// Note appends a line of the harness's own to the server's log (a
// "=== wakebench:" line, which ExitErr's log tail leaves out).
func (s *Server) Note(format string, args ...any) { s.note(format, args...) }

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
		if waitGroupGone(s.cmd.Process.Pid); !GroupAlive(s.cmd.Process.Pid) {
			s.spec.Watchdog.forget(s.cmd.Process.Pid) // its number may be another group's later
		}
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("kill %s: pid %d survived SIGKILL", s.spec.Label, s.cmd.Process.Pid)
	}
}

// PIDs lists the processes of the server's tree (liveTree).
func (s *Server) PIDs() ([]int, error) {
	procs, err := s.liveTree()
	if err != nil {
		return nil, err
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.PID
	}
	return pids, nil
}

// RSS is the resident memory of every process in the server's tree
// (liveTree), in bytes; it also raises the recorded peak.
func (s *Server) RSS() (uint64, error) {
	procs, err := s.liveTree()
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

// Host is the host memory of every process in the server's tree
// (liveTree): RSS, and the locked and pinned parts where the kernel
// reports them. It raises the peak RSS like RSS does.
func (s *Server) Host() (HostMemory, error) {
	procs, err := s.liveTree()
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

// treeProcs are the server's processes: its process group, every
// descendant of its leader or of a group member (one that left the group
// with setsid included), and every process seen in the tree before that
// still runs (its parent gone, it is PID 1's child now) with its
// descendants. Each is remembered in seen for Stop.
func (s *Server) treeProcs() ([]procfs.Proc, error) {
	all, err := procfs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	pgid := s.cmd.Process.Pid
	// Once the leader is reaped its PID, and after the group's last member
	// its group ID, may be another process's: then only processes seen in
	// the tree before, by PID and start time, are the server's.
	reaped := s.exited()
	s.mu.Lock()
	seen := maps.Clone(s.seen)
	s.mu.Unlock()
	stats := make(map[int]procfs.ProcStat, len(all))
	children := map[int][]int{}
	var queue []int
	for _, p := range all {
		st, err := p.Stat()
		if err != nil {
			continue // exited meanwhile
		}
		stats[p.PID] = st
		children[st.PPID] = append(children[st.PPID], p.PID)
		if !reaped && (st.PGRP == pgid || p.PID == pgid) || (seen[p.PID] == st.Starttime && seen[p.PID] != 0) {
			queue = append(queue, p.PID)
		}
	}
	in := map[int]bool{}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if in[pid] {
			continue
		}
		in[pid] = true
		queue = append(queue, children[pid]...)
	}
	var out []procfs.Proc
	starts := make(map[int]uint64, len(in))
	for _, p := range all {
		if in[p.PID] {
			out = append(out, p)
			starts[p.PID] = stats[p.PID].Starttime
		}
	}
	s.remember(starts)
	return out, nil
}

// remember adds processes found in the tree (PID → start time) to seen,
// and has the watchdog watch each new one.
func (s *Server) remember(starts map[int]uint64) {
	var fresh []int
	s.mu.Lock()
	for pid, start := range starts {
		if s.seen[pid] != start {
			s.seen[pid] = start
			fresh = append(fresh, pid)
		}
	}
	s.mu.Unlock()
	for _, pid := range fresh {
		s.spec.Watchdog.watchProc(s.cmd.Process.Pid, pid, starts[pid])
	}
}

// scanEvery is how often liveTree scans every process instead (treeProcs):
// once in 8 reads, every 2 s at four reads a second.
const scanEvery = 8

// liveTree is treeProcs for the sampled reads (RSS, Host, PIDs: four times
// a second for each server, faster while a state's cost is measured): the
// same processes, found from their roots down instead of from every
// process's stat. The roots are the leader while it runs and each process
// seen in the tree before that still runs (its PID and start time); a
// process's children are those its main thread's list holds
// (/proc/PID/task/PID/children, Linux 3.5 on with CONFIG_PROC_CHILDREN),
// a setsid'd one included. Reading and parsing every process's stat took
// 38 % of a child run's own CPU (a profile at issue 49), more on a host of
// many processes. Every scanEvery-th call is treeProcs's scan, which also
// finds and remembers (seen) what no root leads to: a child of another
// thread, a group member whose parent died, a child the kernel's list
// missed while a sibling exited (proc(5)); Stop and the listener's check
// always scan. Without the children files it is always treeProcs.
func (s *Server) liveTree() ([]procfs.Proc, error) {
	leader := s.cmd.Process.Pid
	s.mu.Lock()
	s.walks++
	scan := s.walks%scanEvery == 1
	seen := maps.Clone(s.seen)
	s.mu.Unlock()
	if scan || !childrenListed() {
		return s.treeProcs()
	}
	reaped := s.exited()
	var queue []int
	if !reaped {
		queue = append(queue, leader)
	}
	var rest []int
	for pid, start := range seen {
		if pid == leader && !reaped {
			continue
		}
		// A root from before must be the same process: its PID may be
		// another's now. A process reached through its parent is the
		// tree's whoever held its PID before. Not living's check: a zombie
		// still counts, as in treeProcs's scan.
		if p, err := procfs.NewProc(pid); err == nil {
			if st, err := p.Stat(); err == nil && st.Starttime == start {
				rest = append(rest, pid)
			}
		}
	}
	slices.Sort(rest) // the same order each time
	queue = append(queue, rest...)
	in := map[int]bool{}
	starts := map[int]uint64{}
	var out []procfs.Proc
	for ; len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		if in[pid] {
			continue
		}
		p, err := procfs.NewProc(pid)
		if err != nil {
			continue // exited
		}
		st, err := p.Stat()
		if err != nil {
			continue
		}
		in[pid] = true
		starts[pid] = st.Starttime
		out = append(out, p)
		queue = append(queue, childrenOf(pid)...)
	}
	s.remember(starts)
	return out, nil
}

// exited reports whether the server's leader has exited and been reaped.
func (s *Server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// childrenListed reports whether this kernel lists a thread's children
// (CONFIG_PROC_CHILDREN), asked once: liveTree walks them, else it scans.
var childrenListed = sync.OnceValue(func() bool {
	_, err := os.Stat(childrenFile(os.Getpid()))
	return err == nil
})

// childrenFile is the kernel's list of the children of pid's main thread.
func childrenFile(pid int) string {
	return fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)
}

// childrenOf is every child of pid's main thread as the kernel lists it
// (none where pid has exited).
func childrenOf(pid int) []int {
	b, err := os.ReadFile(childrenFile(pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if child, err := strconv.Atoi(f); err == nil {
			out = append(out, child)
		}
	}
	return out
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
