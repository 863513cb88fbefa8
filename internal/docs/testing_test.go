package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeVar is the value of the Makefile variable name (its ?= line and the
// lines its trailing backslashes continue), split into words.
func makeVar(t *testing.T, makefile, name string) []string {
	t.Helper()
	i := strings.Index(makefile, "\n"+name+" ")
	require.GreaterOrEqual(t, i, 0, "the Makefile sets %s", name)
	var value strings.Builder
	for _, line := range strings.Split(makefile[i+1:], "\n") {
		more := strings.HasSuffix(line, "\\")
		value.WriteString(strings.TrimSuffix(line, "\\") + " ")
		if !more {
			break
		}
	}
	_, v, ok := strings.Cut(value.String(), "?=")
	require.True(t, ok, "%s is set with ?=", name)
	return strings.Fields(v)
}

// longCall is a test's call of testmain.Long, on a line of its own.
var longCall = regexp.MustCompile(`(?m)^\s+testmain\.Long\(t\)$`)

// TestLongTestsRunInStress: make test runs with -short, which skips every
// test that calls testmain.Long; CI runs those only in make stress, so each
// package that holds one must be one of make stress's packages (STRESS_PKGS,
// under -race, or STRESS_NORACE_PKGS, without it), or its long tests would
// run nowhere in CI.
func TestLongTestsRunInStress(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	stress := append(makeVar(t, string(b), "STRESS_PKGS"), makeVar(t, string(b), "STRESS_NORACE_PKGS")...)
	long := map[string]bool{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "tools" || d.Name() == "out" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if longCall.Match(src) {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel == "." {
				long["."] = true
			} else {
				long["./"+filepath.ToSlash(rel)] = true
			}
		}
		return nil
	}))
	require.NotEmpty(t, long, "the module's long tests")
	for dir := range long {
		assert.Contains(t, stress, dir, "%s has long tests (testmain.Long), which make test's -short skips: list it in the Makefile's STRESS_PKGS (or STRESS_NORACE_PKGS)", dir)
	}
}

// ciStepBudgets is docs/testing.md's table of CI's steps: step → budget in
// seconds, and the whole run's budget.
func ciStepBudgets(t *testing.T, doc string) (steps map[string]int, total int) {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## CI's steps and their budgets\n")
	require.True(t, ok, "docs/testing.md has a section \"CI's steps and their budgets\"")
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	steps = map[string]int{}
	row := regexp.MustCompile("^\\| `([^`]+)` \\| *([0-9]+) *\\|")
	for _, line := range strings.Split(section, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		if m[1] == "CI, all steps" {
			total = n
			continue
		}
		_, dup := steps[m[1]]
		require.False(t, dup, "step %q has one row", m[1])
		steps[m[1]] = n
	}
	return steps, total
}

// TestEveryCIStepHasABudget: .ci/run prints each step's time against its
// budget, read from docs/testing.md's table; every step has a row there,
// every row is a step, and the steps' budgets add up to no more than the
// whole run's (issue 49: 35 minutes on a fresh 2-core machine).
func TestEveryCIStepHasABudget(t *testing.T) {
	root := filepath.Join("..", "..")
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	require.NoError(t, err)
	var run []string
	for _, m := range regexp.MustCompile(`(?m)^step "([^"]+)"`).FindAllStringSubmatch(string(ci), -1) {
		run = append(run, m[1])
	}
	require.NotEmpty(t, run, ".ci/run's steps")
	budgets, total := ciStepBudgets(t, string(doc))
	var rows []string
	sum := 0
	for name, b := range budgets {
		rows = append(rows, name)
		assert.Positive(t, b, name)
		sum += b
	}
	slices.Sort(rows)
	assert.ElementsMatch(t, run, rows, ".ci/run's steps and the rows of docs/testing.md's table of CI's steps")
	assert.Equal(t, 35*60, total, "the whole run's budget (issue 49)")
	assert.LessOrEqual(t, sum, total, "the steps' budgets fit the whole run's")
}
