package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// simBackend is the default without the gpu build tag: the suite runs on
// vllmsim and its simulated GPU, with two tiny models: what `go test ./...`
// and CI run. The tiny models' sub-millisecond decode steps make round
// tok/s swing by ±10 % when a shared CI machine is busy, so the after-wake
// ratio is held to 0.8 here (0.95 on real GPUs, where a step is tens of
// milliseconds). Its rounds are four of four requests, not two of eight:
// the same 16 requests per concurrency as the reference run, but a round
// of the tiny models lasts a few hundred milliseconds, and one stall of a
// busy runner (0.3 s, seen in CI's make stress) in one of two rounds
// moved the median of two by a third; the median of four leaves one
// disturbed round out.
func simBackend(c *Config) {
	c.Command, c.Memory = "vllmsim", "sim"
	c.Models = []Model{
		{Label: "A", Name: "tiny-a", GPUMemoryUtilization: 0.45},
		{Label: "B", Name: "tiny-b", GPUMemoryUtilization: 0.45},
	}
	c.Protocol.Rounds, c.Protocol.RequestsPerRound = 4, 4
	c.Thresholds.MinAfterWakeTPSRatio = 0.8
	c.Thresholds.MinDecodeRateRatio = 0.5 // the engine's own decode time of ms steps swings with the timers
}

// gpuBackend is the default with the gpu build tag: real `vllm serve`,
// memory from NVML, and without a config file the reference run's models
// (ReferenceModels), so `go test -tags gpu ./...` on a GPU runner runs the
// reference protocol.
func gpuBackend(c *Config) {
	c.Command, c.Memory = "vllm", "nvml"
	c.Models = ReferenceModels()
	c.Protocol.SettleS = 1
}

// SimDefault is Default as a build without the gpu tag has it: vllmsim on
// its simulated GPU. Tests that start simulated servers use it, so they
// run the same under -tags gpu.
func SimDefault() Config {
	c := base()
	simBackend(&c)
	return c
}

// ReferenceModels are the models of the reference run
// (../shared/reference/l20-reference-report.json: A Qwen3.8-27B-FP8,
// B Qwen3-1.7B, on one 48 GB L20). wakebench passes --kv-cache-memory-bytes,
// so a share does not size the KV cache: it is what vLLM checks free at
// start (free ≥ share × total), beside the other model asleep.
func ReferenceModels() []Model {
	return []Model{
		{Label: "A", Name: "Qwen/Qwen3.8-27B-FP8", GPUMemoryUtilization: 0.75},
		{Label: "B", Name: "Qwen/Qwen3-1.7B", GPUMemoryUtilization: 0.2},
	}
}

// ReferencePeakGiB is the most device memory the reference run used (its
// memory.physical_peak_gib max: A awake, B asleep).
const ReferencePeakGiB = 33.0888671875

// referenceHeadroomGiB is kept free beyond the reference's peak: a
// driver, vLLM or CUDA release differs by a few hundred MiB.
const referenceHeadroomGiB = 1

// ReferenceFit says whether the reference models fit a GPU of totalBytes:
// nil when c does not serve them or they fit, else what to set instead.
func (c Config) ReferenceFit(totalBytes uint64) error {
	if !slices.EqualFunc(c.Models, ReferenceModels(), func(a, b Model) bool { return a.Name == b.Name }) {
		return nil
	}
	need := ReferencePeakGiB + referenceHeadroomGiB
	if have := float64(totalBytes) / (1 << 30); have < need {
		return fmt.Errorf("the reference's models (%s, %s) need %.1f GiB of GPU memory (the reference run's peak, %.1f GiB, and %d GiB headroom); this GPU has %.1f GiB: name models that fit in a config file, %s=gpu.json (testdata/gpu-example.json: Qwen3-8B and Qwen3-1.7B, ≈ 22 GiB)",
			c.Models[0].Name, c.Models[1].Name, need, ReferencePeakGiB, referenceHeadroomGiB, have, EnvFile)
	}
	return nil
}

// refCost is what one model's protocol steps took in the reference run
// (seconds, from its report: restart summaries, each window less its 4 s
// pad, level-2 wake to first token plus its sleep).
type refCost struct {
	initial, warm float64
	serve         float64 // one serving stage: 2 concurrencies × 16 requests × 128 tokens
	l1, l2        float64 // one sleep/wake cycle
}

var referenceCosts = map[string]refCost{
	"Qwen/Qwen3.8-27B-FP8": {initial: 219.2, warm: 55.6, serve: 102.9, l1: 49.4 / 5, l2: 14.9 + 0.6},
	"Qwen/Qwen3-1.7B":      {initial: 84.1, warm: 36.1, serve: 14.8, l1: 20.2 / 5, l2: 2.2 + 0.1},
}

// referenceHandoffS is one switch activation in the reference run (its
// AB-switch window, 207.4 s, over 1 + 19 activations).
const referenceHandoffS = 207.4 / 20

// Estimate is how long c's run takes at least, before it starts, and how
// that was reckoned; 0 for vllmsim, whose runs take minutes. A real run is
// reckoned step by step from the reference run's times: a reference model
// at its own, any other model at least at the reference's smallest
// (Qwen3-1.7B), the switch at the reference's activation time, traffic at
// its configured duration (twice with the ideal run).
func (c Config) Estimate() (time.Duration, string) {
	if c.Command == "vllmsim" {
		return 0, "simulated: not estimated"
	}
	p := c.Protocol
	floor := referenceCosts["Qwen/Qwen3-1.7B"]
	scale := float64(len(p.Concurrency)*p.Rounds*p.RequestsPerRound*p.MaxTokens) / (2 * 16 * 128)
	var s float64
	for _, m := range c.Models {
		r, ok := referenceCosts[m.Name]
		if !ok {
			r = floor
		}
		// The baseline starts each model afresh (its server has slept to
		// let the next one start): one more warm start.
		s += r.initial + r.warm*float64(p.RestartWarm+1) + 2*r.serve*scale +
			(r.l1+p.SettleS)*float64(p.SleepL1Cycles) + (r.l2+p.SettleS)*float64(p.SleepL2Cycles) +
			// Level 0 and a KV-only release move no weights: at most a
			// level-1 cycle's time each.
			(r.l1+p.SettleS)*float64(p.SleepL0Cycles+p.KVReleaseCycles) +
			costS(p, r)
	}
	s += referenceHandoffS * float64(p.Handoffs+1)
	traffic := c.Traffic.DurationS
	if c.Traffic.Ideal {
		traffic *= 2
	}
	s += traffic
	how := fmt.Sprintf("%d model(s) at the reference run's step times (Qwen3-1.7B's for a model it did not run), %d handoffs, %.0f s of traffic",
		len(c.Models), p.Handoffs, traffic)
	if n := len(c.Variants); n > 0 { // a variant run: the protocol once per variant in each block
		s *= float64(n * p.VariantBlocks)
		how += fmt.Sprintf(", run %d times (%d variants in %d blocks)", n*p.VariantBlocks, n, p.VariantBlocks)
	}
	return time.Duration(s * float64(time.Second)), how
}

// costS is the state-cost phase's time for one model: five states held
// cost_dwell_s each, a sleep and wake at each level and a cold start (the
// reference's initial start); 0 with the phase off.
func costS(p Protocol, r refCost) float64 {
	if p.CostDwellS == 0 {
		return 0
	}
	return 5*p.CostDwellS + r.l1 + r.l2 + r.initial
}

// CheckTimeout refuses a run that go test's -timeout (0: none) cannot
// hold, before anything starts: -timeout panics mid-run, which leaves a
// report that says only that it was cut short.
func (c Config) CheckTimeout(timeout time.Duration) error {
	if timeout <= 0 {
		return nil
	}
	est, how := c.Estimate()
	if est <= timeout {
		return nil
	}
	return fmt.Errorf("this run takes at least %v (%s) but go test -timeout is %v (go test's default is 10m): run it with -timeout 0, or make gpu",
		est.Round(time.Second), how, timeout)
}

// NoGPUHardware says why a gpu-tag hardware test (NVML, the CUDA driver)
// has nothing to measure on this runner: the run's config, as Load reads it
// (WAKEBENCH_CONFIG and the WAKEBENCH_* overrides), says "memory": "none",
// a runner without NVML whose servers are measured without GPU memory
// (docs/gpu.md). It is "" otherwise, and when the config does not load:
// then the hardware tests run and say what the machine lacks, as the
// protocol's run says what is wrong with the config.
//
// A relative WAKEBENCH_CONFIG names a file from where the user ran go test,
// the module's root (go test ./...), while go test runs each package's
// tests in the package's own directory: it is read from the nearest
// directory above with a go.mod.
func NoGPUHardware(getenv func(string) string) string {
	where := "the default config"
	f := getenv(EnvFile)
	if f != "" {
		where = EnvFile + "=" + f
		if !filepath.IsAbs(f) {
			if root, err := moduleRoot(); err == nil {
				abs, outer := filepath.Join(root, f), getenv
				getenv = func(k string) string {
					if k == EnvFile {
						return abs
					}
					return outer(k)
				}
			}
		}
	}
	cfg, err := Load(getenv)
	if err != nil || cfg.Memory != "none" {
		return ""
	}
	if getenv(EnvName("memory")) != "" {
		where = EnvName("memory") + "=none"
	}
	return fmt.Sprintf("%s says \"memory\": \"none\" (no NVML on this runner): the NVML and CUDA hardware tests have nothing to measure; set \"memory\": \"nvml\" on a runner with the NVIDIA driver to run them", where)
}

// moduleRoot is the nearest directory at or above the working directory
// that holds a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod at or above the working directory")
		}
		dir = up
	}
}
