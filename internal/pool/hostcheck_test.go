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
	"github.com/wakebench/wakebench/internal/vllm"
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

// TestHostHeadroomCountsTheGraphPool: with --sleep-mode-offload-cudagraph
// a sleep also pins the CUDA graph pool's backup, at both levels (vLLM's
// docs for the option): the check adds the graphs' memory the server
// logged capturing, times sim.host_scale on vllmsim, to the weights'
// backup at level 1, and checks a level-2 sleep for it alone; once the
// server has slept, the graph pool's backup is held and not counted
// again. By hand from the server log's lines: a host with room for the
// weights and the headroom but not the graph pool is refused, naming it.
func TestHostHeadroomCountsTheGraphPool(t *testing.T) {
	testmain.Long(t)
	root := fakeHost(t, 64)
	f, _, cfg := simtest.PoolWith(t, nil, func(c *config.Config) {
		c.Thresholds.MinHostHeadroomGiB = 1
		c.Sim.HostScale = 1
		c.Models[0].ExtraArgs = append(c.Models[0].ExtraArgs, "--sleep-mode-offload-cudagraph")
	}, func(o *pool.Options) { o.HostRoot = root })
	require.Equal(t, "vllmsim", cfg.Command)
	ctx := t.Context()
	require.NoError(t, f.Activate(ctx, "A"))
	weights, how := f.Memory().BackupGiB("A")
	require.Positive(t, weights, how)
	graph, how := f.Memory().GraphBackupGiB("A")
	require.Positive(t, graph, how)
	assert.Contains(t, how, "Graph capturing finished in")
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, "A.log"))
	require.NoError(t, err)
	logged, _, ok := vllm.GraphGiB(b)
	require.True(t, ok, "vllmsim logs its graph capture")
	assert.InDelta(t, logged, graph, 1e-12, "one GPU: the logged size")
	noOpt, _ := f.Memory().GraphBackupGiB("B")
	assert.Zero(t, noOpt, "B runs without the option")

	setFree := func(gib float64) {
		kb := uint64(gib * (1 << 20))
		require.NoError(t, os.WriteFile(filepath.Join(root, "proc/meminfo"), fmt.Appendf(nil, "MemTotal: %d kB\nMemAvailable: %d kB\n", 2*kb, kb), 0o644))
	}
	// Room for the weights and the headroom, short of the graph pool.
	setFree(weights + 1 + graph/2)
	_, err = f.Run(ctx, "A", pool.Sleep(1))
	require.ErrorIs(t, err, pool.ErrHostShort)
	assert.ErrorContains(t, err, fmt.Sprintf("A needs %.2f GiB", weights+graph+1))
	assert.ErrorContains(t, err, "CUDA graph pool (--sleep-mode-offload-cudagraph)")
	// A level-2 sleep pins the graph pool alone: refused short of it, sent with room.
	setFree(1 + graph/2)
	_, err = f.Run(ctx, "A", pool.Sleep(2))
	require.ErrorIs(t, err, pool.ErrHostShort)
	assert.ErrorContains(t, err, "sleep A level 2 not sent")
	assert.ErrorContains(t, err, fmt.Sprintf("A needs %.2f GiB", graph+1))
	setFree(1 + graph + 0.01)
	_, err = f.Run(ctx, "A", pool.Sleep(2))
	require.NoError(t, err)
	_, err = f.Run(ctx, "A", pool.Wake())
	require.NoError(t, err)
	// Slept once: the graph pool's backup is held; a level-1 sleep needs
	// the weights' backup and the headroom.
	setFree(weights + 1 + 0.01)
	_, err = f.Run(ctx, "A", pool.Sleep(1))
	require.NoError(t, err, "the graph pool's backup is held already")
}
