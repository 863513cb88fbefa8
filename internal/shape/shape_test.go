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
