package config

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckEnvRefusesUnknownNames is issue 47's third item: a misspelt
// override (the baseline's, one letter off) left the regression gate off
// without a word. Every WAKEBENCH_ variable wakebench does not read is
// refused by name, with the nearest known name where one is near; known
// ones (config keys, WAKEBENCH_CONFIG, OtherEnv) and other variables pass.
// (The misspellings are built, not written: TestEveryEnvNameIsKnown reads
// this file too.)
func TestCheckEnvRefusesUnknownNames(t *testing.T) {
	typo := EnvPrefix + "BAS" + "LINE"
	outdir := EnvPrefix + "OUT" + "DIR"
	unrelated := EnvPrefix + "Z" + "QX"
	err := CheckEnv([]string{"HOME=/root", EnvName("baseline") + "=a", typo + "=runs/", "PATH=/bin", outdir + "=x", unrelated + "=1", typo + "=again"})
	require.Error(t, err)
	msg := err.Error()
	assert.Equal(t, 3, strings.Count(msg, "names no wakebench setting"), "each name once: %s", msg)
	assert.Contains(t, msg, "environment: "+typo+" names no wakebench setting (did you mean WAKEBENCH_BASELINE?): unset it, or use a name docs/configuration.md lists")
	assert.Contains(t, msg, outdir+" names no wakebench setting (did you mean WAKEBENCH_OUT_DIR?)")
	assert.Contains(t, msg, unrelated+" names no wakebench setting: unset it", "no near name, no hint")

	known := []string{"HOME=/root", "WAKEBENCH_CONFIG=c.json", "WAKEBENCH_BASELINE=", "WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED=0",
		"WAKEBENCH_PROTOCOL_SLEEP_L1_CYCLES=5", "WAKEBENCH_CHILD=1", "WAKEBENCH_FLEET_NODE=n1", "WAKEBENCH_VLLMSIM=/bin/vllmsim", "wakebench_lower=1"}
	assert.NoError(t, CheckEnv(known))

	// A fleet node's Pod in a namespace with the Kubernetes phase's Service
	// wakebench-a gets Kubernetes' service links: not the user's settings.
	// (Names built from EnvPrefix: TestEveryEnvNameIsKnown scans this file.)
	svc := EnvPrefix + "A_"
	links := []string{svc + "SERVICE_HOST=10.0.0.7", svc + "SERVICE_PORT=8000", svc + "SERVICE_PORT_HTTP=8000",
		svc + "PORT=tcp://10.0.0.7:8000", svc + "PORT_8000_TCP=tcp://10.0.0.7:8000", svc + "PORT_8000_TCP_PROTO=tcp",
		svc + "PORT_8000_TCP_PORT=8000", svc + "PORT_8000_TCP_ADDR=10.0.0.7"}
	assert.NoError(t, CheckEnv(links))
	typoPort := EnvPrefix + "KUBERNETS_PORT"
	assert.ErrorContains(t, CheckEnv([]string{typoPort + "=8000"}), typoPort+" names no wakebench setting (did you mean WAKEBENCH_KUBERNETES_PORT?)",
		"a bare _PORT is a service link only with its URL")
}

// TestEveryEnvNameIsKnown holds KnownEnv to the sources: every
// WAKEBENCH_ name the code, scripts, Makefile, CI and docs write is a
// config key's override, WAKEBENCH_CONFIG or in OtherEnv (so CheckEnv
// refuses none of them; a name quoted in an example of CheckEnv's error
// is not read), and every name of OtherEnv is read somewhere outside this
// package (so the list does not keep a variable nothing reads).
func TestEveryEnvNameIsKnown(t *testing.T) {
	root := filepath.Join("..", "..")
	name := regexp.MustCompile(`WAKEBENCH_[A-Z0-9_]*[A-Z0-9]`)
	known := KnownEnv()
	other := OtherEnv()
	readElsewhere := map[string]bool{}
	scanned := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if base := d.Name(); rel != "." && (strings.HasPrefix(base, ".") && base != ".ci" && base != ".github" || base == "out" || base == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(path)
		if !slices.Contains([]string{".go", ".sh", ".json", ".yml", ".yaml", ".md"}, ext) && d.Name() != "Makefile" && rel != filepath.Join(".ci", "run") {
			return nil
		}
		if ext == ".md" && !strings.HasPrefix(rel, "docs"+string(filepath.Separator)) && rel != "README.md" {
			return nil // CHANGELOG.md names what was, and the refused misspellings
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned++
		text := string(b)
		for _, at := range name.FindAllStringIndex(text, -1) {
			n := text[at[0]:at[1]]
			if strings.HasPrefix(text[at[1]:], refused) {
				continue // an example of CheckEnv's refusal, quoting a refused name
			}
			_, ok := slices.BinarySearch(known, n)
			assert.True(t, ok, "%s: %s is read or documented, but CheckEnv would refuse it: add it to config.OtherEnv (or fix the name)", rel, n)
			if filepath.Dir(rel) != filepath.Join("internal", "config") {
				readElsewhere[n] = true
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, scanned, 100, "the repository's sources were read")
	for _, n := range slices.Sorted(maps.Keys(other)) {
		assert.True(t, readElsewhere[n], "config.OtherEnv lists %s, which nothing outside package config names: drop it", n)
		_, isKey := slices.BinarySearch(withoutOther(known, other), n)
		assert.False(t, isKey, "%s is a config key's override too", n)
	}
}

// refused follows a name in CheckEnv's error.
const refused = " names no wakebench setting"

// withoutOther is known less OtherEnv's names, sorted.
func withoutOther(known []string, other map[string]string) []string {
	return slices.DeleteFunc(slices.Clone(known), func(n string) bool { _, ok := other[n]; return ok })
}

// TestRegressionMinJudged: the setting's default is 1 (a gate that
// judged nothing fails the run), 0 is accepted, a negative count refused
// by name; it is set from the environment and applies to the whole run.
func TestRegressionMinJudged(t *testing.T) {
	assert.Equal(t, 1, Default().Thresholds.RegressionMinJudged)
	c, err := Load(env(map[string]string{"WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED": "0"}))
	require.NoError(t, err)
	assert.Zero(t, c.Thresholds.RegressionMinJudged)
	_, err = Load(env(map[string]string{"WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED": "-1"}))
	assert.ErrorContains(t, err, "thresholds.regression_min_judged: -1: want the fewest metrics the gate must judge, ≥ 0 (0 accepts a gate that judged nothing)")
	c = Default()
	c.Models[0].Thresholds = map[string]float64{"regression_min_judged": 3}
	assert.ErrorContains(t, c.Validate(), "models[0].thresholds.regression_min_judged: applies to the whole run")
}
