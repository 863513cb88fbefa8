package cirecipes

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const (
	root         = "../.."
	githubRecipe = "deploy/ci/github-actions.yml"
	gitlabRecipe = "deploy/ci/gitlab-ci.yml"
	keepScript   = "scripts/baseline-keep.sh"
)

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	return b
}

// cardCommand is the GPU card's command as the README shows it: its fenced
// `go test … -tags gpu …` lines (a trailing # comment cut), which must agree.
func cardCommand(t *testing.T) string {
	t.Helper()
	var found []string
	fenced := false
	for _, line := range strings.Split(string(read(t, "README.md")), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		cmd, _, _ := strings.Cut(line, " #")
		if cmd = strings.TrimSpace(cmd); fenced && strings.HasPrefix(cmd, "go test ") && strings.Contains(cmd, "-tags gpu") {
			found = append(found, cmd)
		}
	}
	require.NotEmpty(t, found, "README.md shows no fenced go test -tags gpu line (the GPU card's command)")
	for _, c := range found[1:] {
		require.Equal(t, found[0], c, "README.md's fenced GPU commands disagree")
	}
	return found[0]
}

// shellcheck is shellcheck's path; in CI (which installs it) a missing
// one fails the test, elsewhere it is left out and the test says so.
func shellcheck(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("shellcheck")
	if err == nil {
		return p
	}
	const install = "shellcheck is missing (apt-get install -y -qq shellcheck): shell not linted"
	if os.Getenv("CI") != "" { // .ci/run installs it: in CI a missing linter is a gap, not a skip
		t.Fatal(install)
	}
	t.Log(install)
	return ""
}

func parseGitHub(t *testing.T) (*actionlint.Workflow, *actionlint.Job) {
	t.Helper()
	w, errs := actionlint.Parse(read(t, githubRecipe))
	require.Empty(t, errs, "%s does not parse", githubRecipe)
	require.Len(t, w.Jobs, 1, "%s: one job", githubRecipe)
	for _, j := range w.Jobs {
		return w, j
	}
	panic("unreachable")
}

// glJob is the part of a GitLab job the recipe uses. Decoded with known
// fields only: a misspelt key (artifact:, after-script:) fails the test
// instead of being ignored by GitLab.
type glJob struct {
	Tags          []string `yaml:"tags"`
	ResourceGroup string   `yaml:"resource_group"`
	Timeout       string   `yaml:"timeout"`
	Rules         []struct {
		If        string            `yaml:"if"`
		Variables map[string]string `yaml:"variables"`
	} `yaml:"rules"`
	Variables map[string]string `yaml:"variables"`
	Cache     struct {
		Key       string   `yaml:"key"`
		Paths     []string `yaml:"paths"`
		Policy    string   `yaml:"policy"`
		Unprotect bool     `yaml:"unprotect"`
		When      string   `yaml:"when"`
	} `yaml:"cache"`
	Script      []string `yaml:"script"`
	AfterScript []string `yaml:"after_script"`
	Artifacts   struct {
		When     string   `yaml:"when"`
		ExpireIn string   `yaml:"expire_in"`
		Paths    []string `yaml:"paths"`
		Reports  struct {
			JUnit   string `yaml:"junit"`
			Metrics string `yaml:"metrics"`
		} `yaml:"reports"`
	} `yaml:"artifacts"`
}

func parseGitLab(t *testing.T) glJob {
	t.Helper()
	var jobs map[string]glJob
	dec := yaml.NewDecoder(bytes.NewReader(read(t, gitlabRecipe)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&jobs), gitlabRecipe)
	require.Len(t, jobs, 1, "%s: one job", gitlabRecipe)
	for _, j := range jobs {
		return j
	}
	panic("unreachable")
}

// defaultKeep is scripts/baseline-keep.sh's default number of runs kept.
func defaultKeep(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^default_keep=(\d+)$`).FindSubmatch(read(t, keepScript))
	require.NotNil(t, m, "%s: no default_keep= line", keepScript)
	return string(m[1])
}

// defaultFill is scripts/baseline-keep.sh's default number of runs below
// which env accepts a gate that judged nothing.
func defaultFill(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^default_fill=(\d+)$`).FindSubmatch(read(t, keepScript))
	require.NotNil(t, m, "%s: no default_fill= line", keepScript)
	return string(m[1])
}

// TestGitHubWorkflowLints lints the workflow as actionlint's command does,
// the runner label gpu declared (as a user's .github/actionlint.yaml
// would), shellcheck on its run: scripts where it is installed.
func TestGitHubWorkflowLints(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "actionlint.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("self-hosted-runner:\n  labels: [gpu]\n"), 0o644))
	var out bytes.Buffer
	l, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{
		ConfigFile: cfg,
		Shellcheck: shellcheck(t),
		Color:      actionlint.ColorOptionKindNever,
	})
	require.NoError(t, err)
	errs, err := l.Lint(filepath.Join(root, githubRecipe), read(t, githubRecipe), nil)
	require.NoError(t, err)
	for _, e := range errs {
		t.Errorf("actionlint: %s", e)
	}
}

// TestGitHubWorkflowShape holds the workflow's actions (which the dry run
// does not run) to what docs/ci.md says of them.
func TestGitHubWorkflowShape(t *testing.T) {
	t.Parallel()
	w, job := parseGitHub(t)
	var labels []string
	for _, l := range job.RunsOn.Labels {
		labels = append(labels, l.Value)
	}
	assert.Subset(t, labels, []string{"self-hosted", "gpu"}, "runs-on")
	require.NotNil(t, w.Concurrency, "a workflow-wide concurrency group: two runs never share the GPU")
	assert.NotEmpty(t, w.Concurrency.Group.Value)
	assert.False(t, w.Concurrency.CancelInProgress != nil && w.Concurrency.CancelInProgress.Value, "a new run must not cancel the one measuring")
	require.NotNil(t, w.Defaults, "defaults.run.shell: bash (as the dry run runs the steps)")
	assert.Equal(t, "bash", w.Defaults.Run.Shell.Value)
	assert.Equal(t, defaultKeep(t), job.Env.Vars["baseline_keep"].Value.Value, "BASELINE_KEEP: the script's default")

	type want struct {
		inputs map[string]string
		cond   string
	}
	const keepIf = "success() && env.KEEP_BASELINE == 'true'"
	wants := map[string]want{
		"actions/checkout":             {},
		"actions/setup-go":             {inputs: map[string]string{"go-version-file": "go.mod"}},
		"actions/cache/restore":        {inputs: map[string]string{"path": "${{ env.BASELINE_DIR }}"}},
		"mikepenz/action-junit-report": {inputs: map[string]string{"report_paths": "out/checks.junit.xml"}, cond: "always()"},
		"actions/upload-artifact":      {inputs: map[string]string{"path": "out/"}, cond: "always()"},
		"actions/cache/save":           {inputs: map[string]string{"path": "${{ env.BASELINE_DIR }}"}, cond: keepIf},
	}
	keys := map[string]string{}
	var keepStepIf string
	for _, s := range job.Steps {
		cond := ""
		if s.If != nil {
			cond = s.If.Value
		}
		switch e := s.Exec.(type) {
		case *actionlint.ExecRun:
			if strings.Contains(e.Run.Value, keepScript+" add") {
				keepStepIf = cond
			}
		case *actionlint.ExecAction:
			name, major, ok := strings.Cut(e.Uses.Value, "@")
			assert.True(t, ok && regexp.MustCompile(`^v\d+$`).MatchString(major), "%s: pinned by major version", e.Uses.Value)
			wnt, known := wants[name]
			if !assert.True(t, known, "%s: an action docs/ci.md does not name", name) {
				continue
			}
			delete(wants, name)
			assert.Equal(t, wnt.cond, cond, "%s: if", name)
			for k, v := range wnt.inputs {
				in := e.Inputs[k]
				if assert.NotNil(t, in, "%s: with %s", name, k) {
					assert.Equal(t, v, in.Value.Value, "%s: with %s", name, k)
				}
			}
			if in := e.Inputs["key"]; in != nil {
				keys[name] = in.Value.Value
			}
			if in := e.Inputs["restore-keys"]; in != nil {
				assert.True(t, strings.HasPrefix(keys[name], in.Value.Value), "restore-keys %q: a prefix of the key %q", in.Value.Value, keys[name])
			}
		}
	}
	assert.Empty(t, wants, "actions the workflow lacks")
	assert.Equal(t, keys["actions/cache/restore"], keys["actions/cache/save"], "the baseline is saved under the key it is restored by")
	assert.Equal(t, keepIf, keepStepIf, "the run is kept when, and only when, the baseline is saved")
}

// TestGitLabJobShape holds the GitLab job to what docs/ci.md says of it,
// and shellchecks its script.
func TestGitLabJobShape(t *testing.T) {
	t.Parallel()
	j := parseGitLab(t)
	assert.Contains(t, j.Tags, "gpu", "tags: the GPU runner's")
	assert.NotEmpty(t, j.ResourceGroup, "resource_group: two jobs never share the GPU")
	assert.NotEmpty(t, j.Script)
	assert.Equal(t, "out/checks.junit.xml", j.Artifacts.Reports.JUnit, "artifacts:reports:junit")
	assert.Equal(t, "out/metrics.txt", j.Artifacts.Reports.Metrics, "artifacts:reports:metrics")
	assert.Contains(t, j.Artifacts.Paths, "out/", "artifacts:paths")
	assert.Equal(t, "always", j.Artifacts.When, "artifacts:when: a failed run's outputs are the ones to read")
	assert.Equal(t, []string{j.Variables["BASELINE_DIR"] + "/"}, j.Cache.Paths, "the cache holds BASELINE_DIR")
	assert.Contains(t, []string{"", "on_success"}, j.Cache.When, "cache:when: a failed run's job saves no baseline")
	assert.True(t, j.Cache.Unprotect, "cache:unprotect: merge requests read the default branch's baseline")
	assert.Equal(t, defaultKeep(t), j.Variables["BASELINE_KEEP"], "BASELINE_KEEP: the script's default")

	sc := shellcheck(t)
	if sc == "" {
		return
	}
	for name, lines := range map[string][]string{"script": j.Script, "after_script": j.AfterScript} {
		f := filepath.Join(t.TempDir(), name+".sh")
		require.NoError(t, os.WriteFile(f, []byte("#!/bin/bash\n"+strings.Join(lines, "\n")+"\n"), 0o644))
		out, err := exec.Command(sc, f).CombinedOutput()
		assert.NoError(t, err, "shellcheck %s: %s", name, out)
	}
}

// TestBaselineScriptShellchecks lints scripts/baseline-keep.sh.
func TestBaselineScriptShellchecks(t *testing.T) {
	t.Parallel()
	sc := shellcheck(t)
	if sc == "" {
		t.Skip("no shellcheck")
	}
	out, err := exec.Command(sc, filepath.Join(root, keepScript)).CombinedOutput()
	assert.NoError(t, err, "%s", out)
}

// recipeCommands are the shell lines each recipe runs.
func recipeCommands(t *testing.T) map[string][]string {
	_, job := parseGitHub(t)
	var gh []string
	for _, s := range job.Steps {
		if e, ok := s.Exec.(*actionlint.ExecRun); ok {
			gh = append(gh, strings.Split(e.Run.Value, "\n")...)
		}
	}
	gl := parseGitLab(t)
	return map[string][]string{githubRecipe: gh, gitlabRecipe: append(gl.Script, gl.AfterScript...)}
}

// TestRecipesRunTheCardCommand: each recipe's go test line is the README's
// GPU command exactly.
func TestRecipesRunTheCardCommand(t *testing.T) {
	t.Parallel()
	card := cardCommand(t)
	for recipe, lines := range recipeCommands(t) {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "go test") {
				n++
				assert.Equal(t, card, strings.TrimSpace(l), "%s", recipe)
			}
		}
		assert.Equal(t, 1, n, "%s: runs go test once", recipe)
	}
}

// TestRecipesNameRealFiles: every out/ file a recipe names is one
// docs/outputs.md lists, every script it names is in the repository and
// executable.
func TestRecipesNameRealFiles(t *testing.T) {
	t.Parallel()
	outputs := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)`").FindAllStringSubmatch(string(read(t, "docs/outputs.md")), -1) {
		outputs[m[1]] = true
	}
	require.True(t, outputs["summary.md"] && outputs["checks.junit.xml"], "docs/outputs.md's table not read")
	for _, recipe := range []string{githubRecipe, gitlabRecipe} {
		text := string(read(t, recipe))
		for _, m := range regexp.MustCompile(`\bout/([A-Za-z0-9_.-]+)`).FindAllStringSubmatch(text, -1) {
			assert.True(t, outputs[m[1]], "%s names out/%s, which docs/outputs.md does not list", recipe, m[1])
		}
		scripts := regexp.MustCompile(`\bscripts/[A-Za-z0-9_.-]+`).FindAllString(text, -1)
		assert.NotEmpty(t, scripts, "%s calls scripts/baseline-keep.sh", recipe)
		for _, s := range scripts {
			fi, err := os.Stat(filepath.Join(root, s))
			if assert.NoError(t, err, "%s calls %s", recipe, s) {
				assert.NotZero(t, fi.Mode()&0o111, "%s: not executable", s)
			}
		}
	}
}
