package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDuplicateKeysAreRefused (issue 48): a key given twice in one object
// was accepted, the last value silently winning. Each is refused by its
// path, once however often it is repeated, every one at once; the same
// key in two objects is no duplicate.
func TestDuplicateKeysAreRefused(t *testing.T) {
	const model = `"label": "A", "name": "x", "gpu_memory_utilization": 0.4`
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"a model's port", `{"models": [{` + model + `, "port": 8001, "port": 8002}]}`, []string{`key "models[0].port" given twice: keep one (the last would win silently)`}},
		{"top level, three times", `{"out_dir": "a", "out_dir": "b", "out_dir": "c"}`, []string{`key "out_dir" given twice`}},
		{"a map key", `{"traffic": {"rates": {"A": 1, "A": 2}}}`, []string{`key "traffic.rates.A" given twice`}},
		{"an object given twice", `{"protocol": {"rounds": 1}, "protocol": {"handoffs": 2}}`, []string{`key "protocol" given twice`}},
		{"every one at once, in the second model", `{"models": [{` + model + `}, {"label": "B", "name": "y", "name": "z", "gpu_memory_utilization": 0.4, "thresholds": {"max_residual_gib": 1, "max_residual_gib": 2}}]}`,
			[]string{`key "models[1].name" given twice`, `key "models[1].thresholds.max_residual_gib" given twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(env(map[string]string{EnvFile: writeFile(t, tc.file)}))
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Len(t, strings.Split(err.Error(), "\n"), len(tc.want), "one line per key: %v", err)
		})
	}
	_, err := Load(env(map[string]string{EnvFile: writeFile(t, `{"models": [{`+model+`, "port": 8001}, {"label": "B", "name": "y", "gpu_memory_utilization": 0.4, "port": 8002}], `+
		`"traffic": {"sleep_level": 1}, "kubernetes": {"sleep_level": 1}}`)}))
	assert.NoError(t, err, "the same key in two objects, or at two levels, is no duplicate")
}

// FuzzDuplicateKeys: on any bytes duplicateKeys never panics, and on a
// JSON object it finds a duplicate exactly when the file has more
// members (a ':' outside strings each) than the objects it decodes to
// hold keys.
func FuzzDuplicateKeys(f *testing.F) {
	for _, s := range []string{`{"a": 1, "a": 2}`, `{"a": {"b": [1, {"c": 1, "c": 2}]}}`, `{"a": "x:y", "b": {"a": 1}}`, `{"a\"": 1, "a\\"": 2}`, `[{"a": 1, "a": 1}]`, `{`, `{"a": [}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		errs := duplicateKeys(b)
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		keys := 0
		var count func(any)
		count = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				keys += len(v)
				for _, x := range v {
					count(x)
				}
			case []any:
				for _, x := range v {
					count(x)
				}
			}
		}
		count(v)
		if got, want := len(errs) > 0, colons(b) > keys; got != want {
			t.Fatalf("%q: duplicates found %v (%v), but %d members and %d keys", b, got, errs, colons(b), keys)
		}
	})
}

// colons counts the ':' of JSON text b outside strings: its objects'
// members.
func colons(b []byte) int {
	n, in, esc := 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && c == ':':
			n++
		}
	}
	return n
}

// TestConfigFileIsStatChecked (issue 48): the config file was read
// whatever it was: a FIFO hung the run (forever under -timeout 0),
// /dev/zero ran it out of memory. It is refused like the other inputs
// before it is opened, naming WAKEBENCH_CONFIG and what it is.
func TestConfigFileIsStatChecked(t *testing.T) {
	big := func(t *testing.T) string {
		return sparse(t, filepath.Join(t.TempDir(), "c.json"), MaxConfigBytes+1)
	}
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
		want string
	}{
		{"a FIFO", func(t *testing.T) string { return fifo(t, t.TempDir(), "c.json") }, "is a FIFO (reading it waits for a writer): " + wantConfig},
		{"/dev/zero", func(*testing.T) string { return "/dev/zero" }, "is a character device: " + wantConfig},
		{"a directory", func(t *testing.T) string { return t.TempDir() }, "is a directory: " + wantConfig},
		{"beyond 1 MiB", big, fmt.Sprintf("holds %d bytes, beyond 1 MiB: not a config file (a config is kilobytes): %s", MaxConfigBytes+1, wantConfig)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path(t)
			_, err := Load(env(map[string]string{EnvFile: p}))
			require.Error(t, err)
			assert.Equal(t, "config: "+EnvFile+"="+p+": "+tc.want, err.Error())
		})
	}
	b, err := readConfigFile(writeFile(t, `{"out_dir": "x"}`))
	require.NoError(t, err)
	assert.Equal(t, `{"out_dir": "x"}`, string(b))
}

// TestSleepModeOffIsRefused (issue 48): --no-enable-sleep-mode in a
// model's extra_args was accepted, and without a memory source a server
// that never slept PASSed. Each spelling vLLM's argparse accepts is
// refused at load naming the model's extra_args; turning it on, or other
// flags that merely look alike, are not.
func TestSleepModeOffIsRefused(t *testing.T) {
	var cases []boundCase
	for _, a := range []string{"--no-enable-sleep-mode", "--no-enable_sleep_mode", "--no_enable_sleep_mode", "--enable-sleep-mode=false", "--enable_sleep_mode=False", "--enable-sleep-mode=0", "--enable-sleep-mode=off"} {
		cases = append(cases, boundCase{a, func(_ *testing.T, c *Config) {
			c.Memory = "none"
			c.Models[1].ExtraArgs = []string{"--enforce-eager", a}
		}, fmt.Sprintf("models[1].extra_args: %q turns sleep mode off, and sleep mode is what the suite measures (it passes --enable-sleep-mode itself): remove it", a)})
	}
	checkRefused(t, cases)
	accepted := map[string]func(*testing.T, *Config){}
	for _, a := range []string{"--enable-sleep-mode", "--enable-sleep-mode=true", "--enable_sleep_mode=1", "--no-enable-prefix-caching", "--no-enable-sleep-mode-x"} {
		accepted[a] = func(_ *testing.T, c *Config) { c.Models[0].ExtraArgs = []string{a} }
	}
	checkAccepted(t, accepted)
}

// TestBaselineInsideOutDirIsRefused (issue 48): a baseline inside the
// run's out_dir was deleted with the earlier run's outputs when the run
// began, and the gate then found no bench.txt. It is refused at load,
// naming the baseline and out_dir and saying to move it, whether the
// baseline is a file there, out_dir itself, a directory of runs holding
// out_dir's bench.txt, or reached through a symbolic link.
func TestBaselineInsideOutDirIsRefused(t *testing.T) {
	bench := func(t *testing.T, dir string) string {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		p := filepath.Join(dir, "bench.txt")
		require.NoError(t, os.WriteFile(p, []byte("BenchmarkX 1 2 ns/op\n"), 0o644))
		return p
	}
	const inside = " is inside out_dir "
	const fix = ", whose outputs a run removes when it starts: the baseline would be gone before the gate reads it; move it out of out_dir"
	checkRefused(t, []boundCase{
		{"its bench.txt", func(t *testing.T, c *Config) {
			c.OutDir = t.TempDir()
			c.Baseline = bench(t, c.OutDir)
		}, "baseline: …/bench.txt" + inside},
		{"out_dir itself", func(t *testing.T, c *Config) {
			c.OutDir = t.TempDir()
			bench(t, c.OutDir)
			c.Baseline = c.OutDir + "/"
		}, "baseline: …" + fix},
		{"a directory of runs holding out_dir", func(t *testing.T, c *Config) {
			runs := t.TempDir()
			bench(t, filepath.Join(runs, "old"))
			c.OutDir = filepath.Join(runs, "new")
			bench(t, c.OutDir)
			c.Baseline = runs
		}, "baseline: …/new/bench.txt" + inside},
		{"through a link", func(t *testing.T, c *Config) {
			dir := t.TempDir()
			c.OutDir = filepath.Join(dir, "out")
			link := filepath.Join(dir, "link")
			require.NoError(t, os.Symlink(c.OutDir, link))
			bench(t, c.OutDir)
			c.Baseline = filepath.Join(link, "bench.txt")
		}, "baseline: …/link/bench.txt" + inside},
	})
	c := SimDefault()
	c.OutDir = t.TempDir()
	c.Baseline = bench(t, c.OutDir)
	err := c.Validate()
	require.Error(t, err)
	assert.Equal(t, "baseline: "+c.Baseline+inside+c.OutDir+fix+" (e.g. mv "+c.Baseline+" base.bench.txt) and name the new path", err.Error())

	checkAccepted(t, map[string]func(*testing.T, *Config){
		"a sibling whose name out_dir starts": func(t *testing.T, c *Config) {
			dir := t.TempDir()
			c.OutDir = filepath.Join(dir, "out")
			require.NoError(t, os.Mkdir(c.OutDir, 0o755))
			c.Baseline = bench(t, filepath.Join(dir, "out2"))
		},
		"out_dir not made yet": func(t *testing.T, c *Config) {
			c.OutDir = filepath.Join(t.TempDir(), "out")
			c.Baseline = bench(t, t.TempDir())
		},
		"a directory of runs beside a new out_dir in it": func(t *testing.T, c *Config) {
			runs := t.TempDir()
			bench(t, filepath.Join(runs, "old"))
			c.OutDir = filepath.Join(runs, "new")
			c.Baseline = runs
		},
	})
}

// TestFailedLoadKeepsTheBaseline: a config that cannot be loaded still
// names its baseline, so the FAIL report's claim of out_dir leaves it.
func TestFailedLoadKeepsTheBaseline(t *testing.T) {
	c, err := Load(env(map[string]string{EnvFile: writeFile(t, `{"baseline": "b.txt", "protocol": {"rounds": "x"}}`)}))
	require.Error(t, err)
	assert.Equal(t, "b.txt", c.Baseline)
	c, err = Load(env(map[string]string{EnvFile: writeFile(t, `{"baseline": "b.txt",`), "WAKEBENCH_BASELINE": "e.txt"}))
	require.Error(t, err)
	assert.Equal(t, "e.txt", c.Baseline, "the environment over the file")
}

// TestWithin: what is a path inside a directory, and what is not.
func TestWithin(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	require.NoError(t, os.MkdirAll(filepath.Join(out, "sub"), 0o755))
	f := filepath.Join(out, "sub", "f")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	require.NoError(t, os.Symlink(f, filepath.Join(dir, "lf")))
	assert.True(t, Within(f, out))
	assert.True(t, Within(out, out))
	assert.True(t, Within(f, f), "the same entry")
	assert.True(t, Within(filepath.Join(dir, "lf"), out), "a link to a file inside")
	assert.False(t, Within(out, f))
	assert.False(t, Within(dir, out))
	assert.False(t, Within(f, filepath.Join(dir, "nonexistent")))
	assert.False(t, Within(filepath.Join(out, "nonexistent"), out), "what does not exist is nowhere")
}

// TestRunPattern: a -run pattern splits as package testing splits it:
// alternatives at a top-level |, levels at a top-level /, neither inside
// brackets, parentheses or after a backslash.
func TestRunPattern(t *testing.T) {
	for s, want := range map[string][][]string{
		"":                       {{""}},
		"^TestProtocol$":         {{"^TestProtocol$"}},
		"TestProtocol/switch":    {{"TestProtocol", "switch"}},
		"^TestA$|^TestB$/x":      {{"^TestA$"}, {"^TestB$", "x"}},
		"Test(Protocol|Outputs)": {{"Test(Protocol|Outputs)"}},
		"TestProtocol/(a|b)":     {{"TestProtocol", "(a|b)"}},
		`a\|b/[/|]`:              {{`a\|b`, "[/|]"}},
		"^$":                     {{"^$"}},
		"TestA//":                {{"TestA", "", ""}},
	} {
		assert.Equal(t, want, RunPattern(s), s)
	}
	require.ErrorContains(t, CheckRunPattern("^TestA$|("), `element 1 ("(") is not a regexp`)
	require.NoError(t, CheckRunPattern("Test(A|B)/x|TestC"))
}
