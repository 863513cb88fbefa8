package figures

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/wakebench/wakebench/internal/gate"
)

func docTable(t *testing.T) Table {
	t.Helper()
	md, err := os.ReadFile("../../docs/metrics.md")
	require.NoError(t, err)
	tab, err := Parse(md)
	require.NoError(t, err, "docs/metrics.md's figure table")
	return tab
}

// TestGoldenReportHasARowForEveryFigure: every figure of the golden
// report (internal/report's fixture, every section filled, soak included)
// and every benchmark and unit of its bench.txt has exactly one row in
// docs/metrics.md. The whole-run test checks a
// real run's report the same way.
func TestGoldenReportHasARowForEveryFigure(t *testing.T) {
	tab := docTable(t)
	b, err := os.ReadFile("../report/testdata/golden/report.json")
	require.NoError(t, err)
	figs, err := Flatten(b)
	require.NoError(t, err)
	require.Greater(t, len(figs), 100, "the golden report's figures")
	for p := range figs {
		_, err := tab.Row(p)
		assert.NoError(t, err)
	}
	f, err := os.Open("../report/testdata/golden/bench.txt")
	require.NoError(t, err)
	defer f.Close()
	bench, err := gate.ReadBench(f, "bench.txt")
	require.NoError(t, err)
	require.NotEmpty(t, bench.Values)
	for k := range bench.Values {
		_, err := tab.Row(BenchPath(k.Name, k.Unit))
		assert.NoError(t, err)
	}
}

func TestParse(t *testing.T) {
	md := "intro\n\n" + Header + "\n|---|---|---|---|\n" +
		"| `a.*.x_s`, `a.*.y_s` | sent | answered (`|` in code) | sleep, ~reads |\n" +
		"| `b.n` | — | a count | — |\n" +
		"| `c.d_s` | x | y | nothing |\n" +
		"| `e_s` | x | y | prefill, ~any |\n\nafter\n| not | the | table | row |\n"
	tab, err := Parse([]byte(md))
	require.NoError(t, err)
	require.Len(t, tab, 4)
	assert.True(t, tab[3].Schedule)
	assert.Equal(t, []string{"prefill"}, tab[3].Inside)
	assert.False(t, tab[0].Schedule)
	assert.Equal(t, []string{"a.*.x_s", "a.*.y_s"}, tab[0].Patterns)
	assert.Equal(t, []string{"sleep"}, tab[0].Inside)
	assert.Equal(t, []string{"reads"}, tab[0].Partly)
	assert.True(t, tab[0].Interval)
	assert.Equal(t, 5, tab[0].Line)
	assert.False(t, tab[1].Interval)
	assert.True(t, tab[2].Interval)
	assert.Empty(t, tab[2].Inside)

	r, err := tab.Row("a.B.y_s")
	require.NoError(t, err)
	assert.Equal(t, 5, r.Line)
	_, err = tab.Row("a.B.z_s")
	assert.ErrorContains(t, err, "no row")

	for _, bad := range []string{
		Header + "\n|---|---|---|---|\n| `a` | x | y | sleeping |\n", // not an operation
		Header + "\n|---|---|---|---|\n| a | x | y | sleep |\n",      // no path
		Header + "\n|---|---|---|---|\n| `a` | x | sleep |\n",        // three cells
		"no table here\n",
	} {
		_, err := Parse([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestTwoRowsForOneFigureFail(t *testing.T) {
	tab, err := Parse([]byte(Header + "\n|---|---|---|---|\n| `a.*` | x | y | — |\n| `a.b` | x | y | sleep |\n"))
	require.NoError(t, err)
	_, err = tab.Row("a.b")
	assert.ErrorContains(t, err, "lines 3, 4")
}

func TestMatch(t *testing.T) {
	assert.True(t, Match("models.*.performance[*].ttft_s", "models.A.performance[3].ttft_s"))
	assert.True(t, Match("switch.directions.*.sleep_s", "switch.directions.A→B.sleep_s"))
	assert.False(t, Match("models.*.sleep_s", "models.A.sleep.1.sleep_s"), "* is one key, not several")
	assert.False(t, Match("models.*.sleep.1.sleep_s", "models.A.sleep.2.sleep_s"))
	p := BenchPath("Sleep/model=A/level=1", "sec/wake")
	assert.True(t, Match("bench:Sleep/model=*/level=1 sec/wake", p))
	assert.False(t, Match("bench:Sleep/model=*/level=2 sec/wake", p))
	assert.False(t, Match("bench:Sleep/model=*/level=1 sec/sleep", p))
	assert.False(t, Match("bench:Sleep/dir=*/level=1 sec/wake", p), "key=* holds the key")
}

func TestValues(t *testing.T) {
	assert.Equal(t, Figure{N: 4, Median: 2.5, Min: 1}, Values([]float64{4, 1, 3, 2}))
	assert.Equal(t, Figure{N: 3, Median: 2, Min: 1}, Values([]float64{2, 3, 1}))
	f := Values(nil)
	assert.Zero(t, f.N)
	assert.True(t, math.IsNaN(f.Min))
}

func TestFlatten(t *testing.T) {
	figs, err := Flatten([]byte(`{"a": {"n": 3, "median": 2, "min": 1, "max": 3, "p95": 3},
		"b": [{"c": 4}, {"c": 5.5}], "s": "text", "ok": true, "none": null, "d": {"e": 7}}`))
	require.NoError(t, err)
	keys := make([]string, 0, len(figs))
	for k := range figs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	assert.Equal(t, []string{"a", "b[0].c", "b[1].c", "d.e"}, keys, "summaries whole, numbers; no strings, booleans or nulls")
	assert.Equal(t, Figure{N: 3, Median: 2, Min: 1, Summary: true}, figs["a"])
	assert.Equal(t, Figure{N: 1, Median: 5.5, Min: 5.5}, figs["b[1].c"])
	_, err = Flatten([]byte(`{`))
	assert.Error(t, err)
}

// TestServeRowsCountTheirSamples (issue 50): each serving figure's row
// says how many samples it has, one per round or one per successful
// request, and the golden bench.txt has that many for every model, stage
// and concurrency of the golden report (its rounds, its successes).
// 650cbfc's row put req-tok/s, one per request, under "one sample per
// round".
func TestServeRowsCountTheirSamples(t *testing.T) {
	tab := docTable(t)
	md, err := os.ReadFile("../../docs/metrics.md")
	require.NoError(t, err)
	lines := strings.Split(string(md), "\n")
	b, err := os.ReadFile("../report/testdata/golden/report.json")
	require.NoError(t, err)
	var rep struct {
		Models map[string]struct {
			Performance []struct {
				Stage       string `json:"stage"`
				Concurrency int    `json:"concurrency"`
				Rounds      int    `json:"rounds"`
				Success     int    `json:"success"`
			} `json:"performance"`
		} `json:"models"`
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	f, err := os.Open("../report/testdata/golden/bench.txt")
	require.NoError(t, err)
	defer f.Close()
	bench, err := gate.ReadBench(f, "bench.txt")
	require.NoError(t, err)
	checked := map[string]bool{}
	for label, m := range rep.Models {
		for _, p := range m.Performance {
			require.NotEqual(t, p.Rounds, p.Success, "the fixture tells rounds from requests")
			name := fmt.Sprintf("Serve/model=%s/stage=%s/conc=%d", label, p.Stage, p.Concurrency)
			for k, xs := range bench.Values {
				if k.Name != name {
					continue
				}
				row, err := tab.Row(BenchPath(k.Name, k.Unit))
				require.NoError(t, err)
				text := lines[row.Line-1]
				switch {
				case strings.Contains(text, "one sample per round"):
					assert.Len(t, xs, p.Rounds, "%s %s: docs/metrics.md:%d says one sample per round", name, k.Unit, row.Line)
				case strings.Contains(text, "one sample per successful request"):
					assert.Len(t, xs, p.Success, "%s %s: docs/metrics.md:%d says one sample per successful request", name, k.Unit, row.Line)
				default:
					t.Errorf("%s %s: docs/metrics.md:%d says neither one sample per round nor per successful request", name, k.Unit, row.Line)
				}
				checked[k.Unit] = true
			}
		}
	}
	assert.Len(t, checked, 4, "tok/s, req-tok/s, sec/ttft, sec/tpot: %v", checked)
}
