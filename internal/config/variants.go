package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// EnvVariant names the variant whose settings a run takes (ForVariant):
// the variant run's parent sets it on each block's child run (package
// variants). It is no config key: a config file names its variants, a
// child is one of them.
const EnvVariant = "WAKEBENCH_VARIANT"

// Variant is one way of running the same models that a variant run
// compares with the others, block by block on the same GPU (docs/variants.md):
// each field left empty is the run's own.
type Variant struct {
	// Name is the variant's name in every output (bench.txt's variant:
	// key, the comparison's columns, out_dir/variants/<name>/…).
	Name string `json:"name"`
	// Command is the server program of this variant: another vLLM
	// install (a venv's bin/vllm), or vllmsim.
	Command string `json:"command"`
	// SimEra is the vLLM release line vllmsim speaks for this variant
	// (sim.era): two eras stand for two vLLM releases where there is no GPU.
	SimEra string `json:"sim_era"`
	// ExtraArgs are added to every model's serve flags (after its own),
	// e.g. a sleep option on in one variant and off in the other.
	ExtraArgs []string `json:"extra_args"`
	// Env is added to every server's environment, over the run's own env.
	Env map[string]string `json:"env"`
}

// simFaultsEnv is vllmsim's faults variable (package vllmsim's
// EnvFaults, which config may not import), as sim_faults sets it.
const simFaultsEnv = "VLLMSIM_FAULTS"

// variantName is a variant's name: it names a directory and a benchfmt
// config value.
var variantName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,39}$`)

// envName is an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// VariantOrders are protocol.variant_order's values: "random", the blocks
// the rows of a cyclic Latin square drawn from variant_seed (each variant
// in each place of a block once in every complete group of as many blocks
// as variants, so drift within a block falls on each alike); "alternate",
// each block in the config's order (A B, A B, …).
var VariantOrders = []string{"random", "alternate"}

// VariantNames are the variants' names in config order (the first is the
// reference every other is compared with); none without variants.
func (c Config) VariantNames() []string {
	out := make([]string, len(c.Variants))
	for i, v := range c.Variants {
		out[i] = v.Name
	}
	return out
}

// ForVariant is c as variant name runs it: its command, vllmsim era,
// serve flags (after each model's own) and server environment (over c's
// env), with no variants of its own. The models and maps are copies: c is
// left as it was.
func (c Config) ForVariant(name string) (Config, error) {
	i := slices.IndexFunc(c.Variants, func(v Variant) bool { return v.Name == name })
	if i < 0 {
		return c, fmt.Errorf("%s=%s: the config has no such variant (its variants: %s)", EnvVariant, name, strings.Join(c.VariantNames(), ", "))
	}
	v := c.Variants[i]
	out := c
	out.Variants = nil
	if v.Command != "" {
		out.Command = v.Command
	}
	if v.SimEra != "" {
		out.Sim.Era = v.SimEra
	}
	out.Models = slices.Clone(c.Models)
	for j := range out.Models {
		out.Models[j].ExtraArgs = append(slices.Clip(out.Models[j].ExtraArgs), v.ExtraArgs...)
	}
	out.Env = maps.Clone(c.Env)
	if len(v.Env) > 0 && out.Env == nil {
		out.Env = map[string]string{}
	}
	maps.Copy(out.Env, v.Env)
	return out, nil
}

// validateVariants checks the variants and the servers' env: two or more
// variants, each named once, each era known, each variable a name; and
// the blocks they run in.
func (c Config) validateVariants(bad badFunc) {
	faults := slices.ContainsFunc(c.Models, func(m Model) bool { return m.SimFaults != "" })
	checkEnv := func(key string, env map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(env)) {
			switch {
			case k == simFaultsEnv && faults:
				// The env comes last in a server's environment: it would
				// replace every model's own sim_faults without a word.
				bad(key, "%s would replace the models' sim_faults: set the faults in one place", k)
			case !envName.MatchString(k):
				bad(key, "%q: not an environment variable's name (letters, digits, _)", k)
			case strings.HasPrefix(k, EnvPrefix):
				bad(key, "%s: a wakebench setting is the config's, not a server's environment", k)
			}
		}
	}
	checkEnv("env", c.Env)
	if len(c.Variants) == 0 {
		return
	}
	if len(c.Variants) == 1 {
		bad("variants", "one variant: name two or more (the first is the reference the others are compared with), or none")
	}
	seen := map[string]bool{}
	for i, v := range c.Variants {
		key := fmt.Sprintf("variants[%d]", i)
		switch {
		case !variantName.MatchString(v.Name):
			bad(key+".name", "%q: want 1 to 40 of a-z, 0-9, '.', '_', '-', starting with a letter or digit (it names a directory and a bench.txt value)", v.Name)
		case seen[v.Name]:
			bad(key+".name", "%q: named twice", v.Name)
		}
		seen[v.Name] = true
		if v.SimEra != "" && !slices.Contains(SimEras, v.SimEra) {
			bad(key+".sim_era", "%q: want one of %s", v.SimEra, strings.Join(SimEras, ", "))
		}
		checkEnv(key+".env", v.Env)
		// The servers as this variant runs them: its flags and command
		// are held to what a model's own are (a flag wakebench sets, a
		// tensor parallel size beyond gpus, …); what the run's own
		// config already gets wrong is said once, not per variant.
		if vc, err := c.ForVariant(v.Name); err == nil && v.Name != "" {
			for _, e := range vc.serverProblems() {
				if !slices.Contains(c.serverProblems(), e) {
					bad(key, "%s as this variant runs it: %s", v.Name, e)
				}
			}
		}
	}
	p := c.Protocol
	if p.VariantBlocks < 2 || p.VariantBlocks > 100 {
		bad("protocol.variant_blocks", "%d: want 2 to 100 (each block runs every variant once; the paired difference's interval needs two)", p.VariantBlocks)
	}
	if !slices.Contains(VariantOrders, p.VariantOrder) {
		bad("protocol.variant_order", "%q: want one of %s", p.VariantOrder, strings.Join(VariantOrders, ", "))
	}
}

// serverProblems are what validateServers and validateModels find, one
// line each.
func (c Config) serverProblems() []string {
	var out []string
	collect := func(key, format string, a ...any) { out = append(out, key+": "+fmt.Sprintf(format, a...)) }
	c.validateServers(collect)
	c.validateModels(collect)
	return out
}
