package harness

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
)

// TestGateErrorEndsInAWrittenReport: a gate that cannot judge (stopped by
// the -timeout guard's cancel, or a baseline that turned bad after the
// config was checked) leaves a FAIL report.json that names why: a
// failure of PhaseGate, the comparison's check NOT EVALUATED, the gate
// section's error, summary.md's gate heading.
func TestGateErrorEndsInAWrittenReport(t *testing.T) {
	base := filepath.Join(t.TempDir(), "bench.txt")
	require.NoError(t, os.WriteFile(base, []byte("Unit sec/wake better=lower\nBenchmarkSleep/model=A/level=1 1 1 sec/wake\n"), 0o644))
	for _, c := range []struct {
		name     string
		baseline string
		ctx      func() context.Context
		want     string
	}{
		{"stopped", base, func() context.Context {
			ctx, cancel := context.WithCancelCause(t.Context())
			cancel(record.Stopped{Reason: "go test -timeout 10m0s is near"})
			return ctx
		}, "regression gate: baseline: go test -timeout 10m0s is near"},
		{"device", "/dev/zero", t.Context, "regression gate: baseline: /dev/zero is a character device"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := small(t)
			h, err := Open(t.Context(), cfg)
			require.NoError(t, err)
			_, _, err = h.Gate(c.ctx(), c.baseline)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), c.want), err.Error())
			_, err = h.Close(nil)
			require.NoError(t, err)

			rep := readReport(t, cfg.OutDir)
			assert.Equal(t, "FAIL", rep.Status)
			var failed []string
			for _, f := range rep.Failures {
				if f.Phase == PhaseGate {
					failed = append(failed, f.Error)
				}
			}
			require.Len(t, failed, 1, "%+v", rep.Failures)
			assert.True(t, strings.HasPrefix(failed[0], c.want), failed[0])
			var check *record.Check
			for i := range rep.Checks {
				if rep.Checks[i].Name == gate.CheckRegressions {
					check = &rep.Checks[i]
				}
			}
			require.NotNil(t, check)
			assert.Equal(t, record.NotEvaluated, check.Verdict)
			assert.True(t, check.Fails())
			require.NotNil(t, rep.Gate)
			assert.True(t, strings.HasPrefix(rep.Gate.Error, c.want), rep.Gate.Error)
			summary, err := os.ReadFile(filepath.Join(cfg.OutDir, "summary.md"))
			require.NoError(t, err)
			assert.Contains(t, string(summary), "## Regression gate: NOT EVALUATED\n\nbaseline "+c.baseline+": "+c.want)
		})
	}
}

// TestGateThatJudgedNothingFailsTheRun is issue 47's first item: against
// one baseline run whose level-1 cycles are two (fewer than the one-run
// rule gates on), the gate judges none of the run's metrics. The
// comparison's check is then NOT EVALUATED and required, and the run
// FAILs, each output saying how many it judged and why not the rest
// (compare.txt's head, summary.md's gate heading, report.json's gate
// coverage, the check's reason) — unless thresholds.regression_min_judged
// is 0, which accepts it and says so.
func TestGateThatJudgedNothingFailsTheRun(t *testing.T) {
	base := filepath.Join(t.TempDir(), "bench.txt")
	require.NoError(t, os.WriteFile(base, []byte("Unit sec/wake better=lower\nUnit sec/sleep better=lower\nUnit sec/first-token better=lower\n"+
		"BenchmarkSleep/model=A/level=1 1 0.1 sec/sleep 0.05 sec/wake 0.06 sec/first-token\n"+
		"BenchmarkSleep/model=A/level=1 1 0.1 sec/sleep 0.05 sec/wake 0.06 sec/first-token\n"), 0o644))
	for _, c := range []struct {
		minJudged int
		verdict   string
		status    string
	}{
		{1, record.NotEvaluated, "FAIL"},
		{0, "PASS", "PASS"},
	} {
		t.Run(fmt.Sprint("min judged ", c.minJudged), func(t *testing.T) {
			cfg := small(t)
			cfg.Thresholds.RegressionMinJudged = c.minJudged
			h, err := Open(t.Context(), cfg)
			require.NoError(t, err)
			h.rec.PhaseRan("sleep-level1")
			for range 2 { // the wake three times as slow
				h.rec.Writers().Cycles.Add("A", record.Cycle{Level: 1, OK: true, SleepS: 0.1, WakeAPIS: 0.15, ToFirstTokenS: 0.16, ResidualGiB: math.NaN(),
					ReleaseS: math.NaN(), FreedGiB: math.NaN(), HeldS: math.NaN(), HeldPastWakeS: math.NaN()})
			}
			_, table, err := h.Gate(t.Context(), base)
			require.NoError(t, err)
			rep, err := h.Close(nil)
			require.NoError(t, err)
			assert.Equal(t, c.status, rep.Status)

			var check *record.Check
			for i := range rep.Checks {
				if rep.Checks[i].Name == gate.CheckRegressions {
					check = &rep.Checks[i]
				}
			}
			require.NotNil(t, check)
			assert.Equal(t, c.verdict, check.Verdict)
			assert.Equal(t, c.minJudged > 0, check.Fails())
			assert.Contains(t, check.Reason, "judged 0 of 3 metrics")
			assert.Contains(t, check.Reason, "not judged: 3 with fewer than 5 samples in a run")
			assert.Contains(t, check.Reason, "9 more baseline runs needed")
			assert.Contains(t, check.Reason, "worst change among them Sleep/model=A/level=1 sec/wake +200.0 %")

			require.NotNil(t, rep.Gate)
			assert.Equal(t, record.GateCoverage{Judged: 0, Metrics: 3, Unjudged: rep.Gate.Coverage.Unjudged}, rep.Gate.Coverage)
			require.Len(t, rep.Gate.Coverage.Unjudged, 1)
			assert.Equal(t, 3, rep.Gate.Coverage.Unjudged[0].Metrics)
			assert.Equal(t, c.minJudged, rep.Gate.MinJudged)

			compare, err := os.ReadFile(filepath.Join(cfg.OutDir, "compare.txt"))
			require.NoError(t, err)
			assert.Equal(t, table, string(compare))
			summary, err := os.ReadFile(filepath.Join(cfg.OutDir, "summary.md"))
			require.NoError(t, err)
			if c.minJudged > 0 {
				assert.Contains(t, table, "\nNOT EVALUATED: judged 0 of 3 metrics, fewer than thresholds.regression_min_judged (1) asks")
				assert.Contains(t, string(summary), "## Regression gate: NOT EVALUATED (0 regressions; judged 0 of 3 metrics, at least 1 needed: thresholds.regression_min_judged;")
				assert.Contains(t, string(summary), "check regressions against baseline, limit == 0: NOT EVALUATED (judged 0 of 3 metrics")
			} else {
				assert.Contains(t, table, "\njudged 0 of 3 metrics (thresholds.regression_min_judged: 0)\nnot judged:\n  3 with fewer than 5 samples in a run")
				assert.Contains(t, string(summary), "## Regression gate (0 regressions; judged 0 of 3 metrics, at least 0 needed")
			}
			assert.Contains(t, string(summary), "- not judged: 3 with fewer than 5 samples in a run")
		})
	}
}
