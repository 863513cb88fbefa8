package pool_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/testmain"
)

// fakeHost is a file-system root whose /proc/meminfo says availGiB is
// available and whose runner is in no memory cgroup.
func fakeHost(t *testing.T, availGiB float64) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc"), 0o755))
	kb := uint64(availGiB * (1 << 20))
	meminfo := fmt.Sprintf("MemTotal:       %d kB\nMemAvailable:   %d kB\n", kb*2, kb)
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte(meminfo), 0o644))
	return root
}

// TestHostHeadroomBeforeLevel1Sleep: on a host with less available than a
// model's pinned backup plus min_host_headroom_gib, a level-1 sleep is not
// sent (the server stays awake) and the error names the model, the GiB
// needed, the GiB free and that they came from MemAvailable; a level-2
// sleep (no host copy) is sent; with the headroom off, or on a host with
// room, the level-1 sleep is sent.
func TestHostHeadroomBeforeLevel1Sleep(t *testing.T) {
	testmain.Long(t)
	for _, tc := range []struct {
		name     string
		availGiB float64
		headroom float64
		level    int
		short    bool
	}{
		{"short host", 0.5, 1, 1, true},
		{"short host, level 2", 0.5, 1, 2, false},
		{"short host, check off", 0.5, 0, 1, false},
		{"room", 64, 1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _ := simtest.PoolWith(t, nil, func(c *config.Config) { c.Thresholds.MinHostHeadroomGiB = tc.headroom },
				func(o *pool.Options) { o.HostRoot = fakeHost(t, tc.availGiB) })
			ctx := t.Context()
			require.NoError(t, f.Activate(ctx, "A"))
			backup, how := f.Memory().BackupGiB("A")
			require.Positive(t, backup, how)
			_, err := f.Run(ctx, "A", pool.Sleep(tc.level))
			if !tc.short {
				require.NoError(t, err)
				assert.True(t, f.Asleep("A"))
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, pool.ErrHostShort), err)
			// simtest's servers really allocate 1/20 of the backup (sim.host_scale).
			for _, want := range []string{"sleep A level 1 not sent", fmt.Sprintf("A needs %.2f GiB", backup*0.05+tc.headroom),
				"0.50 GiB free", "MemAvailable", "Model loading took", "× sim.host_scale 0.05"} {
				assert.ErrorContains(t, err, want)
			}
			assert.False(t, f.Asleep("A"), "the sleep was not sent")
			s, err := f.Requests().Probe(ctx, "A")
			require.NoError(t, err, "A is awake and serves")
			assert.NotEmpty(t, s.Tokens)
		})
	}
}

// TestHostHeadroomCountsABackupOnce: vLLM keeps a server's pinned backup
// from its first level-1 sleep on (pinned by cumem.py, cached by PyTorch's host allocator: pytorch/pytorch#275): a later level-1 sleep of
// the same server needs only the headroom free, though the backup now
// counts as used; a new server process needs its backup again.
func TestHostHeadroomCountsABackupOnce(t *testing.T) {
	root := fakeHost(t, 2)
	f, _, _ := simtest.PoolWith(t, nil, func(c *config.Config) {
		c.Thresholds.MinHostHeadroomGiB = 1
		c.Sim.HostScale = 1
	}, func(o *pool.Options) { o.HostRoot = root })
	ctx := t.Context()
	require.NoError(t, f.Activate(ctx, "A"))
	backup, how := f.Memory().BackupGiB("A")
	require.Greater(t, backup, 0.3, how)
	_, err := f.Run(ctx, "A", pool.Sleep(1)) // needs backup + 1 ≤ 2
	require.NoError(t, err)
	_, err = f.Run(ctx, "A", pool.Wake())
	require.NoError(t, err)
	// The backup is held now: the host has less free, but enough for the headroom.
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte("MemTotal: 4194304 kB\nMemAvailable: 1258291 kB\n"), 0o644))
	_, err = f.Run(ctx, "A", pool.Sleep(1))
	require.NoError(t, err, "the second level-1 sleep of the same server needs no second backup")
	_, err = f.Run(ctx, "A", pool.Wake())
	require.NoError(t, err)
	require.NoError(t, f.Stop("A"))
	require.NoError(t, f.Activate(ctx, "A")) // a new process: its backup is not made yet
	_, err = f.Run(ctx, "A", pool.Sleep(1))
	assert.ErrorIs(t, err, pool.ErrHostShort, "a new server needs its backup again: %v", err)
}
