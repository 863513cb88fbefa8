package pool

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/vllm"
)

// unknownAfter is what a failed sleep or wake (op) left unknown, where
// the server exports its resource state: a failed memory RPC leaves them
// unknown and vLLM then refuses every sleep and wake until a restart
// (docs/vllm-api.md); "" when nothing is unknown or nothing is exported.
func (s *servers) unknownAfter(ctx context.Context, label, op string) string {
	ms, err := s.metricsOf(label)(ctx)
	if err != nil {
		return ""
	}
	if v := ms.SleepView(); len(v.Unknown) > 0 {
		return "; then " + unknownErr(label, op, v).Error()
	}
	return ""
}

// errDidNotSleep ends the error of a sleep that answered 200 and did not
// sleep: a server run without sleep mode that does not refuse /sleep.
var errDidNotSleep = errors.New("the server did not sleep; start it with --enable-sleep-mode (wakebench passes it: a wrapper that drops it, --no-enable-sleep-mode in extra_args, or a server that ignores it)")

// cumemFreed is vLLM's allocator's account of a sleep's release.
var cumemFreed = regexp.MustCompile(`CuMemAllocator: sleep freed ([0-9.]+) GiB memory in total`)

// sleptInLog checks what label's server logged of a level-1 or level-2
// sleep since from: where its engine's "Sleep mode freed X GiB" lines
// (one per worker) all say 0.00 GiB, nothing was put to sleep, and the
// sleep is an error naming --enable-sleep-mode, with or without a memory
// source. A server that logs no such line passes (the other checks stand).
func (s *servers) sleptInLog(label string, level int, from int64) error {
	if level < 1 {
		return nil
	}
	b, err := readBetween(s.logPath(label), from, -1)
	if err != nil {
		return nil
	}
	lg := vllm.ParseEngineLog(b)
	if len(lg.FreedGiB) == 0 || slices.ContainsFunc(lg.FreedGiB, func(g float64) bool { return g > 0 }) {
		return nil
	}
	// gpu_worker.py's "freed" is the device's free memory after less before:
	// a leak as large as the release reads 0 too. The allocator's own line
	// (vllm/device_allocator/cumem.py, "CuMemAllocator: sleep freed X GiB
	// memory in total", as vllmsim cites it at vllm@010c2112) says what the
	// sleep released: more than 0, the server slept, and the memory figures
	// (residual, release) judge the leak.
	for _, m := range cumemFreed.FindAllSubmatch(b, -1) {
		if g, err := strconv.ParseFloat(string(m[1]), 64); err == nil && g > 0 {
			return nil
		}
	}
	return fmt.Errorf("/sleep?level=%d answered 200 but the server did not sleep: its log (%s) says \"Sleep mode freed 0.00 GiB memory\": %w",
		level, s.logPath(label), errDidNotSleep)
}

// setAwake records that m's server srv is awake again: the pool sends
// it requests again. It fails when srv was stopped meanwhile (StopAll
// during the call).
func (s *servers) setAwake(m *model, srv *server.Server) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.srv != srv {
		return errors.New("the server was stopped meanwhile")
	}
	m.asleep, m.level, m.slept = false, 0, nil
	s.changes++
	return nil
}

// Running reports whether the model's server is up.
func (f *Pool) Running(label string) bool {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	m := f.s.models[label]
	return m != nil && m.srv != nil && m.srv.ExitErr() == nil
}

// Slept reports whether label's running server process has slept since
// it started (false when none runs): a process that never slept is the
// one a baseline "before any sleep" measures.
func (f *Pool) Slept(label string) bool {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	m := f.s.models[label]
	return m != nil && m.srv != nil && m.sleeps > 0
}

// Asleep reports whether the pool put the model to sleep and has not woken it.
func (f *Pool) Asleep(label string) bool {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	m := f.s.models[label]
	return m != nil && m.asleep
}

// AsleepAt is the level the model sleeps at, and whether the pool put it
// to sleep and has not woken it (false: awake or not running).
func (f *Pool) AsleepAt(label string) (level int, asleep bool) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	m := f.s.models[label]
	if m == nil || !m.asleep {
		return 0, false
	}
	return m.level, true
}

// Awake lists the models whose servers run and are awake.
func (f *Pool) Awake() []string {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	var out []string
	for _, l := range f.s.order {
		m := f.s.models[l]
		if m.srv != nil && !m.asleep {
			out = append(out, l)
		}
	}
	return out
}

// MakeRoom puts every other awake model to sleep (level 1) so label can
// start or wake: models share the GPU, and vLLM must not sleep or wake one
// instance while another is starting. These sleeps are not measured.
func (f *Pool) MakeRoom(ctx context.Context, label string) error {
	for _, o := range f.s.order {
		if o == label || !f.Running(o) || f.Asleep(o) {
			continue
		}
		if _, err := f.Run(ctx, o, Sleep(1)); err != nil {
			return fmt.Errorf("make room for %s: %w", label, err)
		}
	}
	return nil
}

// Activate makes label the awake model: its server running (started if
// needed, after the others are asleep), every other model asleep, label
// awake. A server that has died is an error (its exit and log tail) unless
// an earlier error already named that exit: then it is started afresh, so
// one crash is reported once, by the phase that met it.
func (f *Pool) Activate(ctx context.Context, label string) error {
	m, err := f.s.model(label)
	if err != nil {
		return err
	}
	if srv, _ := f.s.server(m); srv != nil {
		if exit := srv.ExitErr(); exit != nil {
			f.s.mu.Lock()
			reported := m.exitReported
			f.s.mu.Unlock()
			_ = f.Stop(label) // it has exited: the error is its exit
			if !reported {
				return exit
			}
			// The phase that met the crash reported it; this one starts
			// the server afresh rather than failing on it a second time.
		}
	}
	f.s.mu.Lock()
	running, hung := m.srv != nil, m.startHung
	f.s.mu.Unlock()
	if !running && hung != nil {
		return hung // before making room: no other model is put to sleep for it
	}
	if err := f.MakeRoom(ctx, label); err != nil {
		return err
	}
	f.s.mu.Lock()
	running, asleep := m.srv != nil, m.asleep
	f.s.mu.Unlock()
	if !running {
		if _, err := f.Start(ctx, label); err != nil {
			return err
		}
		return f.Started(ctx, label)
	}
	if asleep {
		if _, err := f.Run(ctx, label, Wake()); err != nil {
			return err
		}
	}
	return nil
}
