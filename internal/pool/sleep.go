package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/vllm"
)

// Sleep puts the model to sleep and confirms it with /is_sleeping. It
// returns the duration of the /sleep call.
func (f *Pool) Sleep(ctx context.Context, label string, level int) (time.Duration, error) {
	_, d, err := f.SleepMode(ctx, label, level, "")
	return d, err
}

// SleepMode puts label to sleep at level in a pause mode (vllm.SleepAbort,
// SleepWait, SleepKeep; "": the server's default) while requests may be in
// flight, and confirms it: the answer (the proposed API: {"status":"sleeping",
// "level":N}), /is_sleeping, and, after the interval, the sleep metrics
// where exported (checkEngine: an unknown resource or a hung operation
// fails it). It returns when /sleep was sent and its duration. Level 0
// pauses the scheduler only (vLLM ≥ #34528). The model's correctness
// reference is taken first (Oracle).
func (f *Pool) SleepMode(ctx context.Context, label string, level int, mode string) (sent time.Time, d time.Duration, err error) {
	return f.SleepModeThen(ctx, label, level, mode, nil, nil)
}

// SleepModeThen is SleepMode with mark (nil: none) run last before
// /sleep is sent, after every check of the harness's own (the host
// headroom), and then (nil: none) right at the sleep's answer, before its
// confirmation reads: readings that must open and close the span /sleep
// took (the energy counter, so that the harness's reads around it are
// left out of an energy as of a time). mark's error is returned before
// anything is sent.
func (f *Pool) SleepModeThen(ctx context.Context, label string, level int, mode string, mark func(context.Context) error, then func(context.Context)) (sent time.Time, d time.Duration, err error) {
	m, err := f.s.model(label)
	if err != nil {
		return sent, 0, err
	}
	if err := f.Oracle().ensure(ctx, m); err != nil {
		return sent, 0, fmt.Errorf("sleep %s level %d: %w", label, level, err)
	}
	if err := f.checkHost(ctx, label, level); err != nil { // hostcheck.go: min_host_headroom_gib
		return sent, 0, err
	}
	if mark != nil {
		if err := mark(ctx); err != nil {
			return sent, 0, err
		}
	}
	srv, _ := f.s.server(m) // the server this sleep is for: one stopped meanwhile is not asleep
	var logFrom int64       // where the server's log stood before /sleep (sleptInLog)
	if st, err := os.Stat(f.s.logPath(label)); err == nil {
		logFrom = st.Size()
	}
	sent, d, err = f.s.askAsleep(ctx, m, fmt.Sprintf("/sleep?level=%d", level), func(ctx context.Context, c *vllm.Client) error {
		return c.SleepMode(ctx, level, mode)
	}, then)
	if err != nil {
		return sent, d, fmt.Errorf("sleep %s level %d: %w%s", label, level, err, f.unknownAfter(ctx, label, "sleep"))
	}
	f.s.mu.Lock()
	if m.srv != srv { // stopped (StopAll) while the sleep was under way
		f.s.mu.Unlock()
		return sent, d, fmt.Errorf("sleep %s level %d: the server was stopped meanwhile", label, level)
	}
	m.asleep, m.level, m.slept = true, level, sleptBy(level)
	if level == 1 && !releasesHostMemory() {
		m.pinnedBy = srv
	}
	m.sleeps++
	f.s.changes++
	first := m.sleeps == 1
	f.s.mu.Unlock()
	if first {
		f.obs.firstSleep(label, record.FirstSleep{Level: level, SleepS: d.Seconds()})
	}
	f.obs.event(record.Event{Time: sent, Label: label, Kind: fmt.Sprintf("sleep L%d", level)})
	if err := f.s.sleptInLog(label, level, logFrom); err != nil {
		return sent, d, fmt.Errorf("sleep %s level %d: %w", label, level, err)
	}
	if err := f.verifyEngine(ctx, label, "sleep"); err != nil {
		return sent, d, fmt.Errorf("sleep %s level %d: %w", label, level, err)
	}
	return sent, d, nil
}

// Wake wakes the model with vLLM's sequence for the level it sleeps at
// (vllm.Client.Wake) and confirms it with /is_sleeping. It returns the time
// from the first wake request to the last step's answer.
func (f *Pool) Wake(ctx context.Context, label string) (time.Duration, error) {
	_, d, err := f.WakeThen(ctx, label, nil)
	return d, err
}

// unknownAfter is what a failed sleep or wake (op) left unknown, where
// the server exports its resource state: a failed memory RPC leaves them
// unknown and vLLM then refuses every sleep and wake until a restart
// (docs/vllm-api.md); "" when nothing is unknown or nothing is exported.
func (f *Pool) unknownAfter(ctx context.Context, label, op string) string {
	ms, err := f.metricsOf(label)(ctx)
	if err != nil {
		return ""
	}
	if v := ms.SleepView(); len(v.Unknown) > 0 {
		return "; then " + unknownErr(label, op, v).Error()
	}
	return ""
}

// WakeAt is WakeThen with nothing to run before the verification.
func (f *Pool) WakeAt(ctx context.Context, label string) (sent time.Time, d time.Duration, err error) {
	return f.WakeThen(ctx, label, nil)
}

// WakeThen is Wake, also returning when the first wake request was sent
// (the wake's answer is sent + d), running then between the wake's answer
// and the harness's verification reads (wakeThen). The verification: the
// last /wake_up step must not answer "sleeping" (a failed wake naming
// what is still asleep; judged before then, from the answer alone),
// /is_sleeping must be false, and the sleep metrics must show no unknown
// resource and no hung operation (checkEngine).
func (f *Pool) WakeThen(ctx context.Context, label string, then func(context.Context)) (sent time.Time, d time.Duration, err error) {
	m, err := f.s.model(label)
	if err != nil {
		return sent, 0, err
	}
	f.s.mu.Lock()
	level, slept := m.level, m.slept
	f.s.mu.Unlock()
	name := fmt.Sprintf("wake %s from level %d", label, level)
	sent, d, err = f.wakeThen(ctx, m, name, "wake",
		func(ctx context.Context, c *vllm.Client) (string, func(context.Context) error, error) {
			a, calls, failed, err := c.WakeSequence(ctx, level)
			if err != nil {
				return failed, nil, err
			}
			f.s.mu.Lock()
			m.wakeCalls = calls
			f.s.mu.Unlock()
			step := "wake_up"
			if level == 2 {
				step = "wake_up?tags=kv_cache"
			}
			return step, func(ctx context.Context) error { return wakeVerdict(ctx, a, f.metricsOf(label), slept) }, nil
		},
		func(ctx context.Context, c *vllm.Client) (string, error) {
			return confirmAwake(ctx, c, f.metricsOf(label))
		}, then)
	return sent, d, f.engineAfterWake(ctx, label, name, err)
}

// wakeThen is every call that wakes label's server (m): a wake, a KV
// wake, a resume. answer sends it under timeouts.wake_s (the interval
// sent → answered is d) and returns the step it names in an error and
// verdict (nil: none), its answer's judgement from the answer alone
// (a read only where the answer says it failed). The pool then counts
// the model awake (requests reach it again) and runs then (nil: nothing),
// and only after then makes the harness's verification reads: confirm
// (under timeouts.wake_s again; it names its step) and, for a wake, its
// caller's sleep-metrics check (engineAfterWake). So a caller timing
// "wake → first token" in then times no read the harness makes for
// itself (docs/metrics.md); the
// price is that then's probe may reach a server whose wake a read would
// have refuted (an answer without a body, a partial wake): it then waits
// or fails, and the verification's error, which explains it, is returned
// before anything then met. A failed verification puts the model back as
// it was. The timeline gets kind's event at sent once the wake is
// verified.
func (f *Pool) wakeThen(ctx context.Context, m *model, name, kind string,
	answer func(context.Context, *vllm.Client) (step string, verdict func(context.Context) error, err error),
	confirm func(context.Context, *vllm.Client) (step string, err error),
	then func(context.Context)) (sent time.Time, d time.Duration, err error) {
	label := m.cfg.Label
	f.s.mu.Lock()
	srv, asleep, level, slept := m.srv, m.asleep, m.level, m.slept // the server this wake is for
	m.wakeCalls = 0                                                // known again only if answer says
	m.wakes++
	f.s.mu.Unlock()
	failed := func(step string, err error) error {
		if step != "" {
			step += ": "
		}
		return fmt.Errorf("%s: %s%w%s", name, step, err, f.unknownAfter(ctx, label, "wake"))
	}
	step := ""
	err = f.s.timeout(ctx, m, seconds(f.s.cfg.Timeouts.WakeS), func(ctx context.Context, c *vllm.Client) error {
		sent = time.Now()
		s, verdict, err := answer(ctx, c)
		d, step = time.Since(sent), s
		if err != nil || verdict == nil {
			return err
		}
		return verdict(ctx)
	})
	if err != nil {
		return sent, d, failed(step, err)
	}
	if err := f.setAwake(m, srv); err != nil {
		return sent, d, fmt.Errorf("%s: %w", name, err)
	}
	if then != nil {
		then(ctx)
	}
	step = ""
	err = f.s.timeout(ctx, m, seconds(f.s.cfg.Timeouts.WakeS), func(ctx context.Context, c *vllm.Client) error {
		s, err := confirm(ctx, c)
		step = s
		return err
	})
	if err != nil {
		f.s.mu.Lock()
		if m.srv == srv { // as it was: the wake did not take
			m.asleep, m.level, m.slept = asleep, level, slept
			f.s.changes++
		}
		f.s.mu.Unlock()
		return sent, d, failed(step, err)
	}
	f.obs.event(record.Event{Time: sent, Label: label, Kind: kind})
	return sent, d, nil
}

// engineAfterWake is, after a wake named name that err did not fail, the
// sleep metrics' check (checkEngine: an unknown resource, a hung
// operation); a resume has none.
func (f *Pool) engineAfterWake(ctx context.Context, label, name string, err error) error {
	if err != nil {
		return err
	}
	if err := f.verifyEngine(ctx, label, "wake"); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// askAsleep sends call (a request that puts m's server to sleep, or
// pauses it) within timeouts.sleep_s, timed from sent to its answer, and
// then, outside that interval, confirms /is_sleeping is true; what names
// the call in that error.
func (s *servers) askAsleep(ctx context.Context, m *model, what string, call func(context.Context, *vllm.Client) error, then func(context.Context)) (sent time.Time, d time.Duration, err error) {
	err = s.timeout(ctx, m, seconds(s.cfg.Timeouts.SleepS), func(ctx context.Context, c *vllm.Client) error {
		sent = time.Now()
		if err := call(ctx, c); err != nil {
			return err
		}
		d = time.Since(sent)
		if then != nil {
			then(ctx)
		}
		asleep, err := c.IsSleeping(ctx)
		if err != nil {
			return err
		}
		if !asleep {
			if strings.HasPrefix(what, "/sleep?") {
				return fmt.Errorf("%s answered 200 but /is_sleeping is false: %w", what, errDidNotSleep)
			}
			return fmt.Errorf("%s answered 200 but /is_sleeping is false", what)
		}
		return nil
	})
	return sent, d, err
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
	b, err := readFrom(s.logPath(label), from)
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
func (f *Pool) setAwake(m *model, srv *server.Server) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if m.srv != srv {
		return errors.New("the server was stopped meanwhile")
	}
	m.asleep, m.level, m.slept = false, 0, nil
	f.s.changes++
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
		if _, err := f.Sleep(ctx, o, 1); err != nil {
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
		if _, err := f.Wake(ctx, label); err != nil {
			return err
		}
	}
	return nil
}
