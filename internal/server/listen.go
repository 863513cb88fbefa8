package server

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// Who listens on a port (issue 48): a server already on a configured port
// answers /health for the run's own server, which (vLLM imports torch for
// seconds before it binds) has not bound it yet. Linux says who holds a
// listening socket: /proc/net/tcp{,6} gives its inode, a process's
// /proc/PID/fd links name the sockets it holds ("socket:[INODE]").

// ErrNotOwned means the socket listening on a server's port is not its
// process tree's: another process answers there.
var ErrNotOwned = errors.New("another process listens on the server's port")

// ErrCannotTell means /proc could not say who listens on a port (not
// Linux, another network namespace, or no permission to read the fds).
var ErrCannotTell = errors.New("cannot tell which process listens on the port")

// Process is a process named for a person: its PID and command line.
type Process struct {
	PID     int
	Cmdline string // "" when unreadable
}

func (p Process) String() string {
	if p.Cmdline == "" {
		return fmt.Sprintf("PID %d", p.PID)
	}
	return fmt.Sprintf("PID %d (%s)", p.PID, p.Cmdline)
}

// listener is a TCP socket in state LISTEN.
type listener struct {
	addr  netip.AddrPort
	uid   int
	inode uint64
}

// procRoot is where the kernel's process and socket tables are read.
const procRoot = "/proc"

// listeners are the TCP sockets listening on port that take the
// connections a client makes to host:port: bound to host's address, or to
// every address (0.0.0.0, ::). A host that is no IP address, or is itself
// unspecified, takes every listener on the port.
func listeners(host string, port int) ([]listener, error) {
	want, err := netip.ParseAddr(host)
	matchAll := err != nil || want.IsUnspecified()
	var out []listener
	read := 0
	for _, f := range []string{"net/tcp", "net/tcp6"} {
		ls, err := readListeners(filepath.Join(procRoot, f))
		if err != nil {
			continue // no IPv6, or no /proc
		}
		read++
		for _, l := range ls {
			a := l.addr.Addr().Unmap()
			if int(l.addr.Port()) != port {
				continue
			}
			if matchAll || a.IsUnspecified() || a == want.Unmap() {
				out = append(out, l)
			}
		}
	}
	if read == 0 {
		return nil, fmt.Errorf("%w: %s/net/tcp unreadable", ErrCannotTell, procRoot)
	}
	return out, nil
}

// readListeners parses one /proc/net/tcp{,6} file's LISTEN lines.
func readListeners(path string) ([]listener, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []listener
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		ap, ok := parseHexAddr(fs[1])
		if !ok {
			continue
		}
		uid, err1 := strconv.Atoi(fs[7])
		inode, err2 := strconv.ParseUint(fs[9], 10, 64)
		if err1 != nil || err2 != nil || inode == 0 {
			continue
		}
		out = append(out, listener{addr: ap, uid: uid, inode: inode})
	}
	return out, sc.Err()
}

// parseHexAddr parses /proc/net/tcp's "0100007F:1F40": the address as
// 32-bit words in the host's byte order, the port big-endian.
func parseHexAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	b, err := hex.DecodeString(h)
	port, perr := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || perr != nil || (len(b) != 4 && len(b) != 16) {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(b); i += 4 { // each word as the kernel printed it (%08X of a native u32)
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(b[i:]))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a, uint16(port)), true
}

// held is which of inodes process pid holds (by its /proc/PID/fd links);
// an error when its fds cannot be read.
func held(pid int, inodes map[uint64]bool) ([]uint64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil, err
	}
	targets, err := p.FileDescriptorTargets()
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, t := range targets { // "" for a link that could not be read
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(t, "socket:["), "]"), 10, 64)
		if strings.HasPrefix(t, "socket:[") && err == nil && inodes[n] {
			out = append(out, n)
		}
	}
	return out, nil
}

// socketHolder is the process holding socket inode, found by scanning
// every process's fds; false when no readable process holds it.
func socketHolder(inode uint64) (Process, bool) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return Process{}, false
	}
	want := map[uint64]bool{inode: true}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, _ := held(pid, want); len(ns) > 0 {
			return Process{PID: pid, Cmdline: cmdline(pid)}, true
		}
	}
	return Process{}, false
}

// cmdline is pid's command line, its arguments joined by spaces ("" when
// unreadable), at most 200 bytes.
func cmdline(pid int) string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ""
	}
	args, err := p.CmdLine()
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(strings.Join(args, " "))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// describe names the process holding l, or what /proc says of it when
// its holder cannot be read (another user's process).
func describe(l listener) string {
	if p, ok := socketHolder(l.inode); ok {
		return p.String()
	}
	return fmt.Sprintf("a process of uid %d whose /proc/PID/fd this user cannot read (socket inode %d)", l.uid, l.inode)
}

// PortHolder names the process listening on host:port ("PID 1234 (python3
// -m vllm …)"), or what /proc says of it; "" when /proc says nothing
// (not Linux, nobody listening).
func PortHolder(host string, port int) string {
	ls, err := listeners(host, port)
	if err != nil || len(ls) == 0 {
		return ""
	}
	names := make([]string, 0, len(ls))
	for _, l := range ls {
		if n := describe(l); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, "; ")
}

// Listens checks that what listens on host:port is this server: every
// socket listening there held by its process tree (the leader first: vLLM's
// API server binds in the process it starts as; then the rest of the tree).
// An error wrapping ErrNotOwned names the other process; one wrapping
// ErrCannotTell says why /proc could not tell.
func (s *Server) Listens(host string, port int) error {
	ls, err := listeners(host, port)
	if err != nil {
		return err
	}
	if len(ls) == 0 {
		return fmt.Errorf("%w: no socket listening on port %d in %s/net/tcp{,6} (another network namespace?)", ErrCannotTell, port, procRoot)
	}
	left := map[uint64]bool{}
	for _, l := range ls {
		left[l.inode] = true
	}
	pids := []int{s.PID()}
	if procs, err := s.treeProcs(); err == nil {
		for _, p := range procs {
			if p.PID != s.PID() {
				pids = append(pids, p.PID)
			}
		}
	}
	readable := false
	for _, pid := range pids {
		ns, err := held(pid, left)
		if err != nil {
			continue // exited meanwhile, or not this user's
		}
		readable = true
		for _, n := range ns {
			delete(left, n)
		}
		if len(left) == 0 {
			return nil
		}
	}
	if !readable {
		return fmt.Errorf("%w: the fds of server %s's processes (PID %d) are unreadable", ErrCannotTell, s.spec.Label, s.PID())
	}
	var strangers []string
	named := false // a stranger this user can name by PID
	for _, l := range ls {
		if left[l.inode] {
			if _, ok := socketHolder(l.inode); ok {
				named = true
			}
			strangers = append(strangers, fmt.Sprintf("%s on %s", describe(l), l.addr))
		}
	}
	if !named {
		// Held by no process this user can read: another user's (a stranger),
		// or the server's own outside its process tree (a container runtime's
		// command whose server runs in the runtime's tree): not this check's to
		// decide, so the caller takes the server still running as enough.
		return fmt.Errorf("%w: port %d is held by %s, which this user cannot tell from server %s's own", ErrCannotTell, port, strings.Join(strangers, "; "), s.spec.Label)
	}
	return fmt.Errorf("%w: %s, not server %s (PID %d) nor a process it started", ErrNotOwned, strings.Join(strangers, "; "), s.spec.Label, s.PID())
}
