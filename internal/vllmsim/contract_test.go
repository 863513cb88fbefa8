package vllmsim

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// contractRow is one row of docs/vllm-api.md's "Contract table (tested)".
type contractRow struct {
	line    int
	eras    []era
	before  []string // "METHOD /path?query", each must answer 2xx
	request string
	status  int
	body    string
}

// tableEras are the table's era letters: vLLM's releases A, B, C and D,
// and P, what open PRs propose.
var tableEras = map[string]era{"A": eraA, "B": eraB, "C": eraC, "D": eraD, "P": eraProposed}

// readContractTable parses the table under "## Contract table (tested)".
func readContractTable(t *testing.T, path string) []contractRow {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var rows []contractRow
	in := false
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "## ") {
			in = l == "## Contract table (tested)"
			continue
		}
		if !in || !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| eras") {
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|"), "|") // no cell holds a |
		require.Len(t, cells, 6, "docs/vllm-api.md:%d: want 6 cells", i+1)
		for j := range cells {
			cells[j] = strings.Trim(strings.TrimSpace(cells[j]), "`")
		}
		r := contractRow{line: i + 1, request: cells[2], body: cells[4]}
		for _, e := range strings.Fields(cells[0]) {
			ev, ok := tableEras[e]
			require.True(t, ok, "docs/vllm-api.md:%d: era %q: want A, B, C, D or P", i+1, e)
			r.eras = append(r.eras, ev)
		}
		for _, c := range strings.Split(strings.ReplaceAll(cells[1], "`", ""), ";") {
			if c = strings.TrimSpace(c); c != "" {
				r.before = append(r.before, c)
			}
		}
		require.NoError(t, json.Unmarshal([]byte(cells[3]), &r.status), "docs/vllm-api.md:%d status", i+1)
		rows = append(rows, r)
	}
	return rows
}

// call sends "METHOD /path?query" to the server at base.
func call(t *testing.T, base, req string) (int, string) {
	t.Helper()
	method, path, ok := strings.Cut(req, " ")
	require.True(t, ok, "request %q: want METHOD /path", req)
	r, err := http.NewRequestWithContext(t.Context(), method, base+path, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// bodyMatches reports whether got is the body want describes (the rules
// are in the doc above the table).
func bodyMatches(want, got string) bool {
	switch {
	case want == "*":
		return true
	case want == "(empty)":
		return strings.TrimSpace(got) == ""
	case strings.HasPrefix(want, "~"):
		return strings.Contains(got, want[1:])
	case strings.HasPrefix(want, "!"):
		return !strings.Contains(got, want[1:])
	}
	var w, g map[string]any
	if json.Unmarshal([]byte(want), &w) != nil || json.Unmarshal([]byte(got), &g) != nil {
		return false
	}
	if we, ok := w["error"].(map[string]any); ok && len(w) == 1 {
		ge, ok := g["error"].(map[string]any)
		if !ok {
			return false
		}
		for k, v := range we {
			if gv, ok := ge[k]; !ok || !reflect.DeepEqual(v, gv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(w, g)
}

// TestContractTable replays docs/vllm-api.md's contract table against
// vllmsim in every era each row names: the doc and the simulator agree.
func TestContractTable(t *testing.T) {
	rows := readContractTable(t, "../../docs/vllm-api.md")
	require.GreaterOrEqual(t, len(rows), 40, "the table was not found or lost rows")
	seen := map[era]int{}
	for _, r := range rows {
		for _, e := range r.eras {
			seen[e]++
			t.Run(string(e)+"/"+r.request, func(t *testing.T) {
				s := startSim(t, "tiny-a", map[string]string{EnvEra: string(e), EnvTimeScale: "0"})
				s.ready(t)
				for _, b := range r.before {
					code, body := call(t, s.url, b)
					require.True(t, code/100 == 2, "docs/vllm-api.md:%d: before %q answered %d %s", r.line, b, code, body)
				}
				code, body := call(t, s.url, r.request)
				assert.Equal(t, r.status, code, "docs/vllm-api.md:%d: %s: status (body %s)", r.line, r.request, body)
				assert.True(t, bodyMatches(r.body, body), "docs/vllm-api.md:%d: %s: body\nwant %s\n got %s", r.line, r.request, r.body, body)
			})
		}
	}
	for _, e := range eras {
		assert.NotZero(t, seen[e], "no row for era %s", e)
	}
}

// TestContractBodyRules: the matcher fails on a body that differs.
func TestContractBodyRules(t *testing.T) {
	for _, tt := range []struct {
		want, got string
		ok        bool
	}{
		{`{"status":"sleeping","level":1}`, `{"status":"sleeping","level":1}` + "\n", true},
		{`{"status":"sleeping","level":1}`, `{"status":"sleeping","level":2}`, false},
		{`{"status":"sleeping","level":1}`, `{"status":"sleeping","level":1,"elapsed_ms":3}`, false},
		{`{"status":"sleeping","level":1}`, ``, false},
		{`(empty)`, ``, true},
		{`(empty)`, `{}`, false},
		{`{"error":{"param":"query.level"}}`, `{"error":{"message":"x","param":"query.level","code":400}}`, true},
		{`{"error":{"param":"query.level"}}`, `{"error":{"message":"x","param":null,"code":400}}`, false},
		{`{"error":{"param":null}}`, `{"error":{"message":"x","code":400}}`, false},
		{`~a 1`, `x a 1 y`, true},
		{`~a 1`, `x a 0 y`, false},
		{`!a`, `b`, true},
		{`!a`, `ba`, false},
	} {
		assert.Equal(t, tt.ok, bodyMatches(tt.want, tt.got), "%+v", tt)
	}
}
