package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
)

// EnvPrefix starts every override variable.
const EnvPrefix = "WAKEBENCH_"

// EnvName is the override variable for a JSON key path, e.g.
// protocol.sleep_l1_cycles → WAKEBENCH_PROTOCOL_SLEEP_L1_CYCLES.
func EnvName(path ...string) string {
	return EnvPrefix + strings.ToUpper(strings.Join(path, "_"))
}

// applyEnv sets every scalar key (and integer lists, comma-separated) from
// its WAKEBENCH_* variable when that is set. Models, variants and env are per-file only.
func applyEnv(cfg *Config, getenv func(string) string) error {
	return walkEnv(reflect.ValueOf(cfg).Elem(), nil, func(name string, fv reflect.Value, p []string) error {
		raw := getenv(name)
		if raw == "" {
			return nil
		}
		if err := setFromString(fv, raw); err != nil {
			return fmt.Errorf("%s=%q (key %s): %w", name, raw, strings.Join(p, "."), err)
		}
		return nil
	})
}

// walkEnv calls fn with the override variable, the field and the key path
// of every key of v that an environment variable may set (every one but
// the models, the variants and the servers' env, which are per-file only).
func walkEnv(v reflect.Value, path []string, fn func(name string, fv reflect.Value, p []string) error) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key := jsonKey(f)
		if key == "" || key == "-" || key == "models" || key == "variants" || key == "env" {
			continue
		}
		p := append(append([]string(nil), path...), key)
		fv := v.Field(i)
		if f.Type.Kind() == reflect.Struct {
			if err := walkEnv(fv, p, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(EnvName(p...), fv, p); err != nil {
			return err
		}
	}
	return nil
}

// OtherEnv are the WAKEBENCH_ variables that set no config key, each with
// what reads it. With EnvFile and each key's override (EnvName) they are
// every WAKEBENCH_ variable wakebench reads (KnownEnv);
// TestEveryEnvNameIsKnown holds this list to the sources.
func OtherEnv() map[string]string {
	return map[string]string{
		"WAKEBENCH_CHILD":             "robustness_test.go: a child run of the robustness tests",
		"WAKEBENCH_CHILD_FAIL":        "robustness_test.go: a child run whose test fails on purpose",
		"WAKEBENCH_CHROMIUM":          "internal/htmlreport's tests: the Chromium that renders report.html",
		"WAKEBENCH_FIGURES":           "figures_test.go: make figures' whole-run figure test",
		"WAKEBENCH_FLEET_JOB":         "package fleetjob: a fleet Pod's Job name",
		"WAKEBENCH_FLEET_JOB_UID":     "package fleetjob: a fleet Pod's Job UID",
		"WAKEBENCH_FLEET_MAX_BYTES":   "package fleetjob: a fleet Pod's result size bound",
		"WAKEBENCH_FLEET_NAMESPACE":   "package fleetjob: a fleet Pod's namespace",
		"WAKEBENCH_FLEET_NODE":        "package fleetjob: a fleet Pod's node",
		"WAKEBENCH_FLEET_NODE_CONFIG": "package fleetjob: a fleet Pod's config",
		"WAKEBENCH_FLEET_POD":         "package fleetjob: a fleet Pod's name",
		"WAKEBENCH_GPU_INDEX":         "internal/backend's NVML test (gpu tag): the device it reads",
		"WAKEBENCH_K8S_BIN":           "package harness and scripts/k8s-build.sh: the local control plane's binaries",
		"WAKEBENCH_PERF_PINGER":       "internal/perf's tests: the floor's pinger child",
		"WAKEBENCH_PERF_URL":          "internal/perf's tests and scripts/peers.sh: a server to load",
		"WAKEBENCH_TEST_READ_DELAY_S": "package harness: a test hook that slows the memory reads",
		"WAKEBENCH_UNIT_TESTS":        "package testmain: every test of a package under the gpu tag",
		"WAKEBENCH_VARIANT":           "package config: the variant a variant run's block runs (set by the run's parent, package variants)",
		"WAKEBENCH_VLLMSIM":           "package backend: a vllmsim binary built elsewhere",
	}
}

// KnownEnv is every WAKEBENCH_ variable wakebench reads, sorted: EnvFile,
// every key's override and OtherEnv.
func KnownEnv() []string {
	out := []string{EnvFile}
	_ = walkEnv(reflect.ValueOf(&Config{}).Elem(), nil, func(name string, _ reflect.Value, _ []string) error {
		out = append(out, name)
		return nil
	})
	out = slices.AppendSeq(out, maps.Keys(OtherEnv()))
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckEnv refuses each WAKEBENCH_ variable of environ (os.Environ's
// NAME=value) that wakebench does not read (KnownEnv): a misspelt
// override (the baseline's, one letter short) would otherwise leave its
// setting at the default, the regression gate off, without a word. Each is named, with
// the nearest known name where one is near.
func CheckEnv(environ []string) error {
	known := KnownEnv()
	var unknown []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix) && !isServiceLink(name, value) {
			if _, ok := slices.BinarySearch(known, name); !ok {
				unknown = append(unknown, name)
			}
		}
	}
	slices.Sort(unknown)
	var errs []error
	for _, name := range slices.Compact(unknown) {
		hint := ""
		if near := nearestName(name, known); near != "" {
			hint = " (did you mean " + near + "?)"
		}
		errs = append(errs, fmt.Errorf("environment: %s names no wakebench setting%s: unset it, or use a name docs/configuration.md lists", name, hint))
	}
	return errors.Join(errs...)
}

// isServiceLink says whether name=value is one of the variables Kubernetes
// gives every container of a namespace for each Service in it (a Service
// wakebench-a gives the prefix, A_, then SERVICE_HOST, SERVICE_PORT, PORT
// with a tcp:// URL, PORT_8000_TCP_ADDR, …): a fleet node's Pod meets them
// where the Kubernetes phase's Services live, and they are no setting of
// the user's. A bare _PORT is one only with a service link's URL for
// value, so a mistyped kubernetes.port override is still refused.
func isServiceLink(name, value string) bool {
	if serviceLink.MatchString(name) {
		return true
	}
	return strings.HasSuffix(name, "_PORT") && (strings.HasPrefix(value, "tcp://") || strings.HasPrefix(value, "udp://") || strings.HasPrefix(value, "sctp://"))
}

var serviceLink = regexp.MustCompile(`^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)

// nearestName is the name of known nearest to name by edit distance, ""
// where none is within a third of name's length after the prefix (at
// least 2 edits): a hint, not a guess at an unrelated variable.
func nearestName(name string, known []string) string {
	best, bestD := "", max(2, len(strings.TrimPrefix(name, EnvPrefix))/3)+1
	for _, k := range known {
		if d := levenshtein.ComputeDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func setFromString(v reflect.Value, raw string) error {
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		v.SetInt(int64(n))
	case reflect.Float64:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("want a number")
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v.SetBool(b)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String { // a list of names: WAKEBENCH_PROTOCOL_OPT_IN=wake-burst
			var names []string
			for part := range strings.SplitSeq(raw, ",") {
				if part = strings.TrimSpace(part); part != "" {
					names = append(names, part)
				}
			}
			v.Set(reflect.ValueOf(names).Convert(v.Type()))
			return nil
		}
		if v.Type().Elem().Kind() != reflect.Int {
			return fmt.Errorf("not settable from the environment")
		}
		parts := strings.Split(raw, ",")
		s := reflect.MakeSlice(v.Type(), len(parts), len(parts))
		for i, part := range parts {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil {
				return fmt.Errorf("want comma-separated integers, e.g. 1,4")
			}
			s.Index(i).SetInt(int64(n))
		}
		v.Set(s)
	default:
		return fmt.Errorf("not settable from the environment")
	}
	return nil
}
