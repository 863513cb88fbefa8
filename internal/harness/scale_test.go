package harness

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/testmain"
)

// threads is this process's OS thread count.
func threads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

// TestLongSwitchStaysFlat: 300 handoffs pass with exact accounting, and
// the harness's heap and thread count after them are what they were after
// the first 30 (measured on main before the split: 19 → 26 MB RSS, ≤ 12
// threads).
func TestLongSwitchStaysFlat(t *testing.T) {
	testmain.Long(t)
	cfg := small(t)
	cfg.Sim.TimeScale = 0.05
	cfg.Protocol.Handoffs = 30
	require.NoError(t, cfg.Validate())
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	defer h.Close(nil)
	_, err = protocol.Switch{Env: h.env}.Run(t.Context(), func(string, ...any) {})
	require.NoError(t, err)
	heap0, threads0 := heapMiB(), threads(t)

	longCfg := cfg
	longCfg.Protocol.Handoffs = 300 // the same servers and record, ten times longer
	long := protocol.NewEnv(longCfg, h.pool, h.rec, h)
	o, err := protocol.Switch{Env: long}.Run(t.Context(), func(string, ...any) {})
	handoffs := o.Value
	require.NoError(t, err)
	ok := 0
	for _, ho := range handoffs {
		if ho.OK {
			ok++
		}
	}
	assert.Equal(t, 301, ok, "the initial activation and 300 handoffs")
	raw := h.Raw()
	assert.Equal(t, raw.Requests.Executed, raw.Requests.Success, "no request failed")
	// One probe per activation and handoff, a replay of the 2-probe
	// correctness set after each, the set once per model before its first
	// sleep, and each switch phase's engine-health burst after its first
	// handoff to each model (2 phases × 2 models); nothing else.
	assert.Equal(t, 3*(1+30+1+300)+2*2+2*2*cfg.Protocol.HealthRequests, raw.Requests.Executed,
		"one probe and one 2-probe replay per activation and handoff, 2 references, 4 health bursts")
	heap, th := heapMiB(), threads(t)
	t.Logf("after 30 handoffs: heap %.1f MiB, %d threads; after 300 more: heap %.1f MiB, %d threads", heap0, threads0, heap, th)
	assert.Less(t, heap-heap0, 8.0, "heap grows by less than 8 MiB over 300 handoffs")
	assert.LessOrEqual(t, th, max(threads0+4, 16), "threads stay bounded")
}

// TestHighConcurrencyAccounting: 128 requests at concurrency 128 in one
// round pass with every request accounted for.
func TestHighConcurrencyAccounting(t *testing.T) {
	cfg := small(t)
	cfg.Sim.TimeScale = 0.1
	cfg.Protocol.Concurrency, cfg.Protocol.RequestsPerRound, cfg.Protocol.Rounds = []int{128}, 128, 1
	require.NoError(t, cfg.Validate())
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", func(string, ...any) {})
	require.NoError(t, err)
	runsOut, err := protocol.Baseline{Env: h.env}.Run(t.Context(), "A", func(string, ...any) {})
	runs := runsOut.Value
	require.NoError(t, err)
	rep, err := h.Close(nil)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, 128, runs[0].Success)
	assert.Len(t, runs[0].TTFT, 128, "a TTFT per request")
	assert.Equal(t, 128, rep.Requests.PlannedPerformance)
	assert.Equal(t, 128+2+cfg.Protocol.HealthRequests, rep.Requests.Executed, "128 requests, the 2 start probes and the engine-health burst's")
	assert.Zero(t, rep.Requests.Failure)
}
