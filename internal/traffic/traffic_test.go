package traffic_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/traffic"
)

// fourRows is a trace of four requests to A and B.
const fourRows = "t_s,model,prompt_tokens,output_tokens\n0,A,20,8\n0.1,B,30,8\n0.2,B,10,4\n0.4,A,20,8\n"

// TestTrafficPhase runs the phase from a trace: every row sent through the
// router, the same rows with both models awake, and a sleep with requests
// in flight in each pause mode, each as vLLM documents it.
func TestTrafficPhase(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(trace, []byte(fourRows), 0o644))
	_, rec, p := simPoolWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.Trace = trace
		cfg.Traffic.InFlightRequests = 3
	})
	trOut, err := p.Run(t.Context(), t.Logf)
	tr := trOut.Value
	require.NoError(t, err)
	var shared, ideal int
	for _, r := range tr.Requests {
		assert.Empty(t, r.Err)
		assert.True(t, r.Good)
		switch r.Run {
		case record.RunShared:
			shared++
		case record.RunIdeal:
			ideal++
			assert.False(t, r.Waited, "every model awake: nothing waits")
		}
	}
	assert.Equal(t, 4, shared)
	assert.Equal(t, 4, ideal)
	assert.True(t, tr.IdealRan)
	assert.Equal(t, "trace "+trace, tr.Arrivals)
	modes := map[string]record.InFlight{}
	for _, f := range tr.InFlight {
		modes[f.Mode] = f
		assert.True(t, f.Survived, f.Mode)
		assert.Zero(t, f.Unexpected, "%s: %s", f.Mode, f.Detail)
	}
	assert.Equal(t, 3, modes["abort"].Aborted)
	assert.Equal(t, 3, modes["wait"].Finished)
	assert.Equal(t, 3, modes["keep"].Held)
	// The requests mode abort ended are expected outcomes, counted apart:
	// requests.failure means failure.
	reqs := rec.Raw().Requests
	assert.Equal(t, 3, reqs.AbortedByDesign, "mode abort's requests")
	assert.Zero(t, reqs.Failure, "no request failed")
	assert.Equal(t, reqs.Executed, reqs.Success+reqs.Failure+reqs.AbortedByDesign)
	for _, c := range trOut.Checks {
		if c.Name == "traffic.goodput_ratio" {
			// Four requests' goodput against the ideal run's is the
			// machine's speed as much as the router's (0.44 against 0.5
			// in make test with both cores busy): it is computed, and
			// its verdict is internal/gate's tests', on hand figures.
			assert.Positive(t, c.Value, c.String())
			continue
		}
		assert.Equal(t, "PASS", c.Verdict, c.String())
	}
	assert.NotNil(t, rec.Raw().Traffic)
}

// TestInFlightCrashIsNamed: a server that dies when put to sleep with
// requests running (vLLM before PR #34528) fails the phase by name.
func TestInFlightCrashIsNamed(t *testing.T) {
	_, rec, p := simPoolWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.DurationS = 0 // the in-flight sleeps alone
		cfg.Traffic.InFlightRequests = 2
		cfg.Models[0].SimFaults = "inflight-crash"
	})
	trOut, err := p.Run(t.Context(), t.Logf)
	tr := trOut.Value
	require.Error(t, err)
	assert.ErrorContains(t, err, "server A exited")
	require.Len(t, tr.InFlight, 1, "the first mode ends it")
	assert.False(t, tr.InFlight[0].Survived)
	f := rec.Raw().Failures
	require.Len(t, f, 1)
	assert.Equal(t, "sleep with requests in flight, mode abort", f[0].Step)
	checks := byName(trOut.Checks)
	assert.Equal(t, "FAIL", checks["traffic.in_flight.abort.survived/"].Verdict)
}

// TestInFlightOffBeforePauseFirst: on a vLLM before PR #34528 (vllmsim
// era a, no /is_paused) a sleep with requests running kills the engine
// (vllm#28714), so no mode is tried: each is off naming that cause, its
// checks NOT EVALUATED, nothing failed, and the server still serves.
func TestInFlightOffBeforePauseFirst(t *testing.T) {
	t.Setenv("VLLMSIM_ERA", "a")
	f, rec, p := simPoolWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.DurationS = 0 // the in-flight sleeps alone
		cfg.Traffic.InFlightRequests = 2
	})
	trOut, err := p.Run(t.Context(), t.Logf)
	require.NoError(t, err)
	tr := trOut.Value
	require.Len(t, tr.InFlight, 3, "one per mode, each off")
	for _, fl := range tr.InFlight {
		assert.Equal(t, traffic.OffBeforePauseFirst(fl.Mode), fl.Off)
		assert.Contains(t, fl.Off, "vllm#28714")
		assert.Zero(t, fl.Requests+fl.Aborted+fl.Finished+fl.Held+fl.Errors, "nothing sent")
	}
	assert.Contains(t, tr.InFlight[1].Off, "ignores mode=wait")
	checks := byName(trOut.Checks)
	for _, mode := range []string{"abort", "wait", "keep"} {
		c := checks["traffic.in_flight."+mode+".survived/"]
		assert.Equal(t, record.NotEvaluated, c.Verdict, mode)
		assert.Contains(t, c.Reason, "its engine dies of it", mode)
	}
	assert.Empty(t, rec.Raw().Failures)
	_, err = f.Requests().Probe(t.Context(), "A")
	assert.NoError(t, err, "the server lives on")
}

// TestInFlightOffOnAnOldServer: traffic.in_flight_requests 0 runs no
// sleep with requests in flight, so a server that would crash on one
// (fault inflight-crash) passes the traffic checks: routed and ideal runs
// are measured, none in flight.
func TestInFlightOffOnAnOldServer(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(trace, []byte(fourRows), 0o644))
	_, rec, p := simPoolWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.Trace = trace
		cfg.Traffic.InFlightRequests = 0
		cfg.Models[0].SimFaults = "inflight-crash"
		// What is judged is that no in-flight sleep is tried, not the
		// goodput of four requests (0.489 against 0.5 in make test with
		// both cores busy): that ratio is off.
		cfg.Thresholds.MinTrafficGoodputRatio = 0
	})
	trOut, err := p.Run(t.Context(), t.Logf)
	tr := trOut.Value
	require.NoError(t, err)
	assert.Empty(t, tr.InFlight, "no sleep with requests in flight")
	assert.Len(t, tr.Requests, 8, "both runs measured")
	checks := trOut.Checks
	require.NotEmpty(t, checks)
	for _, c := range checks {
		assert.Equal(t, "PASS", c.Verdict, c.String())
		assert.NotContains(t, c.Name, "in_flight")
	}
	assert.Empty(t, rec.Raw().Failures)
}

func TestArrivals(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Traffic.Rates = map[string]float64{"B": 0.5}
	cfg.Traffic.DurationS, cfg.Traffic.WarmupRequests, cfg.Traffic.Arrivals = 4, 2, "constant"
	plan, err := traffic.NewPlan(cfg, 0)
	require.NoError(t, err)
	a, what := plan.Arrivals, plan.What
	n := map[string]int{}
	warm := map[string]int{}
	for _, x := range a {
		n[x.Model]++
		if x.WarmUp {
			warm[x.Model]++
		}
		assert.Equal(t, cfg.Traffic.Workload.OutputTokens, x.Request.MaxTokens)
	}
	assert.Equal(t, map[string]int{"A": 2 + 8, "B": 2 + 2}, n, "rate × duration, plus the warm-up")
	assert.Equal(t, map[string]int{"A": 2, "B": 2}, warm)
	assert.Contains(t, what, "constant arrivals over 4s (A 2 req/s, B 0.5 req/s)")
	for i := 1; i < len(a); i++ {
		assert.LessOrEqual(t, a[i-1].At, a[i].At, "interleaved by time")
	}
}

// TestPlanTrafficRefusesWhatTheRunCannotDo: the traffic phase's input is
// read and checked when planned (before any server starts), each refusal
// naming the key, the line where there is one, and the bound.
func TestPlanTrafficRefusesWhatTheRunCannotDo(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	for name, tc := range map[string]struct {
		mod    func(*config.Config)
		budget time.Duration
		want   string
	}{
		"NaN time": {func(c *config.Config) { c.Traffic.Trace = file("nan.csv", "0,A,8,8\nNaN,B,8,8\n") }, 0, "traffic.trace " + filepath.Join(dir, "nan.csv") + ":2:"},
		"a trace beyond the budget": {func(c *config.Config) { c.Traffic.Trace = file("late.csv", "0,A,8,8\n700,B,8,8\n") }, 10 * time.Minute,
			":2: t_s 700: later than the run has time for (10m0s)"},
		"a trace beyond the context": {func(c *config.Config) { c.Traffic.Trace = file("long.csv", "0,A,4000,200\n") }, 0, "beyond the models' context (protocol.context_tokens 4096)"},
		"a directory":                {func(c *config.Config) { c.Traffic.Trace = dir }, 0, "is a directory"},
		"dwell beyond the budget": {func(c *config.Config) { c.Traffic.MinDwellS = 900 }, 10 * time.Minute,
			"and traffic.min_dwell_s (900s) the phase needs 15m"},
		"duration beyond the budget": {func(c *config.Config) { c.Traffic.DurationS = 400 }, 10 * time.Minute,
			"traffic.rate/rates/duration_s/warmup_requests: the last request arrives at 6m"},
		"a warm-up at a low rate beyond the budget": {func(c *config.Config) { c.Traffic.Rate, c.Traffic.WarmupRequests = 0.01, 100 }, 10 * time.Minute,
			"the last request arrives at 3h"},
		"a rate so low its offsets overflow": {func(c *config.Config) { c.Traffic.Rate, c.Traffic.WarmupRequests = 1e-12, 3 }, 0, "traffic.rates.A 1e-12: its 3 requests would arrive over more than a day"},
		"a huge trace time without a budget": {func(c *config.Config) { c.Traffic.Trace = file("huge.csv", "0,A,8,8\n1e10,B,8,8\n") }, 0,
			":2: t_s 1e+10: later than the run has time for (24h0m0s)"},
		"a dataset whose prefix leaves no room": {func(c *config.Config) {
			c.Traffic.Workload = config.TrafficWorkload{Kind: "dataset", Dataset: file("d2.jsonl", `{"prompt": "hello there", "output_tokens": 95}`), SharedPrefixTokens: 4000}
		}, 0, "beyond the models' context (protocol.context_tokens 96)"},
		"a dataset beyond the context": {func(c *config.Config) {
			c.Traffic.Workload = config.TrafficWorkload{Kind: "dataset", Dataset: file("d.jsonl", `{"prompt": "hi", "output_tokens": 5000}`)}
		}, 0, "traffic.workload.dataset " + filepath.Join(dir, "d.jsonl") + ":1: about 1 prompt + 5000 output tokens"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			tc.mod(&cfg)
			_, err := traffic.NewPlan(cfg, tc.budget)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	cfg := config.Default()
	cfg.Traffic.Trace = file("ok.csv", "t_s,model,prompt_tokens,output_tokens\n0,A,8,8\n5,B,8,8\n")
	plan, err := traffic.NewPlan(cfg, 10*time.Minute)
	require.NoError(t, err)
	assert.Len(t, plan.Arrivals, 2)
}

// TestCrashDuringTheIdealRunFails: A's server dies at the first request
// of the all-awake run (its 7th completion: 2 correctness probes and 4
// requests through the router came before), the router's run having gone
// well. The phase fails naming A's exit, the ideal run's failed requests
// fail their check, and the goodput ratio is not judged against a broken
// ideal.
func TestCrashDuringTheIdealRunFails(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(trace, []byte("0,A,20,8\n0.05,A,20,8\n0.1,A,20,8\n0.15,A,20,8\n0.2,B,20,8\n"), 0o644))
	_, rec, p := simPoolWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.Trace = trace
		cfg.Traffic.InFlightRequests = 0
		cfg.Models[0].SimFaults = "crash-after=7"
	})
	trOut, _ := p.Run(t.Context(), t.Logf)
	tr := trOut.Value
	idealFailed := 0
	for _, r := range tr.Requests {
		if r.Run == record.RunShared {
			require.Empty(t, r.Err, "the router's run must go well for this test to mean anything")
		} else if r.Err != "" {
			idealFailed++
		}
	}
	require.Positive(t, idealFailed, "A died during the ideal run")
	var failure *record.Failure
	for _, f := range rec.Raw().Failures {
		if f.Phase == record.PhaseTraffic && f.Model == "A" {
			failure = &f
		}
	}
	require.NotNil(t, failure, "the phase names A's exit: %+v", rec.Raw().Failures)
	assert.Contains(t, failure.Error, "server A exited: exit status 3")
	v := byName(trOut.Checks)
	assert.Equal(t, "FAIL", v["traffic.ideal.failed_requests/"].Verdict)
	assert.Equal(t, float64(idealFailed), v["traffic.ideal.failed_requests/"].Value)
	assert.Equal(t, "PASS", v["traffic.failed_requests/"].Verdict)
	assert.Equal(t, record.NotEvaluated, v["traffic.goodput_ratio/"].Verdict)
	assert.Contains(t, v["traffic.goodput_ratio/"].Reason, "the ideal run lost")
}

// openFiles is the number of this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd on this system:", err)
	}
	return len(fds)
}

// TestTrafficShedsBeyondItsQueueAndClosesIdleConnections: a burst of
// arrivals for the sleeping model B beyond traffic.max_queue is shed —
// never sent, each request marked shed with an error saying so, counted
// apart from the failed requests and gated by its own check — and once
// the phase is over the burst's connections are closed: the open files
// come back to where they were (a burst left one per request before).
func TestTrafficShedsBeyondItsQueueAndClosesIdleConnections(t *testing.T) {
	var trace strings.Builder
	trace.WriteString("t_s,model,prompt_tokens,output_tokens\n")
	for i := range 150 { // A awake: sent at once, 150 connections in flight together
		fmt.Fprintf(&trace, "%g,A,16,48\n", float64(i)*0.001)
	}
	for i := range 40 { // B asleep: 40 arrive while its wake waits for A's 150 to drain
		fmt.Fprintf(&trace, "%g,B,16,4\n", 0.2+float64(i)*0.001)
	}
	file := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(file, []byte(trace.String()), 0o644))
	f, _, p := simPoolWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.Trace = file
		cfg.Traffic.InFlightRequests = 0
		cfg.Traffic.Ideal = false
		cfg.Traffic.MaxQueue = 10
	})
	for _, l := range []string{"B", "A"} {
		require.NoError(t, f.Activate(t.Context(), l))
	}
	f.Procs().CloseIdle()
	before := openFiles(t)
	trOut, err := p.Run(t.Context(), t.Logf)
	tr := trOut.Value
	require.NoError(t, err)
	after := openFiles(t)
	// Which of A's and B's arrivals reach the router first is the
	// scheduler's to decide (each request is sent on a goroutine of its
	// own): on a busy machine some of A's reach it after B's are queued,
	// and then wait or are shed like B's. What holds whatever the order:
	// every arrival is served or shed, exactly once; a shed request was
	// never sent; the queue never held more than max_queue, so of B's 40 at
	// most 10 waited for its wake (B sleeps until A's burst has drained)
	// and at least 30 arrivals were shed.
	shed := map[string]int{}
	sent := map[string]int{}
	for _, r := range tr.Requests {
		if r.Shed {
			shed[r.Model]++
			assert.Contains(t, r.Err, "shed: the router's queue is full")
			assert.True(t, r.Dispatched.IsZero(), "a shed request never left the router")
			continue
		}
		assert.Empty(t, r.Err)
		sent[r.Model]++
	}
	assert.Equal(t, 150, shed["A"]+sent["A"], "every arrival for A is served or shed")
	assert.Equal(t, 40, shed["B"]+sent["B"], "every arrival for B is served or shed")
	assert.LessOrEqual(t, sent["B"], 10, "at most max_queue of B's waited for its wake")
	total := shed["A"] + shed["B"]
	assert.GreaterOrEqual(t, total, 30, "B's arrivals beyond the queue are shed")
	for _, d := range tr.Depth {
		assert.LessOrEqual(t, d.Queued, 10, "the queue never holds more than max_queue")
	}
	assert.Equal(t, 10, tr.MaxQueue)
	v := byName(trOut.Checks)
	assert.Equal(t, "PASS", v["traffic.failed_requests/"].Verdict, "shed is not failed")
	assert.Equal(t, "FAIL", v["traffic.shed_requests/"].Verdict)
	assert.Equal(t, float64(total), v["traffic.shed_requests/"].Value)
	assert.LessOrEqual(t, after-before, 8, "open files before %d, after %d: the burst's connections stay open", before, after)
}

// TestTrafficClockStartsAtTheFirstArrival: a trace whose first row comes
// 1 s in: the run's start (per_second's second 0) is that arrival, and its
// duration runs from it to the last request done.
func TestTrafficClockStartsAtTheFirstArrival(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(trace, []byte("1,A,8,8\n1.2,B,8,8\n"), 0o644))
	_, _, p := simPoolWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.Trace, cfg.Traffic.InFlightRequests, cfg.Traffic.Ideal = trace, 0, false
	})
	phaseStart := time.Now()
	trOut, err := p.Run(t.Context(), t.Logf)
	tr := trOut.Value
	require.NoError(t, err)
	first, _, last := requestSpan(tr)
	assert.True(t, tr.Start.Equal(first), "start %v, first arrival %v", tr.Start, first)
	assert.InDelta(t, last.Sub(first).Seconds(), tr.DurationS, 1e-6)
	assert.GreaterOrEqual(t, tr.Start.Sub(phaseStart), time.Second, "not counted from the phase's start, a second before the first arrival")
}

// TestTrafficStartsAtItsSleepLevel: with traffic.sleep_level 2 the router's
// first wake of a model is one from level 2, even when the phases before
// left it asleep at level 1 (making room always sleeps at level 1): the
// phase puts it to sleep at its level first. Every sleep of B from then on
// is at level 2.
func TestTrafficStartsAtItsSleepLevel(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(trace, []byte(fourRows), 0o644))
	f, rec, p := simPoolWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.Trace, cfg.Traffic.InFlightRequests, cfg.Traffic.Ideal = trace, 0, false
		cfg.Traffic.SleepLevel = 2
	})
	ctx := t.Context()
	require.NoError(t, f.Activate(ctx, "B"))
	require.NoError(t, f.Activate(ctx, "A")) // B asleep at level 1
	at, asleep := f.AsleepAt("B")
	require.True(t, asleep)
	require.Equal(t, 1, at)
	trOut, err := p.Run(ctx, t.Logf)
	require.NoError(t, err)
	i := slices.IndexFunc(trOut.Value.Switches, func(sw record.RouterSwitch) bool { return sw.To == "B" })
	require.GreaterOrEqual(t, i, 0, "the router woke B")
	first := trOut.Value.Switches[i].Start
	last := ""
	for _, ev := range rec.Raw().Events {
		if ev.Label == "B" && strings.HasPrefix(ev.Kind, "sleep") && ev.Time.Before(first) {
			last = ev.Kind
		}
	}
	assert.Equal(t, "sleep L2", last, "B's sleep before the router's first wake of it")
}

// TestCrowdedGoodputSaysSo: a goodput ratio missed while other processes
// held the CPU over the traffic phase says the ratio may be the
// machine's; on a quiet machine the same miss says nothing of it. The
// ratio is held to 1000, which no run reaches, so both miss.
func TestCrowdedGoodputSaysSo(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(trace, []byte(fourRows), 0o644))
	for _, pct := range []float64{80, 0} {
		t.Run(fmt.Sprint(pct), func(t *testing.T) {
			f, rec, cfg := simtest.Pool(t, same, func(cfg *config.Config) {
				cfg.Traffic.Trace = trace
				cfg.Traffic.InFlightRequests = 0
				cfg.Thresholds.MinTrafficGoodputRatio = 1000
			})
			out, err := traffic.New(protocol.NewEnv(cfg, f, rec, simtest.LoadObserver{OthersCPUPct: pct}), rec.Writers().Traffic).Run(t.Context(), t.Logf)
			require.NoError(t, err)
			c, ok := byName(out.Checks)["traffic.goodput_ratio/"]
			require.True(t, ok, "the goodput ratio is checked")
			assert.Equal(t, "FAIL", c.Verdict, c.String())
			if pct > 0 {
				assert.Contains(t, c.Reason, "other processes took 80 % during AB-traffic of the machine's CPU: the ratio may be the machine's")
			} else {
				assert.NotContains(t, c.Reason, "other processes")
			}
		})
	}
}
