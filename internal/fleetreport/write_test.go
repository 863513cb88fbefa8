package fleetreport

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"golang.org/x/perf/benchfmt"
)

func TestWrite(t *testing.T) {
	base, bench := readTestdata(t)
	const h, a = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"
	var in []NodeResult
	for _, s := range []shape{{"h1", h, 0.6, 0.5, 0.5, 1, 0.8}, {"h2", h, 0.6, 0.5, 0.5, 1, 0.8}, {"h3", h, 0.3, 0.5, 0.5, 1, 0.8}, {"a1", a, 0.5, 0.4, 0.5, 1, 0.1}} {
		in = append(in, synth(t, base, bench, s))
	}
	in = append(in, NodeResult{Node: "gone", GPU: a, Status: StatusNotRun, Reason: "pod never scheduled: 0/9 nodes are available"})
	f, err := Build(in, Options{})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, Write(dir, f))

	var back Fleet
	j, err := os.ReadFile(filepath.Join(dir, FileJSON))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(j, &back))
	assert.Equal(t, StatusFail, back.Status)
	assert.Len(t, back.Nodes, 5)
	assert.Len(t, back.Kinds, 2)
	assert.Equal(t, []string{"a1", "gone", "h3"}, back.Flagged(), "a1's link probe read a tenth of its nominal link")
	assert.Equal(t, 4, back.Simulated)

	md, err := os.ReadFile(filepath.Join(dir, FileMD))
	require.NoError(t, err)
	assert.Contains(t, string(md), "**Simulated**: 4 of the 5 nodes ran on vllmsim")
	assert.Contains(t, string(md), "- **gone** (NVIDIA A100-SXM4-40GB): NOT RUN: pod never scheduled")
	assert.Contains(t, string(md), "- **h3** (NVIDIA H100 80GB HBM3, simulated: vllmsim profile tiny, time scale 1): PASS\n  - outlier: model A l1_wake_fraction_of_floor = 0.3, kind median 0.6")
	assert.NotContains(t, string(md), "- **h1**")
	assert.Contains(t, string(md), "| h3 | PASS, outlier, simulated | 50.4 of 63.01 GB/s = 0.80 | A | 0.300 (measured) |")
	assert.Contains(t, string(md), "- **a1** (NVIDIA A100-SXM4-40GB, simulated: vllmsim profile tiny, time scale 1): PASS\n  - outlier: host link link_h2d_fraction_of_nominal = 0.1 (measured host→device over NVML's nominal), kind median 0: link measured below 0.25 of the rate NVML's maximum link promises")

	// fleet.html: the nodes to look at first, and h3 marked an outlier in
	// the figure that flagged it, and in no other.
	page, err := os.ReadFile(filepath.Join(dir, FileHTML))
	require.NoError(t, err)
	html := string(page)
	first := html[strings.Index(html, `id="first-failed"`):]
	first = first[:strings.Index(first, "</div>")]
	assert.Contains(t, first, "h3 (NVIDIA H100 80GB HBM3): PASS; outlier: A l1_wake_fraction_of_floor = 0.3, kind median 0.6")
	assert.Contains(t, first, "gone (NVIDIA A100-SXM4-40GB): NOT RUN: pod never scheduled")
	assert.NotContains(t, first, "h1 (")
	assert.Contains(t, html, `<tr class="outlier"><td>NVIDIA H100 80GB HBM3 · model A</td><td>h3</td><td>0.3</td><td>OUTLIER</td><td>simulated</td></tr>`)
	assert.Contains(t, html, `<tr class="outlier"><td>NVIDIA A100-SXM4-40GB</td><td>a1</td><td>0.1</td><td>OUTLIER</td><td>simulated</td></tr>`)
	assert.Len(t, back.Outliers, 3, "h3's wake fraction for A and B, a1's link")
	assert.Equal(t, 3, strings.Count(html, `<tr class="outlier">`), "each outlier marked once, nothing else")
	assert.Contains(t, html, "Simulated: 4 of the 5 nodes ran on vllmsim")

	// Every merged result carries its node and kind; the node's own gpu line is kept apart.
	merged, err := os.ReadFile(filepath.Join(dir, FileBench))
	require.NoError(t, err)
	r := benchfmt.NewReader(bytes.NewReader(merged), "bench.txt")
	perNode := map[string]int{}
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.Result:
			node := rec.GetConfig("node")
			perNode[node]++
			want := h
			if node == "a1" {
				want = a
			}
			assert.Equal(t, want, rec.GetConfig("gpu"))
			assert.Equal(t, "1 × Tiny Sim GPU (simulated)", rec.GetConfig("node-gpu"))
		case *benchfmt.SyntaxError:
			t.Errorf("merged bench.txt: %v", rec)
		}
	}
	require.NoError(t, r.Err())
	lines := 0
	for l := range strings.Lines(string(bench)) {
		if strings.HasPrefix(l, "Benchmark") {
			lines++
		}
	}
	assert.Equal(t, map[string]int{"h1": lines, "h2": lines, "h3": lines, "a1": lines}, perNode)
	assert.Equal(t, 1, strings.Count(string(merged), "Unit tok/s better=higher"), "unit metadata once")

	// benchstat (a tool of this module) splits the merged file by node and filters by kind.
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command for go tool benchstat")
	}
	benchstat := func(args ...string) string {
		cmd := exec.Command("go", append([]string{"tool", "benchstat"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	byNode := benchstat("-filter", ".fullname:Sleep/model=A/level=1", "-col", "node", filepath.Join(dir, FileBench))
	for _, want := range []string{"gpu: " + h, "gpu: " + a, "sec/wake"} {
		assert.Contains(t, byNode, want, "a table per kind:\n%s", byNode)
	}
	for _, n := range []string{"h1", "h2", "h3", "a1"} {
		assert.Regexp(t, `│ +`+n+` +│`, byNode, "a column per node")
	}
	oneKind := benchstat("-filter", `gpu:"`+h+`"`, "-col", "node", filepath.Join(dir, FileBench))
	assert.Contains(t, oneKind, "h3")
	assert.NotContains(t, oneKind, "a1", "-filter gpu: keeps one kind:\n%s", oneKind)
}

// TestWriteNodes: each node's own outputs land under nodes/<node>/, a node
// with none leaves no directory, and a name that is not a directory name
// is refused.
func TestWriteNodes(t *testing.T) {
	dir := t.TempDir()
	err := WriteNodes(dir, []NodeResult{{Node: "n1", Report: []byte(`{"status":"FAIL"}`), Bench: []byte("BenchmarkX 1 1 sec/wake\n")}, {Node: "n2"}})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "nodes", "n1", "report.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":"FAIL"}`, string(b))
	assert.FileExists(t, filepath.Join(dir, "nodes", "n1", "bench.txt"))
	assert.NoDirExists(t, filepath.Join(dir, "nodes", "n2"))
	assert.Error(t, WriteNodes(dir, []NodeResult{{Node: "../x", Report: []byte("{}")}}))
}
