package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"reflect"
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
	// Set are config keys this variant runs with another value, each a
	// key path as in docs/configuration.md ("protocol.switch_level",
	// "traffic.sleep_level") and its JSON value, e.g. the sleep level the
	// switch and traffic phases use. The keys a variant has fields for,
	// the run's out_dir and baseline, and the variant run's own keys are
	// not settable here (notSettable).
	Set map[string]json.RawMessage `json:"set"`
}

// notSettable are the config keys a variant's set may not change, each
// with what to do instead: its own fields, or what a variant run decides
// for all of its runs.
var notSettable = map[string]string{
	"command":                          "use the variant's command",
	"sim.era":                          "use the variant's sim_era",
	"out_dir":                          "each variant's runs write under the run's out_dir/variants/<name>",
	"baseline":                         "a baseline history is the run's, for every variant alike",
	"protocol.variant_blocks":          "the blocks are the variant run's, not a variant's",
	"protocol.variant_order":           "the order is the variant run's, not a variant's",
	"protocol.variant_seed":            "the seed is the variant run's, not a variant's",
	"protocol.variant_gate":            "the verdict is the variant run's, not a variant's",
	"protocol.variant_focus":           "the verdict's family is the variant run's, for every variant alike",
	"protocol.variant_block_figure":    "a block's figure is the variant run's, for every variant alike",
	"thresholds.regression_percent":    "the paired verdict's tolerance is the variant run's, for every variant alike",
	"thresholds.regression_alpha":      "the paired verdict's significance is the variant run's, for every variant alike",
	"thresholds.regression_min_judged": "the paired verdict's minimum is the variant run's, for every variant alike",
	"timeouts.stop_s":                  "the variant run stops every block's run alike",
	"api_key":                          "a secret: a variant's definition is written into the comparison; set it for the run",
}

// setKey sets the config key at path (dotted, as in docs/configuration.md)
// from its JSON value, strictly: an unknown key (with the nearest known
// one) or a value of the wrong type is an error naming it.
func (c *Config) setKey(path string, raw json.RawMessage) error {
	var known []string
	found := false
	err := walkEnv(reflect.ValueOf(c).Elem(), nil, func(_ string, fv reflect.Value, p []string) error {
		k := strings.Join(p, ".")
		known = append(known, k)
		if k != path {
			return nil
		}
		found = true
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return fmt.Errorf("%s: null: give the value this variant runs with (a file's null keeps the default; a variant's would be no change)", path)
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		v := reflect.New(fv.Type())
		if err := d.Decode(v.Interface()); err != nil {
			return fmt.Errorf("%s: %s: want a value of type %s", path, raw, fv.Type())
		}
		fv.Set(v.Elem())
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		hint := ""
		if near := nearestName(path, known); near != "" {
			hint = " (did you mean " + near + "?)"
		}
		return fmt.Errorf("%q: no such config key%s: docs/configuration.md lists them", path, hint)
	}
	return nil
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

// VariantBlockFigures are protocol.variant_block_figure's values: a
// block's median of a metric's samples, or, for a time or a rate, its
// best sample (the least of a lower-is-better unit's, the most of a
// higher-is-better one's; the median of a memory, power or energy
// figure, and of a unit without a direction, which is not judged). Noise
// that only ever adds time (a stall, another process on the CPU) moves
// the best least: Chen & Revels, "Robust benchmarking in noisy
// environments" (2016, arXiv:1608.04295), whose BenchmarkTools.jl
// compares minimums for it. The best does not see a change in the slow
// samples alone; the median does.
var VariantBlockFigures = []string{"median", "best"}

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
	for _, k := range slices.Sorted(maps.Keys(v.Set)) {
		if why, ok := notSettable[k]; ok {
			return c, fmt.Errorf("variant %s: set %q: not a variant's to set: %s", name, k, why)
		}
		if err := out.setKey(k, v.Set[k]); err != nil {
			return c, fmt.Errorf("variant %s: set %w", name, err)
		}
	}
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
	own := c.problems() // what the run's own config gets wrong, said once
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
		// The config as this variant runs it: its flags and command are
		// held to what a model's own are (a flag wakebench sets, a tensor
		// parallel size beyond gpus, …) and its set keys to what the
		// file's are; what the run's own config already gets wrong is
		// said once, not per variant.
		vc, err := c.ForVariant(v.Name)
		switch {
		case err != nil && len(v.Set) > 0:
			bad(key+".set", "%v", err)
		case err == nil && v.Name != "":
			for _, e := range vc.problems() {
				if !slices.Contains(own, e) && !strings.HasPrefix(e, "sim.era: ") { // a bad sim_era is said above
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
	if !slices.Contains(VariantBlockFigures, p.VariantBlockFigure) {
		bad("protocol.variant_block_figure", "%q: want one of %s", p.VariantBlockFigure, strings.Join(VariantBlockFigures, ", "))
	}
	for i, f := range p.VariantFocus {
		pat, unit, hasUnit := strings.Cut(f, " ")
		key := fmt.Sprintf("protocol.variant_focus[%d]", i)
		if _, err := path.Match(pat, ""); err != nil || pat == "" || strings.HasPrefix(pat, "Benchmark") || (hasUnit && (unit == "" || strings.ContainsAny(unit, " *?["))) {
			bad(key, `%q: want "NAME" or "NAME UNIT": NAME a pattern over bench.txt's names without "Benchmark" (* matches within one /-part: "Sleep/*/* sec/wake"), UNIT one unit`, f)
		}
	}
}

// problems are what Validate finds but the variants' own problems, one
// line each.
func (c Config) problems() []string {
	c.Variants = nil
	err := c.Validate()
	if err == nil {
		return nil
	}
	var out []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		out = append(out, e.Error())
	}
	return out
}
