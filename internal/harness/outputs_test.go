package harness

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
)

// TestReportOutputsAgreeAndOneLostLosesOnlyItself: every output made from
// the report says the same verdict and names the same failure; one that
// cannot be written (here report.html, where a directory is in its way)
// is named in the error, and the others, the report first, are written.
func TestReportOutputsAgreeAndOneLostLosesOnlyItself(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "report.html"), 0o755))
	rec := record.New([]string{"A"}, map[string]string{"A": "m"})
	rec.Fail(record.Failure{Phase: "sleep-level1", Model: "A", Step: "wake", Error: "wake_up: got <nil> answer"})
	rep, _, err := writeReport(dir, rec.Raw(), nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "report.html"))
	assert.Equal(t, []string{"report.html"}, slices.Sorted(maps.Keys(lostOutputs(err))), "only the page is lost")
	assert.Equal(t, "FAIL", rep.Status)

	var back struct{ Status string }
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, "FAIL", back.Status)
	for name, text := range map[string]string{"summary.md": "got <nil> answer", "ctrf.json": "got <nil> answer", "checks.junit.xml": "got &lt;nil&gt; answer"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		assert.Contains(t, string(b), text, "%s names the failure", name)
	}
	m, err := os.ReadFile(filepath.Join(dir, "metrics.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(m), "wakebench_run_passed 0")

	// With the way clear, the page says the same, the failure's text whole.
	require.NoError(t, os.Remove(filepath.Join(dir, "report.html")))
	_, _, err = writeReport(dir, rec.Raw(), nil, nil)
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), "got &lt;nil&gt; answer")
	assert.Contains(t, string(page), `id="status">FAIL<`)
}
