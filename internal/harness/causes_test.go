package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/simtest"
)

// TestKnownCausesGetTheirFix: each cause What failed knows, made for real
// on vllmsim (or the backend), is recorded with an error that says what
// to change, and What failed's first cause carries its fix: the fix
// table matches the words the code writes, not a copy of them.
func TestKnownCausesGetTheirFix(t *testing.T) {
	sleepA := func(ctx context.Context, h *Run) error {
		_, err := protocol.Sleep{Env: h.env, Level: 1}.Run(ctx, "A", func(string, ...any) {})
		return err
	}
	port := busyPort(t)
	for _, tc := range []struct {
		name           string
		tweak          func(*config.Config)
		inError, inFix string
	}{
		// A server that ignores --enable-sleep-mode (--no-enable-sleep-mode in
		// extra_args is refused at load): /sleep answers 200, nothing is freed.
		{"sleep mode off", func(c *config.Config) { c.Models[0].SimFaults = "sleep-ignored" },
			"start it with --enable-sleep-mode", "--enable-sleep-mode"},
		{"port in use", func(c *config.Config) { c.Models[0].Port = port },
			fmt.Sprintf("port %d, config models[0].port, is already in use", port), fmt.Sprintf("another process holds port %d: stop it, or set models[0].port", port)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := faultRun(t, "", tc.tweak, sleepA)
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.inError, "the phase's error says what to change")
			require.NotEmpty(t, rep.Failures)
			assert.Contains(t, rep.Failures[0].Error, tc.inError, "report.json's failure too")
			causes := report.WhatFailed(rep)
			require.NotEmpty(t, causes)
			assert.Contains(t, causes[0].Fix, tc.inFix)
		})
	}

	t.Run("no dev mode", func(t *testing.T) {
		t.Parallel()
		// A server wakebench did not give VLLM_SERVER_DEV_MODE=1 (a wrapper
		// that drops the environment): the last value of a variable wins.
		f, rec, cfg := simtest.PoolWith(t, nil, nil, func(o *pool.Options) {
			env := o.Env
			o.Env = func(m config.Model) []string { return append(env(m), "VLLM_SERVER_DEV_MODE=0") }
		})
		p := protocol.NewEnv(cfg, f, rec, nil)
		_, err := protocol.Sleep{Env: p, Level: 1}.Run(t.Context(), "A", func(string, ...any) {})
		require.Error(t, err)
		assert.ErrorContains(t, err, "VLLM_SERVER_DEV_MODE=1")
		raw := rec.Raw()
		require.NotEmpty(t, raw.Failures)
		assert.Contains(t, raw.Failures[0].Error, "VLLM_SERVER_DEV_MODE=1", "report.json's failure names it")
		causes := report.WhatFailed(report.Build(raw))
		require.NotEmpty(t, causes)
		assert.Contains(t, causes[0].Fix, "start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment")
		require.NotEmpty(t, causes[0].Checks, "the phase's checks follow from it")
		assert.Equal(t, "sleep.level1.successful_cycles", causes[0].Checks[0].Name)
	})

	t.Run("no vllm", func(t *testing.T) {
		t.Parallel()
		cfg := small(t)
		cfg.Command = "wakebench-no-such-vllm"
		cfg.Memory = "none"
		_, err := Open(t.Context(), cfg)
		require.Error(t, err)
		require.NoError(t, WriteAborted(cfg, "setup", err), "what main_test.go does with a setup error")
		summary, err := os.ReadFile(filepath.Join(cfg.OutDir, "summary.md"))
		require.NoError(t, err)
		assert.Contains(t, string(summary), `  - fix: install vLLM where PATH finds it, or set the config key command to the vllm executable's path (it is "wakebench-no-such-vllm")`)
		rep := readReport(t, cfg.OutDir)
		require.Len(t, rep.Failures, 1)
		assert.Equal(t, record.Failure{Phase: "setup", Error: rep.Failures[0].Error}, rep.Failures[0])
	})
}
