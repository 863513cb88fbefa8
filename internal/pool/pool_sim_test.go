package pool_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/vllm"
)

// TestLifecycle: a start, Activate handing the GPU over (MakeRoom), a
// sleep and a wake, each leaving the state it says, and a stop.
func TestLifecycle(t *testing.T) {
	f, rec, _ := simtest.Pool(t, nil, nil)
	ctx := t.Context()

	ready, err := f.Start(ctx, "A")
	require.NoError(t, err)
	assert.Positive(t, ready)
	_, err = f.Start(ctx, "A")
	assert.ErrorContains(t, err, "already running")
	require.NoError(t, f.Started(ctx, "A"))
	assert.True(t, f.Running("A"))
	assert.NotZero(t, f.Procs().PID("A"))
	assert.Equal(t, "A", f.Procs().LabelOf(f.Procs().PID("A")))
	assert.False(t, f.Procs().Spawned("A").IsZero())
	assert.Equal(t, "process", f.Memory().Attribution("A"), "the simulated GPU lists each server's processes")
	assert.Equal(t, []string{"A"}, f.Awake())

	require.NoError(t, f.Activate(ctx, "B"), "starts B after putting A to sleep")
	assert.True(t, f.Asleep("A") && f.Running("A") && f.Slept("A"))
	assert.False(t, f.Slept("B"))
	assert.Equal(t, []string{"B"}, f.Awake())
	require.NoError(t, f.Activate(ctx, "A"), "wakes A after putting B to sleep")
	assert.Equal(t, []string{"A"}, f.Awake())
	assert.True(t, f.Asleep("B"))

	st, err := f.Run(ctx, "A", pool.Sleep(1))
	require.NoError(t, err)
	assert.Positive(t, st.Took)
	assert.Empty(t, f.Awake())
	_, err = f.Requests().Probe(ctx, "A")
	assert.ErrorContains(t, err, "refusing to send inference")
	wt, err := f.Run(ctx, "A", pool.Wake())
	require.NoError(t, err)
	assert.Positive(t, wt.Took)
	assert.Equal(t, 1, wt.Level, "the level it woke from")
	s, err := f.Requests().Probe(ctx, "A")
	require.NoError(t, err)
	assert.NotEmpty(t, s.Tokens)

	// A benchmark's view of the same servers keeps its own marks: the
	// run's record never gathers them.
	b := f.Observed(pool.Observer{})
	_, err = b.Run(ctx, "A", pool.Sleep(1))
	require.NoError(t, err)
	_, err = b.Run(ctx, "A", pool.Wake())
	require.NoError(t, err)
	var benchKinds []string
	for _, e := range b.Collect().Events {
		benchKinds = append(benchKinds, e.Label+" "+e.Kind)
	}
	assert.Equal(t, []string{"A sleep L1", "A wake"}, benchKinds)

	require.NoError(t, f.Stop("A"))
	assert.False(t, f.Running("A"))
	assert.Zero(t, f.Procs().PID("A"))
	labels, _ := f.Procs().Exits(0)
	assert.Empty(t, labels, "a stop is no exit")

	raw := rec.Raw()
	var kinds []string
	for _, e := range raw.Events {
		if e.Label == "A" {
			kinds = append(kinds, e.Kind)
		}
	}
	assert.Equal(t, []string{"sleep L1", "wake", "sleep L1", "wake"}, kinds, "A's sleeps and wakes, in order")
	assert.Len(t, raw.FirstSleeps["A"], 1, "one server process, one first sleep")
	assert.Positive(t, raw.Weights["A"].GiB, "the weight size A's start logged")
	assert.Contains(t, raw.Runtime, "(vllmsim)", "the version a start read")
}

// TestExits: a server that crashes is one exit, named in front of the
// error the client saw; Activate then starts it afresh (the crash was
// reported once).
func TestExits(t *testing.T) {
	f, _, _ := simtest.Pool(t, nil, func(c *config.Config) { c.Models[0].SimFaults = "crash-after=1" })
	ctx := t.Context()
	require.NoError(t, f.Activate(ctx, "A"))
	mark := f.Procs().ExitMark()
	_, err := f.Requests().Probe(ctx, "A")
	require.Error(t, err)
	assert.ErrorContains(t, err, "exit status 3", "the exit is named, not only the cut stream")
	labels, errs := f.Procs().Exits(mark)
	require.Equal(t, []string{"A"}, labels)
	assert.ErrorContains(t, errs[0], "exit status 3")
	assert.False(t, f.Running("A"))
	require.NoError(t, f.Activate(ctx, "A"), "the crash was reported: started afresh")
	assert.True(t, f.Running("A"))
	labels, _ = f.Procs().Exits(f.Procs().ExitMark())
	assert.Empty(t, labels)
}

// TestAStopIsNoExit: a server the pool stops is not an exit, also when a
// phase's end looks at the exits while the stop is under way (the timeout
// guard's StopAll beside a phase).
func TestAStopIsNoExit(t *testing.T) {
	f, _, _ := simtest.Pool(t, nil, nil)
	ctx := t.Context()
	mark := f.Procs().ExitMark()
	for range 3 {
		require.NoError(t, f.Activate(ctx, "A"))
		done := make(chan struct{})
		go func() {
			defer close(done)
			for f.Running("A") {
				f.Procs().Exits(mark)
			}
		}()
		require.NoError(t, f.Stop("A"))
		<-done
	}
	labels, errs := f.Procs().Exits(mark)
	assert.Empty(t, labels, "%v", errs)
}

// TestMeasuredSleepExcludesMemoryRead: the memory reads around a measured
// sleep (here 300 ms each) stay outside /sleep sent → answered, by process
// or by device delta (whose read asleep is Held), and the release is still
// measured and handed back, not recorded. Each read's span is ordered
// against the sleep's (Sent, Sent+Took): a bound on Took by the clock
// failed on a busy machine, where the sleep itself took 510 ms.
func TestMeasuredSleepExcludesMemoryRead(t *testing.T) {
	testmain.Long(t)
	const delay = 300 * time.Millisecond
	for name, wrap := range map[string]func(*simtest.ReadLog) func(gpu.Source) gpu.Source{
		"process": func(l *simtest.ReadLog) func(gpu.Source) gpu.Source {
			return func(s gpu.Source) gpu.Source { return simtest.SlowReads{Source: s, Delay: delay, Log: l} }
		},
		"device-delta": func(l *simtest.ReadLog) func(gpu.Source) gpu.Source {
			return func(s gpu.Source) gpu.Source {
				return simtest.NoProcs{Source: simtest.SlowReads{Source: s, Delay: delay, Log: l}}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			reads := &simtest.ReadLog{}
			f, rec, _ := simtest.Pool(t, wrap(reads), nil)
			ctx := t.Context()
			// B first: the simulated device exists once a server runs, so
			// the device is read before A's spawn (device delta's basis).
			require.NoError(t, f.Activate(ctx, "B"))
			require.NoError(t, f.Activate(ctx, "A"))
			assert.Equal(t, name, f.Memory().Attribution("A"))
			t0 := time.Now()
			ms, err := f.Memory().Sleep(ctx, "A", pool.Sleep(1))
			require.NoError(t, err)
			resid, err := ms.Finish(ctx)
			require.NoError(t, err)
			t.Logf("took %v, held %v, all %v; residual %.3f GiB, released %.3f GiB (%.1f%%)", ms.Took, ms.Held, time.Since(t0), resid, ms.ReleasedGiB, ms.ReleasePercent)
			sleepEnd := ms.Sent.Add(ms.Took)
			var before, after int
			for _, r := range reads.Since(t0) {
				assert.False(t, r.Overlaps(ms.Sent, sleepEnd), "a read (%v after the call, %v long) inside the sleep's interval (%v after the call, %v long)",
					r.Start.Sub(t0), r.End.Sub(r.Start), ms.Sent.Sub(t0), ms.Took)
				if !r.End.After(ms.Sent) {
					before++
				} else {
					after++
				}
			}
			assert.Positive(t, before, "the memory is read before the sleep")
			assert.Positive(t, after, "and after it")
			if name == "device-delta" {
				assert.GreaterOrEqual(t, ms.Held, delay, "the read asleep is held apart")
			}
			assert.False(t, math.IsNaN(resid))
			assert.Positive(t, ms.ReleasedGiB)
			assert.Greater(t, ms.ReleasePercent, 50.0, "the weights and KV cache went")
			assert.Empty(t, ms.Note)
			assert.Empty(t, rec.Raw().Release["A"], "Memory hands the release out; the caller records it")
		})
	}
}

// TestMeasuredSleepFollowsTheSleep: a /sleep that takes 300 ms longer
// (vllmsim's delay fault) shows in the measured sleep's Took: the server
// answers no sooner than 300 ms after the request, so Took is at least
// that (a floor the server sets; two runs' difference failed under make
// stress, the plain run taking 366 ms).
func TestMeasuredSleepFollowsTheSleep(t *testing.T) {
	took := func(faults string) time.Duration {
		f, _, _ := simtest.Pool(t, nil, func(c *config.Config) { c.Models[0].SimFaults = faults })
		require.NoError(t, f.Activate(t.Context(), "A"))
		ms, err := f.Memory().Sleep(t.Context(), "A", pool.Sleep(1))
		require.NoError(t, err)
		return ms.Took
	}
	fast, slow := took(""), took("delay=/sleep:0.3")
	t.Logf("/sleep took %v, with a 300 ms delay %v", fast, slow)
	assert.GreaterOrEqual(t, slow, 300*time.Millisecond, "the server's 300 ms lie inside /sleep sent → answered")
}

// TestMeasuredSleepNote: where the source lists none of the model's
// processes and there is no footprint to attribute by (the device was not
// read before the start), the residual is NaN and Note says why.
func TestMeasuredSleepNote(t *testing.T) {
	f, _, _ := simtest.Pool(t, func(s gpu.Source) gpu.Source { return simtest.NoProcs{Source: s} }, nil)
	ctx := t.Context()
	_, err := f.Start(ctx, "A") // no Started: no footprint
	require.NoError(t, err)
	ms, err := f.Memory().Sleep(ctx, "A", pool.Sleep(1))
	require.NoError(t, err)
	resid, err := ms.Finish(ctx)
	require.NoError(t, err)
	assert.True(t, math.IsNaN(resid) && math.IsNaN(ms.ReleasePercent))
	assert.Contains(t, ms.Note, "listed none of model A's processes")
}

// TestStopAllBesideAPhase: StopAll while a phase runs (as a run's deadline
// does: a serving phase amid its requests, a sleep-cycles phase amid its
// cycles), with the samplers reading the processes beside them: under
// -race no data race, and the phase ends (with errors).
func TestStopAllBesideAPhase(t *testing.T) {
	for name, tc := range map[string]struct {
		run   func(context.Context, *protocol.Env) error
		ready func(*pool.Pool, *record.Recorder) bool
		after time.Duration // from ready to StopAll
	}{
		"serve": {
			run: func(ctx context.Context, p *protocol.Env) error {
				_, err := p.Serve(ctx, "A", "baseline", t.Logf)
				return err
			},
			// Its requests are counted when they end: amid them is a
			// moment after the phase starts (512 tokens a request).
			ready: func(*pool.Pool, *record.Recorder) bool { return true },
			after: 300 * time.Millisecond,
		},
		"cycles": {
			run: func(ctx context.Context, p *protocol.Env) error {
				_, err := protocol.Sleep{Env: p, Level: 1}.Run(ctx, "A", t.Logf)
				return err
			},
			ready: func(f *pool.Pool, _ *record.Recorder) bool { return f.Slept("A") },
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, rec, p := simtest.Env(t, nil, func(c *config.Config) { c.Protocol.MaxTokens = 512 })
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			require.NoError(t, f.Activate(ctx, "A"))
			var phaseErr error
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				phaseErr = tc.run(ctx, p)
			}()
			sampled := make(chan struct{})
			go func() { // the harness's RSS sampler and /metrics scrapes
				defer close(sampled)
				for {
					select {
					case <-finished:
						return
					case <-time.After(5 * time.Millisecond):
					}
					f.Procs().SampleRSS()
					_, _ = f.Engine().Metrics(ctx, "A")
					_ = f.Awake()
				}
			}()
			require.Eventually(t, func() bool { return tc.ready(f, rec) }, time.Minute, 2*time.Millisecond, "the phase is under way")
			time.Sleep(tc.after)
			_ = f.StopAll() // errors are fine: a server may need SIGKILL
			select {
			case <-finished:
				t.Logf("the phase ended: %v", phaseErr)
			case <-time.After(90 * time.Second):
				t.Fatal("the phase did not end after StopAll")
			}
			<-sampled
		})
	}
}

// TestWakeVerifiedOutsideItsInterval: Do returns at the wake's answer and
// Verify reads /is_sleeping and /metrics after it: with both read 300 ms
// late (vllmsim's delay fault), the measured wake and Do's return lie
// before every read (Do returns less than one read's delay after the
// answer, Verify takes at least the reads), while a /wake_up 300 ms
// slower moves the wake. Floors and orders within one run: a busy machine
// only lengthens what is measured.
func TestWakeVerifiedOutsideItsInterval(t *testing.T) {
	const late = 300 * time.Millisecond
	wake := func(faults string) (d, toReturn, verify time.Duration) {
		f, _, _ := simtest.Pool(t, nil, func(c *config.Config) { c.Models[0].SimFaults = faults })
		ctx := t.Context()
		require.NoError(t, f.Activate(ctx, "A"))
		_, err := f.Run(ctx, "A", pool.Sleep(1))
		require.NoError(t, err)
		w, err := f.Do(ctx, "A", pool.Wake())
		require.NoError(t, err)
		returned := time.Now()
		require.NoError(t, w.Verify(ctx))
		return w.Took, returned.Sub(w.Sent), time.Since(returned)
	}
	slowReads, toReturn, verify := wake("delay=/metrics:0.3,delay=/is_sleeping:0.3")
	slowWake, _, _ := wake("delay=/wake_up:0.3")
	t.Logf("with /metrics and /is_sleeping 300 ms slower: wake %v, Do returned at %v, Verify took %v; with /wake_up 300 ms slower: wake %v", slowReads, toReturn, verify, slowWake)
	assert.GreaterOrEqual(t, verify, 2*late, "Verify read /is_sleeping and the metrics")
	assert.GreaterOrEqual(t, toReturn, slowReads, "Do returns after the answer")
	assert.Less(t, toReturn-slowReads, late, "no read between the wake's answer and Do's return")
	assert.GreaterOrEqual(t, slowWake, late, "a slower wake shows")
}

// TestTransitionIsVerifiedBeforeTheNext: a sleep counts from its answer
// (no inference goes to it) and is verified by its caller, or else by the
// model's next transition, whose error is then the sleep's (a server that
// answers /sleep 200 and does not sleep: fault sleep-ignored), and which
// puts the model back awake. A memory read after the sleep needs it
// verified; a prepared transition is sent once.
func TestTransitionIsVerifiedBeforeTheNext(t *testing.T) {
	t.Run("verified by the next", func(t *testing.T) {
		f, _, _ := simtest.Pool(t, nil, nil)
		ctx := t.Context()
		require.NoError(t, f.Activate(ctx, "A"))
		ms, err := f.Memory().Before(ctx, "A", pool.Sleep(1))
		require.NoError(t, err)
		st, err := f.Do(ctx, "A", pool.Sleep(1))
		require.NoError(t, err)
		assert.True(t, f.Asleep("A"), "counted asleep from its answer")
		_, err = f.Requests().Probe(ctx, "A")
		assert.ErrorContains(t, err, "refusing to send inference")
		assert.ErrorContains(t, ms.Asleep(ctx, st), "before the sleep was verified")
		w, err := f.Run(ctx, "A", pool.Wake())
		require.NoError(t, err, "the sleep verified first, then the wake")
		assert.Equal(t, 1, w.Level, "the wake knew the sleep's level")
		assert.NoError(t, st.Verify(ctx), "a second Verify returns the first's result")
		assert.NoError(t, ms.Asleep(ctx, st), "verified now")
		assert.False(t, f.Asleep("A"))
		pend, err := f.Prepare(ctx, "A", pool.Sleep(1))
		require.NoError(t, err)
		st, err = pend.Send(ctx)
		require.NoError(t, err)
		require.NoError(t, st.Verify(ctx))
		_, err = pend.Send(ctx)
		assert.ErrorContains(t, err, "sent twice")
	})
	t.Run("its error is the next one's", func(t *testing.T) {
		f, _, _ := simtest.PoolWith(t, nil, func(c *config.Config) { c.Models[0].SimFaults = "sleep-ignored" },
			func(o *pool.Options) { o.Sampler = nil })
		ctx := t.Context()
		_, err := f.Start(ctx, "A")
		require.NoError(t, err)
		st, err := f.Do(ctx, "A", pool.Sleep(1))
		require.NoError(t, err, "/sleep answered 200")
		assert.True(t, f.Asleep("A"))
		_, err = f.Do(ctx, "A", pool.Wake())
		require.ErrorContains(t, err, "/sleep?level=1 answered 200 but /is_sleeping is false")
		assert.ErrorIs(t, st.Verify(ctx), err, "the sleep's own error")
		assert.False(t, f.Asleep("A"), "put back awake: the sleep did not take")
		_, err = f.Requests().Probe(ctx, "A")
		assert.NoError(t, err, "it serves")
	})
	t.Run("a stopped server", func(t *testing.T) {
		f, _, _ := simtest.Pool(t, nil, nil)
		ctx := t.Context()
		require.NoError(t, f.Activate(ctx, "A"))
		st, err := f.Do(ctx, "A", pool.Sleep(1))
		require.NoError(t, err)
		require.NoError(t, f.Stop("A"))
		assert.ErrorContains(t, st.Verify(ctx), "sleep A level 1: the server was stopped meanwhile")
		require.NoError(t, f.Activate(ctx, "A"), "a new server: nothing of the old one pending")
		_, err = f.Run(ctx, "A", pool.Sleep(1))
		assert.NoError(t, err)
	})
}

// TestFailedCallsAreNotCountedAgainstTheNext: vLLM ≥ 0.32 counts a
// refused call as a failed operation (status="error"); the call's own
// error said so, so the next successful operation's verification reads the
// count as the failure left it instead of taking it for its own (the KV-release phase's
// refused release, then its cycle). An errored operation is named in
// TestFaultsAreNamed (vllmsim's errored-op).
func TestFailedCallsAreNotCountedAgainstTheNext(t *testing.T) {
	f, _, _ := simtest.Pool(t, nil, nil) // era d, vllmsim's default
	ctx := t.Context()
	require.NoError(t, f.Activate(ctx, "A"))
	_, err := f.Run(ctx, "A", pool.ReleaseKV())
	require.ErrorContains(t, err, "HTTP 500", "no release without a pause")
	m, err := f.Engine().Metrics(ctx, "A")
	require.NoError(t, err)
	require.Equal(t, 1.0, m.SleepView().OpErrors["release_kv_cache_memory"], "the server counted the refusal")
	for _, op := range []pool.Op{pool.Pause(), pool.ReleaseKV(), pool.WakeKV(), pool.Sleep(1), pool.Wake()} {
		_, err := f.Run(ctx, "A", op)
		require.NoError(t, err, "the refusal is not this operation's")
	}
	// The harness's expected failure, then CheckEngine (the KV-release
	// phase's probe): the count is read anew there too.
	_, err = f.Run(ctx, "A", pool.Wake())
	require.NoError(t, err)
	_, err = f.Run(ctx, "A", pool.ReleaseKV())
	require.Error(t, err)
	require.NoError(t, f.CheckEngine(ctx, "A", "release_kv_cache_memory"))
	_, err = f.Run(ctx, "A", pool.Sleep(1))
	require.NoError(t, err)
}

// TestPauseUnsupported: vllmsim in its oldest era (a: vLLM ≤ 0.11) has
// no /pause, /is_paused or /release_kv_cache_memory: the pool says so
// with vllm.ErrUnsupported and leaves the model awake.
func TestPauseUnsupported(t *testing.T) {
	t.Setenv("VLLMSIM_ERA", "a")
	f, _, _ := simtest.Pool(t, nil, nil)
	ctx := t.Context()
	require.NoError(t, f.Activate(ctx, "A"))
	ok, err := f.SupportsPause(ctx, "A")
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = f.Run(ctx, "A", pool.Pause())
	assert.ErrorIs(t, err, vllm.ErrUnsupported)
	_, err = f.Run(ctx, "A", pool.ReleaseKV())
	assert.ErrorIs(t, err, vllm.ErrUnsupported)
	assert.False(t, f.Asleep("A"), "nothing was paused")
	_, err = f.Requests().Probe(ctx, "A")
	assert.NoError(t, err)
}

// TestProbeThatCannotFitNamesTheContext: a context too short for the
// correctness probes (the "long" one is about 227 tokens) fails the first
// sleep with an error naming the config keys that fix it, not a bare 400.
func TestProbeThatCannotFitNamesTheContext(t *testing.T) {
	f, _, _ := simtest.Pool(t, nil, func(c *config.Config) {
		c.Protocol.ContextTokens, c.Protocol.MaxTokens = 64, 8
		c.Traffic.Workload.PromptTokens, c.Traffic.Workload.OutputTokens = 16, 8 // the config holds them: only the probes do not fit
	})
	ctx := t.Context()
	_, err := f.Start(ctx, "A")
	require.NoError(t, err)
	_, err = f.Run(ctx, "A", pool.Sleep(1))
	require.Error(t, err)
	assert.ErrorContains(t, err, "protocol.context_tokens (64)")
	assert.ErrorContains(t, err, "correctness_max_tokens to 0")
	assert.ErrorContains(t, err, "maximum context length", "the server's own words follow")
	assert.False(t, f.Asleep("A"), "nothing was sent: the reference comes first")
}

// TestStartTriesAnotherPortWhenItsIsTaken: a port picked free and taken by
// another process before the server bound it (a test package beside this
// one once made it: the probe then reached the other package's server)
// fails the server at once, as vLLM does ("address already in use"); the
// start picks another port and the model serves.
func TestStartTriesAnotherPortWhenItsIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	picks := 0
	f, _, _ := simtest.PoolWith(t, nil, nil, func(o *pool.Options) {
		o.FreePort = func(host string) (int, error) {
			picks++
			if picks == 1 {
				return taken.Addr().(*net.TCPAddr).Port, nil
			}
			return server.FreePort(host)
		}
	})
	_, err = f.Start(t.Context(), "A")
	require.NoError(t, err, "the second port serves")
	assert.Equal(t, 2, picks, "one more pick after the taken port")
	_, err = f.Requests().Probe(t.Context(), "A")
	assert.NoError(t, err, "it answers on its own port")
}

// TestConfiguredPortInUseIsNamed: a port the config names and another
// process holds fails the start at once (no other port is tried: the
// config chose it), and the error names the port and its config key.
func TestConfiguredPortInUseIsNamed(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	f, _, _ := simtest.Pool(t, nil, func(c *config.Config) { c.Models[1].Port = port })
	_, err = f.Start(t.Context(), "B")
	require.Error(t, err)
	assert.ErrorContains(t, err, fmt.Sprintf("port %d, config models[1].port, is already in use", port))
	assert.ErrorContains(t, err, "address already in use", "the server's own words follow")
}

// TestProbingStopsAtItsFirstToken: a started probe hands out its first
// token's receive time, then reads on when asked: the whole probe, its
// first token the one First gave; a probe refused (the model asleep) has
// no first token and Rest says why.
func TestProbingStopsAtItsFirstToken(t *testing.T) {
	f, _, cfg := simtest.Pool(t, nil, nil)
	ctx := t.Context()
	require.NoError(t, f.Activate(ctx, "A"))
	pr := f.Requests().StartProbe(ctx, "A")
	at, ok := pr.First()
	require.True(t, ok)
	again, ok := pr.First()
	assert.True(t, ok && again.Equal(at), "First again returns the same")
	s, err := pr.Rest()
	require.NoError(t, err)
	assert.Equal(t, at, s.Tokens[0])
	assert.Len(t, s.Tokens, cfg.Protocol.ProbeMaxTokens, "read on to its end")
	_, err = pr.Rest()
	assert.NoError(t, err, "Rest again returns the same")

	_, err = f.Run(ctx, "A", pool.Sleep(1))
	require.NoError(t, err)
	pr = f.Requests().StartProbe(ctx, "A")
	_, ok = pr.First()
	assert.False(t, ok)
	_, err = pr.Rest()
	assert.ErrorContains(t, err, "refusing to send inference")
}

// TestHealthRates: an engine-health window sends its n requests (counted
// as executed) and reads the server's counters across them: the same
// prompt n times finds its prefix cached from the second on (a hit rate
// over 0, at most 1) and every request decoded past its first token (a
// decode rate over 0); where /metrics is broken, the figures are NaN and
// the note says why, and the requests were still sent.
func TestHealthRates(t *testing.T) {
	for _, faults := range []string{"", "metrics-broken=500"} {
		t.Run("faults="+faults, func(t *testing.T) {
			f, rec, cfg := simtest.Pool(t, nil, func(c *config.Config) { c.Models[0].SimFaults = faults })
			ctx := t.Context()
			_, err := f.Start(ctx, "A")
			require.NoError(t, err)
			before := rec.Raw().Requests.Executed
			prompt := strings.Repeat("the cat sat on a mat and ate ", 8) // 64 words: whole KV blocks of 16 tokens to cache
			r, note, err := f.Requests().HealthRates(ctx, "A", cfg.Models[0].Name, prompt, 8, 3)
			require.NoError(t, err)
			assert.Equal(t, 3, rec.Raw().Requests.Executed-before, "the window's requests count as executed")
			if faults != "" {
				assert.Contains(t, note, "/metrics unreadable: ")
				assert.True(t, math.IsNaN(r.PrefixHitRate) && math.IsNaN(r.DecodeTPS) && math.IsNaN(r.SpecAcceptance), "%+v", r)
				return
			}
			assert.Empty(t, note)
			assert.Greater(t, r.PrefixHitRate, 0.0)
			assert.LessOrEqual(t, r.PrefixHitRate, 1.0)
			assert.Greater(t, r.DecodeTPS, 0.0)
		})
	}
}

// TestTransitionCarriesItsEngineLines: a transition's account is its
// server's log lines from just before it went out until just before the
// model's next one went out, or its server stopped: a level-1 sleep's has
// its sleep line and what it freed and no wake, the wake's (read after the
// probe, as a cycle reads it) its wake line and no sleep, and neither
// grows with what the server logs after the next transition or a restart.
func TestTransitionCarriesItsEngineLines(t *testing.T) {
	f, _, _ := simtest.Pool(t, nil, nil)
	ctx := t.Context()
	require.NoError(t, f.Activate(ctx, "A"))
	sleep, err := f.Run(ctx, "A", pool.Sleep(1))
	require.NoError(t, err)
	wake, err := f.Run(ctx, "A", pool.Wake())
	require.NoError(t, err)
	_, err = f.Requests().Probe(ctx, "A")
	require.NoError(t, err)
	sl, ok := sleep.Engine()
	require.True(t, ok, "the sleep's log was read")
	assert.Len(t, sl.SleepS, 1, "the sleep's line")
	assert.NotEmpty(t, sl.FreedGiB, "what it freed")
	assert.Empty(t, sl.WakeS, "the wake is the wake's")
	wl, ok := wake.Engine()
	require.True(t, ok)
	assert.Len(t, wl.WakeS, 1, "a level-1 wake's one /wake_up")
	assert.Empty(t, wl.SleepS)

	again, err := f.Run(ctx, "A", pool.Sleep(1))
	require.NoError(t, err)
	wl2, _ := wake.Engine()
	assert.Equal(t, wl, wl2, "the wake's window ended where the next sleep began")
	require.NoError(t, f.Stop("A"))
	require.NoError(t, f.Activate(ctx, "A"))
	_, err = f.Run(ctx, "A", pool.Sleep(1))
	require.NoError(t, err)
	al, _ := again.Engine()
	assert.Len(t, al.SleepS, 1, "the stop (or the start after it) ended the last sleep's window: the restarted server's sleep is not in it")

	_, ok = (&pool.Transition{Label: "A", Op: pool.Wake()}).Engine()
	assert.False(t, ok, "a transition never sent has no account")
}
