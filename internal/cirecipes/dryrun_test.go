package cirecipes

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The dry run: a recipe's jobs one after another on this machine, each
// shell step run for real by bash in a workspace holding the recipe's
// scripts, with a stub go that records how it was called and writes the
// out/ of a run that passed or failed, and the CI's baseline cache a
// directory kept between the jobs (restored and saved as the recipe says).

// stubGo is the go command of the dry run.
const stubGo = `#!/bin/sh
printf '%s\n' "$@" > "$STUB_DIR/argv"
printf '%s' "${WAKEBENCH_BASELINE-unset}" > "$STUB_DIR/baseline"
printf '%s' "${WAKEBENCH_CONFIG-unset}" > "$STUB_DIR/config"
printf '%s' "${WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED-unset}" > "$STUB_DIR/minjudged"
mkdir -p out
printf '# wakebench: %s\n\nThe stub run of job %s.\n' "$STUB_STATUS" "$STUB_JOB" > out/summary.md
printf 'BenchmarkSleep/model=A/level=1 1 %s sec/sleep\n' "$STUB_JOB" > out/bench.txt
echo '<testsuites/>' > out/checks.junit.xml
[ "$STUB_STATUS" = PASS ]
`

// world is what the dry run's jobs share: the workspace, the stub and the
// CI's cache of the baseline directory.
type world struct {
	t                    *testing.T
	ws, bin, stub, cache string
	restored, saved      int
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, ws: t.TempDir(), bin: t.TempDir(), stub: t.TempDir(), cache: filepath.Join(t.TempDir(), "cache")}
	require.NoError(t, os.WriteFile(filepath.Join(w.bin, "go"), []byte(stubGo), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(w.ws, "scripts"), 0o755))
	script := read(t, keepScript)
	require.NoError(t, os.WriteFile(filepath.Join(w.ws, keepScript), script, 0o755))
	return w
}

// job is one CI job of the dry run: its number, the stub run's verdict,
// whether it runs on the default branch (else a pull or merge request),
// and BASELINE_FILL as a CI variable ("": unset).
type job struct {
	n             int
	status        string
	defaultBranch bool
	fill          string
}

// result is what a job did.
type result struct {
	failed    bool
	shown     string // what the job showed of summary.md: the step summary (GitHub), the log (GitLab)
	ran       bool   // go was run
	argv      []string
	baseline  string // WAKEBENCH_BASELINE as go saw it ("unset")
	config    string // WAKEBENCH_CONFIG as go saw it
	minJudged string // WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED as go saw it ("unset")
}

// begin starts a job on a clean checkout (no out/, no baseline
// directory), the stub's record of the last job gone.
func (w *world) begin(baselineDir string) {
	for _, p := range []string{filepath.Join(w.ws, "out"), filepath.Join(w.ws, baselineDir), w.stub} {
		require.NoError(w.t, os.RemoveAll(p))
	}
	require.NoError(w.t, os.Mkdir(w.stub, 0o755))
}

// env is the environment every step of job j starts from.
func (w *world) env(j job) map[string]string {
	env := map[string]string{
		"PATH":        w.bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME":        w.ws,
		"CI":          "true",
		"STUB_DIR":    w.stub,
		"STUB_STATUS": j.status,
		"STUB_JOB":    strconv.Itoa(j.n),
	}
	if j.fill != "" {
		env["BASELINE_FILL"] = j.fill
	}
	return env
}

// restore and save copy the baseline directory from and to the cache.
func (w *world) restore(dir string) {
	w.restored++
	if _, err := os.Stat(w.cache); err == nil {
		require.NoError(w.t, os.CopyFS(filepath.Join(w.ws, dir), os.DirFS(w.cache)))
	}
}

func (w *world) save(dir string) {
	w.saved++
	require.NoError(w.t, os.RemoveAll(w.cache))
	require.NoError(w.t, os.CopyFS(w.cache, os.DirFS(filepath.Join(w.ws, dir))))
}

// bash runs script as the CI would: bash, errexit and pipefail on.
func (w *world) bash(script string, env map[string]string) (string, error) {
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
	cmd.Dir = w.ws
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// finish reads what the stub saw, if it was run.
func (w *world) finish(r *result) {
	argv, err := os.ReadFile(filepath.Join(w.stub, "argv"))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	require.NoError(w.t, err)
	r.ran, r.argv = true, strings.Fields(string(argv))
	b, err := os.ReadFile(filepath.Join(w.stub, "baseline"))
	require.NoError(w.t, err)
	c, err := os.ReadFile(filepath.Join(w.stub, "config"))
	require.NoError(w.t, err)
	m, err := os.ReadFile(filepath.Join(w.stub, "minjudged"))
	require.NoError(w.t, err)
	r.baseline, r.config, r.minJudged = string(b), string(c), string(m)
}

// cachedRuns are the runs in the cache, by the job that made each.
func (w *world) cachedRuns() []string {
	var jobs []string
	bench, _ := filepath.Glob(filepath.Join(w.cache, "*", "bench.txt"))
	for _, f := range bench {
		b, err := os.ReadFile(f)
		require.NoError(w.t, err)
		jobs = append(jobs, strings.Fields(string(b))[2])
	}
	return jobs
}

// dryRun runs six jobs through run, BASELINE_FILL 2, and checks what
// each did: a first pass on the default branch (no baseline yet, then one
// run kept), a failure there (judged against the baseline, not kept, the
// summary still shown), a pull request that passes (judged, not kept), a
// second pass; while the baseline holds one run a gate that judged
// nothing is accepted (WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED=0), from
// two runs not. Then a third pass with BASELINE_FILL bad: the job fails
// before go runs, and keeps nothing.
func dryRun(t *testing.T, baselineDir string, run func(*world, job) result) {
	card := strings.Fields(cardCommand(t))
	require.Equal(t, "go", card[0])
	w := newWorld(t)
	baseline := filepath.Join(w.ws, baselineDir)
	if abs, err := filepath.EvalSymlinks(w.ws); err == nil {
		baseline = filepath.Join(abs, baselineDir)
	}
	const filling = "0" // WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED while the baseline fills
	for _, c := range []struct {
		job
		failed    bool
		baseline  string
		minJudged string
		cached    []string
	}{
		{job{1, "PASS", true, "2"}, false, "unset", "unset", []string{"1"}},
		{job{2, "FAIL", true, "2"}, true, baseline, filling, []string{"1"}},
		{job{3, "PASS", false, "2"}, false, baseline, filling, []string{"1"}},
		{job{4, "PASS", true, "2"}, false, baseline, filling, []string{"1", "4"}},
		{job{5, "PASS", true, "2"}, false, baseline, "unset", []string{"1", "4", "5"}},
		{job{6, "PASS", true, "two"}, true, "", "", []string{"1", "4", "5"}},
	} {
		w.begin(baselineDir)
		r := run(w, c.job)
		where := fmt.Sprintf("job %d (%s, default branch %v, BASELINE_FILL=%s)", c.n, c.status, c.defaultBranch, c.fill)
		assert.Equal(t, c.failed, r.failed, "%s: the job's verdict is the run's", where)
		assert.Equal(t, c.cached, w.cachedRuns(), "%s: the runs in the baseline cache", where)
		if c.baseline == "" {
			assert.False(t, r.ran, "%s: go run though the baseline script failed", where)
			assert.Contains(t, r.shown, "wrote no out/summary.md", "%s: the missing summary said", where)
			continue
		}
		if !assert.True(t, r.ran, "%s: go was not run", where) {
			continue
		}
		assert.Equal(t, card[1:], r.argv, "%s: go's arguments: the card's command", where)
		assert.Equal(t, "gpu.json", r.config, "%s: WAKEBENCH_CONFIG", where)
		assert.Equal(t, c.baseline, r.baseline, "%s: WAKEBENCH_BASELINE", where)
		assert.Equal(t, c.minJudged, r.minJudged, "%s: WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED", where)
		assert.Contains(t, r.shown, fmt.Sprintf("# wakebench: %s\n\nThe stub run of job %d.", c.status, c.n), "%s: summary.md shown", where)
	}
	assert.Equal(t, 6, w.restored, "every job restores the baseline")
	assert.Equal(t, 3, w.saved, "the baseline saved by the default branch's passes alone")
}

// TestGitHubDryRun runs the workflow's steps: run: scripts by bash as the
// runner does, actions/cache/restore and save as copies, other actions
// skipped; GITHUB_ENV, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY as files.
func TestGitHubDryRun(t *testing.T) {
	t.Parallel()
	wf, gj := parseGitHub(t)
	envRef := regexp.MustCompile(`^\$\{\{\s*env\.(\w+)\s*\}\}$`)
	baselineDir := gj.Env.Vars["baseline_dir"].Value.Value
	dryRun(t, baselineDir, func(w *world, j job) result {
		env := w.env(j)
		tmp := t.TempDir()
		files := map[string]string{"GITHUB_ENV": "env", "GITHUB_STEP_SUMMARY": "summary", "GITHUB_OUTPUT": "output"}
		for k, f := range files {
			env[k] = filepath.Join(tmp, f)
			require.NoError(t, os.WriteFile(env[k], nil, 0o644))
		}
		env["GITHUB_WORKSPACE"], env["GITHUB_ACTIONS"], env["GITHUB_RUN_ID"] = w.ws, "true", strconv.Itoa(j.n)
		for _, e := range []*actionlint.Env{wf.Env, gj.Env} {
			if e == nil {
				continue
			}
			for _, v := range e.Vars {
				val := v.Value.Value
				if v.Value.ContainsExpression() {
					// The one expression the dry run sets: is this a run of the default branch.
					require.Equal(t, "KEEP_BASELINE", v.Name.Value, "job env %s: an expression the dry run cannot evaluate", v.Name.Value)
					val = strconv.FormatBool(j.defaultBranch)
				}
				env[v.Name.Value] = val
			}
		}
		failed := false
		for _, s := range gj.Steps {
			cond := ""
			if s.If != nil {
				cond = strings.TrimSpace(s.If.Value)
			}
			switch cond {
			case "", "success()":
				if failed {
					continue
				}
			case "always()":
			case "success() && env.KEEP_BASELINE == 'true'":
				if failed || env["KEEP_BASELINE"] != "true" {
					continue
				}
			default:
				t.Fatalf("step if: %q: a condition the dry run does not know", cond)
			}
			switch e := s.Exec.(type) {
			case *actionlint.ExecAction:
				uses, _, _ := strings.Cut(e.Uses.Value, "@")
				if uses != "actions/cache/restore" && uses != "actions/cache/save" {
					continue
				}
				m := envRef.FindStringSubmatch(e.Inputs["path"].Value.Value)
				require.NotNil(t, m, "%s: path is ${{ env.… }}", uses)
				if uses == "actions/cache/restore" {
					w.restore(env[m[1]])
				} else {
					w.save(env[m[1]])
				}
			case *actionlint.ExecRun:
				require.False(t, e.Run.ContainsExpression(), "a run: script with ${{ }}: put it in env (the dry run runs the script as it is)")
				stepEnv := maps.Clone(env)
				b, err := os.ReadFile(env["GITHUB_ENV"])
				require.NoError(t, err)
				for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
					if k, v, ok := strings.Cut(l, "="); ok {
						stepEnv[k] = v
					} else if l != "" {
						t.Fatalf("GITHUB_ENV line %q: not NAME=value", l)
					}
				}
				if s.Env != nil {
					for _, v := range s.Env.Vars {
						stepEnv[v.Name.Value] = v.Value.Value
					}
				}
				out, err := w.bash(e.Run.Value, stepEnv)
				if err != nil {
					t.Logf("job %d: step %q failed (%v):\n%s", j.n, e.Run.Value, err, out)
					failed = true
				}
			}
		}
		summary, err := os.ReadFile(env["GITHUB_STEP_SUMMARY"])
		require.NoError(t, err)
		output, err := os.ReadFile(env["GITHUB_OUTPUT"])
		require.NoError(t, err)
		assert.Regexp(t, `(?m)^kind=[A-Za-z0-9._-]+$`, string(output), "job %d: the GPU kind for the cache key", j.n)
		r := result{failed: failed, shown: string(summary)}
		w.finish(&r)
		return r
	})
}

// TestGitLabDryRun runs the job as GitLab's runner does: the rule that
// matches first sets its variables, the cache is pulled when its policy
// says so, script runs as one bash script (stopping at the first failure),
// after_script always, and the cache is pushed when the policy says so and
// the job succeeded.
func TestGitLabDryRun(t *testing.T) {
	t.Parallel()
	gj := parseGitLab(t)
	baselineDir := strings.TrimSuffix(gj.Cache.Paths[0], "/")
	dryRun(t, baselineDir, func(w *world, j job) result {
		env := w.env(j)
		env["GITLAB_CI"], env["CI_PROJECT_DIR"], env["CI_PIPELINE_ID"] = "true", w.ws, strconv.Itoa(j.n)
		env["CI_DEFAULT_BRANCH"], env["CI_PIPELINE_SOURCE"] = "main", "merge_request_event"
		if j.defaultBranch {
			env["CI_COMMIT_BRANCH"], env["CI_PIPELINE_SOURCE"] = "main", "push"
		}
		for k, v := range gj.Variables {
			env[k] = v
		}
		matched := false
		for _, r := range gj.Rules {
			var ok bool
			switch r.If {
			case "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH":
				ok = env["CI_COMMIT_BRANCH"] != "" && env["CI_COMMIT_BRANCH"] == env["CI_DEFAULT_BRANCH"]
			case `$CI_PIPELINE_SOURCE == "merge_request_event"`:
				ok = env["CI_PIPELINE_SOURCE"] == "merge_request_event"
			default:
				t.Fatalf("rule if: %q: a condition the dry run does not know", r.If)
			}
			if ok {
				for k, v := range r.Variables {
					env[k] = v
				}
				matched = true
				break
			}
		}
		require.True(t, matched, "job %d: no rule runs the job", j.n)
		policy := os.Expand(gj.Cache.Policy, func(k string) string { return env[k] })
		require.Contains(t, []string{"pull", "push", "pull-push"}, policy, "cache:policy")
		wantPolicy := map[bool]string{true: "pull-push", false: "pull"}[j.defaultBranch]
		assert.Equal(t, wantPolicy, policy, "job %d: only the default branch pushes the baseline", j.n)
		if strings.Contains(policy, "pull") {
			w.restore(baselineDir)
		}
		out, err := w.bash(strings.Join(gj.Script, "\n"), env)
		if err != nil {
			t.Logf("job %d: script failed (%v):\n%s", j.n, err, out)
		}
		log, aerr := w.bash(strings.Join(gj.AfterScript, "\n"), env)
		require.NoError(t, aerr, log)
		if strings.Contains(policy, "push") && err == nil {
			w.save(baselineDir)
		}
		r := result{failed: err != nil, shown: log}
		w.finish(&r)
		return r
	})
}
