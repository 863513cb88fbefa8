package cirecipes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/record"
)

// keepCmd is scripts/baseline-keep.sh with args, run in dir with env
// added to a bare environment.
func keepCmd(t *testing.T, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	script, err := filepath.Abs(filepath.Join(root, keepScript))
	require.NoError(t, err)
	cmd := exec.Command(script, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	return cmd
}

// keep runs keepCmd; it returns stdout and stderr together.
func keep(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	out, err := keepCmd(t, dir, env, args...).CombinedOutput()
	return string(out), err
}

// writeRun writes a run's out/: summary.md titled title and a bench.txt
// the gate reads, its started line n seconds after a fixed time.
func writeRun(t *testing.T, out, title string, n int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(out, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(out, "summary.md"), []byte(title+"\n\nrest of the summary\n"), 0o644))
	started := time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC).Format(time.RFC3339Nano)
	bench := fmt.Sprintf("%s%s\nBenchmarkSleep/model=A/level=1 1 %d sec/sleep\n", record.BenchStartedPrefix, started, n)
	require.NoError(t, os.WriteFile(filepath.Join(out, "bench.txt"), []byte(bench), 0o644))
}

// kept is the runs dir holds, oldest first, as the gate reads them.
func kept(t *testing.T, dir string) []gate.Run {
	t.Helper()
	b, err := gate.LoadBaseline(context.Background(), dir)
	require.NoError(t, err)
	return b.Runs
}

// TestBaselineKeepDefaultFromTheGate: the default number of runs kept is
// 2 × gate.FewMinRuns, within what the gate reads and searches.
func TestBaselineKeepDefaultFromTheGate(t *testing.T) {
	t.Parallel()
	n, err := strconv.Atoi(defaultKeep(t))
	require.NoError(t, err)
	assert.Equal(t, 2*gate.FewMinRuns, n, "every metric gated after a change point in the older half")
	assert.GreaterOrEqual(t, n, gate.HistoryMinRuns, "change points searched")
	assert.LessOrEqual(t, n, gate.HistoryMaxRuns, "the gate reads no more")
}

// TestBaselineFillDefaultFromTheGate: env accepts a gate that judged
// nothing until the baseline holds gate.FewMinRuns runs, the fewest from
// which every metric (one or two events a run too) can be judged.
func TestBaselineFillDefaultFromTheGate(t *testing.T) {
	t.Parallel()
	n, err := strconv.Atoi(defaultFill(t))
	require.NoError(t, err)
	assert.Equal(t, gate.FewMinRuns, n, "the baseline fills until every metric can be gated")
	k, err := strconv.Atoi(defaultKeep(t))
	require.NoError(t, err)
	assert.LessOrEqual(t, n, k, "a baseline that keeps fewer runs would fill forever")
}

// TestBaselineKeepKeepsTheNewestN adds N+3 passing runs with the default
// N: the newest N are kept, in a directory the gate reads as N runs.
func TestBaselineKeepKeepsTheNewestN(t *testing.T) {
	t.Parallel()
	n, err := strconv.Atoi(defaultKeep(t))
	require.NoError(t, err)
	dir := t.TempDir()
	for i := 1; i <= n+3; i++ {
		writeRun(t, filepath.Join(dir, "out"), "# wakebench: PASS", i)
		out, err := keep(t, dir, []string{fmt.Sprintf("BASELINE_RUN_ID=run%02d", i)}, "add", "base", "out")
		require.NoError(t, err, out)
		assert.Contains(t, out, fmt.Sprintf("keeps %d runs (at most %d)", min(i, n), n))
		if i > n {
			assert.Contains(t, out, "-run"+fmt.Sprintf("%02d", i-n)+" (older than the newest")
		}
	}
	runs := kept(t, filepath.Join(dir, "base"))
	require.Len(t, runs, n)
	for j, r := range runs {
		want := j + 4 // runs 1 to 3 removed
		assert.True(t, strings.HasSuffix(filepath.Dir(r.Path), fmt.Sprintf("-run%02d", want)), r.Path)
		assert.Equal(t, time.Date(2026, 1, 1, 0, 0, want, 0, time.UTC), r.Started.UTC(), r.Path)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "base"))
	require.NoError(t, err)
	assert.Len(t, entries, n, "nothing else left behind (no .adding.* directory)")
}

// TestBaselineKeepAddsOnlyAPass: a FAIL or NOT RUN is not added (and is no
// error), a simulated PASS is; a PASS without its bench.txt, a bad
// BASELINE_KEEP and a missing summary.md are errors.
func TestBaselineKeepAddsOnlyAPass(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	for _, title := range []string{"# wakebench: FAIL", "# wakebench: NOT RUN", "# wakebench: FAIL — simulated (vllmsim profile tiny, time scale 1)", "# wakebench: PASSED?"} {
		writeRun(t, filepath.Join(dir, "out"), title, 1)
		out, err := keep(t, dir, nil, "add", "base")
		require.NoError(t, err, out)
		assert.Contains(t, out, "not added", title)
		assert.NoDirExists(t, base, title)
	}

	writeRun(t, filepath.Join(dir, "out"), "# wakebench: PASS — simulated (vllmsim profile tiny, time scale 1)", 1)
	out, err := keep(t, dir, nil, "add", "base")
	require.NoError(t, err, out)
	assert.Len(t, kept(t, base), 1)

	for _, c := range []struct {
		env   []string
		setup func()
		want  string
	}{
		{setup: func() { require.NoError(t, os.Remove(filepath.Join(dir, "out", "bench.txt"))) }, want: "bench.txt: missing"},
		{env: []string{"BASELINE_KEEP=0"}, want: "BASELINE_KEEP=0"},
		{env: []string{"BASELINE_KEEP=x"}, want: "BASELINE_KEEP=x"},
		{setup: func() { require.NoError(t, os.Remove(filepath.Join(dir, "out", "summary.md"))) }, want: "summary.md: none"},
	} {
		writeRun(t, filepath.Join(dir, "out"), "# wakebench: PASS", 2)
		if c.setup != nil {
			c.setup()
		}
		out, err := keep(t, dir, c.env, "add", "base")
		assert.Error(t, err, out)
		assert.Contains(t, out, c.want)
	}
	assert.Len(t, kept(t, base), 1, "nothing added by a call that failed")
}

// TestBaselineKeepUse: WAKEBENCH_BASELINE only for a directory holding a
// run, as its absolute path.
func TestBaselineKeepUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, d := range []string{"none", "empty"} {
		if d == "empty" {
			require.NoError(t, os.Mkdir(filepath.Join(dir, d), 0o755))
		}
		out, err := keepCmd(t, dir, nil, "use", d).Output()
		require.NoError(t, err)
		assert.Empty(t, string(out), "%s: no baseline", d)
	}
	writeRun(t, filepath.Join(dir, "out"), "# wakebench: PASS", 1)
	_, err := keep(t, dir, nil, "add", "base")
	require.NoError(t, err)
	out, err := keepCmd(t, dir, nil, "use", "base").Output()
	require.NoError(t, err)
	want, err := filepath.EvalSymlinks(filepath.Join(dir, "base"))
	require.NoError(t, err)
	assert.Equal(t, want+"\n", string(out))
}

// keepEnv runs keepCmd with args; it returns stdout and stderr apart.
func keepEnv(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e strings.Builder
	cmd := keepCmd(t, dir, env, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

const minJudged0 = "WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED=0\n"

// TestBaselineKeepEnv: env prints nothing for a directory holding no run
// (no baseline, no gate); WAKEBENCH_BASELINE and a minimum of 0 judged
// metrics, saying the baseline is filling, for 1 to FILL-1 runs;
// WAKEBENCH_BASELINE alone from FILL runs on (default gate.FewMinRuns).
func TestBaselineKeepEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, d := range []string{"none", "empty"} {
		if d == "empty" {
			require.NoError(t, os.Mkdir(filepath.Join(dir, d), 0o755))
		}
		stdout, stderr, err := keepEnv(t, dir, nil, "env", d)
		require.NoError(t, err, stderr)
		assert.Empty(t, stdout, "%s: no baseline, so no gate and nothing to relax", d)
		assert.Contains(t, stderr, "holds no run yet", d)
	}

	fill, err := strconv.Atoi(defaultFill(t))
	require.NoError(t, err)
	base := filepath.Join(dir, "base")
	for i := 1; i <= fill+1; i++ {
		writeRun(t, filepath.Join(dir, "out"), "# wakebench: PASS", i)
		out, err := keep(t, dir, []string{fmt.Sprintf("BASELINE_RUN_ID=run%02d", i)}, "add", "base", "out")
		require.NoError(t, err, out)
		require.Len(t, kept(t, base), i, "the gate reads %d runs", i)
		abs, err := filepath.EvalSymlinks(base)
		require.NoError(t, err)

		stdout, stderr, err := keepEnv(t, dir, nil, "env", "base")
		require.NoError(t, err, stderr)
		want := "WAKEBENCH_BASELINE=" + abs + "\n"
		if i < fill {
			want += minJudged0
			assert.Contains(t, stderr, fmt.Sprintf("the baseline is filling (%d of %d runs)", i, fill), "run %d", i)
			assert.Contains(t, stderr, "a gate that judges nothing is accepted", "run %d", i)
		} else {
			assert.NotContains(t, stderr, "filling", "run %d", i)
		}
		assert.Equal(t, want, stdout, "%d runs of %d", i, fill)

		use, err := keepCmd(t, dir, nil, "use", "base").Output()
		require.NoError(t, err)
		assert.Equal(t, abs+"\n", string(use), "use: env's WAKEBENCH_BASELINE")
	}

	// BASELINE_FILL sets the count (0: never filling); a bad one is an error.
	for fillEnv, want := range map[string]bool{fmt.Sprint(fill + 2): true, fmt.Sprint(fill + 1): false, "1": false, "0": false} {
		stdout, stderr, err := keepEnv(t, dir, []string{"BASELINE_FILL=" + fillEnv}, "env", "base")
		require.NoError(t, err, stderr)
		assert.Equal(t, want, strings.HasSuffix(stdout, minJudged0), "BASELINE_FILL=%s, %d runs: %s", fillEnv, fill+1, stdout)
	}
	for _, bad := range []string{"x", "-1", "1.5", "010"} {
		stdout, stderr, err := keepEnv(t, dir, []string{"BASELINE_FILL=" + bad}, "env", "base")
		assert.Error(t, err, "BASELINE_FILL=%s", bad)
		assert.Empty(t, stdout, "BASELINE_FILL=%s: nothing for the job's environment", bad)
		assert.Contains(t, stderr, "BASELINE_FILL="+bad)
	}
}

// TestBaselineKeepEnvCountsAsTheGate: the runs env counts are the runs
// the gate reads from the directory, the script's or not.
func TestBaselineKeepEnvCountsAsTheGate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	for i, p := range []string{"bench.txt", "a.bench.txt", "by-hand/bench.txt", ".hidden/bench.txt", "20260101T000000.000000000Z-1/bench.txt"} {
		writeRun(t, filepath.Join(dir, "out"), "# wakebench: PASS", i+1)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(base, p)), 0o755))
		require.NoError(t, os.Rename(filepath.Join(dir, "out", "bench.txt"), filepath.Join(base, p)))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(base, "no-run"), 0o755))
	n := len(kept(t, base))
	require.Equal(t, 5, n, "the gate reads every bench.txt, a dot directory's too (Go's * matches a leading dot)")
	_, stderr, err := keepEnv(t, dir, nil, "env", "base")
	require.NoError(t, err, stderr)
	assert.Contains(t, stderr, fmt.Sprintf("filling (%d of ", n), "the gate reads %d runs", n)
}
