package backend

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/vllmsim"
)

// sampleConfig is the simulator's default config in every build (the gpu
// tag's defaults are real vLLM on the reference models).
func sampleConfig() config.Config { return config.SimDefault() }

// TestOpenSim: the default config is vllmsim on the simulated GPU, built
// once per process, with the device described once for both sides (the
// link facts NVML would report included) and labelled simulated.
func TestOpenSim(t *testing.T) {
	cfg := sampleConfig()
	cfg.APIKey = "k"
	dir := t.TempDir()
	b, err := Open(t.Context(), cfg, dir)
	require.NoError(t, err)
	defer b.Close()

	again, err := BuildSim(t.Context())
	require.NoError(t, err)
	assert.Equal(t, b.Command, again, "built once per process")
	st, err := os.Stat(b.Command)
	require.NoError(t, err)
	assert.NotZero(t, st.Mode()&0o111, "executable")

	prof, err := vllmsim.LookupProfile(cfg.Sim.Profile)
	require.NoError(t, err)
	dev, err := simgpu.ReadDevice(filepath.Join(dir, "gpu"))
	require.NoError(t, err)
	want := prof.GPU.Device()
	pw, ok := simgpu.DefaultPower(want.Name)
	require.True(t, ok, "the profile's GPU has a simulated power model")
	want.Power = &pw
	assert.Equal(t, want, dev)
	assert.NotZero(t, dev.PCIeGen, "link facts are part of the device")

	require.NotNil(t, b.Setup.Simulated)
	assert.Equal(t, "1 × "+prof.GPU.Name+" (simulated)", b.Setup.GPU)
	require.NotNil(t, b.Setup.GPUFacts)
	assert.Positive(t, b.Setup.GPUFacts.PCIeGBps)
	assert.True(t, b.Setup.GPUFacts.Simulated)

	env := b.ServerEnv(config.Model{Label: "A", SimFaults: "crash-after=3"})
	assert.Contains(t, env, "VLLM_SERVER_DEV_MODE=1")
	assert.Contains(t, env, "VLLM_API_KEY=k")
	assert.Contains(t, env, vllmsim.EnvFaults+"=crash-after=3")
	assert.NotContains(t, b.ServerEnv(config.Model{Label: "B"}), vllmsim.EnvFaults+"=crash-after=3", "faults are per model")
	assert.Contains(t, env, PoisonEnv, "correctness replays on (the default): discarded pages poisoned")
	cfg = config.SimDefault()
	cfg.Protocol.CorrectnessMaxTokens = 0
	off, err := Open(t.Context(), cfg, t.TempDir())
	require.NoError(t, err)
	assert.NotContains(t, off.ServerEnv(config.Model{Label: "A"}), PoisonEnv, "no replays: the wake is not slowed by the fill")
	cfg = config.SimDefault()
	cfg.Protocol.PoisonDiscardedPages = false
	noPoison, err := Open(t.Context(), cfg, t.TempDir())
	require.NoError(t, err)
	assert.NotContains(t, noPoison.ServerEnv(config.Model{Label: "A"}), PoisonEnv, "turned off")
}

func TestOpenErrorsNameTheSetting(t *testing.T) {
	cfg := sampleConfig()
	cfg.Command, cfg.Memory = "/nonexistent/vllm", "none"
	_, err := Open(t.Context(), cfg, t.TempDir())
	assert.ErrorContains(t, err, `config command "/nonexistent/vllm"`)

	cfg = sampleConfig()
	cfg.Sim.Profile = "no-such-profile"
	_, err = Open(t.Context(), cfg, t.TempDir())
	assert.ErrorContains(t, err, "config sim.profile")

	cfg = sampleConfig()
	cfg.Models[0].SimFaults, cfg.Models[1].SimFaults = "wake-fial=2", "crash-after=x"
	_, err = Open(t.Context(), cfg, t.TempDir())
	assert.ErrorContains(t, err, "config models[0].sim_faults:")
	assert.ErrorContains(t, err, "config models[1].sim_faults:")
	assert.ErrorContains(t, err, "wake-fial", "the typo is named")

	cfg = sampleConfig()
	cfg.Command, cfg.Memory = "/bin/true", "none"
	b, err := Open(t.Context(), cfg, t.TempDir())
	require.NoError(t, err)
	assert.Nil(t, b.Source)
	assert.Nil(t, b.Setup.Simulated, "a command by path is not labelled simulated until its /version says so")
	assert.Contains(t, b.Setup.MemoryNote, "no GPU memory was sampled")
}

// TestFreshCachesPerModel: with fresh_caches each model's server gets its
// own compile caches under the run's directory; without, none are set.
func TestFreshCachesPerModel(t *testing.T) {
	cfg := sampleConfig()
	cfg.Command, cfg.Memory = "/bin/true", "none"
	dir := t.TempDir()
	b, err := Open(t.Context(), cfg, dir)
	require.NoError(t, err)
	a, bb := b.ServerEnv(cfg.Models[0]), b.ServerEnv(cfg.Models[1])
	for _, v := range []string{"VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUDA_CACHE_PATH"} {
		assert.Contains(t, a, v+"="+filepath.Join(dir, "caches", "A", map[string]string{"VLLM_CACHE_ROOT": "vllm", "TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton", "CUDA_CACHE_PATH": "cuda"}[v]))
		assert.NotContains(t, bb, a[len(a)-1], "B's caches are its own")
	}
	cfg.FreshCaches = false
	b, err = Open(t.Context(), cfg, dir)
	require.NoError(t, err)
	for _, e := range b.ServerEnv(cfg.Models[0]) {
		assert.NotContains(t, e, "CACHE", "the runner's own caches")
	}
}

// The config's env comes last in every server's environment, after the
// faults and caches wakebench sets, so it overrides them (exec keeps a
// name's last value): a variant's VLLMSIM_ERA, its own cache root.
func TestConfigEnvOverridesLast(t *testing.T) {
	cfg := sampleConfig()
	cfg.Command, cfg.Memory = "/bin/true", "none"
	cfg.Env = map[string]string{"VLLM_CACHE_ROOT": "/mine", "B_VAR": "1"}
	b, err := Open(t.Context(), cfg, t.TempDir())
	require.NoError(t, err)
	env := b.ServerEnv(config.Model{Label: "A", SimFaults: "crash-after=3"})
	require.GreaterOrEqual(t, len(env), 3)
	assert.Equal(t, []string{"B_VAR=1", "VLLM_CACHE_ROOT=/mine"}, env[len(env)-2:])
	assert.Equal(t, []string{"B_VAR=1", "VLLM_CACHE_ROOT=/mine"}, b.NodeEnv()[len(b.NodeEnv())-2:])
}

// TestBuildSimNamedByContent: the built vllmsim is named by its content,
// so a test process of another checkout (another source, another binary)
// never replaces the one this process's servers run.
func TestBuildSimNamedByContent(t *testing.T) {
	path, err := BuildSim(t.Context())
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	assert.Equal(t, "vllmsim-"+hex.EncodeToString(sum[:8]), filepath.Base(path))
}

// TestReferenceModelsMustFit: with the gpu tag's default models (the
// reference run's) a GPU too small for them is refused at open, saying
// what to set; one large enough opens.
func TestReferenceModelsMustFit(t *testing.T) {
	cfg := sampleConfig()
	cfg.Command, cfg.Memory, cfg.Models = "/bin/true", "nvml", config.ReferenceModels()
	f := newFake()
	f.total = 24 * gib
	_, err := open(t.Context(), cfg, t.TempDir(), func(string) string { return "" }, func() nvml.Interface { return f.lib })
	assert.ErrorContains(t, err, "config models: the reference's models")
	assert.ErrorContains(t, err, "this GPU has 24.0 GiB")
	assert.Equal(t, 1, f.shutdowns, "NVML is shut down again")

	f = newFake()
	b, err := open(t.Context(), cfg, t.TempDir(), func(string) string { return "" }, func() nvml.Interface { return f.lib })
	require.NoError(t, err, "a 48 GiB GPU holds them")
	require.NoError(t, b.Close())
}
