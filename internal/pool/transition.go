package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/vllm"
)

// A transition is one request that changes a server's sleep state, handed
// to its caller as a value (issue 51): Do (or Prepare, then Send) sends it
// and returns at its answer, with when it was sent and how long the answer
// took; the harness's own verification reads (/is_sleeping, the sleep
// metrics, the server's log) come when the caller calls Verify, after
// whatever it times from the answer (a probe's first token, an energy
// reading). Run is Do and Verify at once, for a caller that times nothing
// in between. The pool never calls back into its caller.

// OpKind is what a transition asks of a server.
type OpKind uint8

// The transitions (docs/vllm-api.md).
const (
	OpSleep     OpKind = iota + 1 // POST /sleep?level=…&mode=…; level 0 pauses the scheduler only (vLLM ≥ #34528)
	OpWake                        // vLLM's wake sequence for the level the model sleeps at (vllm.Client.WakeSequence)
	OpPause                       // POST /pause?mode=…&clear_cache=… (vLLM's RLHF router)
	OpResume                      // POST /resume after a pause with nothing else asleep
	OpReleaseKV                   // POST /release_kv_cache_memory of a paused server (vLLM #44890)
	OpWakeKV                      // POST /wake_up?tags=kv_cache after a KV release
)

// Op is one transition to send: its kind and, for a sleep, its level and
// pause mode (vllm.SleepAbort, SleepWait, SleepKeep; "": the server's
// default), for a pause its mode and whether it clears the cache.
type Op struct {
	Kind       OpKind
	Level      int
	Mode       string
	ClearCache bool
}

// Sleep is a sleep at level in the server's default pause mode.
func Sleep(level int) Op { return Op{Kind: OpSleep, Level: level} }

// SleepIn is a sleep at level in pause mode (requests may be in flight).
func SleepIn(level int, mode string) Op { return Op{Kind: OpSleep, Level: level, Mode: mode} }

// Wake is vLLM's wake for the level the model sleeps at.
func Wake() Op { return Op{Kind: OpWake} }

// Pause is /pause as vLLM's RLHF router defaults it, the way that router's
// users pause: mode abort (the requests in flight end with finish_reason
// "abort"), the prefix cache cleared (vllm.Client.Pause; docs/vllm-api.md
// §5). The level-0 cycles' pause is Sleep(0).
func Pause() Op {
	return Op{Kind: OpPause, Mode: vllm.SleepAbort, ClearCache: true}
}

// Resume is /resume after a pause.
func Resume() Op { return Op{Kind: OpResume} }

// ReleaseKV is /release_kv_cache_memory of a paused server.
func ReleaseKV() Op { return Op{Kind: OpReleaseKV} }

// WakeKV is /wake_up?tags=kv_cache after a KV release.
func WakeKV() Op { return Op{Kind: OpWakeKV} }

// step is the operation's name in its errors, the timeline and the sleep
// metrics' check.
func (o Op) step() string {
	switch o.Kind {
	case OpSleep:
		return "sleep"
	case OpWake:
		return "wake"
	case OpPause:
		return "pause"
	case OpResume:
		return "resume"
	case OpReleaseKV:
		return "release_kv_cache_memory"
	case OpWakeKV:
		return "wake kv_cache"
	}
	return fmt.Sprintf("transition %d", o.Kind)
}

// name is the operation on label in an error: "sleep A level 1", "pause A".
func (o Op) name(label string) string {
	if o.Kind == OpSleep {
		return fmt.Sprintf("sleep %s level %d", label, o.Level)
	}
	return o.step() + " " + label
}

// Transition is one transition the pool sent: Sent and Took are set once
// the request went out (Took: sent → answered; 0 for a sleep, pause or
// release that did not answer). Level is, for a wake, the level it woke
// from.
type Transition struct {
	Label string
	Op    Op
	Level int
	Sent  time.Time
	Took  time.Duration
	// Calls is, for a wake, the HTTP time of its /wake_up calls alone
	// (vllm.Client.WakeSequence; a level-2 wake's reload lies between
	// them): what the engine's wake lines account for. 0 where the answer
	// did not say.
	Calls time.Duration

	srv *server.Server // the server it was sent to (nil: never sent)
	// log is the server's log (""; never sent); logFrom where it stood just
	// before the request went out, logTo (set once) where it stood just
	// before the model's next transition went out or its server stopped:
	// the lines between are the transition's (Engine).
	log     string
	logFrom int64
	logTo   atomic.Int64 // −1 until set
	// verify is the harness's reads after the answer (nil: nothing to
	// verify); once runs it a single time, verr is what it found (read
	// after once.Do) and done says it ran.
	verify func(context.Context) error
	once   sync.Once
	verr   error
	done   atomic.Bool
}

// Answered is when the transition answered: Sent + Took.
func (t *Transition) Answered() time.Time { return t.Sent.Add(t.Took) }

// Engine is the server's own account of the transition: what its log says
// from just before the request went out until just before the model's
// next transition went out (or its server stopped), or until now where
// neither has happened yet. A wake's line can land after its answer, so a
// caller reads it after what it times (a probe's first token), as a cycle
// does. ok is false for a transition never sent or a log that could not
// be read (or t is nil). It reads no endpoint, and its window opened
// with a file size read before the request: it costs a caller's wait (a
// wake-on-demand router's) nothing.
func (t *Transition) Engine() (lg vllm.EngineLog, ok bool) {
	if t == nil || t.log == "" {
		return lg, false
	}
	b, err := readBetween(t.log, t.logFrom, t.logTo.Load())
	if err != nil {
		return lg, false
	}
	return vllm.ParseEngineLog(b), true
}

// closeLog ends t's log window at to (a later end is ignored); nil t:
// nothing.
func (t *Transition) closeLog(to int64) {
	if t != nil {
		t.logTo.CompareAndSwap(-1, to)
	}
}

// Verify makes the harness's reads that confirm the transition, once:
// a sleep, pause or release must show /is_sleeping true, the server's log
// must say a sleep freed memory, and the sleep metrics must show no
// unknown resource and no hung operation; a wake, KV wake or resume must
// show the server awake. The pool counts the model asleep or awake from
// the answer on (no inference goes to a model whose sleep answered); a
// verification that fails puts it back as it was. The timeline gets the
// transition's event once its reads passed. A later or concurrent call
// returns the first's result (a concurrent one waits for it).
func (t *Transition) Verify(ctx context.Context) error {
	t.once.Do(func() {
		if t.verify != nil {
			t.verr = t.verify(ctx)
		}
		t.done.Store(true)
	})
	return t.verr
}

// Pending is a transition the pool's own checks passed and that Send
// sends: a caller that must read something last before the request goes
// out (the energy counter) reads it between Prepare and Send.
type Pending struct {
	f    *Pool
	m    *model
	op   Op
	sent bool // Send was called: a Pending is sent once
}

// verifyPending verifies m's transition its caller has not verified yet
// (none: nothing), so that what comes next (a transition, a memory read
// before one) meets the state the server is in: its error is returned.
func (s *servers) verifyPending(ctx context.Context, m *model) error {
	s.mu.Lock()
	prev := m.toVerify
	s.mu.Unlock()
	if prev == nil {
		return nil
	}
	return prev.Verify(ctx)
}

// Prepare makes the pool's checks before op on label: a transition of
// label sent before and never verified is verified first (its error is
// returned); a sleep, pause or release takes the model's correctness
// reference first (Oracle), and a sleep checks the host's headroom
// (thresholds.min_host_headroom_gib); a resume needs a pause with nothing
// else asleep.
func (f *Pool) Prepare(ctx context.Context, label string, op Op) (*Pending, error) {
	m, err := f.s.model(label)
	if err != nil {
		return nil, err
	}
	if err := f.s.verifyPending(ctx, m); err != nil {
		return nil, err
	}
	switch op.Kind {
	case OpSleep:
		if err := f.Oracle().ensure(ctx, m); err != nil {
			return nil, fmt.Errorf("%s: %w", op.name(label), err)
		}
		if err := f.Memory().checkHost(ctx, label, op.Level); err != nil { // hostcheck.go: min_host_headroom_gib
			return nil, err
		}
	case OpPause, OpReleaseKV:
		if err := f.Oracle().ensure(ctx, m); err != nil {
			return nil, fmt.Errorf("%s: %w", op.name(label), err)
		}
	case OpResume:
		f.s.mu.Lock()
		slept := m.slept
		f.s.mu.Unlock()
		if !slices.Equal(slept, []string{"scheduling"}) {
			return nil, fmt.Errorf("resume %s: only a paused scheduler resumes; asleep: %v", label, slept)
		}
	case OpWake, OpWakeKV:
	default:
		return nil, fmt.Errorf("pool: %s: unknown transition kind %d", label, op.Kind)
	}
	return &Pending{f: f, m: m, op: op}, nil
}

// Send sends the prepared transition and returns at its answer,
// unverified (Transition.Verify). The transition is never nil; its error
// names the model and the step.
func (p *Pending) Send(ctx context.Context) (*Transition, error) {
	if p.sent {
		return &Transition{Label: p.m.cfg.Label, Op: p.op}, fmt.Errorf("pool: %s: a prepared %s sent twice", p.m.cfg.Label, p.op.step())
	}
	p.sent = true
	s := p.f.s
	// The log's window opens before the request goes out (outside its
	// time) and closes the previous transition's there.
	logFrom := s.logSize(p.m.cfg.Label)
	s.mu.Lock()
	p.m.last.closeLog(logFrom)
	p.m.last = nil
	s.mu.Unlock()
	var t *Transition
	var err error
	switch p.op.Kind {
	case OpSleep, OpPause, OpReleaseKV:
		t, err = p.f.sendAsleep(ctx, p.m, p.op, logFrom)
	default:
		t, err = p.f.sendWake(ctx, p.m, p.op)
	}
	t.log, t.logFrom = s.logPath(p.m.cfg.Label), logFrom
	t.logTo.Store(-1)
	s.mu.Lock()
	if p.m.srv == t.srv { // the next transition, a Stop or a Start ends its window
		p.m.last = t
	} else { // the server was stopped or replaced while it went out: its window ends now
		t.closeLog(s.logSize(p.m.cfg.Label))
	}
	s.mu.Unlock()
	if err != nil {
		s.opFailed(ctx, p.m)
	}
	if err != nil || t.verify == nil {
		return t, err
	}
	v := t.verify
	t.verify = func(ctx context.Context) error { // set before t is published below
		err := v(ctx)
		s.mu.Lock()
		if p.m.toVerify == t {
			p.m.toVerify = nil
		}
		s.mu.Unlock()
		if err != nil {
			s.opFailed(ctx, p.m)
		}
		return err
	}
	s.mu.Lock()
	if p.m.srv == t.srv { // not a server stopped or started since: Stop and Start drop what is pending
		p.m.toVerify = t
	}
	s.mu.Unlock()
	return t, nil
}

// Do is Prepare and Send: op sent to label's server, returned at its
// answer, unverified. The transition is never nil.
func (f *Pool) Do(ctx context.Context, label string, op Op) (*Transition, error) {
	p, err := f.Prepare(ctx, label, op)
	if err != nil {
		return &Transition{Label: label, Op: op}, err
	}
	return p.Send(ctx)
}

// Run is Do and Verify at once: for a caller that times nothing from the
// answer.
func (f *Pool) Run(ctx context.Context, label string, op Op) (*Transition, error) {
	t, err := f.Do(ctx, label, op)
	if err != nil {
		return t, err
	}
	return t, t.Verify(ctx)
}

// sendAsleep sends a sleep, pause or release (a call that leaves the
// server not fully awake) within timeouts.sleep_s, timed from sent to its
// answer; its verification confirms /is_sleeping, then counts the model
// asleep with what it put to sleep, and checks the server's log (a sleep)
// and the sleep metrics.
func (f *Pool) sendAsleep(ctx context.Context, m *model, op Op, logFrom int64) (*Transition, error) {
	label := m.cfg.Label
	t := &Transition{Label: label, Op: op, Level: op.Level}
	name, what := op.name(label), op.step()
	var call func(context.Context, *vllm.Client) error
	var slept []string
	switch op.Kind {
	case OpSleep:
		what = fmt.Sprintf("/sleep?level=%d", op.Level)
		call = func(ctx context.Context, c *vllm.Client) error { return c.SleepMode(ctx, op.Level, op.Mode) }
	case OpPause:
		t.Level, slept = 0, []string{"scheduling"}
		call = func(ctx context.Context, c *vllm.Client) error { return c.Pause(ctx, op.Mode, op.ClearCache) }
	case OpReleaseKV:
		t.Level, slept = record.LevelKVRelease, []string{"kv_cache", "scheduling"}
		call = func(ctx context.Context, c *vllm.Client) error { return c.ReleaseKVCacheMemory(ctx) }
	}
	srv, _ := f.s.server(m) // the server this call is for: one stopped meanwhile is not asleep
	t.srv = srv
	err := f.s.timeout(ctx, m, seconds(f.s.cfg.Timeouts.SleepS), func(ctx context.Context, c *vllm.Client) error {
		t.Sent = time.Now()
		if err := call(ctx, c); err != nil {
			return err
		}
		t.Took = time.Since(t.Sent)
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("%s: %w%s", name, err, f.s.unknownAfter(ctx, label, op.step()))
	}
	was, first, err := f.s.setAsleep(m, srv, op, slept)
	if err != nil {
		return t, fmt.Errorf("%s: %w", name, err)
	}
	t.verify = func(ctx context.Context) error {
		if !f.s.serves(m, srv) {
			return fmt.Errorf("%s: the server was stopped meanwhile", name)
		}
		err := f.s.timeout(ctx, m, seconds(f.s.cfg.Timeouts.SleepS), func(ctx context.Context, c *vllm.Client) error {
			asleep, err := c.IsSleeping(ctx)
			if err != nil {
				return err
			}
			if !asleep {
				if op.Kind == OpSleep {
					return fmt.Errorf("%s answered 200 but /is_sleeping is false: %w", what, errDidNotSleep)
				}
				return fmt.Errorf("%s answered 200 but /is_sleeping is false", what)
			}
			return nil
		})
		if err != nil {
			f.s.mu.Lock()
			if m.srv == srv { // as it was: the sleep did not take
				was.restore(m)
				f.s.changes++
			}
			f.s.mu.Unlock()
			return fmt.Errorf("%s: %w%s", name, err, f.s.unknownAfter(ctx, label, op.step()))
		}
		kind := op.step()
		if op.Kind == OpSleep {
			if first {
				f.facts.firstSleep(label, record.FirstSleep{Level: op.Level, SleepS: t.Took.Seconds()})
			}
			kind = fmt.Sprintf("sleep L%d", op.Level)
		}
		f.facts.event(record.Event{Time: t.Sent, Label: label, Kind: kind})
		if op.Kind == OpSleep {
			if err := f.s.sleptInLog(label, op.Level, logFrom); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if err := f.s.verifyEngine(ctx, label, op.step()); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	return t, nil
}

// sleepState is what a sleep, pause or release changes of a model: what
// setAsleep returns so that a failed verification can put it back.
type sleepState struct {
	asleep   bool
	level    int
	slept    []string
	sleeps   int
	pinnedBy *server.Server
}

// restore puts m's sleep state back to st. Caller holds servers.mu.
func (st sleepState) restore(m *model) {
	m.asleep, m.level, m.slept, m.sleeps, m.pinnedBy = st.asleep, st.level, st.slept, st.sleeps, st.pinnedBy
}

// serves reports whether srv is still m's server (not stopped or
// replaced since a transition was sent to it).
func (s *servers) serves(m *model, srv *server.Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.srv == srv
}

// setAsleep counts m's server srv asleep from op's answer on, op having
// put slept to sleep (a sleep: what its level puts to sleep); was is the
// state before, first says it was the process's first sleep. It fails
// when srv was stopped meanwhile.
func (s *servers) setAsleep(m *model, srv *server.Server, op Op, slept []string) (was sleepState, first bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.srv != srv { // stopped (StopAll) while the call was under way
		return was, false, errors.New("the server was stopped meanwhile")
	}
	was = sleepState{asleep: m.asleep, level: m.level, slept: slices.Clone(m.slept), sleeps: m.sleeps, pinnedBy: m.pinnedBy}
	s.changes++
	if op.Kind == OpSleep {
		m.asleep, m.level, m.slept = true, op.Level, sleptBy(op.Level)
		if op.Level == 1 && !releasesHostMemory() {
			m.pinnedBy = srv
		}
		m.sleeps++
		return was, m.sleeps == 1, nil
	}
	if !m.asleep {
		m.level = 0 // a wake sends a plain /wake_up: it restores everything
	}
	m.asleep = true
	for _, t := range slept {
		if !slices.Contains(m.slept, t) {
			m.slept = append(m.slept, t)
		}
	}
	return was, false, nil
}

// sendWake sends a wake, KV wake or resume under timeouts.wake_s (Took:
// sent → answered) and judges its answer from the answer alone (a read
// only where the answer says it failed: "sleeping" names what is still
// asleep). The pool then counts the model awake, so the caller's probe
// reaches it before any read the harness makes for itself
// (docs/metrics.md); the price is that the probe may reach a server whose
// wake a read would have refuted (an answer without a body, a partial
// wake): it then waits or fails, and the verification's error, which
// explains it, is the one to report. The verification (under
// timeouts.wake_s again) confirms the server awake and, for a wake, checks
// the sleep metrics; a failed one puts the model back as it was.
func (f *Pool) sendWake(ctx context.Context, m *model, op Op) (*Transition, error) {
	label := m.cfg.Label
	f.s.mu.Lock()
	srv, asleep, level, slept := m.srv, m.asleep, m.level, m.slept // the server this wake is for
	f.s.mu.Unlock()
	t := &Transition{Label: label, Op: op, Level: level, srv: srv}
	var name string
	var answer func(context.Context, *vllm.Client) (step string, verdict func(context.Context) error, err error)
	confirm := func(ctx context.Context, c *vllm.Client) (string, error) {
		return confirmAwake(ctx, c, f.s.metricsOf(label))
	}
	switch op.Kind {
	case OpWake:
		name = fmt.Sprintf("wake %s from level %d", label, level)
		answer = func(ctx context.Context, c *vllm.Client) (string, func(context.Context) error, error) {
			a, calls, failed, err := c.WakeSequence(ctx, level)
			if err != nil {
				return failed, nil, err
			}
			t.Calls = calls
			step := "wake_up"
			if level == 2 {
				step = "wake_up?tags=kv_cache"
			}
			return step, func(ctx context.Context) error { return wakeVerdict(ctx, a, f.s.metricsOf(label), slept) }, nil
		}
	case OpWakeKV:
		name = "wake " + label + " kv_cache"
		answer = func(ctx context.Context, c *vllm.Client) (string, func(context.Context) error, error) {
			a, err := c.WakeUpAnswer(ctx, "kv_cache")
			if err != nil {
				return "wake_up?tags=kv_cache", nil, err
			}
			return "wake_up?tags=kv_cache", func(ctx context.Context) error { return wakeVerdict(ctx, a, f.s.metricsOf(label), slept) }, nil
		}
	case OpResume:
		name = "resume " + label
		answer = func(ctx context.Context, c *vllm.Client) (string, func(context.Context) error, error) {
			return "resume", nil, c.Resume(ctx)
		}
		confirm = func(ctx context.Context, c *vllm.Client) (string, error) {
			if paused, err := c.IsPaused(ctx); err != nil || paused {
				return "is_paused", cmp.Or(err, errors.New("resume answered 200 but /is_paused is still true"))
			}
			if asleep, err := c.IsSleeping(ctx); err != nil || asleep {
				return "is_sleeping", cmp.Or(err, errors.New("resume answered 200 but /is_sleeping is still true"))
			}
			return "", nil
		}
	}
	failed := func(ctx context.Context, step string, err error) error {
		if step != "" {
			step += ": "
		}
		return fmt.Errorf("%s: %s%w%s", name, step, err, f.s.unknownAfter(ctx, label, "wake"))
	}
	step := ""
	err := f.s.timeout(ctx, m, seconds(f.s.cfg.Timeouts.WakeS), func(ctx context.Context, c *vllm.Client) error {
		t.Sent = time.Now()
		s, verdict, err := answer(ctx, c)
		t.Took, step = time.Since(t.Sent), s
		if err != nil || verdict == nil {
			return err
		}
		return verdict(ctx)
	})
	if err != nil {
		return t, failed(ctx, step, err)
	}
	if err := f.s.setAwake(m, srv); err != nil {
		return t, fmt.Errorf("%s: %w", name, err)
	}
	t.verify = func(ctx context.Context) error {
		if !f.s.serves(m, srv) {
			return fmt.Errorf("%s: the server was stopped meanwhile", name)
		}
		step := ""
		err := f.s.timeout(ctx, m, seconds(f.s.cfg.Timeouts.WakeS), func(ctx context.Context, c *vllm.Client) error {
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
			return failed(ctx, step, err)
		}
		f.facts.event(record.Event{Time: t.Sent, Label: label, Kind: op.step()})
		if op.Kind == OpResume {
			return nil
		}
		if err := f.s.verifyEngine(ctx, label, "wake"); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	return t, nil
}
