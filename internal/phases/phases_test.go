package phases

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/wakebench/wakebench/internal/record"
)

// TestPhaseOrder: the reference run's phases (testdata/l20-reference-report.json:
// restart, baseline, level-1 cycles, after-wake, level 2, switch) run in
// its order, whatever runs between them; the traffic phase, whose router
// leaves any model awake, runs last; each name once and documented. A new
// phase is one entry of List, not an edit here.
func TestPhaseOrder(t *testing.T) {
	names := Names()
	reference := []string{record.PhaseRestart, record.PhaseBaseline, record.PhaseSleepL1, record.PhaseAfterWake, record.PhaseSleepL2, record.PhaseSwitch}
	last := -1
	for _, r := range reference {
		i := slices.Index(names, r)
		require.GreaterOrEqual(t, i, 0, "%s is not listed", r)
		assert.Greater(t, i, last, "%s runs after the reference phase before it", r)
		last = i
	}
	assert.Equal(t, record.PhaseTraffic, names[len(names)-1], "traffic runs last")
	seen := map[string]bool{}
	for _, p := range List() {
		assert.False(t, seen[p.Name], "%s listed twice", p.Name)
		seen[p.Name] = true
		assert.NotEmpty(t, p.Doc, p.Name)
	}
	ph := List()
	ph[0].Name = "changed"
	assert.Equal(t, record.PhaseRestart, List()[0].Name, "callers get a copy")
}

var update = flag.Bool("update", false, "rewrite the docs/protocol.md's phase table from List")

const (
	tableBegin = "<!-- phases: generated from internal/phases.List by go test ./internal/phases -update -->\n"
	tableEnd   = "<!-- phases end -->\n"
)

// phaseTable is the docs/protocol.md's phase table.
func phaseTable() string {
	var b strings.Builder
	b.WriteString("| phase | run alone | per model |\n|---|---|---|\n")
	for _, p := range List() {
		fmt.Fprintf(&b, "| %s | `-run 'TestProtocol/%s$'` | %s |\n", p.Name, p.Name, p.Doc)
	}
	return b.String()
}

// TestDocsListThePhases: docs/protocol.md's phase table is generated from
// List (go test ./internal/phases -update rewrites it).
func TestDocsListThePhases(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "protocol.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(b)
	i, j := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	require.True(t, i >= 0 && j > i, "docs/protocol.md has no generated phase table between %q and %q", tableBegin, tableEnd)
	got := readme[i+len(tableBegin) : j]
	if *update {
		readme = readme[:i+len(tableBegin)] + phaseTable() + readme[j:]
		require.NoError(t, os.WriteFile(path, []byte(readme), 0o644))
		got = phaseTable()
	}
	assert.Equal(t, phaseTable(), got, "docs/protocol.md's phase table is stale: go test ./internal/phases -update")
}
