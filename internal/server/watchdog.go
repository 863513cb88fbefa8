package server

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Watchdog is a process beside the harness that kills what the harness's
// servers left running when the harness dies without stopping them (kill
// -9, an OOM kill, a crash): Pdeathsig reaches a server's leader only, so
// the engine core and any worker in its process group, and a descendant
// that left the group (setsid), would run on as init's children, holding
// GPU memory and the next run's ports (issue 48).
//
// It is /bin/sh reading a pipe from the harness, in its own process group
// and deaf to SIGINT, SIGTERM, SIGHUP and SIGQUIT: a terminal's ^C and a
// CI's cancel reach the harness, which stops its servers itself. One
// watchdog serves every server of a run: it starts once, before the
// first server, so no server's start waits for it; a start writes it one
// line. Each server's process group is watched from its start until its
// stop has seen the group gone, and each process seen in its tree
// (Server.liveTree) by PID and start time. When the pipe ends without the
// harness's goodbye (Close), the watchdog sends SIGKILL to each watched
// group and to each watched process still the one seen (its start time
// matches), and says so in that server's log.
//
// A group's ID cannot be another group's while a process of it runs (the
// kernel keeps the number); the watchdog kills a group within
// milliseconds of the harness's death, before its last process is gone
// and the number free, and a group is forgotten once Stop or Kill has
// seen it gone. A process that left the tree before any walk saw it (a
// double fork into a new session between two reads, four a second) is
// not known to the watchdog, nor to Stop.
type Watchdog struct {
	cmd *exec.Cmd
	// mu guards w (a line is written whole; none after Close), err and groups.
	mu     sync.Mutex
	w      *os.File
	err    error        // the first write that failed: the watchdog is gone
	groups map[int]bool // the process groups watched and not forgotten
}

// WatchdogName is the watchdog's $0: ps shows `/bin/sh -c … wakebench-watchdog PID`,
// PID the harness's.
const WatchdogName = "wakebench-watchdog"

// watchdogScript is the watchdog. Its input, a line each:
//
//	w PGID LOG         watch the process group PGID; notes go to LOG
//	p PGID PID:START   watch PID (started START ticks after boot), of PGID's server
//	f PGID             forget PGID and its processes: its server stopped
//	x                  the harness's goodbye: exit, killing nothing
const watchdogScript = `trap '' HUP INT TERM QUIT PIPE
harness=$1 groups= procs=
living() { # living PID: START:PGRP (fields 22 and 5 of /proc/PID/stat) while it runs (not a zombie)
	[ -r "/proc/$1/stat" ] || return 1
	read -r s < "/proc/$1/stat" || return 1
	s=${s##*) }
	set -- $s
	case $1 in Z|X) return 1 ;; esac
	pgrp=$3
	shift 19
	echo "$1:$pgrp"
}
note() { # note PGID TEXT: a line in PGID's server log
	eval "l=\$log_$1"
	[ -n "$l" ] && printf '=== wakebench: watchdog %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" "$2" >> "$l"
}
while read -r op g rest; do
	case $op in
	w) groups="$groups $g"; eval "log_$g=\$rest" ;;
	p) procs="$procs $g:$rest" ;;
	f) ng= np=
	   for e in $groups; do [ "$e" = "$g" ] || ng="$ng $e"; done
	   for e in $procs; do [ "${e%%:*}" = "$g" ] || np="$np $e"; done
	   groups=$ng procs=$np ;;
	x) exit 0 ;;
	esac
done
for g in $groups; do
	kill -9 "-$g" 2>/dev/null &&
		note "$g" "the harness (pid $harness) died with this server running: SIGKILL to its process group $g"
done
for e in $procs; do
	g=${e%%:*} r=${e#*:}
	pid=${r%%:*} start=${r#*:}
	st=$(living "$pid") || continue
	[ "${st%%:*}" = "$start" ] && [ "${st#*:}" != "$g" ] || continue # gone, another's PID, or of the group
	cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)
	kill -9 "$pid" 2>/dev/null || continue
	what="pid $pid ($cmd)"
	# A group of its own (setsid): the processes it started in it too.
	[ "${st#*:}" = "$pid" ] && kill -9 "-$pid" 2>/dev/null && what="$what and its process group"
	note "$g" "the harness (pid $harness) died with this server running: SIGKILL to $what, seen in its tree, outside its process group"
done
exit 0
`

// StartWatchdog starts the run's watchdog. Close it after the last
// server's stop.
func StartWatchdog() (*Watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the watchdog that kills the servers if the harness dies: %w", err)
	}
	// $0 names it in ps; $1 is the harness's PID, for its notes.
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, WatchdogName, strconv.Itoa(os.Getpid()))
	cmd.Stdin = r // stdout and stderr: /dev/null, never go test's pipe (it would wait for the watchdog)
	// Its own group: a signal to the harness's group (a terminal's ^C) is the harness's to handle.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start the watchdog (/bin/sh) that kills the servers if the harness dies: %w", err)
	}
	return &Watchdog{cmd: cmd, w: w, groups: map[int]bool{}}, nil
}

// PID is the watchdog's process id.
func (d *Watchdog) PID() int { return d.cmd.Process.Pid }

// send writes one line; a nil Watchdog (none) takes nothing.
func (d *Watchdog) send(format string, args ...any) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sendLocked(format, args...)
}

// sendLocked is send with mu held.
func (d *Watchdog) sendLocked(format string, args ...any) {
	if d.w == nil || d.err != nil {
		return
	}
	// A watchdog that stopped reading (stopped, frozen) with its pipe
	// full must not hold a server's start or the sampler: a second, then
	// it is taken as gone.
	_ = d.w.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintf(d.w, format+"\n", args...); err != nil {
		d.err = fmt.Errorf("the watchdog that kills the servers if the harness dies is gone: %w", err)
	}
}

// watchGroup watches the process group pgid, noting in logPath.
func (d *Watchdog) watchGroup(pgid int, logPath string) {
	if strings.ContainsAny(logPath, "\n\r") {
		logPath = "" // a line each: no notes, the kill still happens
	}
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.groups[pgid] = true
	d.sendLocked("w %d %s", pgid, logPath)
}

// watchProc watches pid, started at start, of pgid's server.
func (d *Watchdog) watchProc(pgid, pid int, start uint64) { d.send("p %d %d:%d", pgid, pid, start) }

// forget stops watching pgid's server: it has stopped.
func (d *Watchdog) forget(pgid int) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.groups, pgid)
	d.sendLocked("f %d", pgid)
}

// watching is the process groups watched and not forgotten.
func (d *Watchdog) watching() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.groups))
}

// Close ends the watchdog after every server's Stop, and waits for it.
// Where every group it watched was forgotten (stopped and gone), it says
// goodbye and the watchdog exits killing nothing; where some still runs
// (a server not stopped, or one that outlived its SIGKILL), the pipe ends
// without it, the watchdog kills what remains, naming it in the server's
// log, and the error names the groups. An error also says that the
// watchdog died before (a server of this run may have been unguarded).
func (d *Watchdog) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	w, err := d.w, d.err
	left := slices.Sorted(maps.Keys(d.groups))
	if w != nil {
		if len(left) == 0 {
			_ = w.SetWriteDeadline(time.Now().Add(time.Second))
			if _, werr := fmt.Fprintln(w, "x"); werr != nil && err == nil {
				err = fmt.Errorf("the watchdog that kills the servers if the harness dies is gone: %w", werr)
			}
		} else {
			err = errors.Join(err, fmt.Errorf("server process groups %v still ran at the end; the watchdog killed them (their logs say so)", left))
		}
		w.Close()
		d.w = nil
	}
	d.mu.Unlock()
	if w == nil {
		return nil // closed before
	}
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case werr := <-done:
		if werr != nil {
			err = errors.Join(err, fmt.Errorf("the watchdog exited: %w", werr))
		}
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
		err = errors.Join(err, errors.New("the watchdog did not exit within 5 s of the end of its pipe; killed"))
	}
	return err
}
