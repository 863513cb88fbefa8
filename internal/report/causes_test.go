package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
)

// noDevMode is what a run of vllmsim without VLLM_SERVER_DEV_MODE=1
// records, as the code wrote it (the protocol's phases on a simtest pool
// whose servers got VLLM_SERVER_DEV_MODE=0): the restart of B has to put
// A to sleep first, so B's failures name A's sleep.
func noDevMode() ([]record.Failure, []record.Check) {
	const (
		l1   = "sleep A level 1: POST /sleep: HTTP 404: 404 page not found: the server has no sleep endpoints: start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (a vLLM older than 0.7.3 may have none)"
		l2   = "sleep A level 2: POST /sleep: HTTP 404: 404 page not found: the server has no sleep endpoints: start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (a vLLM older than 0.7.3 may have none)"
		forB = "make room for B: " + l1
	)
	fs := []record.Failure{
		{Phase: "restart", Model: "B", Step: "make room", Error: forB},
		{Phase: "baseline", Model: "B", Step: "activate", Error: forB},
		{Phase: "sleep-level1", Model: "A", Step: "cycle 1 sleep", Error: l1},
		{Phase: "sleep-level1", Model: "B", Step: "activate", Error: forB},
		{Phase: "after-wake", Model: "A", Step: "sleep", Error: l1},
		{Phase: "after-wake", Model: "B", Step: "activate", Error: forB},
		{Phase: "sleep-level2", Model: "A", Step: "cycle 1 sleep", Error: l2},
		{Phase: "sleep-level2", Model: "B", Step: "activate", Error: forB},
		{Phase: "after-wake-l2", Model: "A", Step: "sleep", Error: l2},
		{Phase: "after-wake-l2", Model: "B", Step: "activate", Error: forB},
		{Phase: "switch", Model: "B", Step: "start", Error: forB},
	}
	in := func(phase string, c record.Check) record.Check { c.Phase = phase; return c }
	cs := []record.Check{
		in("restart", record.Evaluate("restart.starts", "A", 3, "==", 3)),
		in("restart", record.Evaluate("restart.starts", "B", 0, "==", 3)),
		in("sleep-level1", record.Evaluate("sleep.level1.successful_cycles", "A", 0, "==", 2)),
		in("sleep-level1", record.Evaluate("sleep.level1.successful_cycles", "B", 0, "==", 2)),
		in("sleep-level2", record.Evaluate("sleep.level2.successful_cycles", "A", 0, "==", 1)),
		in("switch", record.Evaluate("switch.successful_handoffs", "", 0, "==", 2)),
	}
	return fs, cs
}

// whatFailed is summary.md's What failed section of rep, its heading left out.
func whatFailed(t *testing.T, rep Report) string {
	t.Helper()
	s := Summary(rep).Markdown()
	i := strings.Index(s, "## What failed\n\n")
	require.GreaterOrEqual(t, i, 0, "no What failed section in\n%s", s)
	s = s[i+len("## What failed\n\n"):]
	return s[:strings.Index(s, "\n\n")+1]
}

// TestWhatFailedNamesOneCauseOnce: a server without dev mode fails 11
// steps in 7 phases of both models; What failed names the cause once, first,
// with its count, phases, models and fix, and the checks that failed
// because of it after it, on one line; a threshold missed on its own
// (the regression gate's, judged by no phase) stands on its own line.
func TestWhatFailedNamesOneCauseOnce(t *testing.T) {
	raw := sampleRaw()
	raw.Failures, raw.Checks = noDevMode()
	own := record.Evaluate("regression Sleep/model=A/level=1 sec/wake (u-test rule)", "", 12, "within", 10)
	raw.Checks = append([]record.Check{own}, raw.Checks...)
	got := whatFailed(t, Build(raw))
	assert.Equal(t, "- restart / B / make room: make room for B: sleep A level 1: POST /sleep: HTTP 404: 404 page not found: "+
		"the server has no sleep endpoints: start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (a vLLM older than 0.7.3 may have none)"+
		" — the same cause 11 times, in 7 phases (restart, baseline, sleep-level1, after-wake, sleep-level2, after-wake-l2, switch), models A, B\n"+
		"  - fix: start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (and --enable-sleep-mode): vLLM has /sleep, /wake_up and /is_sleeping only then. "+
		"wakebench sets it for the servers it starts, so a wrapper script that drops the environment, or a vLLM older than 0.7.3, has none\n"+
		"  - and 5 checks of those phases: restart.starts (model B) = 0, limit == 3: FAIL; sleep.level1.successful_cycles (model A) = 0, limit == 2: FAIL; "+
		"sleep.level1.successful_cycles (model B) = 0, limit == 2: FAIL; sleep.level2.successful_cycles (model A) = 0, limit == 1: FAIL; "+
		"switch.successful_handoffs = 0, limit == 2: FAIL\n"+
		"- check regression Sleep/model=A/level=1 sec/wake (u-test rule) = 12, limit within 10: FAIL\n", got)
	assert.Equal(t, 1, strings.Count(got, "404 page not found"), "the cause once")
}

// TestWhatFailedOrder: what stops the run, then a server that exited,
// then a phase's own failure, then a check missed on its own, then go
// test's echo of a failed test; a check of a phase with a failure of
// another model is not that failure's consequence, nor is a check of a
// phase whose failure is of the same model in another phase.
func TestWhatFailedOrder(t *testing.T) {
	raw := sampleRaw()
	raw.Failures = []record.Failure{
		{Phase: "baseline", Model: "A", Step: "serve at concurrency 2", Error: "1 of 4 requests failed: HTTP 503: Service Unavailable"},
		{Phase: "sleep-level1", Step: "test TestProtocol/sleep-level1/B", Error: "test TestProtocol/sleep-level1/B failed (see the go test output)"},
		{Phase: "switch", Model: "B", Step: "server exited during the phase", Error: "server B exited: exit status 3 (log /out/B.log); last log lines: injected fault crash-after=3"},
		{Phase: "kv-release", Step: "run stopped during cycle 1 of A", Error: "interrupt: the run was stopped"},
	}
	in := func(phase string, c record.Check) record.Check { c.Phase = phase; return c }
	raw.Checks = []record.Check{
		in("sleep-level1", record.Evaluate("sleep.level1.to_first_token_s.p95", "B", 4, "<=", 3)),
		in("baseline", record.Evaluate("baseline.conc2.failed_requests", "A", 1, "<=", 0)),
		in("baseline", record.Evaluate("baseline.conc2.failed_requests", "B", 2, "<=", 0)),
		in("switch", record.Evaluate("switch.successful_handoffs", "", 1, "==", 2)),
		in("kv-release", record.Evaluate("kv_release.successful_cycles", "A", 0, "==", 1)),
		in("after-wake", record.Evaluate("after-wake.conc2.failed_requests", "A", 1, "<=", 0)),
	}
	causes := WhatFailed(Build(raw))
	var lines []string
	for _, c := range causes {
		lines = append(lines, c.String())
	}
	assert.Equal(t, []string{
		"kv-release / run stopped during cycle 1 of A: interrupt: the run was stopped",
		"switch / B / server exited during the phase: server B exited: exit status 3 (log /out/B.log); last log lines: injected fault crash-after=3",
		"baseline / A / serve at concurrency 2: 1 of 4 requests failed: HTTP 503: Service Unavailable",
		"check sleep.level1.to_first_token_s.p95 (model B) = 4, limit <= 3: FAIL",
		"check baseline.conc2.failed_requests (model B) = 2, limit <= 0: FAIL",
		"check after-wake.conc2.failed_requests (model A) = 1, limit <= 0: FAIL",
		"sleep-level1 / test TestProtocol/sleep-level1/B: test TestProtocol/sleep-level1/B failed (see the go test output)",
	}, lines)
	require.Len(t, causes, 7)
	assert.Equal(t, []string{"kv_release.successful_cycles"}, names(causes[0].Checks), "the stopped run's phase")
	assert.Equal(t, []string{"switch.successful_handoffs"}, names(causes[1].Checks), "the exit's phase")
	assert.Equal(t, []string{"baseline.conc2.failed_requests"}, names(causes[2].Checks), "A's, not B's")
	assert.Equal(t, "A", causes[2].Checks[0].Model)
	assert.Equal(t, lines, func() []string { // the same record, the same order
		var again []string
		for _, c := range WhatFailed(Build(raw)) {
			again = append(again, c.String())
		}
		return again
	}())
}

func names(cs []record.Check) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// TestWhatFailedKeepsCausesApart: errors that end alike in only one
// clause, or that differ in what failed, are different causes; the same
// error at another level, or for another model, is one.
func TestWhatFailedKeepsCausesApart(t *testing.T) {
	raw := sampleRaw()
	raw.Failures = []record.Failure{
		{Phase: "sleep-level1", Model: "A", Step: "cycle 1 wake", Error: "wake A from level 1: wake_up: context deadline exceeded"},
		{Phase: "baseline", Model: "B", Step: "serve at concurrency 2", Error: "request 3: context deadline exceeded"},
		{Phase: "sleep-level2", Model: "A", Step: "cycle 1 wake", Error: "wake A from level 2: wake_up: context deadline exceeded"},
		{Phase: "sleep-level1", Model: "B", Step: "cycle 2 wake", Error: "wake B from level 1: wake_up: HTTP 500 InternalServerError: CUDA Error: out of memory"},
		{Phase: "sleep-level1", Model: "B", Step: "cycle 1 wake", Error: "wake B from level 1: wake_up: context deadline exceeded"},
		{Phase: "traffic", Step: "ideal", Error: "context deadline exceeded"},
	}
	var got []string
	for _, c := range WhatFailed(Build(raw)) {
		got = append(got, c.String())
	}
	assert.Equal(t, []string{
		"sleep-level1 / A / cycle 1 wake: wake A from level 1: wake_up: context deadline exceeded — the same cause 3 times, in 2 phases (sleep-level1, sleep-level2), models A, B",
		"baseline / B / serve at concurrency 2: request 3: context deadline exceeded",
		"sleep-level1 / B / cycle 2 wake: wake B from level 1: wake_up: HTTP 500 InternalServerError: CUDA Error: out of memory",
		"traffic / ideal: context deadline exceeded",
	}, got)
}

// TestKnownCausesHaveTheirFix: each cause wakebench knows, in the words its
// code writes for it, gets its fix line in summary.md; another error none.
func TestKnownCausesHaveTheirFix(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    record.Failure
		fix  string
	}{
		{"no dev mode", record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 sleep",
			Error: "sleep A level 1: POST /sleep: HTTP 404: 404 page not found: the server has no sleep endpoints: start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (a vLLM older than 0.7.3 may have none)"},
			"start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (and --enable-sleep-mode)"},
		{"sleep mode off", record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 sleep",
			Error: "sleep A level 1: POST /sleep: HTTP 500 InternalServerError: Sleep mode is not enabled: start the server with --enable-sleep-mode: the server runs without sleep mode: start vLLM with --enable-sleep-mode"},
			"start vLLM with --enable-sleep-mode: wakebench passes it"},
		{"awake after a sleep", record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 sleep",
			Error: "sleep A level 1: /sleep?level=1 answered 200 but /is_sleeping is false"},
			"the server stayed awake after /sleep: start vLLM with --enable-sleep-mode"},
		{"nothing freed by a sleep", record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 sleep",
			Error: `sleep A level 1: /sleep?level=1 answered 200 but the server did not sleep: its log (/out/A.log) says "Sleep mode freed 0.00 GiB memory": the server did not sleep; start it with --enable-sleep-mode`},
			"the server stayed awake after /sleep: start vLLM with --enable-sleep-mode"},
		{"port in use", record.Failure{Phase: "restart", Model: "B", Step: "start",
			Error: "port 8002, config models[1].port, is already in use by another process: start B (small): server B exited: exit status 1 (log /out/B.log); last log lines: ERROR [Errno 98] error while attempting to bind on address ('127.0.0.1', 8002): address already in use; server log: /out/B.log"},
			"another process holds port 8002: stop it, or set models[1].port to a free port (0: wakebench picks one)"},
		{"no vllm", record.Failure{Phase: "setup",
			Error: `config command "vllm": exec: "vllm": executable file not found in $PATH (install vLLM or set command to a path)`},
			`install vLLM where PATH finds it, or set the config key command to the vllm executable's path (it is "vllm")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := sampleRaw()
			raw.Failures = []record.Failure{tc.f}
			got := whatFailed(t, Build(raw))
			lines := strings.Split(got, "\n")
			require.GreaterOrEqual(t, len(lines), 2, got)
			assert.True(t, strings.HasPrefix(lines[1], "  - fix: "+tc.fix), "the fix follows the cause:\n%s", got)
		})
	}
	raw := sampleRaw()
	raw.Failures = []record.Failure{{Phase: "sleep-level1", Model: "A", Step: "cycle 1 wake", Error: "wake A from level 1: wake_up: HTTP 500 InternalServerError: CUDA Error: out of memory"}}
	assert.NotContains(t, whatFailed(t, Build(raw)), "fix:", "no fix is made up")
}
