package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/server"
)

// faultRun sets up a small run with faults injected into model A's server,
// runs phase, closes the harness and returns the phase error and the report
// as written to disk. It checks the guarantees every fault must keep: the
// report is valid JSON with status FAIL, and no server process survives.
func faultRun(t *testing.T, faults string, tweak func(*config.Config), phase func(ctx context.Context, h *Run) error) (report.Report, error) {
	t.Helper()
	cfg := small(t)
	cfg.Models[0].SimFaults = faults
	if tweak != nil {
		tweak(&cfg)
	}
	require.NoError(t, cfg.Validate())
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	var pids []int
	phaseErr := phase(t.Context(), h)
	for _, l := range h.Labels() {
		if pid := h.pool.Procs().PID(l); pid != 0 {
			pids = append(pids, pid)
		}
	}
	_, err = h.Close(nil)
	require.NoError(t, err)
	for _, pid := range pids {
		assert.False(t, server.GroupAlive(pid), "no server process survives")
	}
	rep := readReport(t, cfg.OutDir)
	assert.Equal(t, "FAIL", rep.Status)
	return rep, phaseErr
}

func restartThen(f func(ctx context.Context, h *Run) error) func(ctx context.Context, h *Run) error {
	return func(ctx context.Context, h *Run) error {
		if _, err := (protocol.Restart{Env: h.env}).Run(ctx, "A", func(string, ...any) {}); err != nil {
			return err
		}
		return f(ctx, h)
	}
}

func baseline(ctx context.Context, h *Run) error {
	_, err := protocol.Baseline{Env: h.env}.Run(ctx, "A", func(string, ...any) {})
	return err
}

func cycles(level int) func(ctx context.Context, h *Run) error {
	return func(ctx context.Context, h *Run) error {
		_, err := protocol.Sleep{Env: h.env, Level: level}.Run(ctx, "A", func(string, ...any) {})
		return err
	}
}

func kvCycles(ctx context.Context, h *Run) error {
	_, err := protocol.KVRelease{Env: h.env}.Run(ctx, "A", func(string, ...any) {})
	return err
}

func TestFaultsAreNamed(t *testing.T) {
	tests := []struct {
		name   string
		faults string
		tweak  func(*config.Config)
		phase  func(ctx context.Context, h *Run) error
		want   []string       // in the phase error
		where  record.Failure // phase, model, step of the first failure
	}{
		{"server exits during start-up", "crash-at-start", nil,
			func(ctx context.Context, h *Run) error {
				_, err := protocol.Restart{Env: h.env}.Run(ctx, "A", func(string, ...any) {})
				return err
			},
			[]string{"server A exited: exit status 1", "injected fault crash-at-start"}, record.Failure{Phase: "restart", Model: "A", Step: "start"}},
		// 2 starts = 2 probes; the 3rd completion is in the baseline.
		{"server exits during a phase", "crash-after=3", nil, restartThen(baseline),
			[]string{"server A exited: exit status 3"}, record.Failure{Phase: "baseline", Model: "A", Step: "serve at concurrency 2"}},
		{"server exits during a stream", "crash-mid-stream=3", nil, restartThen(baseline),
			[]string{"server A exited: exit status 3"}, record.Failure{Phase: "baseline", Model: "A", Step: "serve at concurrency 2"}},
		{"truncated stream", "truncate-stream=3", nil, restartThen(baseline),
			[]string{"1 of 4 requests failed", "stream ended without [DONE]"}, record.Failure{Phase: "baseline", Model: "A", Step: "serve at concurrency 2"}},
		// Requests of 2 tokens: the fault of the third token acts before
		// the last (issue 48: it never fired, and the run passed).
		{"truncated short stream", "truncate-stream=3", func(c *config.Config) { c.Protocol.MaxTokens = 2 }, restartThen(baseline),
			[]string{"1 of 4 requests failed", "stream ended without [DONE]"}, record.Failure{Phase: "baseline", Model: "A", Step: "serve at concurrency 2"}},
		{"HTTP 503", "error-status=4:503", nil, restartThen(baseline),
			[]string{"1 of 4 requests failed", "HTTP 503"}, record.Failure{Phase: "baseline", Model: "A", Step: "serve at concurrency 2"}},
		{"error event inside a 200 stream", "error-event=3", nil, restartThen(baseline),
			[]string{"error event in stream", "injected fault error-event"}, record.Failure{Phase: "baseline", Model: "A", Step: "serve at concurrency 2"}},
		{"stalled stream", "stall-stream=3:30", func(c *config.Config) { c.Timeouts.RequestS = 0.5 }, restartThen(baseline),
			[]string{"1 of 4 requests failed", "context deadline exceeded"}, record.Failure{Phase: "baseline", Model: "A", Step: "serve at concurrency 2"}},
		{"wake answers 500", "wake-fail=2", nil, restartThen(cycles(1)),
			[]string{"wake A from level 1: wake_up", "HTTP 500", "CUDA Error: out of memory"}, record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 2 wake"}},
		{"wake never returns", "wake-hang", func(c *config.Config) { c.Timeouts.WakeS = 0.5 }, restartThen(cycles(1)),
			[]string{"wake A from level 1: wake_up: no answer within 500ms"}, record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 wake"}},
		{"level-2 wake without a real reload", "no-reload", nil, restartThen(cycles(2)),
			[]string{"garbage output", "reload_weights"}, record.Failure{Phase: "sleep-level2", Model: "A", Step: "cycle 1 first token after wake"}},
		{"prefix cache never reset after a level-2 wake", "prefix-reset-false", nil, restartThen(cycles(2)),
			[]string{"wake A from level 2: reset_prefix_cache", `{"success": false}`}, record.Failure{Phase: "sleep-level2", Model: "A", Step: "cycle 1 wake"}},
		// vLLM's newest sleep API (issue 24): the pool verifies, not assumes.
		{"wake answers sleeping", "wake-stays-asleep", proposed, restartThen(cycles(1)),
			[]string{"wake A from level 1", `answered {"status":"sleeping"}`, "still asleep: scheduler=paused"}, record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 wake"}},
		{"a sleep-mode operation stays in flight", "stuck-op=wake_up", proposed, restartThen(cycles(1)),
			[]string{"wake A from level 1", "hung sleep-mode operation wake (1 in flight)"}, record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 wake"}},
		// vLLM ≥ 0.32 counts each operation by status (#52864): one it
		// counted failed though its call answered success is named.
		{"a sleep-mode operation counted failed", "errored-op=wake_up", nil, restartThen(cycles(1)),
			[]string{"wake A from level 1", `the server counted a failed sleep-mode operation wake (vllm:rl_sleep_mode_operations_total{operation="wake",status="error"} 0 → 1), though the wake call (and every call since the last verification) answered success`}, record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 wake"}},
		// Issue 25: a full host fails the level-1 sleep's pinned copy and
		// the engine dies (ls1intum/edutelligence#583): named, host memory said.
		{"host out of memory at a level-1 sleep", "host-oom", nil, restartThen(cycles(1)),
			[]string{"sleep A level 1", "HTTP 500", "pinned host memory"}, record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 sleep"}},
		{"a KV release stays in flight", "stuck-op=release_kv_cache_memory", proposed, restartThen(kvCycles),
			[]string{"release without a pause", "hung sleep-mode operation release_kv_cache_memory (1 in flight)"}, record.Failure{Phase: "kv-release", Model: "A", Step: "release without a pause"}},
		{"a KV discard fails", "rpc-fail=release_kv_cache_memory", proposed, restartThen(kvCycles),
			[]string{"release_kv_cache_memory A", "HTTP 500", "unknown"}, record.Failure{Phase: "kv-release", Model: "A", Step: "cycle 1 release_kv_cache_memory"}},
		// The same faults on v0.31 (no JSON answer, no resource states, no
		// operation gauges): what it does say is named.
		{"wake answers sleeping (v0.31)", "wake-stays-asleep", v031, restartThen(cycles(1)),
			[]string{"wake A from level 1", "wake answered 200 but /is_sleeping is still true"}, record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 wake"}},
		{"a memory RPC fails (a release)", "rpc-fail=sleep", v031, restartThen(cycles(1)),
			[]string{"sleep A level 1", "HTTP 500", "rpc-fail=sleep"}, record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 sleep"}},
		{"a memory RPC fails", "rpc-fail=sleep", proposed, restartThen(cycles(1)),
			[]string{"sleep A level 1", "HTTP 500", "unknown"}, record.Failure{Phase: "sleep-level1", Model: "A", Step: "cycle 1 sleep"}},
		{"a sleep option this vLLM lacks", "", func(c *config.Config) {
			c.Sim.Era = "c" // v0.31: argparse refuses the v0.32 option, exit 2
			c.Models[0].ExtraArgs = append(c.Models[0].ExtraArgs, "--sleep-mode-offload-cudagraph")
		},
			func(ctx context.Context, h *Run) error {
				_, err := protocol.Restart{Env: h.env}.Run(ctx, "A", func(string, ...any) {})
				return err
			},
			[]string{"--sleep-mode-offload-cudagraph is not in this vLLM (needs ≥ v0.32, vLLM #59160)", "exit status 2"}, record.Failure{Phase: "restart", Model: "A", Step: "start"}},
		{"port already in use", "", func(c *config.Config) { c.Models[0].Port = busyPort(t) },
			func(ctx context.Context, h *Run) error {
				_, err := protocol.Restart{Env: h.env}.Run(ctx, "A", func(string, ...any) {})
				return err
			},
			[]string{"address already in use"}, record.Failure{Phase: "restart", Model: "A", Step: "start"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // independent runs: own out dir, ports and simulated GPU
			start := time.Now()
			rep, err := faultRun(t, tt.faults, tt.tweak, tt.phase)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
			assert.Less(t, time.Since(start), 20*time.Second, "a fault ends the phase promptly")
			require.NotEmpty(t, rep.Failures)
			got := rep.Failures[0]
			assert.Equal(t, tt.where, record.Failure{Phase: got.Phase, Model: got.Model, Step: got.Step})
			assert.NotEmpty(t, got.Error)
		})
	}
}

// proposed runs vllmsim as the API open vLLM PRs propose (era proposed):
// a wake's JSON answer, the resource states and the operation gauges, the
// only ways these faults show before the first token (no release has them,
// docs/vllm-api.md §0).
func proposed(c *config.Config) { c.Sim.Era = "proposed" }

// v031 runs vllmsim as vLLM 0.31 (era c): empty answers, no operation
// metrics, no resource states.
func v031(c *config.Config) { c.Sim.Era = "c" }

// busyPort holds a loopback port for the test's duration.
func busyPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// TestMemoryNotReleasedFailsItsThreshold: a sleep that frees nothing (the
// vLLM 0.14/0.15 regression) passes every step but fails the residual and
// release thresholds, by name.
func TestMemoryNotReleasedFailsItsThreshold(t *testing.T) {
	rep, err := faultRun(t, "no-release", func(c *config.Config) {
		c.Thresholds.MaxResidualGiB = 0.5
		c.Thresholds.MinL1ReleasePercent = 80
	}, restartThen(cycles(1)))
	require.NoError(t, err, "every call succeeded")
	assert.InDelta(t, 0.75, rep.Models["A"].Sleep["1"].ResidualGiB.Median, 1e-9, "0.25 residual + 0.5 GiB of weights kept")
	var failed []string
	for _, c := range rep.Checks {
		if c.Verdict == "FAIL" {
			failed = append(failed, c.String())
		}
	}
	// 0.75 of 4.75 GiB stays: 84 % released passes 80 %, the residual fails.
	assert.Equal(t, []string{"sleep.level1.residual_gib.median (model A) = 0.75, limit <= 0.5: FAIL"}, failed)
	assert.Empty(t, rep.Failures, "nothing failed outright: the thresholds say what is wrong")
}

// TestSilentCorruptionFailsTheRun: after a wake the model answers with
// status 200 and plausible text, other tokens than before it slept: every
// step succeeds, the garbage check passes, and the run fails all the same,
// naming the probe, the token and the wake, in report.json and summary.md.
func TestSilentCorruptionFailsTheRun(t *testing.T) {
	for fault, want := range map[string]string{
		"diverge-after-wake=5": `probe "short" diverged from its answer before the first sleep at token 5 (token)`,
		"logprob-drift=0.2":    `probe "short" diverged from its answer before the first sleep at token 1 (logprob)`,
	} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			var dir string
			rep, err := faultRun(t, fault, func(c *config.Config) { dir = c.OutDir }, restartThen(cycles(2)))
			require.NoError(t, err, "every step succeeded")
			require.Len(t, rep.Failures, 1)
			f := rep.Failures[0]
			assert.Equal(t, record.Failure{Phase: "sleep-level2", Model: "A", Step: "correctness after sleep-level2 wake 1"}, record.Failure{Phase: f.Phase, Model: f.Model, Step: f.Step})
			assert.Contains(t, f.Error, want)
			var failed []string
			for _, c := range rep.Checks {
				if c.Fails() {
					failed = append(failed, c.Name)
				}
			}
			assert.Equal(t, []string{"correctness.sleep-level2.mismatches"}, failed)
			st := rep.Models["A"].Correctness.Stages[record.PhaseSleepL2]
			assert.Equal(t, 2, st.Mismatches, "both probes, in the one level-2 cycle")
			summary, err := os.ReadFile(filepath.Join(dir, "summary.md"))
			require.NoError(t, err)
			assert.Contains(t, string(summary), "sleep-level2 / A / correctness after sleep-level2 wake 1: "+want)
		})
	}
}

func TestBadSetup(t *testing.T) {
	cfg := small(t)
	cfg.Command = "/nonexistent/vllm"
	cfg.Memory = "none"
	_, err := Open(t.Context(), cfg)
	assert.ErrorContains(t, err, `config command "/nonexistent/vllm"`)

	cfg = small(t)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cfg.OutDir = filepath.Join(file, "out")
	_, err = Open(t.Context(), cfg)
	assert.ErrorContains(t, err, "out_dir "+cfg.OutDir)
}

// TestAPIKeyNeverWritten: with an API key the run works and the key
// appears in no output file.
func TestAPIKeyNeverWritten(t *testing.T) {
	cfg := small(t)
	cfg.APIKey = "sk-wakebench-secret-4242"
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	_, err = protocol.Baseline{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	_, err = h.Close(nil)
	require.NoError(t, err)
	entries, err := os.ReadDir(cfg.OutDir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(cfg.OutDir, e.Name()))
		require.NoError(t, err)
		assert.False(t, strings.Contains(string(b), cfg.APIKey), "%s holds the API key", e.Name())
	}
}

// TestDiskFull puts out_dir on a 32 KiB tmpfs: the run goes on, Close says
// which output could not be written and why, the streamed files hold only
// whole lines, the status is FAIL and what the run prints names what is
// missing, and no server is left.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("needs root to mount a small tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	cfg := small(t)
	cfg.OutDir = dir
	cfg.Protocol.SleepL1Cycles = 8
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	_, err = protocol.Sleep{Env: h.env, Level: 1}.Run(t.Context(), "A", func(string, ...any) {})
	require.NoError(t, err, "a full disk does not stop the measurements")
	pid := h.pool.Procs().PID("A")
	rep, err := h.Close(nil)
	require.Error(t, err)
	t.Log(err)
	assert.ErrorContains(t, err, "no space left on device")
	assert.ErrorContains(t, err, dir, "the error names the output")
	assert.False(t, server.GroupAlive(pid))
	assert.Equal(t, "FAIL", rep.Status, "an output that could not be written fails the run")

	for _, name := range []string{"samples.csv", "metrics.jsonl"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		if len(b) > 0 {
			assert.Equal(t, byte('\n'), b[len(b)-1], "%s ends with a whole line", name)
		}
	}
	end := Ending(rep, err, dir)
	assert.Contains(t, end, "wakebench: status FAIL")
	assert.Contains(t, end, "not all outputs were written")
	assert.NotContains(t, end, "status PASS")
}

// TestOneFailedRequestCostsOneRequest: a truncated stream at the first
// concurrency fails one request; every concurrency still runs and is
// recorded (planned_performance stays whole), and max_failed_requests
// decides: within it the phase passes, beyond it the failure names the
// concurrency and the first error.
func TestOneFailedRequestCostsOneRequest(t *testing.T) {
	for _, limit := range []int{0, 1} {
		t.Run(fmt.Sprint("max_failed_requests=", limit), func(t *testing.T) {
			t.Parallel()
			cfg := small(t)
			cfg.Models[0].SimFaults = "truncate-stream=3" // 2 probes at start, then the third completion
			cfg.Protocol.Concurrency = []int{2, 4}
			cfg.Thresholds.MaxFailedRequests = limit
			require.NoError(t, cfg.Validate())
			h, err := Open(t.Context(), cfg)
			require.NoError(t, err)
			_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
			require.NoError(t, err)
			runsOut, err := protocol.Baseline{Env: h.env}.Run(t.Context(), "A", t.Logf)
			runs := runsOut.Value
			checks := runsOut.Checks
			rep, cerr := h.Close(nil)
			require.NoError(t, cerr)

			require.Len(t, runs, 2, "the concurrency after the failed request runs too")
			assert.Equal(t, 3, runs[0].Success)
			assert.Equal(t, 4, runs[1].Success)
			assert.Equal(t, 8, rep.Requests.PlannedPerformance)
			assert.Equal(t, 1, rep.Requests.Failure, "one failed request is one failed request")
			assert.Len(t, checks, 4, "both concurrencies are checked")
			if limit == 0 {
				require.Error(t, err)
				assert.ErrorContains(t, err, "1 of 4 requests failed")
				assert.ErrorContains(t, err, "(max_failed_requests 0)")
				assert.Equal(t, "FAIL", rep.Status)
				require.Len(t, rep.Failures, 1)
				assert.Equal(t, "serve at concurrency 2", rep.Failures[0].Step)
			} else {
				assert.NoError(t, err)
				assert.Empty(t, rep.Failures)
				assert.Equal(t, "PASS", rep.Status)
			}
		})
	}
}

// TestFailedStartIsStopped: a start that never becomes ready is stopped
// when it times out, so the next model starts alone, its own start is not
// blamed on making room, and no phase serves the model that failed.
func TestFailedStartIsStopped(t *testing.T) {
	cfg := small(t)
	cfg.Models[0].SimFaults = "start-hang"
	cfg.Timeouts.StartS = 2
	require.NoError(t, cfg.Validate())
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	defer h.Close(nil)

	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.Error(t, err)
	assert.ErrorContains(t, err, "no answer within 2s")
	assert.False(t, h.pool.Running("A"))
	assert.Zero(t, h.pool.Procs().PID("A"), "the server that failed to start is stopped")

	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "B", t.Logf)
	require.NoError(t, err, "B starts alone; nothing is blamed on making room for it")
	assert.Equal(t, []string{"B"}, h.pool.Awake())
	_, err = protocol.Baseline{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.Error(t, err, "A's start timed out once: the next phase fails at once, not spawning and waiting again")
	assert.ErrorContains(t, err, "baseline A: activate")
	assert.ErrorContains(t, err, "never became ready (timeouts.start_s 2 s) at an earlier start, so it is not started again")
	assert.Zero(t, h.pool.Procs().PID("A"))
}

// TestLineFileKeepsWholeLines fills an 8 KiB tmpfs with lines of a size
// that does not divide a page: the write that hits the end is cut back, so
// the file ends with a whole line, and Close says how many were lost.
func TestLineFileKeepsWholeLines(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("needs root to mount a small tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	lf, err := createLineFile(filepath.Join(dir, "m.jsonl"), "m.jsonl")
	require.NoError(t, err)
	line := []byte(strings.Repeat("x", 999) + "\n")
	for range 12 {
		lf.write(line)
	}
	err = lf.Close()
	require.Error(t, err)
	assert.ErrorContains(t, err, "m.jsonl: 4 write(s) lost")
	assert.ErrorContains(t, err, "no space left on device")
	b, rerr := os.ReadFile(filepath.Join(dir, "m.jsonl"))
	require.NoError(t, rerr)
	assert.Equal(t, 8*len(line), len(b), "8 whole lines fit in 8 KiB; the 9th was cut back")
}

// TestACrashIsReportedOnce: a server that crashes in the baseline fails
// the baseline, naming the exit; the next phase starts it afresh instead
// of failing a second time on the same crash.
func TestACrashIsReportedOnce(t *testing.T) {
	cfg := small(t)
	cfg.Models[0].SimFaults = "crash-after=3" // 2 probes at start; the baseline's first request
	// The fault holds for every process of A: without the oracle's probes
	// the fresh server's cycles make 2 requests, within the 3.
	cfg.Protocol.CorrectnessMaxTokens = 0
	require.NoError(t, cfg.Validate())
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	_, err = protocol.Baseline{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.Error(t, err)
	assert.ErrorContains(t, err, "server A exited: exit status 3")
	cyclesOut, err := protocol.Sleep{Env: h.env, Level: 1}.Run(t.Context(), "A", t.Logf) // 2 cycles, 2 probes: the fresh server lives
	cycles := cyclesOut.Value
	require.NoError(t, err, "the next phase runs on a fresh server")
	assert.Len(t, cycles, 2)
	rep, err := h.Close(nil)
	require.NoError(t, err)
	require.Len(t, rep.Failures, 1, "one crash, one failure: %+v", rep.Failures)
	assert.Equal(t, "baseline", rep.Failures[0].Phase)
}

// TestSamplerErrorsAreReported: GPU memory reads that fail mid-run (here
// the simulated GPU disappears, as a GPU that falls off the bus) are
// counted in memory.note with the first error, and fail a check.
func TestSamplerErrorsAreReported(t *testing.T) {
	cfg := small(t)
	cfg.Protocol.SampleHz = 100
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	_, err = protocol.Restart{Env: h.env}.Run(t.Context(), "A", t.Logf)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(h.tmp, "gpu")))
	time.Sleep(200 * time.Millisecond)
	rep, err := h.Close(nil)
	require.NoError(t, err)
	assert.Equal(t, "FAIL", rep.Status)
	assert.Contains(t, rep.Memory.Note, "GPU memory reads failed (first: ")
	var c record.Check
	for _, x := range rep.Checks {
		if x.Name == "memory.sampler_errors" {
			c = x
		}
	}
	assert.Equal(t, "FAIL", c.Verdict)
	assert.Positive(t, c.Value)
}

// TestUnreadableMetricsIsNoPass: a hung wake that readable /metrics would
// name (TestFaultsAreNamed) behind a /metrics answering 500 or garbage used
// to PASS silently. Every step still succeeds (the wake answered and
// /is_sleeping says awake), and the report says which verification could
// not be made: engine.verified NOT EVALUATED with the reason, required, so
// the run FAILs (faultRun asserts it).
func TestUnreadableMetricsIsNoPass(t *testing.T) {
	for _, broken := range []string{"500", "garbage"} {
		t.Run(broken, func(t *testing.T) {
			t.Parallel()
			rep, err := faultRun(t, "stuck-op=wake_up,metrics-broken="+broken, nil, restartThen(cycles(1)))
			require.NoError(t, err, "every call answered as it should")
			var c *record.Check
			for i := range rep.Checks {
				if rep.Checks[i].Name == "engine.verified" && rep.Checks[i].Model == "A" {
					c = &rep.Checks[i]
				}
			}
			require.NotNil(t, c, "the unverified wakes are reported: %v", rep.Checks)
			assert.Equal(t, record.NotEvaluated, c.Verdict)
			assert.True(t, c.Fails())
			assert.Contains(t, c.Reason, "GET /metrics")
			assert.Contains(t, c.Reason, "no check for an unknown resource, a hung operation or an errored one could be made")
		})
	}
}

// TestFailuresAreACopyOfThemAlone: Run.Failures (what TestMain reads after
// the servers stop) hands out the failures recorded, as a copy the record
// does not share.
func TestFailuresAreACopyOfThemAlone(t *testing.T) {
	h, err := Open(t.Context(), small(t))
	require.NoError(t, err)
	defer func() { _, _ = h.Close(nil) }()
	assert.Empty(t, h.Failures())
	h.rec.Fail(record.Failure{Phase: "restart", Model: "A", Error: "boom"})
	got := h.Failures()
	require.Len(t, got, 1)
	assert.Equal(t, "boom", got[0].Error)
	got[0].Error = "changed"
	assert.Equal(t, "boom", h.Failures()[0].Error, "the record's own failure is untouched")
}
