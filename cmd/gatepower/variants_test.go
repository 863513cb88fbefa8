package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/variants"
)

// writeComparison writes a variant run's comparison.json with one Sleep
// wake figure and one serving figure of the given verdicts, both gated
// (in the focus), and a serving figure outside the focus judged worse.
func writeComparison(t *testing.T, dir string, wake, serve string) {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	// The wake's blocks' log ratios ±0.1 in turn: a 10 % slower wake needs
	// 14 blocks at a 5 % tolerance and α 0.05 (variants.TestBlocksForByHand).
	r := []float64{math.Exp(0.1), math.Exp(-0.1), math.Exp(0.1), math.Exp(-0.1)}
	c := variants.Comparison{Status: "PASS", Blocks: make([]variants.Block, 4), TolerancePct: 5, Alpha: 0.05, Metrics: []variants.Metric{
		{Name: "Sleep/model=A/level=1", Unit: "sec/wake", Better: -1, Verdict: wake, DetectPct: 7, Focus: true, Ratios: r},
		{Name: "Serve/model=A/stage=baseline/conc=1", Unit: "tok/s", Better: 1, Verdict: serve, Focus: true},
		{Name: "Serve/model=A/stage=baseline/conc=1", Unit: "sec/ttft", Better: -1, Verdict: variants.Worse}, // shown, not gated: flags nothing
		{Name: "Host/window=A-restart", Unit: "others-cpu-%", Verdict: variants.NotJudge},
	}}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "comparison.json"), b, 0o644))
}

// The rows count by hand: of 20 same-code runs one flags a serving
// figure better (a false alarm all the same) → 1, the goal ≤ 1 met; of 10
// slow-wake runs 8 have the wake worse and one only a serving figure →
// 8, short of the goal ≥ 9.
func TestVariantRowsCountByHand(t *testing.T) {
	out := t.TempDir()
	for i := 1; i <= 20; i++ {
		serve := variants.Same
		if i == 7 {
			serve = variants.Better
		}
		writeComparison(t, filepath.Join(out, scVariantsSame, strconv.Itoa(i)), variants.Same, serve)
	}
	for i := 1; i <= 10; i++ {
		wake, serve := variants.Worse, variants.Same
		switch i {
		case 3:
			wake = variants.Same
		case 9:
			wake, serve = variants.Same, variants.Worse
		}
		writeComparison(t, filepath.Join(out, scVariantsSlowWake, strconv.Itoa(i)), wake, serve)
	}
	var m measurement
	require.NoError(t, variantRows(out, &m, false))
	require.Len(t, m.rows, 2)
	same, slow := m.rows[0], m.rows[1]
	assert.Equal(t, []int{1, 20}, []int{same.flagged, same.of})
	assert.Equal(t, "≤ 1 flagged", same.goal)
	assert.True(t, same.met)
	assert.Equal(t, []int{3, 4}, []int{same.judged, same.metrics}, "three of four figures judged a run")
	assert.Contains(t, same.against, "4 blocks; a wake figure's change caught 8 times in 10 when judged alone, before Benjamini-Hochberg: median 7 %; blocks for a 10 % change of one wake figure caught so, from the spread of its blocks in each run: median 14")
	assert.Equal(t, []int{8, 10}, []int{slow.flagged, slow.of})
	assert.Equal(t, "≥ 9 flagged", slow.goal)
	assert.False(t, slow.met)
	assert.False(t, m.broken)

	// Under the hog (LOAD=1): rows of their own after the quiet ones; of 4
	// same-code runs 2 flag (the goal ≤ 1 missed), of 4 slow-wake runs 4.
	for i := 1; i <= 4; i++ {
		serve := variants.Same
		if i <= 2 {
			serve = variants.Worse
		}
		writeComparison(t, filepath.Join(out, scVariantsSame+loadSuffix, strconv.Itoa(i)), variants.Same, serve)
		writeComparison(t, filepath.Join(out, scVariantsSlowWake+loadSuffix, strconv.Itoa(i)), variants.Worse, variants.Same)
	}
	m = measurement{}
	require.NoError(t, variantRows(out, &m, false))
	require.Len(t, m.rows, 4)
	assert.Equal(t, "variants, the same code (quiet): any gated figure worse or better", m.rows[0].what)
	assert.Equal(t, "variants, the same code (under the hog): any gated figure worse or better", m.rows[2].what)
	assert.Equal(t, []int{2, 4}, []int{m.rows[2].flagged, m.rows[2].of})
	assert.False(t, m.rows[2].met, "≤ 1 of 4")
	assert.Equal(t, "variants, every wake 10 % slower (under the hog): a wake figure worse", m.rows[3].what)
	assert.Equal(t, []int{4, 4}, []int{m.rows[3].flagged, m.rows[3].of})
	assert.True(t, m.rows[3].met, "≥ 4 of 4")

	require.NoError(t, os.MkdirAll(filepath.Join(out, scVariantsSame, "21"), 0o755))
	m = measurement{}
	require.NoError(t, variantRows(out, &m, false))
	assert.True(t, m.broken, "a run that wrote no comparison.json")
}

// TestHogVariantRunsBesideQuietRuns: LOAD=1 STAGES=variants in a folder
// that holds earlier quiet runs (no base-load): the hog ran the variant
// runs alone, so the table is the quiet gate rows and the variant rows,
// with a note, not a refusal.
func TestHogVariantRunsBesideQuietRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 1))
	out := t.TempDir()
	for i := 1; i <= 5; i++ {
		writeRun(t, rng, filepath.Join(out, scBase, strconv.Itoa(i)), 1, 1, 2)
		writeRun(t, rng, filepath.Join(out, scSame, strconv.Itoa(i)), 1, 1, 2)
	}
	writeComparison(t, filepath.Join(out, scVariantsSame+loadSuffix, "1"), variants.Same, variants.Same)
	var b strings.Builder
	_, err := run(t.Context(), &b, out, true, 10, 0.05, false, false)
	require.NoError(t, err)
	assert.Contains(t, b.String(), "| variants, the same code (under the hog): any gated figure worse or better |")
	assert.Contains(t, b.String(), "| same code (quiet) |")
	assert.Contains(t, b.String(), "LOAD=1 made no base-load or same-load runs")
	_, err = run(t.Context(), &b, t.TempDir(), true, 10, 0.05, false, false)
	assert.ErrorContains(t, err, "no runs of base or same", "nothing at all")
}
