package protocol_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
)

// TestTrafficPhase runs the phase from a trace: every row sent through the
// router, the same rows with both models awake, and a sleep with requests
// in flight in each pause mode, each as vLLM documents it.
func TestTrafficPhase(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, os.WriteFile(trace, []byte("t_s,model,prompt_tokens,output_tokens\n0,A,20,8\n0.1,B,30,8\n0.2,B,10,4\n0.4,A,20,8\n"), 0o644))
	_, rec, p := simFleetWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.Trace = trace
		cfg.Traffic.InFlightRequests = 3
	})
	tr, err := p.Traffic(t.Context(), t.Logf)
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
	for _, c := range p.TrafficChecks(tr) {
		assert.Equal(t, "PASS", c.Verdict, c.String())
	}
	assert.NotNil(t, rec.Raw().Traffic)
}

// TestInFlightCrashIsNamed: a server that dies when put to sleep with
// requests running (vLLM before PR #34528) fails the phase by name.
func TestInFlightCrashIsNamed(t *testing.T) {
	_, rec, p := simFleetWith(t, same, func(cfg *config.Config) {
		cfg.Traffic.DurationS = 0 // the in-flight sleeps alone
		cfg.Traffic.InFlightRequests = 2
		cfg.Models[0].SimFaults = "inflight-crash"
	})
	tr, err := p.Traffic(t.Context(), t.Logf)
	require.Error(t, err)
	assert.ErrorContains(t, err, "server A exited")
	require.Len(t, tr.InFlight, 1, "the first mode ends it")
	assert.False(t, tr.InFlight[0].Survived)
	f := rec.Raw().Failures
	require.Len(t, f, 1)
	assert.Equal(t, "sleep with requests in flight, mode abort", f[0].Step)
	checks := byName(p.TrafficChecks(tr))
	assert.Equal(t, "FAIL", checks["traffic.in_flight.abort.survived/"].Verdict)
}

func TestArrivals(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Traffic.Rates = map[string]float64{"B": 0.5}
	cfg.Traffic.DurationS, cfg.Traffic.WarmupRequests, cfg.Traffic.Arrivals = 4, 2, "constant"
	a, what, err := protocol.Arrivals(cfg)
	require.NoError(t, err)
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
