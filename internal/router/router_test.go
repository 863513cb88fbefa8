package router

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/wakebench/wakebench/internal/testmain"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/vllm"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { testmain.Main(m, "") }

// simPool is vllmsim's tiny A and B on a simulated GPU.
func simPool(t *testing.T) *pool.Pool { return simPoolFaults(t, "") }

// simPoolFaults is simPool with vllmsim faults in B's server.
func simPoolFaults(t *testing.T, faultsB string) *pool.Pool {
	t.Helper()
	f, _, _ := simtest.Pool(t, nil, func(c *config.Config) { c.Models[1].SimFaults = faultsB })
	return f
}

// run runs rt until stop, which returns once it has.
func run(t *testing.T, rt *Router) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	return ctx, func() { cancel(); <-done }
}

// TestRouterWakesOnDemand: a request for the awake model goes at once; one
// for a sleeping model waits while the router puts the awake one to sleep
// and wakes it; requests queue first come, first served.
func TestRouterWakesOnDemand(t *testing.T) {
	f := simPool(t)
	require.NoError(t, f.Activate(t.Context(), "B"))
	require.NoError(t, f.Activate(t.Context(), "A"))
	rt := New(f, 1, "A")
	ctx, stop := run(t, rt)
	defer stop()
	req := vllm.CompletionRequest{Prompt: "hello", MaxTokens: 4, IgnoreEOS: true}
	at := func(ms int, m string) load.Arrival {
		return load.Arrival{At: time.Duration(ms) * time.Millisecond, Model: m, Request: req}
	}
	// The last B is sent once the others are served, not at a fixed time after them: a B that
	// arrived while B was still awake (its switch and request slow on a busy machine) would go
	// at once, and the third switch would not happen.
	out := load.RunOpen(ctx, rt, []load.Arrival{at(0, "A"), at(300, "B"), at(600, "A"), at(600, "A")}, 10*time.Second)
	out = append(out, load.RunOpen(ctx, rt, []load.Arrival{at(0, "B")}, 10*time.Second)...)
	var waited []bool
	for _, o := range out {
		require.NoError(t, o.Err, "request %d for %s", o.Index, o.Model)
		waited = append(waited, o.Waited)
		assert.False(t, o.Dispatched.Before(o.Issued))
	}
	assert.Equal(t, []bool{false, true, true, true, true}, waited, "only the first found its model awake")
	var path []string
	for _, s := range rt.Switches() {
		assert.Empty(t, s.Err)
		path = append(path, s.From+"→"+s.To)
		assert.Positive(t, s.SleepS)
		assert.Positive(t, s.WakeS)
	}
	assert.Equal(t, []string{"A→B", "B→A", "A→B"}, path, "one switch per change of model; the two A requests share one")
	assert.True(t, f.Asleep("A") && !f.Asleep("B"), "B was asked for last")
	depth := 0
	for _, d := range rt.Depths() {
		depth = max(depth, d.Queued)
	}
	assert.GreaterOrEqual(t, depth, 2, "the two A requests waited together (with B's too, if its wake was slow)")
}

// TestAFailedWakeFailsItsRequests: a wake that fails (out of memory) fails
// the requests waiting for it, naming the wake; the router goes on and
// serves the next request for the other model.
func TestAFailedWakeFailsItsRequests(t *testing.T) {
	f := simPoolFaults(t, "wake-fail=1")
	require.NoError(t, f.Activate(t.Context(), "B"))
	require.NoError(t, f.Activate(t.Context(), "A"))
	rt := New(f, 1, "A")
	ctx, stop := run(t, rt)
	defer stop()
	req := vllm.CompletionRequest{Prompt: "hello", MaxTokens: 4, IgnoreEOS: true}
	out := load.RunOpen(ctx, rt, []load.Arrival{{Model: "B", Request: req}, {At: 400 * time.Millisecond, Model: "A", Request: req}}, 10*time.Second)
	assert.ErrorContains(t, out[0].Err, "router: waking B for this request")
	assert.ErrorContains(t, out[0].Err, "out of memory")
	assert.NoError(t, out[1].Err, "the router goes on")
	sw := rt.Switches()
	require.Len(t, sw, 2)
	assert.NotEmpty(t, sw[0].Err)
	assert.Empty(t, sw[1].Err)
}

// TestStoppedRouterFailsWaiters: a router stopped while requests wait
// fails them (they never reached a server) and leaves no goroutine.
func TestStoppedRouterFailsWaiters(t *testing.T) {
	rt := New(nil, 1, "A") // no pool: it must never switch
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := rt.Send(ctx, load.Arrival{Model: "B"})
	assert.ErrorContains(t, err, "waiting for B to wake")
	assert.Empty(t, rt.queue, "a request given up leaves the queue")

	rt.mu.Lock()
	rt.inflight = 1 // A's request that never ends: the router waits to drain
	rt.mu.Unlock()
	rctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { rt.Run(rctx); close(done) }()
	errc := make(chan error, 1)
	go func() {
		_, err := rt.Send(t.Context(), load.Arrival{Model: "B"})
		errc <- err
	}()
	require.Eventually(t, func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return len(rt.queue) == 1 }, time.Second, time.Millisecond)
	stop()
	<-done
	assert.ErrorContains(t, <-errc, "router stopped")
}

// TestMinDwell: with a minimum dwell the awake model keeps taking its own
// requests ahead of a waiting one until the dwell ends, then the router
// switches once: fewer switches, a longer wait for the other model. The
// events are ordered, not timed: the dwell starts after start, so B's
// dispatch lies past start+dwell however busy the machine; A's request is
// issued far inside the dwell (100 ms of 1.5 s); the last B request is sent
// only once B has served, so it finds B awake.
func TestMinDwell(t *testing.T) {
	f := simPool(t)
	require.NoError(t, f.Activate(t.Context(), "B"))
	require.NoError(t, f.Activate(t.Context(), "A"))
	const dwell = 1500 * time.Millisecond
	start := time.Now()
	rt := NewWith(f, Options{Level: 1, MinDwell: dwell}, "A")
	ctx, stop := run(t, rt)
	defer stop()
	req := vllm.CompletionRequest{Prompt: "hello", MaxTokens: 4, IgnoreEOS: true}
	at := func(ms int, m string) load.Arrival {
		return load.Arrival{At: time.Duration(ms) * time.Millisecond, Model: m, Request: req}
	}
	out := load.RunOpen(ctx, rt, []load.Arrival{at(0, "A"), at(50, "B"), at(100, "A")}, 10*time.Second)
	for _, o := range out {
		require.NoError(t, o.Err)
	}
	require.Less(t, out[2].Issued.Sub(start), dwell, "A's second request was issued within the dwell")
	assert.False(t, out[2].Waited, "within the dwell, A's request goes ahead of B's")
	assert.True(t, out[1].Waited)
	assert.GreaterOrEqual(t, out[1].Dispatched.Sub(start), dwell, "B waited for the dwell to end")
	last := load.RunOpen(ctx, rt, []load.Arrival{at(0, "B")}, 10*time.Second)
	require.NoError(t, last[0].Err)
	assert.False(t, last[0].Waited, "B awake by then")
	sw := rt.Switches()
	require.Len(t, sw, 1, "one switch, not three")
	assert.Equal(t, "A", sw[0].From)
}

// TestAStartEndsTheSwitchWhenReady: a request for a model never started
// makes the router start it; the switch ends when it is ready, before the
// harness's reads after a start (here GET /version answered late), and the
// request is served all the same. Each assertion is a lower bound that a
// server-side delay sets, so it holds however busy the machine: what lies
// after the switch's end delays the request's dispatch past it, what lies
// inside the switch lengthens it.
func TestAStartEndsTheSwitchWhenReady(t *testing.T) {
	testmain.Long(t)
	switchTo := func(faultsB string) (Switch, load.Open) {
		f := simPoolFaults(t, faultsB)
		require.NoError(t, f.Activate(t.Context(), "A"))
		rt := New(f, 1, "A")
		ctx, stop := run(t, rt)
		defer stop()
		req := vllm.CompletionRequest{Prompt: "hello", MaxTokens: 4, IgnoreEOS: true}
		out := load.RunOpen(ctx, rt, []load.Arrival{{Model: "B", Request: req}}, 30*time.Second)
		require.NoError(t, out[0].Err)
		sws := rt.Switches()
		require.Len(t, sws, 1)
		require.Empty(t, sws[0].Err)
		return sws[0], out[0]
	}
	d := func(s Switch) time.Duration { return s.End.Sub(s.Start) }
	const late = 1500 * time.Millisecond
	slow, o := switchTo("delay=/version:1.5")
	t.Logf("A→B with B's start, /version %v late: switch %v, dispatched %v after it", late, d(slow), o.Dispatched.Sub(slow.End))
	assert.GreaterOrEqual(t, o.Dispatched.Sub(slow.End), late, "GET /version (after ready) comes after the switch, before the request goes out")
	slowStart, _ := switchTo("delay=/health:1.5")
	t.Logf("with /health %v late: switch %v", late, d(slowStart))
	assert.GreaterOrEqual(t, d(slowStart), late, "the answer that made B ready is inside the switch")
}
