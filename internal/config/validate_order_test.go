package config

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidateReportsEverySectionInOrder pins Validate's whole message, one
// line per problem in the order the sections are checked, for a config wrong
// in every section: splitting Validate must not change a word or the order.
func TestValidateReportsEverySectionInOrder(t *testing.T) {
	err := Config{}.Validate()
	require.Error(t, err)
	assert.Equal(t, strings.Join(wantZeroConfig, "\n"), err.Error())

	err = wrongEverywhere().Validate()
	require.Error(t, err)
	assert.Equal(t, strings.Join(wantWrongEverywhere, "\n"), err.Error())
}

// wrongEverywhere is the default config with a mistake in every check that
// a zero Config does not reach.
func wrongEverywhere() Config {
	c := Default()
	c.Command = "vllm"
	c.Memory = "sim"
	c.GPUIndex = -1
	c.APIKey = "key\n"
	c.Baseline = "/nonexistent/bench.txt"
	c.Thresholds.RegressionPercent = -1
	c.Thresholds.RegressionAlpha = 1
	c.Thresholds.MinL1ReleasePercent = 101
	c.Thresholds.MaxResidualGiB = math.NaN()
	c.Timeouts.WakeS = 0
	c.Protocol.SoakCycles = 1
	c.Kubernetes.ControlPlane = "kubeconfig"
	c.Kubernetes.Namespace = ""
	c.Models = []Model{
		{Label: "A", Name: "m", Port: 8000, GPUMemoryUtilization: 0.5, ExtraArgs: []string{"-tp", "2", "--api-key=x"}, SimFaults: "wake-fail=1",
			Thresholds:  map[string]float64{"nope": 1, "regression_alpha": 0.1, "max_failed_requests": 1.5},
			LoRAModules: map[string]string{"m": "p", "b c": "p", "ok": " "}},
		{Label: "A", Name: " ", Port: 8000, GPUMemoryUtilization: 2},
	}
	return c
}

// wantZeroConfig is Validate's message for Config{}, one line per problem.
var wantZeroConfig = []string{
	"host: empty: use \"127.0.0.1\" (loopback) or the address to bind",
	"command: empty: set \"vllmsim\", \"vllm\" or a path",
	"memory: \"\": want \"nvml\", \"sim\" or \"none\"",
	"gpus: 0: want the number of GPUs the run uses, 1 to 64",
	"sim.time_scale: 0: want a factor in (0, 1000] on every modelled duration (vllmsim's VLLMSIM_TIME_SCALE bound)",
	"sim.host_scale: 0: must be in (0, 1]: the share of a level-1 sleep's pinned host backup vllmsim really allocates",
	"models: empty: list the models to serve in the file named by WAKEBENCH_CONFIG (see docs/gpu.md)",
	"protocol.sleep_l1_cycles: 0: must be at least 1",
	"protocol.sleep_l2_cycles: 0: must be at least 1",
	"protocol.rounds: 0: must be at least 1",
	"protocol.requests_per_round: 0: must be at least 1",
	"protocol.handoffs: 0: must be at least 1",
	"protocol.max_tokens: 0: must be at least 2",
	"protocol.probe_max_tokens: 0: must be at least 1",
	"protocol.soak_level: 0: want 1 or 2",
	"protocol.switch_level: 0: want 1 or 2",
	"protocol.concurrency: empty: list at least one concurrency, e.g. [1, 4]",
	"protocol.context_tokens: 0: must exceed max_tokens (0) plus the prompt",
	"protocol.kv_gib: 0: must be > 0",
	"protocol.prompt: empty",
	"protocol.sample_hz: 0: want 0 < Hz ≤ 1000",
	"traffic.arrivals: \"\": want \"constant\", \"poisson\" or \"gamma\"",
	"traffic.workload.kind: \"\": want \"fixed\", \"uniform\" or \"dataset\"",
	"traffic.max_queue: 0: want 1 to 250000 requests waiting in the router for a wake (one more is shed: not sent, gated by thresholds.max_shed_requests)",
	"traffic.max_in_flight: 0: want 1 to 65536 requests in flight at once (each holds a connection, an open file; an arrival beyond waits for one to end)",
	"traffic.sleep_level: 0: want 1 or 2",
	"timeouts.start_s: 0: want seconds in (0, 86400] (at most a day)",
	"timeouts.request_s: 0: want seconds in (0, 86400] (at most a day)",
	"timeouts.sleep_s: 0: want seconds in (0, 86400] (at most a day)",
	"timeouts.wake_s: 0: want seconds in (0, 86400] (at most a day)",
	"timeouts.stop_s: 0: want seconds in (0, 86400] (at most a day)",
	"timeouts.poll_ms: 0: want a readiness poll interval in [1, 60000] ms",
	"thresholds.regression_alpha: 0: want a significance level in (0, 1), e.g. 0.05",
	"out_dir: empty: name a directory for the report",
}

// wantWrongEverywhere is Validate's message for wrongEverywhere().
var wantWrongEverywhere = []string{
	"models[0].extra_args: --tensor-parallel-size 2 needs 2 GPUs, but gpus is 1: set gpus to 2",
	"gpu_index: -1: want an NVML device index (0 for the first GPU)",
	"memory: \"sim\" reads vllmsim's simulated GPU, but command is \"vllm\": use \"none\"",
	"models[0].thresholds.max_failed_requests: 1.5: a number of requests, want a whole number",
	"models[0].thresholds: unknown threshold \"nope\" (keys as in thresholds)",
	"models[0].thresholds.regression_alpha: applies to the whole run, not to one model: set it in thresholds",
	"models[0].sim_faults: faults are injected by vllmsim only, but command is \"vllm\"",
	"models[0].extra_args: pass the key as api_key (it would show in logs as an argument)",
	"models[0].lora_modules: adapter name \"b c\": use letters, digits, - or _",
	"models[0].lora_modules: adapter name \"m\" is the model's own name: requests could not tell them apart",
	"models[0].lora_modules.ok: empty path: the adapter's directory or Hugging Face id",
	"models[1].label: \"A\" used twice: labels must be unique",
	"models[1].name: missing: the model name or path to serve",
	"models[1].port: 8000 already used by model A",
	"models[1].gpu_memory_utilization: 2: want a share in (0, 1]",
	"protocol.soak_cycles: 1: the soak rotates over at least 3 models, the config has 2: add models or set soak_cycles 0",
	"kubernetes.namespace: empty",
	"timeouts.wake_s: 0: want seconds in (0, 86400] (at most a day)",
	"thresholds.min_l1_release_percent: 101: a percent of the model's memory, at most 100",
	"thresholds.max_residual_gib: NaN: want a number",
	"api_key: holds a control character or surrounding space (a newline from a secrets file?): it would break the Authorization header",
	"thresholds.regression_percent: -1: must not be negative",
	"thresholds.regression_alpha: 1: want a significance level in (0, 1), e.g. 0.05",
	"baseline: stat /nonexistent/bench.txt: no such file or directory (a previous run's bench.txt, or a directory of runs)",
}
