package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
)

// checkJSON lists every problem of a config file at once, by key path:
// keys Config does not have (matched exactly: encoding/json would take
// "HANDOFFS" for "handoffs"), keys given twice in one object
// (encoding/json keeps the last silently) and values of the wrong JSON
// type (encoding/json reports only the first).
// It returns the file's top-level object for the caller to read its keys.
func checkJSON(b []byte) (map[string]any, []error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, []error{fmt.Errorf("not a JSON object: %w", err)}
	}
	if _, err := dec.Token(); err != io.EOF { // json.Unmarshal refuses trailing text too
		return nil, []error{errors.New("not a JSON object: text follows the object")}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, []error{fmt.Errorf("not a JSON object: the file holds a JSON %s", jsonKind(v))}
	}
	errs := duplicateKeys(b)
	walkJSON(v, reflect.TypeOf(Config{}), "", &errs)
	return obj, errs
}

// duplicateKeys names every key given more than once in one JSON object
// of b, by its path ("models[0].port"), once each, in the file's order.
// b is JSON that decodes (checkJSON's caller decoded it first): a token
// error ends the walk with what was found.
func duplicateKeys(b []byte) []error {
	// frame is one object or list being read: its path, and for an
	// object the keys seen and whether the next string is a key.
	type frame struct {
		path    string
		object  bool
		seen    map[string]bool
		key     string
		wantKey bool
		index   int
	}
	var stack []*frame
	var errs []error
	reported := map[string]bool{}
	// valuePath is the path of the value the next token starts.
	valuePath := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.object {
			return join(f.path, f.key)
		}
		return fmt.Sprintf("%s[%d]", f.path, f.index)
	}
	// valueDone moves the enclosing object or list past a value.
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; f.object {
			f.wantKey = true
		} else {
			f.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return errs
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, &frame{path: valuePath(), object: t == '{', seen: map[string]bool{}, wantKey: true})
			case '}', ']':
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
				f := stack[n-1]
				f.key, f.wantKey = t, false
				if p := join(f.path, t); f.seen[t] && !reported[p] {
					reported[p] = true
					errs = append(errs, fmt.Errorf("key %q given twice: keep one (the last would win silently)", p))
				}
				f.seen[t] = true
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func walkJSON(v any, t reflect.Type, path string, errs *[]error) {
	if v == nil { // null leaves the default, as encoding/json does
		return
	}
	wrong := func(want string) {
		*errs = append(*errs, fmt.Errorf("key %q: want %s, got JSON %s", path, want, jsonKind(v)))
	}
	if t == reflect.TypeFor[json.RawMessage]() { // any JSON: a variant's set value, checked against its key's type where it is applied (Config.setKey)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			wrong("an object")
			return
		}
		fields := map[string]reflect.StructField{}
		for i := range t.NumField() {
			f := t.Field(i)
			if name := jsonKey(f); name != "" && name != "-" {
				fields[name] = f
			}
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			f, ok := fields[k]
			if !ok {
				*errs = append(*errs, fmt.Errorf("unknown key %q (keys are lower case, as in testdata/example-config.json)", join(path, k)))
				continue
			}
			walkJSON(obj[k], f.Type, join(path, k), errs)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			wrong("an object")
			return
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			walkJSON(obj[k], t.Elem(), join(path, k), errs)
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			wrong("a list")
			return
		}
		for i, x := range arr {
			walkJSON(x, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			wrong("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			wrong("true or false")
		}
	case reflect.Int, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			wrong("an integer")
			return
		}
		if f, err := n.Float64(); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			*errs = append(*errs, fmt.Errorf("key %q: want an integer, got %s", path, n))
		}
	case reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			wrong("a number")
		}
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	}
	return "object"
}
