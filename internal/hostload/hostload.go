// Package hostload measures how much the machine kept a run waiting: over
// an interval, the share of the machine's CPU that processes outside the
// run's process tree took (steal included), and how long the run's own
// threads waited on a run queue per second they ran (the kernel's
// schedstat). The regression gate reads the two per phase window: a phase
// other processes crowded is NOT EVALUATED instead of flagged
// (docs/compare.md).
package hostload

import (
	"fmt"
	"os"
	"time"

	"github.com/prometheus/procfs"

	"github.com/wakebench/wakebench/internal/record"
)

// Reading is the machine's and the run's CPU counters at one instant.
type Reading struct {
	At time.Time
	// Busy and Total are the machine's CPU seconds over all cores since
	// boot (/proc/stat): Busy is user, nice, system, irq, softirq and
	// steal; Total adds idle and iowait.
	Busy, Total float64
	// threads is each thread of the run's process tree: its CPU seconds
	// and run-queue wait seconds (/proc/PID/task/TID/schedstat).
	threads map[int]thread
}

type thread struct{ run, wait float64 }

// Load is what the machine did to the run between two readings.
type Load struct {
	// OthersPct is the CPU time processes outside the run's tree took
	// (and the hypervisor stole), in percent of the machine's CPU time
	// over the interval (100: every core, all the time).
	OthersPct float64
	// WaitPerRun is the seconds the run's threads waited for a CPU per
	// second they ran: 0 on an idle machine, about 1 where they got half
	// the CPU they wanted.
	WaitPerRun float64
	// RunS is the CPU seconds the run's threads ran over the interval.
	RunS float64
	// Seconds is the interval's length.
	Seconds float64
}

// Read takes a reading of the machine and of the process tree rooted at
// root (its descendants included, found by their parent ids).
func Read(root int) (Reading, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return Reading{}, fmt.Errorf("host load: %w", err)
	}
	st, err := fs.Stat()
	if err != nil {
		return Reading{}, fmt.Errorf("host load: read /proc/stat: %w", err)
	}
	c := st.CPUTotal
	r := Reading{At: time.Now(), threads: map[int]thread{}}
	r.Busy = c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	r.Total = r.Busy + c.Idle + c.Iowait
	all, err := fs.AllProcs()
	if err != nil {
		return Reading{}, fmt.Errorf("host load: list processes: %w", err)
	}
	children := map[int][]int{}
	for _, p := range all {
		if s, err := p.Stat(); err == nil {
			children[s.PPID] = append(children[s.PPID], p.PID)
		}
	}
	for todo := []int{root}; len(todo) > 0; {
		pid := todo[len(todo)-1]
		todo = append(todo[:len(todo)-1], children[pid]...)
		ts, err := fs.AllThreads(pid)
		if err != nil {
			continue // exited since the listing
		}
		for _, t := range ts {
			if s, err := t.Schedstat(); err == nil {
				r.threads[t.PID] = thread{float64(s.RunningNanoseconds) / 1e9, float64(s.WaitingNanoseconds) / 1e9}
			}
		}
	}
	return r, nil
}

// ReadSelf is Read of this process's tree.
func ReadSelf() (Reading, error) { return Read(os.Getpid()) }

// Between is the load from a to b. A thread that started between them
// counts from zero; one that ended between them (a server stopped inside
// the window, or a thread's exit) is left out, its last counts gone with
// it, so OthersPct is an upper bound where the run's processes came and
// went. (The root's reaped-children time cannot mend this: a child reaped
// in the window brings its whole life and its own reaped children's, and
// a process another reaped brings nothing.)
func Between(a, b Reading) Load {
	var run, wait float64
	for tid, t := range b.threads {
		p := a.threads[tid]
		if t.run < p.run || t.wait < p.wait { // a new thread reusing the id
			p = thread{}
		}
		run, wait = run+t.run-p.run, wait+t.wait-p.wait
	}
	l := Load{Seconds: b.At.Sub(a.At).Seconds(), RunS: run}
	if dt := b.Total - a.Total; dt > 0 {
		l.OthersPct = max(0, min(100, 100*(b.Busy-a.Busy-run)/dt))
	}
	if run > 0 {
		l.WaitPerRun = wait / run
	}
	return l
}

// Window reads this process's tree now and returns end, which reads it
// again and gives the load between, as a phase window records it (nil
// where /proc could not be read: no figure rather than a wrong one).
func Window() (end func() *record.HostLoad) {
	r0, err0 := ReadSelf()
	return func() *record.HostLoad {
		r1, err := ReadSelf()
		if err0 != nil || err != nil {
			return nil
		}
		l := Between(r0, r1)
		return &record.HostLoad{OthersCPUPct: l.OthersPct, WaitPerRun: l.WaitPerRun}
	}
}
