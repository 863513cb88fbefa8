package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gpuDefault is Default as a build with the gpu tag has it.
func gpuDefault() Config {
	c := base()
	gpuBackend(&c)
	return c
}

// TestGPUDefaultsAreTheReference: the gpu tag's defaults are the reference
// run's protocol on its two models, and valid without a config file.
func TestGPUDefaultsAreTheReference(t *testing.T) {
	c := gpuDefault()
	require.NoError(t, c.Validate(), "no config file needed")
	assert.Equal(t, []string{"Qwen/Qwen3.8-27B-FP8", "Qwen/Qwen3-1.7B"}, []string{c.Models[0].Name, c.Models[1].Name})
	assert.Equal(t, "vllm", c.Command)
	assert.Equal(t, "nvml", c.Memory)
	s := SimDefault()
	require.NoError(t, s.Validate())
	assert.Equal(t, "vllmsim", s.Command, "SimDefault is the simulator in every build")
	assert.Equal(t, "tiny-a", s.Models[0].Name)
}

// TestReferenceFit: the reference models are refused on a GPU smaller than
// the reference's peak, with what to set; other models are not judged.
func TestReferenceFit(t *testing.T) {
	c := gpuDefault()
	assert.NoError(t, c.ReferenceFit(46068<<20), "an L20 (NVML: 46068 MiB) holds the reference run")
	assert.NoError(t, c.ReferenceFit(40<<30))
	err := c.ReferenceFit(24 << 30)
	assert.ErrorContains(t, err, "need 34.1 GiB of GPU memory")
	assert.ErrorContains(t, err, "this GPU has 24.0 GiB")
	assert.ErrorContains(t, err, "WAKEBENCH_CONFIG=gpu.json")
	c.Models[0].Name = "Qwen/Qwen3-8B"
	assert.NoError(t, c.ReferenceFit(24<<30), "a config's own models are its own business")
}

// TestEstimate: the reference protocol on the reference models is reckoned
// at the reference run's own length, and moves with what the config asks.
func TestEstimate(t *testing.T) {
	c := gpuDefault()
	c.Protocol.SettleS = 0 // as timed in the reference run's figures
	c.Traffic.DurationS = 0
	est, how := c.Estimate()
	// The reference run took A's restarts, 219.2 + 2 × 55.6 s
	// (restart_initial, restart_warm), then 744 s from A's baseline to the
	// end of the switch (its windows; B's restarts and both models'
	// level-2 cycles fall between them). This protocol adds a warm start
	// of each model before its baseline: A's 55.6 s and B's; and the
	// level-0 and KV-only release cycles the reference run did not have,
	// reckoned at a level-1 cycle's time each.
	a, b := referenceCosts[c.Models[0].Name], referenceCosts[c.Models[1].Name]
	extra := float64(c.Protocol.SleepL0Cycles+c.Protocol.KVReleaseCycles) * (a.l1 + b.l1)
	// The state-cost phase: five states held cost_dwell_s each, a sleep
	// and wake at each level and a cold start, per model.
	extra += 10*c.Protocol.CostDwellS + a.l1 + a.l2 + a.initial + b.l1 + b.l2 + b.initial
	assert.InDelta(t, 219.2+2*55.6+744+55.6+b.warm+extra, est.Seconds(), 0.05*1074, how)
	assert.Contains(t, how, "2 model(s)")

	more := c
	more.Protocol.Handoffs = 99
	longer, _ := more.Estimate()
	assert.InDelta(t, (80*referenceHandoffS)*float64(time.Second), float64(longer-est), float64(time.Second))

	dwell := c
	dwell.Protocol.CostDwellS = 11
	held, _ := dwell.Estimate()
	assert.InDelta(t, float64(2*5*10*time.Second), float64(held-est), float64(time.Second), "10 s more in each of five states, two models")
	off := c
	off.Protocol.CostDwellS = 0
	offEst, _ := off.Estimate()
	assert.InDelta(t, (10*c.Protocol.CostDwellS+a.l1+a.l2+a.initial+b.l1+b.l2+b.initial)*float64(time.Second), float64(est-offEst), float64(time.Second), "the phase off costs nothing")

	small := c
	small.Models = []Model{{Label: "A", Name: "some/tiny-model", GPUMemoryUtilization: 0.2}}
	floor, _ := small.Estimate()
	assert.Less(t, floor, est, "an unknown model at the smallest reference model's times")
	assert.Greater(t, floor, time.Duration(0))

	sim := SimDefault()
	zero, how := sim.Estimate()
	assert.Zero(t, zero, how)
}

// TestCheckTimeout: go test's default 10-minute -timeout cannot hold the
// reference protocol on real vLLM: refused at once, naming -timeout 0 and
// make gpu; no timeout, a long enough one or the simulator pass; a variant
// run is reckoned per variant and block.
func TestCheckTimeout(t *testing.T) {
	c := gpuDefault()
	err := c.CheckTimeout(10 * time.Minute)
	assert.ErrorContains(t, err, "-timeout 0")
	assert.ErrorContains(t, err, "make gpu")
	assert.ErrorContains(t, err, "go test -timeout is 10m0s")
	assert.NoError(t, c.CheckTimeout(0), "-timeout 0: no limit")
	assert.NoError(t, c.CheckTimeout(3*time.Hour))
	assert.NoError(t, SimDefault().CheckTimeout(10*time.Minute), "make test's simulated run")

	// A variant run is the protocol once per variant in each block: two
	// variants in four blocks, eight runs, by hand. A -timeout that holds
	// one run refuses it, naming the count.
	one, _ := c.Estimate()
	v := c
	v.Variants = []Variant{{Name: "v0.31"}, {Name: "v0.33"}}
	v.Protocol.VariantBlocks = 4
	all, how := v.Estimate()
	assert.InDelta(t, 8*one.Seconds(), all.Seconds(), 0.001, how)
	assert.Contains(t, how, "run 8 times (2 variants in 4 blocks)")
	assert.NoError(t, c.CheckTimeout(2*one))
	err = v.CheckTimeout(2 * one)
	assert.ErrorContains(t, err, "run 8 times (2 variants in 4 blocks)")
	assert.ErrorContains(t, err, "-timeout 0")
}

// TestNoGPUHardware: the gpu-tag hardware tests skip, naming where it was
// said, only where the run's config says there is no memory source; a
// config on NVML, or one that does not load, runs them.
func TestNoGPUHardware(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gpu.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"command": "vllm", "memory": "none"}`), 0o644))
	assert.Contains(t, NoGPUHardware(env(map[string]string{EnvFile: file})), EnvFile+"="+file+` says "memory": "none"`)
	assert.Contains(t, NoGPUHardware(env(map[string]string{"WAKEBENCH_COMMAND": "vllm", "WAKEBENCH_MEMORY": "none"})), `WAKEBENCH_MEMORY=none says "memory": "none"`)
	assert.Empty(t, NoGPUHardware(env(map[string]string{"WAKEBENCH_COMMAND": "vllm", "WAKEBENCH_MEMORY": "nvml"})))
	assert.Empty(t, NoGPUHardware(env(map[string]string{EnvFile: filepath.Join(t.TempDir(), "missing.json")})), "a config that does not load: the hardware tests run")
	// go test ./... from the module's root with a relative config runs this
	// package's tests in internal/config: the file is the root's.
	assert.Contains(t, NoGPUHardware(env(map[string]string{EnvFile: "testdata/runner.json"})), `WAKEBENCH_CONFIG=testdata/runner.json says "memory": "none"`)
}
