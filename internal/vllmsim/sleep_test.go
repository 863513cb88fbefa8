package vllmsim

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/vllm"
)

// used is what the simulated GPU shows the sim holding.
func (s *sim) used(t *testing.T) uint64 {
	t.Helper()
	procs, err := simgpu.Processes(s.dir)
	require.NoError(t, err)
	require.Len(t, procs, 1)
	return procs[0].UsedBytes
}

// metrics is one scrape of the sim's /metrics.
func (s *sim) metrics(t *testing.T) vllm.Metrics {
	t.Helper()
	text, err := s.c.Metrics(t.Context())
	require.NoError(t, err)
	m, err := vllm.ParseMetrics(text)
	require.NoError(t, err)
	return m
}

// send is call's answer decoded: status and JSON body (nil when empty).
func send(t *testing.T, s *sim, req string) (int, map[string]any) {
	t.Helper()
	code, body := call(t, s.url, req)
	if strings.TrimSpace(body) == "" {
		return code, nil
	}
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &v), "%s: %s", req, body)
	return code, v
}

func errMessage(t *testing.T, body map[string]any) string {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	require.True(t, ok, "no error object in %v", body)
	msg, _ := e["message"].(string)
	return msg
}

// TestLevel0PausesOnly: /sleep?level=0 pauses the scheduler and nothing
// else (EngineCore.sleep, vllm-api.md §2): is_sleeping true, every byte
// still on the device, no "fall asleep" or freed line, the legacy metric
// all zero, and a request sent meanwhile waits until the wake, then runs.
// v0.31 answers empty bodies, v0.32 on JSON (#52864); era proposed's
// resource-state metrics show the pause.
func TestLevel0PausesOnly(t *testing.T) {
	for _, e := range []era{eraC, eraD, eraProposed} {
		t.Run(string(e), func(t *testing.T) {
			proposed, merged52864 := e == eraProposed, e.since(eraD)
			logs := &SyncLog{}
			s := startSimLog(t, "tiny-a", map[string]string{EnvEra: string(e)}, logs)
			s.ready(t)
			ctx := t.Context()
			before := s.used(t)
			code, body := send(t, s, "POST /sleep?level=0")
			require.Equal(t, 200, code)
			if merged52864 {
				assert.Equal(t, map[string]any{"status": "sleeping", "level": float64(0)}, body)
			} else {
				assert.Nil(t, body, "v0.31: an empty 200")
			}
			asleep, err := s.c.IsSleeping(ctx)
			require.NoError(t, err)
			assert.True(t, asleep)
			assert.Equal(t, before, s.used(t), "level 0 frees nothing")
			assert.NotContains(t, logs.String(), "fall asleep")
			assert.NotContains(t, logs.String(), "Sleep mode freed")
			assert.NotContains(t, logs.String(), "CuMemAllocator")
			m := s.metrics(t)
			for _, st := range []string{"awake", "weights_offloaded", "discard_all"} {
				assert.Equal(t, 0.0, m[`vllm:engine_sleep_state{sleep_state="`+st+`"}`], st)
			}
			if proposed {
				assert.Equal(t, 0.0, m["vllm:engine_fully_awake"])
				assert.Equal(t, 1.0, m[`vllm:engine_sleep_resource_state{resource="weights",state="resident"}`])
			} else {
				assert.NotContains(t, m, "vllm:engine_fully_awake", "no release exports it")
			}

			short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
			defer cancel()
			_, err = s.c.Complete(short, vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 2})
			assert.ErrorIs(t, err, context.DeadlineExceeded, "paused: the request waits")
			got := make(chan error, 1)
			go func() {
				_, err := s.c.Complete(ctx, vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 2, IgnoreEOS: true})
				got <- err
			}()
			time.Sleep(50 * time.Millisecond)
			code, body = send(t, s, "POST /wake_up")
			require.Equal(t, 200, code)
			if merged52864 {
				assert.Equal(t, "awake", body["status"])
			} else {
				assert.Nil(t, body)
			}
			select {
			case err := <-got:
				assert.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("the waiting request never ran after the wake")
			}
			logs.Has(t, "WARNING Executor is not sleeping.", "no memory slept")
			assert.NotContains(t, logs.String(), "to wake up tags")
			m = s.metrics(t)
			assert.Equal(t, 1.0, m[`vllm:engine_sleep_state{sleep_state="awake"}`])
			if proposed {
				assert.Equal(t, 1.0, m["vllm:engine_fully_awake"])
			}
		})
	}
}

// TestWakeLogLines: vLLM's router and executor lines (vllm-api.md §3), and
// what a sleep after a partial wake does: a release sleeps again (only
// "every tag asleep" is the executor's no-op since PR #44890), era
// proposed refuses it with a 500 naming "partially awake".
func TestWakeLogLines(t *testing.T) {
	for _, e := range []era{eraC, eraD, eraProposed} {
		t.Run(string(e), func(t *testing.T) {
			proposed, merged52864 := e == eraProposed, e.since(eraD)
			logs := &SyncLog{}
			s := startSimLog(t, "tiny-a", map[string]string{EnvEra: string(e)}, logs)
			s.ready(t)
			send(t, s, "POST /sleep?level=1")
			send(t, s, "POST /wake_up")
			logs.Has(t, "wake up the engine with tags: None")
			assert.Regexp(t, `It took [0-9.]+ seconds to wake up tags \{'weights', 'kv_cache'\}\.`, logs.String(), "no tags: the executor's set")

			n := strings.Count(logs.String(), "to wake up tags")
			code, body := send(t, s, "POST /wake_up")
			require.Equal(t, 200, code)
			if merged52864 {
				assert.Equal(t, "awake", body["status"])
			} else {
				assert.Nil(t, body)
			}
			logs.Has(t, "WARNING Executor is not sleeping.")
			assert.Equal(t, n, strings.Count(logs.String(), "to wake up tags"), "nothing asleep: no It took line")

			send(t, s, "POST /sleep?level=1")
			send(t, s, "POST /wake_up?tags=weights")
			logs.Has(t, "wake up the engine with tags: ['weights']")
			assert.Regexp(t, `It took [0-9.]+ seconds to wake up tags \['weights'\]\.`, logs.String())
			n = strings.Count(logs.String(), "to wake up tags")
			used := s.used(t)
			code, body = send(t, s, "POST /wake_up?tags=weights")
			require.Equal(t, 200, code)
			if merged52864 {
				assert.Equal(t, map[string]any{"status": "sleeping", "tags_woken": []any{"weights"}}, body)
			} else {
				assert.Nil(t, body)
			}
			logs.Has(t, "WARNING Tag weights is not in sleeping tags {'kv_cache'}")
			assert.Equal(t, n, strings.Count(logs.String(), "to wake up tags"), "a tag not asleep wakes nothing")
			assert.Equal(t, used, s.used(t))

			code, body = send(t, s, "POST /sleep?level=1")
			if proposed {
				require.Equal(t, 500, code, "sleep while partially awake")
				assert.Regexp(t, "partially awake", errMessage(t, body))
				assert.Equal(t, used, s.used(t), "refused: the weights stay")
			} else {
				require.Equal(t, 200, code, "released: a sleep while partially awake sleeps the weights")
				if merged52864 {
					assert.Equal(t, map[string]any{"status": "sleeping", "level": float64(1)}, body)
				} else {
					assert.Nil(t, body)
				}
				assert.Equal(t, tinyPhysics(t).ResidualBytes(), s.used(t), "the woken weights are offloaded again")
			}
			paused, err := s.c.IsSleeping(t.Context())
			require.NoError(t, err)
			assert.True(t, paused, "the scheduler stays paused")
		})
	}
}

// TestKVOnlyRelease: pause → release_kv_cache_memory frees exactly the KV
// cache on the device (weights stay) → wake_up?tags=kv_cache maps it back
// in a KV wake's time and resumes serving. v0.31 answers empty 200s;
// v0.32 on JSON and the operation metrics (#52864); era proposed its
// resource-state metrics too.
func TestKVOnlyRelease(t *testing.T) {
	for _, e := range []era{eraC, eraD, eraProposed} {
		t.Run(string(e), func(t *testing.T) {
			proposed, merged52864 := e == eraProposed, e.since(eraD)
			logs := &SyncLog{}
			// slow-wake stretches every wake 40 times: 0.2 s for the KV cache.
			s := startSimLog(t, "tiny-a", map[string]string{EnvFaults: "slow-wake=40", EnvEra: string(e)}, logs)
			s.ready(t)
			ctx := t.Context()
			awake := s.used(t)
			code, body := send(t, s, "POST /release_kv_cache_memory")
			require.Equal(t, 500, code)
			assert.Equal(t, "release_kv_cache_memory() requires a completed pause first", errMessage(t, body))
			assert.Equal(t, awake, s.used(t))

			code, _ = send(t, s, "POST /pause")
			require.Equal(t, 200, code)
			code, body = send(t, s, "POST /release_kv_cache_memory")
			require.Equal(t, 200, code)
			if merged52864 {
				assert.Equal(t, map[string]any{"status": "kv_cache_released"}, body)
			} else {
				assert.Nil(t, body, "v0.31: an empty 200")
			}
			assert.Equal(t, awake-1*GiB, s.used(t), "the 1 GiB KV cache is freed, the weights stay")
			m := s.metrics(t)
			assert.Equal(t, 0.0, m[`vllm:engine_sleep_state{sleep_state="awake"}`], "legacy: all zero")
			assert.Equal(t, 0.0, m[`vllm:engine_sleep_state{sleep_state="weights_offloaded"}`], "legacy: all zero")
			if proposed {
				assert.Equal(t, 1.0, m[`vllm:engine_sleep_resource_state{resource="kv_cache",state="released"}`])
			} else {
				assert.NotContains(t, m, `vllm:engine_sleep_resource_state{resource="kv_cache",state="released"}`)
			}
			if merged52864 {
				assert.Equal(t, 2.0, m[`vllm:rl_sleep_mode_operation_duration_seconds_count{operation="release_kv_cache_memory"}`], "the refused call is observed too")
				assert.Equal(t, 1.0, m[`vllm:rl_sleep_mode_operations_total{operation="release_kv_cache_memory",status="error"}`], "and counted as an error")
			} else {
				assert.NotContains(t, m, `vllm:rl_sleep_mode_operation_duration_seconds_count{operation="release_kv_cache_memory"}`)
			}

			code, body = send(t, s, "POST /wake_up?tags=kv_cache")
			require.Equal(t, 200, code)
			if merged52864 {
				assert.Equal(t, "awake", body["status"])
			} else {
				assert.Nil(t, body)
			}
			assert.Equal(t, awake, s.used(t))
			re := regexp.MustCompile(`It took ([0-9.]+) seconds to wake up tags \['kv_cache'\]`)
			mm := re.FindStringSubmatch(logs.String())
			require.NotNil(t, mm, logs.String())
			took, _ := strconv.ParseFloat(mm[1], 64)
			p := tinyPhysics(t)
			// At least a KV wake's modelled time (the log rounds to µs), and short
			// of what mapping the weights back in too would add (1.06 s here): a
			// busy machine only lengthens the wake, so no tight upper bound.
			assert.GreaterOrEqual(t, took, p.WakeKV()*40-1e-6, "a KV wake's modelled time")
			assert.Less(t, took, (p.WakeKV()+p.WakeWeights(1))*40, "the weights were not mapped back in")
			st, err := s.c.Complete(ctx, vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 2, IgnoreEOS: true})
			require.NoError(t, err)
			assert.Equal(t, 2, st.OutputTokens)
		})
	}
}

// tinyPhysics is the tiny profile's tiny-a with the tests' 1 GiB KV cache.
func tinyPhysics(t *testing.T) Physics {
	t.Helper()
	p, err := LookupProfile("tiny")
	require.NoError(t, err)
	m, err := p.Model("tiny-a")
	require.NoError(t, err)
	return Physics{GPU: p.GPU, Model: m, KVBytes: 1 * GiB}
}

// TestWakeStaysAsleepFault: the memory comes back, the scheduler stays
// paused; era proposed answers "sleeping" and its metrics say so, the
// newest release its empty 200.
func TestWakeStaysAsleepFault(t *testing.T) {
	for _, e := range []era{eraC, eraProposed} {
		t.Run(string(e), func(t *testing.T) {
			s := startSim(t, "tiny-a", map[string]string{EnvFaults: "wake-stays-asleep", EnvEra: string(e)})
			s.ready(t)
			awake := s.used(t)
			send(t, s, "POST /sleep?level=1")
			code, body := send(t, s, "POST /wake_up")
			require.Equal(t, 200, code)
			if e == eraProposed {
				assert.Equal(t, map[string]any{"status": "sleeping", "tags_woken": nil}, body)
			} else {
				assert.Nil(t, body)
			}
			assert.Equal(t, awake, s.used(t), "the memory work was done")
			asleep, err := s.c.IsSleeping(t.Context())
			require.NoError(t, err)
			assert.True(t, asleep)
			if e == eraProposed {
				m := s.metrics(t)
				assert.Equal(t, 0.0, m["vllm:engine_fully_awake"])
				assert.Equal(t, 1.0, m[`vllm:engine_sleep_resource_state{resource="scheduler",state="paused"}`])
			}
		})
	}
}

// TestStuckOpFault: the call answers, its in-flight gauge stays 1; the
// other operations' gauges go back to 0 (the operation metrics are eras
// d's and proposed's).
func TestStuckOpFault(t *testing.T) {
	for _, op := range []string{"sleep", "wake_up", "release_kv_cache_memory"} {
		t.Run(op, func(t *testing.T) {
			s := startSim(t, "tiny-a", map[string]string{EnvFaults: "stuck-op=" + op})
			s.ready(t)
			for _, req := range []string{"POST /sleep?level=1", "POST /wake_up", "POST /pause", "POST /release_kv_cache_memory", "POST /wake_up"} {
				code, body := send(t, s, req)
				require.Equal(t, 200, code, "%s: %v", req, body)
			}
			m := s.metrics(t)
			label := map[string]string{"sleep": "sleep", "wake_up": "wake", "release_kv_cache_memory": "release_kv_cache_memory"}
			for _, other := range []string{"sleep", "wake_up", "release_kv_cache_memory"} {
				want := 0.0
				if other == op {
					want = 1
				}
				assert.Equal(t, want, m[`vllm:rl_sleep_mode_operations_in_flight{operation="`+label[other]+`"}`], other)
			}
		})
	}
}

// TestErroredOpFault: the operation answers success, and the server's
// status counter counts it an error (the harness's check that the engine
// and the answer agree); the other operations count success.
func TestErroredOpFault(t *testing.T) {
	s := startSim(t, "tiny-a", map[string]string{EnvFaults: "errored-op=wake_up"})
	s.ready(t)
	for _, req := range []string{"POST /sleep?level=1", "POST /wake_up"} {
		code, body := send(t, s, req)
		require.Equal(t, 200, code, "%s: %v", req, body)
	}
	m := s.metrics(t)
	assert.Equal(t, 1.0, m[`vllm:rl_sleep_mode_operations_total{operation="wake",status="error"}`])
	assert.Equal(t, 0.0, m[`vllm:rl_sleep_mode_operations_total{operation="wake",status="success"}`])
	assert.Equal(t, 1.0, m[`vllm:rl_sleep_mode_operations_total{operation="sleep",status="success"}`])
	assert.Equal(t, 0.0, m[`vllm:rl_sleep_mode_operations_total{operation="sleep",status="error"}`])
}

// TestRPCFailFault: a failed memory RPC is a 500, leaves what it touched
// unknown, and every later sleep, wake or release is a 500 naming unknown
// and rebuild (test_failed_rpc_is_unknown, vllm-api.md §7.1); era proposed
// shows the unknown resources on its resource-state metric.
func TestRPCFailFault(t *testing.T) {
	for _, e := range []era{eraC, eraProposed} {
		proposed := e == eraProposed
		t.Run("sleep/"+string(e), func(t *testing.T) {
			s := startSim(t, "tiny-a", map[string]string{EnvFaults: "rpc-fail=sleep", EnvEra: string(e)})
			s.ready(t)
			code, _ := send(t, s, "POST /sleep?level=1")
			require.Equal(t, 500, code)
			m := s.metrics(t)
			if proposed {
				assert.Equal(t, 1.0, m[`vllm:engine_sleep_resource_state{resource="weights",state="unknown"}`])
				assert.Equal(t, 1.0, m[`vllm:engine_sleep_resource_state{resource="kv_cache",state="unknown"}`])
				assert.Equal(t, 0.0, m["vllm:engine_fully_awake"])
				assert.Equal(t, 0.0, m[`vllm:engine_sleep_state{sleep_state="awake"}`])
			}
			if !proposed {
				// Released: the executor raised before it recorded the
				// sleep; the wake finds nothing asleep and resumes, and the
				// next sleep's RPC fails again.
				code, _ := send(t, s, "POST /wake_up")
				assert.Equal(t, 200, code)
				asleep, err := s.c.IsSleeping(t.Context())
				require.NoError(t, err)
				assert.False(t, asleep)
				code, body := send(t, s, "POST /sleep?level=1")
				assert.Equal(t, 500, code)
				assert.Contains(t, errMessage(t, body), "rpc-fail=sleep")
				return
			}
			for _, req := range []string{"POST /wake_up", "POST /sleep?level=2", "POST /wake_up?tags=kv_cache", "POST /release_kv_cache_memory"} {
				code, body := send(t, s, req)
				assert.Equal(t, 500, code, req)
				assert.Regexp(t, "unknown.*rebuild", errMessage(t, body), req)
			}
			asleep, err := s.c.IsSleeping(t.Context())
			require.NoError(t, err)
			assert.True(t, asleep)
		})
		t.Run("wake_up/"+string(e), func(t *testing.T) {
			s := startSim(t, "tiny-a", map[string]string{EnvFaults: "rpc-fail=wake_up", EnvEra: string(e)})
			s.ready(t)
			send(t, s, "POST /sleep?level=1")
			code, _ := send(t, s, "POST /wake_up?tags=weights")
			require.Equal(t, 500, code)
			if proposed {
				m := s.metrics(t)
				assert.Equal(t, 1.0, m[`vllm:engine_sleep_resource_state{resource="weights",state="unknown"}`])
				assert.Equal(t, 1.0, m[`vllm:engine_sleep_resource_state{resource="kv_cache",state="released"}`], "untouched")
			}
			code, body := send(t, s, "POST /wake_up")
			assert.Equal(t, 500, code)
			if !proposed { // released: still asleep, and the RPC fails again
				assert.Contains(t, errMessage(t, body), "rpc-fail=wake_up")
				return
			}
			assert.Regexp(t, "unknown.*rebuild", errMessage(t, body))
		})
	}
}

// TestSleepModeBackend: in era proposed, cumem is logged once at the first
// memory call and an unknown name fails there with vLLM's factory message
// (a level-0 pause makes no memory call); no release's parser has the
// flag (PR #44074 merged the config field; main at 63344913 registers no
// option): argparse's "unrecognized arguments", exit 2. A release logs
// the default backend it creates.
func TestSleepModeBackend(t *testing.T) {
	proposed := map[string]string{EnvEra: string(eraProposed)}
	logs := &SyncLog{}
	s := startSimLog(t, "tiny-a", proposed, logs, "--sleep-mode-backend", "cumem")
	s.ready(t)
	send(t, s, "POST /sleep?level=1")
	send(t, s, "POST /wake_up")
	assert.Equal(t, 1, strings.Count(logs.String(), "Using sleep-mode backend: cumem"))

	s = startSim(t, "tiny-a", proposed, "--sleep-mode-backend", "nvshmem")
	s.ready(t)
	code, _ := send(t, s, "POST /sleep?level=0")
	assert.Equal(t, 200, code, "level 0 creates no backend")
	code, body := send(t, s, "POST /sleep?level=1")
	require.Equal(t, 500, code)
	assert.Contains(t, errMessage(t, body), "Unsupported sleep-mode backend 'nvshmem'. Registered backends: cumem.")

	released := &SyncLog{}
	s = startSimLog(t, "tiny-a", nil, released)
	s.ready(t)
	send(t, s, "POST /sleep?level=1")
	assert.Equal(t, 1, strings.Count(released.String(), "Using sleep-mode backend: cumem"), "the merged factory's default")
	for _, e := range []era{eraA, eraB, eraC} {
		old := startSim(t, "tiny-a", map[string]string{EnvEra: string(e)}, "--sleep-mode-backend", "cumem")
		select {
		case code := <-old.done:
			assert.Equal(t, 2, code, e)
			assert.Contains(t, old.stderr.String(), "vllm: error: unrecognized arguments: --sleep-mode-backend", e)
			old.done <- code // for the cleanup
		case <-time.After(5 * time.Second):
			t.Fatalf("era %s started with --sleep-mode-backend", e)
		}
	}
}

// TestReleaseHostMemoryLog: with VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY=1 (era
// proposed: vllm#55206 is open) a weights wake after level 1 logs the
// pinned release; not after level 2, not without the variable, and not in
// a release, where the variable is ignored with a warning.
func TestReleaseHostMemoryLog(t *testing.T) {
	const line = "Released 0.50 GiB of pinned host memory after wake-up."
	for _, tc := range []struct {
		e  era
		on bool
	}{{eraProposed, false}, {eraProposed, true}, {eraC, true}} {
		logs := &SyncLog{}
		env := map[string]string{EnvEra: string(tc.e)}
		if tc.on {
			env[EnvReleaseHostMemory] = "1"
		}
		s := startSimLog(t, "tiny-a", env, logs)
		s.ready(t)
		send(t, s, "POST /sleep?level=2")
		send(t, s, "POST /wake_up")
		assert.NotContains(t, logs.String(), "pinned host memory", "level 2 backs nothing up")
		send(t, s, "POST /sleep?level=1")
		send(t, s, "POST /wake_up?tags=kv_cache")
		assert.NotContains(t, logs.String(), "pinned host memory", "a KV wake")
		send(t, s, "POST /wake_up?tags=weights")
		want := tc.on && tc.e == eraProposed
		assert.Equal(t, want, strings.Contains(logs.String(), line), "%+v: %s", tc, logs.String())
		assert.Equal(t, tc.on && !want, strings.Contains(logs.String(), "WARNING vllmsim: "+EnvReleaseHostMemory+" is proposed"), "%+v: the ignored variable is named", tc)
	}
}

// TestPoisonDiscardedPages: a level-2 wake without reload_weights answers
// the 0xFF token over and over with VLLM_POISON_DISCARDED_PAGES=1 in era
// proposed (vllm#52597 is open), "!" without it and in a release, which
// ignores it; with the reload the answer is right either way.
func TestPoisonDiscardedPages(t *testing.T) {
	for _, tc := range []struct {
		e         era
		env, want string
	}{{eraProposed, "", "!!!!"}, {eraProposed, "1", "ÿÿÿÿ"}, {eraC, "1", "!!!!"}} {
		s := startSim(t, "tiny-a", map[string]string{EnvPoisonPages: tc.env, EnvEra: string(tc.e)})
		s.ready(t)
		ctx := t.Context()
		req := vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 4, IgnoreEOS: true}
		ref, err := s.c.Complete(ctx, req)
		require.NoError(t, err)
		send(t, s, "POST /sleep?level=2")
		send(t, s, "POST /wake_up")
		st, err := s.c.Complete(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, tc.want, st.Text, "%+v", tc)
		send(t, s, "POST /sleep?level=2")
		_, err = s.c.Wake(ctx, 2)
		require.NoError(t, err)
		st, err = s.c.Complete(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, ref.Text, st.Text)
	}
}

// TestRustFrontendDropsLegacyMetric: in era proposed (the state design's
// "Rust does not add the deprecated three-state metric")
// VLLM_USE_RUST_FRONTEND=1 exports no vllm:engine_sleep_state, the resource
// state still; a release keeps the legacy metric, its only sleep metric
// (vllmsim's choice: the released Rust frontend's metrics were not read).
func TestRustFrontendDropsLegacyMetric(t *testing.T) {
	s := startSim(t, "tiny-a", map[string]string{EnvRustFrontend: "1", EnvEra: string(eraProposed)})
	s.ready(t)
	m := s.metrics(t)
	_, legacy := m[`vllm:engine_sleep_state{sleep_state="awake"}`]
	assert.False(t, legacy)
	assert.Equal(t, 1.0, m["vllm:engine_fully_awake"])
	s = startSim(t, "tiny-a", map[string]string{EnvEra: string(eraProposed)})
	s.ready(t)
	assert.Equal(t, 1.0, s.metrics(t)[`vllm:engine_sleep_state{sleep_state="awake"}`])
	s = startSim(t, "tiny-a", map[string]string{EnvRustFrontend: "1"})
	s.ready(t)
	m = s.metrics(t)
	assert.Equal(t, 1.0, m[`vllm:engine_sleep_state{sleep_state="awake"}`], "era d: the legacy metric stays")
	assert.NotContains(t, m, "vllm:engine_fully_awake")
}

// TestEraSetting: VLLMSIM_ERA picks a, b, c, d or proposed (default d);
// anything else fails the start naming the variable.
func TestEraSetting(t *testing.T) {
	for in, want := range map[string]era{"": eraD, "a": eraA, "B": eraB, "c": eraC, "d": eraD, "proposed": eraProposed, "Proposed": eraProposed} {
		st, err := SettingsFromEnv(func(k string) string { return map[string]string{EnvEra: in}[k] })
		require.NoError(t, err, in)
		assert.Equal(t, want, st.Era, in)
	}
	_, err := SettingsFromEnv(func(k string) string { return map[string]string{EnvEra: "0.11"}[k] })
	assert.ErrorContains(t, err, `VLLMSIM_ERA="0.11": want a`)
	_, err = SettingsFromEnv(func(k string) string { return map[string]string{EnvPoisonPages: "yes"}[k] })
	assert.ErrorContains(t, err, EnvPoisonPages)
}

// TestOperationMetrics: from era d (PR #52864) the operation metrics carry
// the merged names (vllm:rl_…) and a calls counter by outcome: in era
// proposed a sleep and a wake that succeeded, and a sleep refused while
// partially awake (500), counted as such; the plain names are absent.
// VLLMSIM_PLAIN_OP_METRICS=1 gives branch code's plain names, without a
// counter; era c (v0.31) has no operation metrics at all, and says it
// ignores the variable.
func TestOperationMetrics(t *testing.T) {
	s := startSim(t, "tiny-a", map[string]string{EnvEra: string(eraProposed)})
	s.ready(t)
	for _, req := range []struct {
		line string
		code int
	}{{"POST /sleep?level=1", 200}, {"POST /wake_up?tags=weights", 200}, {"POST /sleep?level=1", 500}, {"POST /wake_up", 200}} {
		code, body := send(t, s, req.line)
		require.Equal(t, req.code, code, "%s: %v", req.line, body)
	}
	m := s.metrics(t)
	assert.Equal(t, 1.0, m[`vllm:rl_sleep_mode_operations_total{operation="sleep",status="success"}`])
	assert.Equal(t, 1.0, m[`vllm:rl_sleep_mode_operations_total{operation="sleep",status="error"}`])
	assert.Equal(t, 2.0, m[`vllm:rl_sleep_mode_operations_total{operation="wake",status="success"}`])
	assert.Equal(t, 3.0, m[`vllm:rl_sleep_mode_operation_duration_seconds_count{operation="sleep"}`]+m[`vllm:rl_sleep_mode_operation_duration_seconds_count{operation="wake"}`]-1)
	assert.Contains(t, m, `vllm:rl_sleep_mode_operations_in_flight{operation="sleep"}`)
	for k := range m {
		assert.NotContains(t, k, "vllm:sleep_mode_operation", "only the rl_ names")
	}

	// The default era, d: the same names, no resource-state metrics; a
	// sleep refused by validation (400) is no operation.
	d := startSim(t, "tiny-a", nil)
	d.ready(t)
	code, _ := send(t, d, "POST /sleep?level=3")
	require.Equal(t, 400, code)
	assert.NotContains(t, d.metrics(t), `vllm:rl_sleep_mode_operation_duration_seconds_count{operation="sleep"}`, "the engine was not called")
	sent := time.Now()
	code, _ = send(t, d, "POST /sleep?level=1")
	http := time.Since(sent).Seconds()
	require.Equal(t, 200, code)
	md := d.metrics(t)
	assert.Equal(t, 1.0, md[`vllm:rl_sleep_mode_operations_total{operation="sleep",status="success"}`])
	// Recorded before the answer is written, as vLLM's router does: the
	// engine's time lies inside the client's.
	require.Contains(t, md, `vllm:rl_sleep_mode_operation_duration_seconds_sum{operation="sleep"}`)
	assert.LessOrEqual(t, md[`vllm:rl_sleep_mode_operation_duration_seconds_sum{operation="sleep"}`], http)
	assert.NotContains(t, md, `vllm:engine_fully_awake`, "the resource-state metrics are proposed")

	// The branch's plain names: no counter.
	p := startSim(t, "tiny-a", map[string]string{EnvPlainOpMetrics: "1"})
	p.ready(t)
	code, _ = send(t, p, "POST /sleep?level=1")
	require.Equal(t, 200, code)
	mp := p.metrics(t)
	assert.Equal(t, 1.0, mp[`vllm:sleep_mode_operation_duration_seconds_count{operation="sleep"}`])
	for k := range mp {
		assert.NotContains(t, k, "vllm:rl_sleep_mode", "only the plain names")
	}

	// v0.31 (era c): no operation metrics; the variable is ignored, saying so.
	logs := &SyncLog{}
	c := startSimLog(t, "tiny-a", map[string]string{EnvPlainOpMetrics: "1", EnvEra: string(eraC)}, logs)
	c.ready(t)
	code, _ = send(t, c, "POST /sleep?level=1")
	require.Equal(t, 200, code)
	for k := range c.metrics(t) {
		assert.NotContains(t, k, "sleep_mode_operation", "era c")
	}
	logs.Has(t, "WARNING vllmsim: "+EnvPlainOpMetrics+" names the operation metrics of vLLM ≥ 0.32")
}

// TestRPCFailOnRelease: a failed discard is a 500. In era proposed it
// leaves the KV cache unknown (vllm-api.md §7.1): every later wake is
// refused until a restart; a release changes nothing and wakes again.
func TestRPCFailOnRelease(t *testing.T) {
	for _, e := range []era{eraC, eraProposed} {
		t.Run(string(e), func(t *testing.T) {
			s := startSim(t, "tiny-a", map[string]string{EnvFaults: "rpc-fail=release_kv_cache_memory", EnvEra: string(e)})
			s.ready(t)
			code, _ := send(t, s, "POST /pause")
			require.Equal(t, 200, code)
			code, body := send(t, s, "POST /release_kv_cache_memory")
			require.Equal(t, 500, code)
			assert.Contains(t, errMessage(t, body), "rpc-fail=release_kv_cache_memory")
			if e == eraProposed {
				m := s.metrics(t)
				assert.Equal(t, 1.0, m[`vllm:engine_sleep_resource_state{resource="kv_cache",state="unknown"}`])
			}
			code, body = send(t, s, "POST /wake_up")
			if e == eraProposed { // refused until a restart
				require.Equal(t, 500, code)
				assert.Contains(t, errMessage(t, body), "unknown")
				return
			}
			// Released: the executor raised before it recorded a discard;
			// the KV cache is as it was and the wake resumes the scheduler.
			require.Equal(t, 200, code)
			asleep, err := s.c.IsSleeping(t.Context())
			require.NoError(t, err)
			assert.False(t, asleep)
		})
	}
}

// TestSleepWithOnlyWeightsAsleep: from #44890 (eras c on) a sleep while
// the weights sleep and the KV cache was woken (wake_up?tags=kv_cache) is
// a memory no-op: nothing is freed, the KV cache stays mapped, and the
// weights keep their level-2 state (garbage until reload_weights), as
// vLLM's test_sleep_with_only_weights_asleep has it.
func TestSleepWithOnlyWeightsAsleep(t *testing.T) {
	for _, e := range []era{eraC, eraD} {
		t.Run(string(e), func(t *testing.T) {
			logs := &SyncLog{}
			s := startSimLog(t, "tiny-a", map[string]string{EnvEra: string(e)}, logs)
			s.ready(t)
			req := vllm.CompletionRequest{Model: "tiny-a", Prompt: "hello there", MaxTokens: 4, IgnoreEOS: true}
			before, err := s.c.Complete(t.Context(), req)
			require.NoError(t, err)
			for _, r := range []string{"POST /sleep?level=2", "POST /wake_up?tags=kv_cache"} {
				code, _ := send(t, s, r)
				require.Equal(t, 200, code, r)
			}
			mapped := s.used(t)
			n := strings.Count(logs.String(), "Executor is already sleeping.")
			code, _ := send(t, s, "POST /sleep?level=1")
			require.Equal(t, 200, code)
			assert.Equal(t, mapped, s.used(t), "a memory no-op: the KV cache stays mapped")
			assert.Equal(t, n+1, strings.Count(logs.String(), "Executor is already sleeping."))
			code, _ = send(t, s, "POST /wake_up?tags=weights")
			require.Equal(t, 200, code)
			after, err := s.c.Complete(t.Context(), req)
			require.NoError(t, err)
			assert.NotEqual(t, before.Text, after.Text, "still level 2's weights: garbage until reload_weights, not a level-1 copy")
		})
	}
}
