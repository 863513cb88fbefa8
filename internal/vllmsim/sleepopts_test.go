package vllmsim

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/vllm"
)

// TestPreservedShare: the patterns name parameters as fnmatch does (a *
// crosses dots), each parameter counted once; a pattern naming none is
// the start's error, naming it.
func TestPreservedShare(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		want     float64
	}{
		{[]string{"*"}, 1},
		{[]string{"model.layers.*.mlp.*"}, 0.40 + 0.15},
		{[]string{"lm_head.weight", "model.embed_tokens.weight"}, 0.10 + 0.05},
		{[]string{"*.self_attn.*", "model.layers.*.self_attn.qkv_proj.weight"}, 0.20 + 0.10},
		{[]string{"*norm*"}, 0}, // the norms: no bytes to speak of
		{[]string{"model.layers.0.*"}, (0.20 + 0.10 + 0.40 + 0.15) / 4}, // one layer of the four
		{[]string{"model.layers.[0-1].mlp.*"}, (0.40 + 0.15) / 2},
	} {
		got, err := preservedShare(tc.patterns, 4)
		require.NoError(t, err, tc.patterns)
		assert.InDelta(t, tc.want, got, 1e-12, tc.patterns)
	}
	_, err := preservedShare([]string{"*.mlp.*", "vision_tower.*"}, 4)
	assert.ErrorContains(t, err, `pattern "vision_tower.*" matches no parameter`)
	_, err = preservedShare([]string{"model.layers.4.*"}, 4)
	assert.ErrorContains(t, err, `pattern "model.layers.4.*" matches no parameter`, "layers 0 to 3 only")
}

// TestSleepOptionsByEra: each option from the era of its first release,
// refused before it as argparse refuses it; a preserve pattern that
// matches nothing fails the start.
func TestSleepOptionsByEra(t *testing.T) {
	for _, tc := range []struct {
		e    era
		flag []string
		ok   bool
	}{
		{eraB, []string{"--enable-nccl-comm-suspend"}, false},
		{eraC, []string{"--enable-nccl-comm-suspend"}, true},
		{eraB, []string{"--sleep-preserve-parameter-names", "*"}, false},
		{eraC, []string{"--sleep-preserve-parameter-names", "*"}, true},
		{eraC, []string{"--sleep-mode-offload-cudagraph"}, false},
		{eraD, []string{"--sleep-mode-offload-cudagraph"}, true},
		{eraD, []string{"--no-sleep-mode-offload-cudagraph"}, true},
	} {
		_, err := parseArgs(append([]string{"serve", "tiny-a"}, tc.flag...), tc.e, &bytes.Buffer{})
		if tc.ok {
			assert.NoError(t, err, "era %s %v", tc.e, tc.flag)
		} else {
			assert.ErrorContains(t, err, "unrecognized arguments: "+tc.flag[0], "era %s", tc.e)
		}
	}
	s := startSim(t, "tiny-a", nil, "--sleep-preserve-parameter-names", "model.layers.*.mlp.*", "visual.*")
	select {
	case code := <-s.done:
		s.done <- code // for the test's cleanup
		assert.NotZero(t, code)
		assert.Contains(t, s.stderr.String(), `pattern "visual.*" matches no parameter`)
	case <-t.Context().Done():
		t.Fatal("the start did not fail")
	}
}

// TestOffloadCUDAGraph: with --sleep-mode-offload-cudagraph a sleep at
// either level leaves the CUDA graph pool off the device (by hand: tiny-a's
// 0.25 GiB residual, of which 0.4 the graph pool: 0.15 GiB left asleep
// against 0.25 without), backed up in pinned host memory, and the wake
// brings it back; with --enforce-eager there are no graphs and nothing
// changes.
func TestOffloadCUDAGraph(t *testing.T) {
	p := tinyPhysics(t)
	graph := uint64(graphPoolShare * p.Model.ResidualGiB * GiB) // 0.4 × 0.25 GiB
	for _, tc := range []struct {
		name  string
		extra []string
		left  uint64
	}{
		{"off", nil, p.ResidualBytes()},
		{"on", []string{"--sleep-mode-offload-cudagraph"}, p.ResidualBytes() - graph},
		{"eager", []string{"--sleep-mode-offload-cudagraph", "--enforce-eager"}, p.ResidualBytes()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &SyncLog{}
			s := startSimLog(t, "tiny-a", nil, logs, tc.extra...)
			s.ready(t)
			awake := s.used(t)
			for _, level := range []string{"1", "2"} {
				code, _ := send(t, s, "POST /sleep?level="+level)
				require.Equal(t, 200, code)
				assert.Equal(t, tc.left, s.used(t), "level %s: what stays on the device", level)
				if level == "2" {
					send(t, s, "POST /wake_up?tags=weights")
					code, _ = send(t, s, "POST /collective_rpc")
					send(t, s, "POST /wake_up?tags=kv_cache")
				} else {
					code, _ = send(t, s, "POST /wake_up")
				}
				assert.Equal(t, awake, s.used(t), "level %s: the wake restores it", level)
			}
			if tc.name == "on" {
				logs.Has(t, "the CUDA graph pool backed up to 0.100 GiB of pinned host memory")
				logs.Has(t, "held by the server process") // one GPU: no rank workers
			} else {
				assert.NotContains(t, logs.String(), "CUDA graph pool backed up")
			}
		})
	}
}

// TestPreserveParameters: --sleep-preserve-parameter-names '*' backs every
// parameter up at level 2, so the weights' wake restores them and the
// model answers as before without reload_weights; preserving the MLP
// alone still leaves garbage for reload_weights to fix. Level 1 is
// unchanged.
func TestPreserveParameters(t *testing.T) {
	req := vllm.CompletionRequest{Model: "tiny-a", Prompt: "hello there", MaxTokens: 4, IgnoreEOS: true}
	for _, tc := range []struct {
		pattern string
		garbage bool
	}{{"*", false}, {"model.layers.*.mlp.*", true}} {
		t.Run(tc.pattern, func(t *testing.T) {
			logs := &SyncLog{}
			s := startSimLog(t, "tiny-a", nil, logs, "--sleep-preserve-parameter-names", tc.pattern)
			s.ready(t)
			before, err := s.c.Complete(t.Context(), req)
			require.NoError(t, err)
			code, _ := send(t, s, "POST /sleep?level=2")
			require.Equal(t, 200, code)
			code, _ = send(t, s, "POST /wake_up")
			require.Equal(t, 200, code)
			after, err := s.c.Complete(t.Context(), req)
			require.NoError(t, err)
			if tc.garbage {
				assert.NotEqual(t, before.Text, after.Text, "the parameters not preserved are garbage until reload_weights")
			} else {
				assert.Equal(t, before.Text, after.Text, "every parameter restored from host memory")
			}
			logs.Has(t, "parameters backed up to pageable host memory")
			if tc.garbage { // by hand: tiny-a's 0.5 GiB of weights × the MLP's 0.55
				logs.Has(t, "0.275 GiB of parameters backed up")
			}
		})
	}
}

// TestNCCLCommSuspend: across two GPUs each rank holds NCCL's buffers
// outside the sleep pools (256 MiB); with --enable-nccl-comm-suspend a
// sleep releases them and the wake restores them; on one GPU there is
// nothing to suspend.
func TestNCCLCommSuspend(t *testing.T) {
	p := tinyPhysics(t)
	base := t.TempDir()
	dirs := []string{filepath.Join(base, "gpu0"), filepath.Join(base, "gpu1")}
	s := startSim(t, "tiny-a", map[string]string{simgpu.EnvDir: strings.Join(dirs, ":")}, "-tp", "2", "--enable-nccl-comm-suspend")
	s.ready(t)
	rank0 := func() uint64 {
		procs, err := simgpu.Processes(dirs[0])
		require.NoError(t, err)
		require.Len(t, procs, 1)
		return procs[0].UsedBytes
	}
	awake := rank0()
	code, _ := send(t, s, "POST /sleep?level=1")
	require.Equal(t, 200, code)
	assert.Equal(t, p.ResidualBytes(), rank0(), "asleep: the CUDA context alone, NCCL's 256 MiB released")
	code, _ = send(t, s, "POST /wake_up")
	require.Equal(t, 200, code)
	assert.Equal(t, awake, rank0())

	one := Physics{Ranks: 1}
	require.NoError(t, sleepOptions(&one, Args{NCCLCommSuspend: true, EnableSleepMode: true}))
	assert.Zero(t, one.SuspendBytes, "one GPU: no communicator")
}

// TestOptionBackupsAreHeldPerRank: across two GPUs each rank's worker
// holds its shard of the options' host backups, as each vLLM worker backs
// up its own graph pool and parameters. By hand (tiny-a, host scale 1): a
// rank's graph pool is 0.4 of its 0.25 GiB residual, 0.1 GiB, pinned at
// either level and kept; with every parameter preserved a level-2 sleep
// adds the rank's half of the 0.5 GiB of weights, 0.25 GiB of pageable
// memory, which the wake frees. Level 2 has no weight backup of its own.
func TestOptionBackupsAreHeldPerRank(t *testing.T) {
	testmain.Long(t)
	const tol = 0.03 * GiB // the worker's Go runtime moves a little
	base := t.TempDir()
	dirs := []string{filepath.Join(base, "gpu0"), filepath.Join(base, "gpu1")}
	logs := &SyncLog{}
	s := startSimLog(t, "tiny-a", map[string]string{simgpu.EnvDir: strings.Join(dirs, ":"), EnvHostScale: "1"}, logs,
		"-tp", "2", "--sleep-mode-offload-cudagraph", "--sleep-preserve-parameter-names", "*")
	s.ready(t)
	type mem struct{ rss, locked float64 }
	ranks := func() []mem {
		t.Helper()
		var out []mem
		for _, d := range dirs {
			procs, err := simgpu.Processes(d)
			require.NoError(t, err)
			require.Len(t, procs, 1, d)
			proc, err := procfs.NewProc(procs[0].PID)
			require.NoError(t, err)
			st, err := proc.NewStatus()
			require.NoError(t, err)
			out = append(out, mem{float64(st.VmRSS), float64(st.VmLck)})
		}
		return out
	}
	self := func() float64 { // the server runs in this process
		t.Helper()
		proc, err := procfs.Self()
		require.NoError(t, err)
		st, err := proc.NewStatus()
		require.NoError(t, err)
		return float64(st.VmRSS)
	}
	graph, preserved := 0.1*GiB, 0.25*GiB
	before, selfBefore := ranks(), self()
	code, _ := send(t, s, "POST /sleep?level=2")
	require.Equal(t, 200, code)
	asleep := ranks()
	assert.Less(t, self()-selfBefore, graph+preserved, "the server process holds no shard (it held all 0.7 GiB before)")
	locked := !strings.Contains(logs.String(), "NOT locked")
	if !locked {
		t.Logf("RLIMIT_MEMLOCK refuses the shards here: VmLck not checked (%s)", memlockLimit())
	}
	for i := range before {
		assert.InDelta(t, before[i].rss+graph+preserved, asleep[i].rss, tol, "rank %d asleep: its graph pool's and its parameters' backups", i)
		if locked {
			assert.InDelta(t, before[i].locked+graph, asleep[i].locked, tol, "rank %d: only the graph pool's backup is pinned", i)
		}
	}
	code, _ = send(t, s, "POST /wake_up")
	require.Equal(t, 200, code)
	awake := ranks()
	for i := range before {
		assert.InDelta(t, before[i].rss+graph, awake[i].rss, tol, "rank %d awake: the parameters' backup freed, the graph pool's kept", i)
	}
	logs.Has(t, "the CUDA graph pool backed up to 0.200 GiB of pinned host memory (real 0.200 GiB, held by each of the 2 ranks' workers, its shard)")
	logs.Has(t, "0.500 GiB of parameters backed up to pageable host memory (real 0.500 GiB, held by each of the 2 ranks' workers, its shard)")
}

// TestOffloadDecodeCost: the offloaded graph pool costs a decode step
// 3 % of a batch-1 step with more than one rank (the custom all-reduce's
// extra copy), nothing on one GPU.
func TestOffloadDecodeCost(t *testing.T) {
	p := tinyPhysics(t)
	p.Ranks = 2
	base1, base8 := p.DecodeStep(1), p.DecodeStep(8)
	noSleep := p
	require.NoError(t, sleepOptions(&noSleep, Args{OffloadCUDAGraph: true}))
	assert.Equal(t, base1, noSleep.DecodeStep(1), "without sleep mode no graph pool is set up (#59160's tests)")
	require.NoError(t, sleepOptions(&p, Args{OffloadCUDAGraph: true, EnableSleepMode: true}))
	assert.InDelta(t, 1.03*base1, p.DecodeStep(1), 1e-12)
	assert.InDelta(t, base8+0.03*base1, p.DecodeStep(8), 1e-12)
	one := tinyPhysics(t)
	b := one.DecodeStep(1)
	require.NoError(t, sleepOptions(&one, Args{OffloadCUDAGraph: true, EnableSleepMode: true}))
	assert.Equal(t, b, one.DecodeStep(1), "one rank: no all-reduce")
}
