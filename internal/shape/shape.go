// Package shape compares the key paths and JSON types of two documents:
// how a run's report.json is held to the reference report's shape.
package shape

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Diff lists every key path of reference that ours lacks or holds with
// another JSON type. Objects are compared key by key (extra keys in ours are
// fine); every element of an array in ours is compared with the reference's
// first element. Objects at the dataKeyed paths are compared by shape only:
// ours must have at least one entry, and each is compared with the
// reference's first (so a run of models A, B, C matches a reference of A, B).
// A summary of no samples ("n": 0) may hold null where the reference has
// a number. Paths look like models.A.sleep.1.wake_api_s.median.
func Diff(reference, ours []byte, dataKeyed ...string) ([]string, error) {
	var ref, got any
	if err := json.Unmarshal(reference, &ref); err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	if err := json.Unmarshal(ours, &got); err != nil {
		return nil, fmt.Errorf("ours: %w", err)
	}
	var diffs []string
	var walk func(path string, r, g any)
	walk = func(path string, r, g any) {
		if jsonType(r) != jsonType(g) {
			diffs = append(diffs, fmt.Sprintf("%s: reference has %s, ours %s", strings.TrimPrefix(path, "."), jsonType(r), jsonType(g)))
			return
		}
		switch r := r.(type) {
		case map[string]any:
			gm := g.(map[string]any)
			if slices.Contains(dataKeyed, strings.TrimPrefix(path, ".")) && len(r) > 0 {
				first := slices.Sorted(maps.Keys(r))[0]
				if len(gm) == 0 {
					diffs = append(diffs, fmt.Sprintf("%s: reference has entries, ours none", strings.TrimPrefix(path, ".")))
				}
				for _, k := range slices.Sorted(maps.Keys(gm)) {
					walk(path+"."+k, r[first], gm[k])
				}
				return
			}
			keys := make([]string, 0, len(r))
			for k := range r {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if unmeasured(gm, k) && jsonType(r[k]) == "number" {
					continue
				}
				walk(path+"."+k, r[k], gm[k])
			}
		case []any:
			ga := g.([]any)
			if len(r) == 0 {
				return
			}
			if len(ga) == 0 {
				diffs = append(diffs, fmt.Sprintf("%s: reference has elements, ours is empty", strings.TrimPrefix(path, ".")))
			}
			for i, e := range ga {
				walk(fmt.Sprintf("%s[%d]", path, i), r[0], e)
			}
		}
	}
	walk("", ref, got)
	return diffs, nil
}

// unmeasured reports whether key k of object o is a figure of a summary
// of no samples: o's "n" is 0 and k, another key, is present and null.
// wakebench writes such a summary's figures null, never 0 (issue 50), where
// the reference, a run that measured everything, has numbers.
func unmeasured(o map[string]any, k string) bool {
	v, present := o[k]
	return k != "n" && present && v == nil && o["n"] == float64(0)
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "missing/null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	}
	return fmt.Sprintf("%T", v)
}
