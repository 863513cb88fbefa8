package shape

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dataKeyed are the reference report's data-keyed objects (report.DataKeyed).
var dataKeyed = []string{"models", "switch.directions", "windows", "memory.rss_peak_gib", "memory.l1_release_fraction"}

func TestDiff(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join("..", "..", "testdata", "l20-reference-report.json"))
	require.NoError(t, err)
	diffs, err := Diff(ref, ref)
	require.NoError(t, err)
	assert.Empty(t, diffs)

	var doc map[string]any
	require.NoError(t, json.Unmarshal(ref, &doc))
	delete(doc["models"].(map[string]any)["A"].(map[string]any), "restart_warm")
	doc["kv_gib"] = "4"
	doc["extra"] = true
	b, _ := json.Marshal(doc)
	diffs, err = Diff(ref, b)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		"kv_gib: reference has number, ours string",
		"models.A.restart_warm: reference has object, ours missing/null",
	}, diffs)

	// Three models C, D, E match the reference's A, B by shape.
	require.NoError(t, json.Unmarshal(ref, &doc))
	models := doc["models"].(map[string]any)
	doc["models"] = map[string]any{"C": models["A"], "D": models["B"], "E": models["A"]}
	b, _ = json.Marshal(doc)
	diffs, err = Diff(ref, b)
	require.NoError(t, err)
	assert.Contains(t, diffs, "models.A: reference has object, ours missing/null", "exact keys by default")
	diffs, err = Diff(ref, b, dataKeyed...)
	require.NoError(t, err)
	assert.Empty(t, diffs)
	delete(models["A"].(map[string]any), "sleep")
	doc["models"] = map[string]any{"C": models["A"]}
	b, _ = json.Marshal(doc)
	diffs, err = Diff(ref, b, dataKeyed...)
	require.NoError(t, err)
	assert.Equal(t, []string{"models.C.sleep: reference has object, ours missing/null"}, diffs)
}

// TestUnmeasuredSummaryMayBeNull: a summary of no samples (n 0) may hold
// null figures where the reference has numbers (issue 50: none is not
// 0 s); a summary of samples may not, nor may a figure without an n
// beside it, nor may a missing key.
func TestUnmeasuredSummaryMayBeNull(t *testing.T) {
	ref := []byte(`{"s":{"n":3,"median":1,"p95":2},"x":{"v":1}}`)
	diffs, err := Diff(ref, []byte(`{"s":{"n":0,"median":null,"p95":null},"x":{"v":1}}`))
	require.NoError(t, err)
	assert.Empty(t, diffs)
	diffs, err = Diff(ref, []byte(`{"s":{"n":2,"median":null,"p95":2},"x":{"v":null}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"s.median: reference has number, ours missing/null", "x.v: reference has number, ours missing/null"}, diffs)
	diffs, err = Diff(ref, []byte(`{"s":{"n":0,"median":null},"x":{"v":1}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"s.p95: reference has number, ours missing/null"}, diffs, "absent is not null")
}
