package protocol

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPhaseOrder: the protocol's order as the reference run defines it,
// each name once and documented.
func TestPhaseOrder(t *testing.T) {
	assert.Equal(t, []string{PhaseRestart, PhaseBaseline, PhaseSleepL1, PhaseAfterWake, PhaseSleepL2, PhaseSleepL0, PhaseKVRelease, PhaseStateCost, PhaseSwitch, PhaseTraffic}, PhaseNames())
	seen := map[string]bool{}
	for _, p := range Phases() {
		assert.False(t, seen[p.Name], "%s listed twice", p.Name)
		seen[p.Name] = true
		assert.NotEmpty(t, p.Doc, p.Name)
	}
	ph := Phases()
	ph[0].Name = "changed"
	assert.Equal(t, PhaseRestart, Phases()[0].Name, "callers get a copy")
}

var update = flag.Bool("update", false, "rewrite the docs/protocol.md's phase table from Phases")

const (
	tableBegin = "<!-- phases: generated from internal/protocol.Phases by go test ./internal/protocol -update -->\n"
	tableEnd   = "<!-- phases end -->\n"
)

// phaseTable is the docs/protocol.md's phase table.
func phaseTable() string {
	var b strings.Builder
	b.WriteString("| phase | run alone | per model |\n|---|---|---|\n")
	for _, p := range Phases() {
		fmt.Fprintf(&b, "| %s | `-run 'TestProtocol/%s'` | %s |\n", p.Name, p.Name, p.Doc)
	}
	return b.String()
}

// TestDocsListThePhases: docs/protocol.md's phase table is generated from
// Phases (go test ./internal/protocol -update rewrites it).
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
	assert.Equal(t, phaseTable(), got, "docs/protocol.md's phase table is stale: go test ./internal/protocol -update")
}
