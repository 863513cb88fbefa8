package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.json")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func TestDefaultIsTheReferenceProtocol(t *testing.T) {
	p := Default().Protocol
	assert.Equal(t, 2, p.RestartWarm)
	assert.Equal(t, 5, p.SleepL1Cycles)
	assert.Equal(t, 3, p.SleepL2Cycles)
	assert.Equal(t, []int{1, 4}, p.Concurrency)
	assert.Equal(t, 2*8, p.Rounds*p.RequestsPerRound)
	assert.Equal(t, 19, p.Handoffs)
	assert.Equal(t, 4096, p.ContextTokens)
	assert.Equal(t, uint64(4<<30), Default().KVBytes())
	assert.Equal(t, 128, p.MaxTokens)
}

func TestBackendDefaultsFollowTheBuildTag(t *testing.T) {
	c := Default()
	if GPUTag {
		assert.Equal(t, "vllm", c.Command)
		assert.Equal(t, "nvml", c.Memory)
		assert.Equal(t, ReferenceModels(), c.Models, "without a config file, the reference run's models")
		assert.Equal(t, 0.95, c.Thresholds.MinAfterWakeTPSRatio)
		_, err := Load(env(nil))
		assert.NoError(t, err, "go test -tags gpu ./... runs with no config at all")
		return
	}
	assert.Equal(t, "vllmsim", c.Command)
	assert.Equal(t, "sim", c.Memory)
	assert.Len(t, c.Models, 2)
	assert.Equal(t, 0.8, c.Thresholds.MinAfterWakeTPSRatio, "tiny models' tok/s is noisy on a busy CI machine")
	_, err := Load(env(nil))
	assert.NoError(t, err, "go test ./... runs with no config at all")
}

func TestShippedConfigsLoad(t *testing.T) {
	for f, models := range map[string]int{"example-config.json": 2, "demo.json": 2, "gpu-example.json": 2, "soak.json": 3, "k8s.json": 2, "fleet.json": 1, "device.json": 2,
		"variants-upgrade.json": 2, "variants-options.json": 2, "variants-sleep-level.json": 2, "variants-sleep-options.json": 2, "variants-env.json": 2,
		"variants-gate-power.json": 2, "variants-gate-power-slow-wake.json": 2} {
		t.Run(f, func(t *testing.T) {
			path := filepath.Join("..", "..", "testdata", f)
			c, err := Load(env(map[string]string{EnvFile: path}))
			require.NoError(t, err)
			assert.Len(t, c.Models, models)
			for _, v := range c.VariantNames() { // each variant's config loads as its block's run loads it
				_, err := Load(env(map[string]string{EnvFile: path, EnvVariant: v}))
				assert.NoError(t, err, v)
			}
		})
	}
}

func TestFileOverridesDefaultsAndEnvOverridesFile(t *testing.T) {
	p := writeFile(t, `{"protocol": {"handoffs": 3, "concurrency": [2]}, "models": [{"label": "X", "name": "tiny-a", "gpu_memory_utilization": 0.5}]}`)
	c, err := Load(env(map[string]string{
		EnvFile:                                 p,
		"WAKEBENCH_PROTOCOL_SLEEP_L1_CYCLES":    "2",
		"WAKEBENCH_PROTOCOL_CONCURRENCY":        "1, 8",
		"WAKEBENCH_PROTOCOL_REQUESTS_PER_ROUND": "8", // vllmsim's default is 4: a round must reach its concurrency
		"WAKEBENCH_SIM_TIME_SCALE":              "0.5",
		"WAKEBENCH_OUT_DIR":                     "/tmp/x",
		"WAKEBENCH_PROTOCOL_OPT_IN":             " wake-burst, ",
	}))
	require.NoError(t, err)
	assert.Equal(t, []string{"wake-burst"}, c.Protocol.OptIn, "a list of names, comma-separated")
	assert.Equal(t, 3, c.Protocol.Handoffs)
	assert.Equal(t, 2, c.Protocol.SleepL1Cycles)
	assert.Equal(t, []int{1, 8}, c.Protocol.Concurrency)
	assert.Equal(t, 0.5, c.Sim.TimeScale)
	assert.Equal(t, "/tmp/x", c.OutDir)
	require.Len(t, c.Models, 1, "a models list replaces the defaults whole")
	assert.Equal(t, "X", c.Models[0].Label)
	assert.Equal(t, 128, c.Protocol.MaxTokens, "keys absent from the file keep their defaults")
}

func TestBadInputNamesTheKey(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  map[string]string
		want []string
	}{
		{"unknown key", `{"protocol": {"handofs": 3}}`, nil, []string{`unknown key "protocol.handofs"`}},
		{"keys are case-sensitive", `{"protocol": {"HANDOFFS": 3}}`, nil, []string{`unknown key "protocol.HANDOFFS"`}},
		{"every type error, not the first", `{"protocol": {"rounds": "two", "handoffs": 2.5}, "sim": {"time_scale": "fast"}, "models": [{"label": 1}]}`, nil,
			[]string{`key "protocol.rounds": want an integer, got JSON string`, `key "protocol.handoffs": want an integer, got 2.5`,
				`key "sim.time_scale": want a number, got JSON string`, `key "models[0].label": want a string, got JSON number`}},
		{"negative threshold", `{"thresholds": {"max_residual_gib": -1, "min_after_wake_tps_ratio": -0.5}}`, nil,
			[]string{"thresholds.max_residual_gib: -1: must not be negative", "thresholds.min_after_wake_tps_ratio: -0.5: must not be negative"}},
		{"release over 100 %", `{"thresholds": {"min_l1_release_percent": 150}}`, nil, []string{"thresholds.min_l1_release_percent: 150: a percent"}},
		{"per-model threshold checked", `{"models": [{"label":"A","name":"x","gpu_memory_utilization":0.4,"thresholds":{"max_residual_gib":-2,"max_failed_requests":1.5}}]}`, nil,
			[]string{"models[0].thresholds.max_residual_gib: -2: must not be negative", "models[0].thresholds.max_failed_requests: 1.5: a number of requests"}},
		{"per-model override of a run-wide threshold", `{"models": [{"label":"A","name":"x","gpu_memory_utilization":0.4,"thresholds":{"max_switch_to_first_token_s":5,"regression_percent":5}}]}`, nil,
			[]string{"models[0].thresholds.max_switch_to_first_token_s: applies to the whole run", "models[0].thresholds.regression_percent: applies to the whole run"}},
		{"unbounded router queue", `{"traffic": {"max_queue": 0}}`, nil, []string{"traffic.max_queue: 0: want 1 to 250000"}},
		{"shed requests a fraction", `{"thresholds": {"max_shed_requests": 0.5}}`, nil, []string{`"thresholds.max_shed_requests": want an integer, got 0.5`}},
		{"shed requests per model", `{"models": [{"label":"A","name":"x","gpu_memory_utilization":0.4,"thresholds":{"max_shed_requests":3}}]}`, nil,
			[]string{"models[0].thresholds.max_shed_requests: applies to the whole run"}},
		{"absurd count", `{}`, map[string]string{"WAKEBENCH_PROTOCOL_HANDOFFS": "1000000000"}, []string{"protocol.handoffs: 1000000000: at most 10000"}},
		{"concurrency a round never reaches", `{"protocol": {"concurrency": [4, 64], "requests_per_round": 8}}`, nil,
			[]string{"protocol.concurrency[1]: 64 exceeds requests_per_round 8"}},
		{"no GPU", `{"gpus": 0}`, nil, []string{"gpus: 0: want the number of GPUs the run uses"}},
		{"tensor parallel beyond the run's GPUs", `{"models": [{"label":"A","name":"x","gpu_memory_utilization":0.4,"extra_args":["--tensor-parallel-size","2"]}]}`, nil,
			[]string{"models[0].extra_args: --tensor-parallel-size 2 needs 2 GPUs, but gpus is 1: set gpus to 2"}},
		{"api key with a newline", `{"api_key": "secret\n"}`, nil, []string{"api_key: holds a control character"}},
		{"wrong type", `{"protocol": {"rounds": "two"}}`, nil, []string{`key "protocol.rounds"`, "int", "string"}},
		{"not an object", `[1]`, nil, []string{"not a JSON object"}},
		{"text after the object", `{"protocol": {}} {}`, nil, []string{"not a JSON object: text follows the object"}},
		{"zero count", `{"protocol": {"sleep_l1_cycles": 0}}`, nil, []string{"protocol.sleep_l1_cycles: 0: must be at least 1"}},
		{"negative concurrency", `{"protocol": {"concurrency": [1, -4]}}`, nil, []string{"protocol.concurrency[1]"}},
		{"a label read as GOMAXPROCS", `{"models": [{"label":"m-12","name":"x","gpu_memory_utilization":0.4},{"label":"m-a","name":"y","gpu_memory_utilization":0.4}]}`, nil, []string{`models[0].label: "m-12" ends in - and digits, which bench.txt's readers (benchstat, the regression gate) take for go test's GOMAXPROCS suffix of a name that ends in it (BenchmarkMemory/model=<label>): end it otherwise (e.g. "m_12")`}},
		{"duplicate label", `{"models": [{"label":"A","name":"x","gpu_memory_utilization":0.4},{"label":"A","name":"y","gpu_memory_utilization":0.4}]}`, nil, []string{`models[1].label: "A" used twice`}},
		{"duplicate port", `{"models": [{"label":"A","name":"x","port":8001,"gpu_memory_utilization":0.4},{"label":"B","name":"y","port":8001,"gpu_memory_utilization":0.4}]}`, nil, []string{"models[1].port: 8001 already used by model A"}},
		{"missing name", `{"models": [{"label":"A","gpu_memory_utilization":0.4}]}`, nil, []string{"models[0].name: missing"}},
		{"bad share", `{"models": [{"label":"A","name":"x","gpu_memory_utilization":1.5}]}`, nil, []string{"models[0].gpu_memory_utilization: 1.5"}},
		{"sim memory with real vllm", `{"command": "vllm", "memory": "sim"}`, nil, []string{`memory: "sim" reads vllmsim`}},
		{"unknown memory source", `{"memory": "dcgm"}`, nil, []string{`memory: "dcgm": want "nvml", "sim" or "none"`}},
		{"negative gpu index", `{"gpu_index": -1}`, nil, []string{"gpu_index: -1"}},
		{"bad env", `{}`, map[string]string{"WAKEBENCH_PROTOCOL_ROUNDS": "many"}, []string{"WAKEBENCH_PROTOCOL_ROUNDS", "want an integer"}},
		{"bad env list", `{}`, map[string]string{"WAKEBENCH_PROTOCOL_CONCURRENCY": "1,x"}, []string{"comma-separated integers"}},
		{"soak over two models", `{"protocol": {"soak_cycles": 10}}`, nil, []string{"protocol.soak_cycles: 10: the soak rotates over at least 3 models, the config has 2"}},
		{"soak level", `{"protocol": {"soak_level": 3}}`, nil, []string{"protocol.soak_level: 3: want 1 or 2"}},
		{"more logprobs than vLLM gives", `{"protocol": {"correctness_logprobs": 21}}`, nil, []string{"protocol.correctness_logprobs: 21: at most 20"}},
		{"negative tolerances", `{"protocol": {"logprob_tolerance": -0.1, "engine_tolerance_percent": -5}}`, nil,
			[]string{"protocol.logprob_tolerance: -0.1", "protocol.engine_tolerance_percent: -5"}},
		{"bad LoRA modules", `{"models": [{"label":"A","name":"x","gpu_memory_utilization":0.4,"lora_modules":{"x":"/a","ok":" ","b c":"/d"}}]}`, nil,
			[]string{`models[0].lora_modules: adapter name "b c"`, `models[0].lora_modules: adapter name "x" is the model's own name`, "models[0].lora_modules.ok: empty path"}},
		{"traffic", `{"traffic": {"arrivals": "bursty", "rates": {"Z": 1, "A": -1}, "sleep_level": 3, "in_flight_modes": ["later"], "workload": {"kind": "zipf"}, "trace": "/nonexistent.csv"}}`, nil,
			[]string{`traffic.arrivals: "bursty"`, `traffic.rates: "Z" is not a model label`, "traffic.rates.A: -1", "traffic.sleep_level: 3", `traffic.in_flight_modes[0]: "later"`, `traffic.workload.kind: "zipf"`, "traffic.trace: stat /nonexistent.csv"}},
		{"traffic prompt beyond the context", `{"traffic": {"workload": {"kind": "fixed", "prompt_tokens": 5000, "output_tokens": 8}}}`, nil, []string{"(5008) must fit protocol.context_tokens (4096)"}},
		{"traffic output beyond the context", `{"traffic": {"workload": {"kind": "fixed", "prompt_tokens": 64, "output_tokens": 4090}}}`, nil, []string{"traffic.workload: prompt_tokens + shared_prefix_tokens + output_tokens (4154) must fit protocol.context_tokens (4096)"}},
		{"traffic rate beyond memory", `{"traffic": {"rate": 1e9}}`, nil, []string{"traffic.rate/rates/duration_s/warmup_requests: 1.2e+10 requests planned", "at most 250000 in one run"}},
		{"traffic warm-up beyond memory", `{"traffic": {"warmup_requests": 1000000}}`, nil, []string{"traffic.rate/rates/duration_s/warmup_requests: 2e+06 requests planned"}},
		{"traffic beyond the plan's memory", `{"traffic": {"rate": 800, "duration_s": 150, "workload": {"kind": "fixed", "prompt_tokens": 4000, "output_tokens": 8}}}`, nil,
			[]string{"traffic.rate/rates/duration_s/warmup_requests: 2.4e+05 requests of 4000 prompt and 8 output tokens hold about 6.5 GiB with their results: at most 1 GiB in one run"}},
		{"a dataset prefix beyond the context", `{"traffic": {"workload": {"kind": "dataset", "dataset": "../../testdata/traffic-sharegpt.jsonl", "shared_prefix_tokens": 5000}}}`, nil,
			[]string{"traffic.workload.shared_prefix_tokens: 5000: every dataset prompt starts with it, so it must stay below protocol.context_tokens (4096)"}},
		{"in-flight modes twice", `{"traffic": {"in_flight_modes": ["abort", "wait", "abort"]}}`, nil, []string{`traffic.in_flight_modes[2]: "abort" twice`}},
		{"in-flight modes empty", `{"traffic": {"in_flight_requests": 4, "in_flight_modes": []}}`, nil, []string{"traffic.in_flight_modes: empty beside in_flight_requests 4"}},
		{"negative growth limit", `{"thresholds": {"max_residual_growth_mib_per_cycle": -1}}`, nil, []string{"thresholds.max_residual_growth_mib_per_cycle: -1: must not be negative"}},
		{"kubernetes control plane", `{"kubernetes": {"control_plane": "kind"}}`, nil, []string{`kubernetes.control_plane: "kind": want "local"`}},
		{"kubernetes", `{"kubernetes": {"control_plane": "kubeconfig", "handoffs": 1, "sleep_level": 3, "port": 0, "namespace": ""}}`, nil,
			[]string{"kubernetes.handoffs: 1: want 2", "kubernetes.sleep_level: 3: want 1 or 2", "kubernetes.port: 0", "kubernetes.namespace: empty"}},
		{"kubernetes runs two models", `{"kubernetes": {"control_plane": "local"}, "models": [{"label":"A","name":"tiny-a","gpu_memory_utilization":0.3},{"label":"B","name":"tiny-b","gpu_memory_utilization":0.3},{"label":"C","name":"tiny-c","gpu_memory_utilization":0.3}]}`, nil,
			[]string{"kubernetes: the Kubernetes phase runs two models on one claim, not 3"}},
		{"fleet", `{"fleet": {"control_plane": "kubeconfig", "parallelism": -1, "resources": {"nvidia.com/gpu": "one"}}}`, nil,
			[]string{"fleet.parallelism: -1: want 0 (every node at once) to 100000 nodes at once (an Indexed Job's limit)",
				`fleet.resources.nvidia.com/gpu: "one": want a resource name and a quantity (e.g. "nvidia.com/gpu": "1")`}},
		{"fleet control plane", `{"fleet": {"control_plane": "kind"}}`, nil, []string{`fleet.control_plane: "kind": want "local"`}},
		{"variant focus", `{"variants": [{"name": "a"}, {"name": "b"}], "protocol": {"variant_focus": ["[", "BenchmarkSleep/*", "Sleep/* a b", "Sleep/*/* sec/wake"]}}`, nil,
			[]string{`protocol.variant_focus[0]: "["`, `protocol.variant_focus[1]: "BenchmarkSleep/*"`, `protocol.variant_focus[2]: "Sleep/* a b"`}},
		// Each node of a variant fleet runs every variant in every block:
		// 2 × 4 runs of a real vLLM (about an hour each) in 600 s cannot be.
		{"fleet time", `{"command": "vllm", "memory": "none", "fleet": {"control_plane": "local", "timeout_s": 600},
			"variants": [{"name": "a"}, {"name": "b", "extra_args": ["--enforce-eager"]}]}`, nil,
			[]string{"fleet.timeout_s: 600 s, but each node's run takes at least", "run 8 times (2 variants in 4 blocks)", "set fleet.timeout_s (and fleet.deadline_s) above it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{EnvFile: writeFile(t, tt.file)}
			for k, v := range tt.env {
				e[k] = v
			}
			_, err := Load(env(e))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.LessOrEqual(t, len(strings.Split(err.Error(), "\n")), len(tt.want), "one line per problem")
		})
	}
}

func TestMissingFileIsAnError(t *testing.T) {
	_, err := Load(env(map[string]string{EnvFile: "/nonexistent/wakebench.json"}))
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "WAKEBENCH_CONFIG=/nonexistent/wakebench.json"), err.Error())
}

// TestFailedLoadKeepsTheOutDir: a config that cannot be loaded still says
// where its user wants the FAIL report: the file's out_dir whatever else is
// wrong in it, WAKEBENCH_OUT_DIR over it, the default when neither reads.
func TestFailedLoadKeepsTheOutDir(t *testing.T) {
	for _, tc := range []struct {
		name, file, envDir, want string
	}{
		{"type error", `{"out_dir": "/tmp/mine", "protocol": {"rounds": "x"}}`, "", "/tmp/mine"},
		{"unknown key", `{"out_dir": "/tmp/mine", "protocl": {}}`, "", "/tmp/mine"},
		{"invalid value", `{"out_dir": "/tmp/mine", "protocol": {"rounds": -1}}`, "", "/tmp/mine"},
		{"env over file", `{"out_dir": "/tmp/mine", "protocol": {"rounds": "x"}}`, "/tmp/env", "/tmp/env"},
		{"not JSON", `{"out_dir": "/tmp/mine",`, "", Default().OutDir},
		{"out_dir of the wrong type", `{"out_dir": 3}`, "", Default().OutDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{EnvFile: writeFile(t, tc.file)}
			if tc.envDir != "" {
				e["WAKEBENCH_OUT_DIR"] = tc.envDir
			}
			c, err := Load(env(e))
			require.Error(t, err)
			assert.Equal(t, tc.want, c.OutDir)
		})
	}
	c, err := Load(env(map[string]string{EnvFile: "/nonexistent/wakebench.json", "WAKEBENCH_OUT_DIR": "/tmp/env"}))
	require.Error(t, err)
	assert.Equal(t, "/tmp/env", c.OutDir, "a missing file")
	c, err = Load(env(map[string]string{"WAKEBENCH_PROTOCOL_ROUNDS": "x", "WAKEBENCH_OUT_DIR": "/tmp/env"}))
	require.Error(t, err)
	assert.Equal(t, "/tmp/env", c.OutDir, "a bad override")
}

func TestEnvName(t *testing.T) {
	assert.Equal(t, "WAKEBENCH_PROTOCOL_SLEEP_L1_CYCLES", EnvName("protocol", "sleep_l1_cycles"))
}

func TestPerModelThresholds(t *testing.T) {
	p := writeFile(t, `{"thresholds": {"max_residual_gib": 1}, "models": [
		{"label": "A", "name": "a", "gpu_memory_utilization": 0.4, "thresholds": {"max_residual_gib": 2.5, "max_failed_requests": 3}},
		{"label": "B", "name": "b", "gpu_memory_utilization": 0.4}]}`)
	c, err := Load(env(map[string]string{EnvFile: p}))
	require.NoError(t, err)
	assert.Equal(t, 2.5, c.ThresholdsFor("A").MaxResidualGiB)
	assert.Equal(t, 3, c.ThresholdsFor("A").MaxFailedRequests)
	assert.Equal(t, 1.0, c.ThresholdsFor("B").MaxResidualGiB)
	assert.Equal(t, Default().Thresholds.MinAfterWakeTPSRatio, c.ThresholdsFor("B").MinAfterWakeTPSRatio)

	p = writeFile(t, `{"models": [{"label": "A", "name": "a", "gpu_memory_utilization": 0.4, "thresholds": {"max_residul_gib": 2}}]}`)
	_, err = Load(env(map[string]string{EnvFile: p}))
	assert.ErrorContains(t, err, `models[0].thresholds: unknown threshold "max_residul_gib"`)
}

// TestThresholdSetByUser: thresholds from the file, the environment or a
// model's own are the user's; the rest are defaults.
func TestThresholdSetByUser(t *testing.T) {
	p := writeFile(t, `{"thresholds": {"max_residual_gib": 1}, "models": [
		{"label": "A", "name": "a", "gpu_memory_utilization": 0.4, "thresholds": {"min_l1_release_percent": 95}},
		{"label": "B", "name": "b", "gpu_memory_utilization": 0.4}]}`)
	c, err := Load(env(map[string]string{EnvFile: p, "WAKEBENCH_THRESHOLDS_MAX_L1_WAKE_TO_FIRST_TOKEN_S": "5"}))
	require.NoError(t, err)
	assert.True(t, c.ThresholdSetByUser("B", "max_residual_gib"), "file")
	assert.True(t, c.ThresholdSetByUser("B", "max_l1_wake_to_first_token_s"), "environment")
	assert.True(t, c.ThresholdSetByUser("A", "min_l1_release_percent"), "the model's own")
	assert.False(t, c.ThresholdSetByUser("B", "min_l1_release_percent"), "a default")
}

func TestTensorParallel(t *testing.T) {
	for args, want := range map[string]int{"--tensor-parallel-size 4": 4, "--tensor-parallel-size=2": 2, "-tp 8": 8, "--enforce-eager": 0} {
		n, ok := TensorParallel(strings.Fields(args))
		assert.Equal(t, want, n, args)
		assert.Equal(t, want > 0, ok, args)
	}
	c := Default()
	c.GPUs = 2
	c.Models[0].ExtraArgs = []string{"--tensor-parallel-size", "2"}
	assert.NoError(t, c.Validate())
}

// TestExampleListsEveryKey: testdata/example-config.json, which docs/configuration.md
// points to for the list of keys, holds every key the config has.
func TestExampleListsEveryKey(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "example-config.json"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	have := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if strings.HasSuffix(prefix, "thresholds") && strings.HasPrefix(prefix, "models") || strings.HasSuffix(prefix, "lora_modules") {
				return // keyed by data
			}
			for k, e := range x {
				have[prefix+k] = true
				walk(prefix+k+".", e)
			}
		case []any:
			for _, e := range x {
				walk(strings.TrimSuffix(prefix, ".")+"[].", e)
			}
		}
	}
	walk("", doc)
	var missing []string
	var want func(prefix string, t reflect.Type)
	want = func(prefix string, ty reflect.Type) {
		for i := range ty.NumField() {
			k := jsonKey(ty.Field(i))
			if k == "" || k == "-" {
				continue
			}
			if !have[prefix+k] {
				missing = append(missing, prefix+k)
			}
			switch f := ty.Field(i).Type; {
			case f.Kind() == reflect.Struct:
				want(prefix+k+".", f)
			case f.Kind() == reflect.Slice && f.Elem().Kind() == reflect.Struct:
				want(prefix+k+"[].", f.Elem())
			}
		}
	}
	want("", reflect.TypeOf(Config{}))
	assert.Empty(t, missing, "keys the example does not show")
}

// TestDocsListEveryKey: docs/configuration.md's key table names every key
// the config has (by its path, or in its section's row by its own name).
func TestDocsListEveryKey(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	require.NoError(t, err)
	doc := string(b)
	var missing []string
	var walk func(prefix string, ty reflect.Type)
	walk = func(prefix string, ty reflect.Type) {
		for i := range ty.NumField() {
			k := jsonKey(ty.Field(i))
			if k == "" || k == "-" {
				continue
			}
			switch f := ty.Field(i).Type; {
			case f.Kind() == reflect.Struct:
				walk(prefix+k+".", f)
			case f.Kind() == reflect.Slice && f.Elem().Kind() == reflect.Struct:
				walk(prefix+k+"[].", f.Elem())
			default:
				if !strings.Contains(doc, "`"+prefix+k+"`") && !strings.Contains(doc, "`"+k+"`") {
					missing = append(missing, prefix+k)
				}
			}
		}
	}
	walk("", reflect.TypeOf(Config{}))
	assert.Empty(t, missing, "keys docs/configuration.md does not name")
}

// TestModelFeatures: speculative decoding is on where extra_args give
// --speculative-config (its alias -sc, its underscore spelling, with =);
// prefix caching is on unless the last of its flags turns it off; the
// lost-prefix probe takes at most half the context.
func TestModelFeatures(t *testing.T) {
	for args, want := range map[string][2]bool{
		"":                           {false, true},
		"--speculative-config {}":    {true, true},
		"-sc {}":                     {true, true},
		"--speculative_config={}":    {true, true},
		"--no-enable-prefix-caching": {false, false},
		"--no-enable-prefix-caching --enable-prefix-caching": {false, true},
		"--speculative-config-x {}":                          {false, true},
	} {
		m := Model{ExtraArgs: strings.Fields(args)}
		assert.Equal(t, want[0], m.Speculative(), "speculative: %q", args)
		assert.Equal(t, want[1], m.PrefixCaching(), "prefix caching: %q", args)
	}
	p := Default().Protocol
	assert.Equal(t, 2048, p.LostPrefixLen())
	p.ContextTokens = 300
	assert.Equal(t, 150, p.LostPrefixLen())
	p.LostPrefixTokens = 0
	assert.Zero(t, p.LostPrefixLen())
}

// TestInVariantFocus: a focus pattern matches bench.txt's names without
// "Benchmark", * within one /-part, the unit when it names one; an empty
// focus holds every figure.
func TestInVariantFocus(t *testing.T) {
	var p Protocol
	assert.True(t, p.InVariantFocus("Serve/model=A/stage=baseline/conc=1", "tok/s"), "no focus: every figure")
	p.VariantFocus = []string{"Sleep/*/* sec/wake", "Switch/*"}
	for _, tc := range []struct {
		name, unit string
		want       bool
	}{
		{"Sleep/model=B/level=1", "sec/wake", true},
		{"Sleep/model=B/level=1", "sec/first-token", false},
		{"Sleep/model=B", "sec/wake", false}, // * is one part
		{"Switch/dir=A→B", "J", true},        // no unit: every unit
		{"Serve/model=A/stage=baseline/conc=1", "sec/wake", false},
	} {
		assert.Equal(t, tc.want, p.InVariantFocus(tc.name, tc.unit), "%s %s", tc.name, tc.unit)
	}
}

// BoolFlag reads a boolean serve flag as vLLM's argparse does: present
// on, --no- off, =true/=false, the last one given winning.
func TestBoolFlag(t *testing.T) {
	const f = "--sleep-mode-offload-cudagraph"
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--enforce-eager"}, false},
		{[]string{f}, true},
		{[]string{f + "=true"}, true},
		{[]string{f + "=False"}, false},
		{[]string{f, "--no-sleep-mode-offload-cudagraph"}, false},
		{[]string{"--no-sleep-mode-offload-cudagraph", f}, true},
		{[]string{f + "-x"}, false},
		{[]string{"--sleep_mode_offload_cudagraph"}, true},
		{[]string{f + "=off"}, false},
	} {
		assert.Equal(t, tc.want, BoolFlag(tc.args, f), "%q", tc.args)
	}
}

// TestLabelsThatEndInADigit: a label may end in a digit, or hold a "-",
// as long as it does not end in "-" and digits (TestBadInputNamesTheKey).
func TestLabelsThatEndInADigit(t *testing.T) {
	p := writeFile(t, `{"models": [{"label":"m1","name":"a","gpu_memory_utilization":0.3},{"label":"m-a","name":"b","gpu_memory_utilization":0.3},{"label":"A_1","name":"c","gpu_memory_utilization":0.3}]}`)
	c, err := Load(env(map[string]string{EnvFile: p}))
	require.NoError(t, err)
	assert.Equal(t, []string{"m1", "m-a", "A_1"}, []string{c.Models[0].Label, c.Models[1].Label, c.Models[2].Label})
}
