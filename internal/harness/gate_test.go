package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
				if rep.Checks[i].Name == checkRegressions {
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
