package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const variantsFile = `{
  "command": "vllmsim",
  "memory": "none",
  "env": {"VLLM_LOGGING_LEVEL": "INFO"},
  "models": [
    {"label": "A", "name": "tiny-a", "gpu_memory_utilization": 0.4, "extra_args": ["--enforce-eager"]},
    {"label": "B", "name": "tiny-b", "gpu_memory_utilization": 0.4}
  ],
  "variants": [
    {"name": "v0.31", "sim_era": "b"},
    {"name": "v0.33", "command": "/opt/vllm-0.33/bin/vllm", "extra_args": ["--enable-prefix-caching"], "env": {"VLLM_LOGGING_LEVEL": "DEBUG", "X": "1"}}
  ],
  "protocol": {"variant_blocks": 4}
}`

// A block's child run takes its variant's settings from WAKEBENCH_VARIANT:
// the variant's command, era, flags after each model's own and env over
// the run's, and no variants; the parent's config is left as it was.
func TestLoadTakesTheVariantOfItsBlock(t *testing.T) {
	path := writeFile(t, variantsFile)
	parent, err := Load(env(map[string]string{EnvFile: path}))
	require.NoError(t, err)
	assert.Equal(t, []string{"v0.31", "v0.33"}, parent.VariantNames())
	assert.Equal(t, 4, parent.Protocol.VariantBlocks)
	assert.Equal(t, "random", parent.Protocol.VariantOrder, "the default order")

	ref, err := Load(env(map[string]string{EnvFile: path, EnvVariant: "v0.31"}))
	require.NoError(t, err)
	assert.Empty(t, ref.Variants)
	assert.Equal(t, "vllmsim", ref.Command)
	assert.Equal(t, "b", ref.Sim.Era)
	assert.Equal(t, []string{"--enforce-eager"}, ref.Models[0].ExtraArgs)
	assert.Equal(t, map[string]string{"VLLM_LOGGING_LEVEL": "INFO"}, ref.Env)

	v, err := Load(env(map[string]string{EnvFile: path, EnvVariant: "v0.33"}))
	require.NoError(t, err)
	assert.Equal(t, "/opt/vllm-0.33/bin/vllm", v.Command)
	assert.Equal(t, "", v.Sim.Era, "the run's own era")
	assert.Equal(t, []string{"--enforce-eager", "--enable-prefix-caching"}, v.Models[0].ExtraArgs)
	assert.Equal(t, []string{"--enable-prefix-caching"}, v.Models[1].ExtraArgs)
	assert.Equal(t, map[string]string{"VLLM_LOGGING_LEVEL": "DEBUG", "X": "1"}, v.Env)

	// ForVariant copies: the parent's models and env are untouched.
	again, err := parent.ForVariant("v0.33")
	require.NoError(t, err)
	again.Models[0].ExtraArgs[0] = "changed"
	again.Env["X"] = "2"
	assert.Equal(t, []string{"--enforce-eager"}, parent.Models[0].ExtraArgs)
	assert.Equal(t, map[string]string{"VLLM_LOGGING_LEVEL": "INFO"}, parent.Env)

	seeded, err := Load(env(map[string]string{EnvFile: path, "WAKEBENCH_PROTOCOL_VARIANT_SEED": "7"}))
	require.NoError(t, err)
	assert.Equal(t, 7, seeded.Protocol.VariantSeed, "settable from the environment, as every scalar key")

	// A variant's set: other values of config keys, checked as the file's.
	levels := `{"variants": [{"name": "l1"}, {"name": "l2", "set": {"protocol.switch_level": 2, "traffic.sleep_level": 2, "protocol.concurrency": [1, 2]}}]}`
	lpath := writeFile(t, levels)
	l1, err := Load(env(map[string]string{EnvFile: lpath, EnvVariant: "l1"}))
	require.NoError(t, err)
	assert.Equal(t, 1, l1.Protocol.SwitchLevel, "the default")
	assert.Equal(t, 1, l1.Traffic.SleepLevel)
	l2, err := Load(env(map[string]string{EnvFile: lpath, EnvVariant: "l2"}))
	require.NoError(t, err)
	assert.Equal(t, 2, l2.Protocol.SwitchLevel)
	assert.Equal(t, 2, l2.Traffic.SleepLevel)
	assert.Equal(t, []int{1, 2}, l2.Protocol.Concurrency)
	assert.Equal(t, Default().Protocol.Concurrency, l1.Protocol.Concurrency, "the reference keeps the run's own")

	_, err = Load(env(map[string]string{EnvFile: path, EnvVariant: "v0.32"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WAKEBENCH_VARIANT=v0.32: the config has no such variant (its variants: v0.31, v0.33)")
}

func TestBadVariantsAreNamed(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"variants": [{"name": "only"}]}`, "variants: one variant"},
		{`{"variants": [{"name": "a"}, {"name": "a"}]}`, `variants[1].name: "a": named twice`},
		{`{"variants": [{"name": "A b"}, {"name": "c"}]}`, `variants[0].name: "A b": want 1 to 40`},
		{`{"variants": [{"name": "a", "sim_era": "z"}, {"name": "c"}]}`, `variants[0].sim_era: "z": want one of a, b, c, d, proposed`},
		{`{"variants": [{"name": "a", "env": {"WAKEBENCH_OUT_DIR": "x"}}, {"name": "c"}]}`, "variants[0].env: WAKEBENCH_OUT_DIR: a wakebench setting"},
		{`{"env": {"A=B": "x"}}`, `env: "A=B": not an environment variable's name`},
		{`{"models": [{"label": "A", "name": "tiny-a", "gpu_memory_utilization": 0.3, "sim_faults": "slow-wake=2"}], "variants": [{"name": "a"}, {"name": "c", "env": {"VLLMSIM_FAULTS": "slow-wake=1.1"}}]}`, "variants[1].env: VLLMSIM_FAULTS would replace the models' sim_faults"},
		{`{"variants": [{"name": "a"}, {"name": "c"}], "protocol": {"variant_blocks": 1}}`, "protocol.variant_blocks: 1: want 2 to 100"},
		{`{"variants": [{"name": "a"}, {"name": "c"}], "protocol": {"variant_order": "abba"}}`, `protocol.variant_order: "abba": want one of random, alternate`},
		{`{"variants": [{"name": "a"}, {"name": "c", "extra_args": ["--no-enable-sleep-mode"]}]}`, "variants[1]: c as this variant runs it: models[0].extra_args: \"--no-enable-sleep-mode\" turns sleep mode off"},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"protocol.switch_levle": 2}}]}`, `variants[1].set: variant c: set "protocol.switch_levle": no such config key (did you mean protocol.switch_level?)`},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"protocol.switch_level": "2"}}]}`, `variants[1].set: variant c: set protocol.switch_level: "2": want a value of type int`},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"protocol.switch_level": 3}}]}`, "variants[1]: c as this variant runs it: protocol.switch_level: 3: want 1 or 2"},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"traffic.sleep_level": 0}}]}`, "variants[1]: c as this variant runs it: traffic.sleep_level: 0: want 1 or 2"},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"sim.era": "b"}}]}`, `variants[1].set: variant c: set "sim.era": not a variant's to set: use the variant's sim_era`},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"protocol.variant_blocks": 8}}]}`, `variants[1].set: variant c: set "protocol.variant_blocks": not a variant's to set`},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"models": []}}]}`, `variants[1].set: variant c: set "models": no such config key`},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"protocol.variant_gate": false}}]}`, `set "protocol.variant_gate": not a variant's to set`},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"thresholds.regression_percent": 50}}]}`, `set "thresholds.regression_percent": not a variant's to set`},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"api_key": "x"}}]}`, `set "api_key": not a variant's to set: a secret`},
		{`{"variants": [{"name": "a"}, {"name": "c", "set": {"thresholds.min_l1_release_percent": null}}]}`, `set thresholds.min_l1_release_percent: null: give the value`},
	} {
		_, err := Load(env(map[string]string{EnvFile: writeFile(t, tc.body)}))
		if assert.Error(t, err, tc.body) {
			assert.Contains(t, err.Error(), tc.want, tc.body)
		}
	}
}
