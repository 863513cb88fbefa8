package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// EnvPrefix starts every override variable.
const EnvPrefix = "WAKEBENCH_"

// EnvName is the override variable for a JSON key path, e.g.
// protocol.sleep_l1_cycles → WAKEBENCH_PROTOCOL_SLEEP_L1_CYCLES.
func EnvName(path ...string) string {
	return EnvPrefix + strings.ToUpper(strings.Join(path, "_"))
}

// applyEnv sets every scalar key (and integer lists, comma-separated) from
// its WAKEBENCH_* variable when that is set. Models are per-file only.
func applyEnv(cfg *Config, getenv func(string) string) error {
	return walkEnv(reflect.ValueOf(cfg).Elem(), nil, getenv)
}

func walkEnv(v reflect.Value, path []string, getenv func(string) string) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key := jsonKey(f)
		if key == "" || key == "-" || key == "models" {
			continue
		}
		p := append(append([]string(nil), path...), key)
		fv := v.Field(i)
		if f.Type.Kind() == reflect.Struct {
			if err := walkEnv(fv, p, getenv); err != nil {
				return err
			}
			continue
		}
		name := EnvName(p...)
		raw := getenv(name)
		if raw == "" {
			continue
		}
		if err := setFromString(fv, raw); err != nil {
			return fmt.Errorf("%s=%q (key %s): %w", name, raw, strings.Join(p, "."), err)
		}
	}
	return nil
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
