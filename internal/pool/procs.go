package pool

import (
	"math"
	"time"

	"github.com/wakebench/wakebench/internal/record"
)

// Procs is the servers' processes: their PIDs, host RSS and the exits the
// pool did not cause. Safe beside a phase in flight (the samplers call it).
type Procs struct{ s *servers }

// Spawned is when label's running server was spawned (zero when none runs).
func (p Procs) Spawned(label string) time.Time {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if m := p.s.models[label]; m != nil && m.srv != nil {
		return m.srv.Spawned
	}
	return time.Time{}
}

// PID is the process-group leader of label's running server, 0 when none runs.
func (p Procs) PID(label string) int {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if m := p.s.models[label]; m != nil && m.srv != nil {
		return m.srv.PID()
	}
	return 0
}

// LabelOf is the model owning a process, "" if none.
func (p Procs) LabelOf(pid int) string {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.s.pidOf[pid]
}

// StartCompile says whether label's last start compiled its graphs
// (vllm.Compiled) or loaded them from the compile cache
// (vllm.LoadedFromCache); "" when its log says neither.
func (p Procs) StartCompile(label string) string {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if m := p.s.models[label]; m != nil {
		return m.compile
	}
	return ""
}

// SampleRSS reads the host RSS of every running server's process group.
func (p Procs) SampleRSS() []record.RSSSample {
	var got []record.RSSSample
	for _, l := range p.s.order {
		m := p.s.models[l]
		srv, _ := p.s.server(m)
		if srv == nil {
			continue
		}
		p.s.late()
		b, err := srv.RSS() // a /proc scan: not under mu, which a start's measured interval may wait on
		if err != nil {
			continue
		}
		p.s.mu.Lock()
		if m.srv == srv {
			m.rssPeak = max(m.rssPeak, b)
		}
		p.s.mu.Unlock()
		got = append(got, record.RSSSample{Time: time.Now(), Label: l, Bytes: b})
	}
	return got
}

// RSSPeaks is each model's peak host RSS so far.
func (p Procs) RSSPeaks() map[string]uint64 {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	out := make(map[string]uint64, len(p.s.models))
	for l, m := range p.s.models {
		out[l] = m.rssPeak
	}
	return out
}

// RSSGiB is the host RSS of label's process tree now (NaN when not running).
func (p Procs) RSSGiB(label string) float64 {
	m := p.s.models[label]
	if m == nil {
		return math.NaN()
	}
	srv, _ := p.s.server(m)
	if srv == nil {
		return math.NaN()
	}
	p.s.late()
	b, err := srv.RSS()
	if err != nil {
		return math.NaN()
	}
	return float64(b) / record.GiB
}

// CloseIdle closes the clients' idle connections.
func (p Procs) CloseIdle() {
	for _, l := range p.s.order {
		if _, c := p.s.server(p.s.models[l]); c != nil {
			c.CloseIdle()
		}
	}
}

// ExitMark is a mark in the list of server exits, for Exits.
func (p Procs) ExitMark() int {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return len(p.s.exits)
}

// Exits are the servers that exited on their own (a crash, an OOM kill)
// since mark, by model label, each with its exit status and log tail:
// those already replaced by a new start and those lying dead now.
func (p Procs) Exits(mark int) (labels []string, errs []error) {
	for _, l := range p.s.order {
		p.s.noticeExit(p.s.models[l])
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	for _, e := range p.s.exits[min(mark, len(p.s.exits)):] {
		labels, errs = append(labels, e.label), append(errs, e.err)
	}
	return labels, errs
}

// Explain puts label's server exit in front of an error it caused (a
// crash shows to the client as a reset or a cut stream a moment before
// the exit); an exit it names counts as reported (Pool.Activate).
func (p Procs) Explain(label string, err error) error {
	m, merr := p.s.model(label)
	if merr != nil {
		return err
	}
	return p.s.explain(m, err)
}
