package protocol_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
)

// Each interval runs between the events the docs/metrics.md names:
// the harness's own work around it (memory reads, a process scan, GET
// /version, confirmations after the answer named) made slower leaves it
// where it was, the thing it measures made slower moves it.

// soakRun runs a three-model soak of n cycles, memory read through wrap,
// every server with faults.
func soakRun(t *testing.T, wrap func(gpu.Source) gpu.Source, n int, faults string) []record.SoakCycle {
	t.Helper()
	_, _, p := simFleetWith(t, wrap, three(n, map[string]string{"A": faults, "B": faults, "C": faults}))
	cycles, err := p.Soak(t.Context(), t.Logf)
	require.NoError(t, err)
	require.Len(t, cycles, n)
	for _, c := range cycles {
		t.Logf("%s→%s: sleep %.3fs, wake %.3fs, switch → first token %.3fs, residual %.3f GiB, headroom %.2f GiB",
			c.From, c.To, c.SleepS, c.WakeS, c.ToFirstTokenS, c.ResidualGiB, c.HeadroomGiB)
	}
	return cycles
}

// TestSoakClockIsTheSwitchClock: the soak's switch → first token runs, as
// the switch phase's, from /sleep sent to the woken model's first token:
// memory reads of 150 ms each (the residual after settle_s, the headroom
// before the wake, device-delta's read of the device asleep) add nothing
// to it (per cycle over sleep + wake, and median against a run without), and the residual and headroom are measured all the same; a wake answered 300 ms later
// moves it by that much.
func TestSoakClockIsTheSwitchClock(t *testing.T) {
	const delay = 150 * time.Millisecond
	plain := soakRun(t, same, 3, "")
	for name, wrap := range map[string]func(gpu.Source) gpu.Source{
		"process": func(s gpu.Source) gpu.Source { return simtest.SlowReads{Source: s, Delay: delay} },
		"device-delta": func(s gpu.Source) gpu.Source {
			return simtest.NoProcs{Source: simtest.SlowReads{Source: s, Delay: delay}}
		},
	} {
		slowRead := soakRun(t, wrap, 3, "")
		assert.Less(t, medianFirstToken(slowRead), medianFirstToken(plain)+delay.Seconds(), "%s: as without slow reads (medians)", name)
		for i, c := range slowRead {
			overhead := time.Duration((c.ToFirstTokenS - c.SleepS - c.WakeS) * float64(time.Second))
			assert.Less(t, overhead, delay, "%s, cycle %d: confirmations and a probe's first token, not the memory reads", name, c.Cycle)
			if name == "process" { // the memory figures under device delta are TestDeviceDeltaAttribution's; here only the clock
				assert.InDelta(t, plain[i].ResidualGiB, c.ResidualGiB, 1e-6, "cycle %d: the residual is read", c.Cycle)
				assert.Positive(t, c.HeadroomGiB, "cycle %d: the headroom is read", c.Cycle)
			}
		}
	}
	const wake = 300 * time.Millisecond
	slowWake := soakRun(t, same, 3, "delay=/wake_up:0.3")
	for _, c := range slowWake {
		assert.GreaterOrEqual(t, c.WakeS, wake.Seconds(), "cycle %d: the wake took its delay", c.Cycle)
		assert.GreaterOrEqual(t, c.ToFirstTokenS, wake.Seconds(), "cycle %d: the wake's delay is in the switch", c.Cycle)
	}
	assert.Greater(t, medianFirstToken(slowWake), medianFirstToken(plain)+wake.Seconds()/2, "a slower wake is a slower switch")
}

// medianFirstToken is the median switch → first token of an odd number of cycles.
func medianFirstToken(cs []record.SoakCycle) float64 {
	xs := make([]float64, len(cs))
	for i, c := range cs {
		xs[i] = c.ToFirstTokenS
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// TestRestartIntervalsEndAtTheirEvents: restart's first token is the probe
// sent after /health 200 and /v1/models; GET /version (and the /proc scan,
// the start log, the memory read) come after it: a /version answered
// 500 ms late leaves ready → first token short. A /health answered 300 ms
// late (the server ready later) moves both figures.
func TestRestartIntervalsEndAtTheirEvents(t *testing.T) {
	restart := func(faults string) []record.Restart {
		_, rec, p := simFleetWith(t, same, func(cfg *config.Config) {
			cfg.Protocol.RestartWarm = 1
			cfg.Models[0].SimFaults = faults
		})
		rs, err := p.Restart(t.Context(), "A", t.Logf)
		require.NoError(t, err)
		require.Len(t, rs, 2)
		raw := rec.Raw()
		assert.NotEmpty(t, raw.Runtime, "the version is read all the same")
		assert.NotZero(t, raw.Weights["A"].GiB, "the start log is read all the same")
		return rs
	}
	plain := restart("")
	slowVersion := restart("delay=/version:0.5")
	for i, r := range slowVersion {
		assert.Less(t, r.FirstTokenS-r.ReadyS, 0.5, "start %d: ready → first token is /v1/models and the probe, not GET /version", i+1)
		assert.Less(t, r.FirstTokenS, plain[i].FirstTokenS+0.5, "start %d: spawn → first token as without the slow /version", i+1)
	}
	// Each start's first /health 200 comes at least 0.3 s after the server
	// is ready: over both starts, 0.6 s; asserted with room for a busy box.
	slowHealth := restart("delay=/health:0.3")
	total := func(rs []record.Restart, f func(record.Restart) float64) float64 { return f(rs[0]) + f(rs[1]) }
	ready := func(r record.Restart) float64 { return r.ReadyS }
	first := func(r record.Restart) float64 { return r.FirstTokenS }
	assert.Greater(t, total(slowHealth, ready), total(plain, ready)+0.3, "ready later")
	assert.Greater(t, total(slowHealth, first), total(plain, first)+0.3, "first token later")
}
