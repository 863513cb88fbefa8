package fleetreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/stats"
	"github.com/wakebench/wakebench/internal/variants"
)

// testdata/report.json and bench.txt are out/ of `go test -count=1 -run 'TestProtocol$' .`
// (vllmsim, profile tiny).
func readTestdata(t testing.TB) (rep report.Report, bench []byte) {
	t.Helper()
	b, err := os.ReadFile("testdata/report.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	bench, err = os.ReadFile("testdata/bench.txt")
	require.NoError(t, err)
	return rep, bench
}

// shape is one synthetic node: its kind, the fraction of its own PCIe limit its wake reaches,
// the fraction of its HBM-limited decode rate it serves, its level-1 residual, and its size
// (its links and memory bandwidth × size; its raw wake time and tok/s follow).
type shape struct {
	node, gpu        string
	wake, tps, resid float64
	size             float64
	link             float64 // the link probe's host→device rate over the nominal link (0: no probe)
}

// synth makes a node result from the testdata report with every model's figures set from s.
func synth(t testing.TB, base report.Report, bench []byte, s shape) NodeResult {
	t.Helper()
	rep := base
	rep.Models = map[string]*report.Model{}
	for label, m := range base.Models {
		mm := *m
		l := *m.PhysicalLimits
		l.PCIeGBps *= s.size
		l.L1WakeFloorS /= s.size
		l.L1WakeS = l.L1WakeFloorS / s.wake
		l.L1WakeFractionOfFloor = s.wake
		l.PCIeBasis = "nominal"
		if s.link > 0 {
			l.PCIeBasis = "measured"
		}
		l.HBMGBps *= s.size
		l.TPOTFloorS /= s.size
		mm.PhysicalLimits = &l
		mm.Performance = slices.Clone(m.Performance)
		for i := range mm.Performance {
			mm.Performance[i].OutputTPS.Median = s.tps / l.TPOTFloorS * float64(mm.Performance[i].Concurrency)
		}
		mm.Sleep = map[string]*report.SleepLevel{}
		for k, v := range m.Sleep {
			vv := *v
			if k == "1" {
				vv.ResidualGiB.Median = s.resid
			}
			mm.Sleep[k] = &vv
		}
		rep.Models[label] = &mm
	}
	rep.LinkProbe = nil
	if s.link > 0 {
		const nominal = 63.008 // PCIe Gen5 x16
		rep.LinkProbe = []record.Link{{GPU: "GPU 0", H2DGBps: s.link * nominal * s.size, NominalGBps: nominal * s.size, H2DFractionOfNominal: s.link}}
	}
	j, err := json.Marshal(rep)
	require.NoError(t, err)
	return NodeResult{Node: s.node, GPU: s.gpu, Status: StatusPass, Report: j, Bench: bench}
}

func TestOutlierRule(t *testing.T) {
	base, bench := readTestdata(t)
	const h, a = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"
	ok := func(node, gpu string) shape { return shape{node, gpu, 0.6, 0.5, 0.5, 1, 0.8} }
	link := MetricLinkFraction
	with := func(s shape, f func(*shape)) shape { f(&s); return s }
	tests := []struct {
		name  string
		nodes []shape
		want  []string // node/model/metric, both models A and B
	}{
		{"degraded wake among four", []shape{ok("h1", h), ok("h2", h), with(ok("h3", h), func(s *shape) { s.wake = 0.3 }), ok("h4", h)},
			[]string{"h3/A/" + MetricWakeFraction, "h3/B/" + MetricWakeFraction}},
		{"smaller shape, proportionally smaller figures", []shape{ok("h1", h), ok("h2", h), with(ok("small", h), func(s *shape) { s.size = 0.5 }), ok("h4", h)}, nil},
		{"two nodes: the worse one", []shape{ok("h1", h), with(ok("h2", h), func(s *shape) { s.wake = 0.3 })},
			[]string{"h2/A/" + MetricWakeFraction, "h2/B/" + MetricWakeFraction}},
		{"two nodes alike, a little apart", []shape{ok("h1", h), with(ok("h2", h), func(s *shape) { s.wake = 0.5 })}, nil},
		{"three nodes: slow decode", []shape{ok("h1", h), with(ok("h2", h), func(s *shape) { s.tps = 0.2 }), ok("h3", h)},
			[]string{"h2/A/" + MetricTPSFraction, "h2/B/" + MetricTPSFraction}},
		{"residual that does not come back", []shape{ok("h1", h), ok("h2", h), with(ok("h3", h), func(s *shape) { s.resid = 2 }), with(ok("h4", h), func(s *shape) { s.resid = 0.1 })},
			[]string{"h3/A/" + MetricResidual, "h3/B/" + MetricResidual}},
		{"a slower kind is not judged against a faster one", []shape{ok("h1", h), ok("h2", h), with(ok("a1", a), func(s *shape) { s.wake, s.tps = 0.3, 0.25 }), with(ok("a2", a), func(s *shape) { s.wake, s.tps = 0.3, 0.25 })}, nil},
		{"one node of a kind, above the floors", []shape{ok("h1", h), with(ok("a1", a), func(s *shape) { s.wake, s.resid = 0.2, 5 })}, nil},
		{"one node of a kind, below the wake floor", []shape{ok("h1", h), with(ok("a1", a), func(s *shape) { s.wake = 0.1 })},
			[]string{"a1/A/" + MetricWakeFraction, "a1/B/" + MetricWakeFraction}},
		{"two nodes of a kind, both below the wake floor", []shape{ok("h1", h), with(ok("a1", a), func(s *shape) { s.wake = 0.1 }), with(ok("a2", a), func(s *shape) { s.wake = 0.1 })},
			[]string{"a1/A/" + MetricWakeFraction, "a1/B/" + MetricWakeFraction, "a2/A/" + MetricWakeFraction, "a2/B/" + MetricWakeFraction}},
		// A small launch-bound model: every healthy node of the kind under the floor; the
		// kind is its own reference and none stands out.
		{"a kind of four all under the wake floor", []shape{ok("h1", h), with(ok("a1", a), func(s *shape) { s.wake = 0.1 }), with(ok("a2", a), func(s *shape) { s.wake = 0.1 }),
			with(ok("a3", a), func(s *shape) { s.wake = 0.1 }), with(ok("a4", a), func(s *shape) { s.wake = 0.1 })}, nil},
		// Median/MAD: 30% below the median is an outlier in a tight kind, not in a noisy one.
		{"tight kind", []shape{ok("h1", h), ok("h2", h), ok("h3", h), ok("h4", h), with(ok("h5", h), func(s *shape) { s.wake = 0.42 })},
			[]string{"h5/A/" + MetricWakeFraction, "h5/B/" + MetricWakeFraction}},
		// The link probe: a link trained down is named on a node alone in its kind (the floor,
		// on every node), among peers by the floor or, for a smaller loss, the relative rule; a
		// node without a probe is not judged on it.
		{"a link trained down, alone in its kind", []shape{ok("h1", h), with(ok("a1", a), func(s *shape) { s.link = 0.1 })}, []string{"a1/" + LinkModel + "/" + link}},
		{"a link trained down among four", []shape{ok("h1", h), ok("h2", h), with(ok("h3", h), func(s *shape) { s.link = 0.1 }), ok("h4", h)}, []string{"h3/" + LinkModel + "/" + link}},
		{"half a link among four", []shape{ok("h1", h), ok("h2", h), with(ok("h3", h), func(s *shape) { s.link = 0.4 }), ok("h4", h)}, []string{"h3/" + LinkModel + "/" + link}},
		{"half a link, alone in its kind", []shape{ok("h1", h), with(ok("a1", a), func(s *shape) { s.link = 0.4 })}, nil},
		// One node's probe did not run: its wake fraction is of its nominal link, not judged
		// against its peers' fractions of their measured ones (the kind has no other node of
		// its basis); nor is it a link outlier.
		{"one node without a probe", []shape{ok("h1", h), ok("h2", h), with(ok("h3", h), func(s *shape) { s.link, s.wake = 0, 0.35 }), ok("h4", h)}, nil},
		{"no probe", []shape{with(ok("h1", h), func(s *shape) { s.link = 0 }), with(ok("h2", h), func(s *shape) { s.link = 0 })}, nil},
		{"noisy kind", []shape{with(ok("h1", h), func(s *shape) { s.wake = 0.4 }), with(ok("h2", h), func(s *shape) { s.wake = 0.5 }), with(ok("h3", h), func(s *shape) { s.wake = 0.7 }),
			with(ok("h4", h), func(s *shape) { s.wake = 0.8 }), with(ok("h5", h), func(s *shape) { s.wake = 0.42 })}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var in []NodeResult
			for _, s := range tc.nodes {
				in = append(in, synth(t, base, bench, s))
			}
			f, err := Build(in, Options{})
			require.NoError(t, err)
			var got []string
			for _, o := range f.Outliers {
				got = append(got, o.Node+"/"+o.Model+"/"+o.Metric)
				assert.NotEmpty(t, o.Rule)
			}
			assert.ElementsMatch(t, tc.want, got, "outliers: %+v", f.Outliers)
			if len(tc.want) == 0 {
				assert.Equal(t, StatusPass, f.Status)
			} else {
				assert.Equal(t, StatusFail, f.Status)
				var flagged []string
				for _, w := range tc.want {
					flagged = append(flagged, strings.Split(w, "/")[0])
				}
				slices.Sort(flagged)
				assert.Equal(t, slices.Compact(flagged), f.Flagged())
			}
		})
	}
}

func TestOutlierNamesFigures(t *testing.T) {
	base, bench := readTestdata(t)
	const h = "NVIDIA H100 80GB HBM3"
	var in []NodeResult
	for i, w := range []float64{0.6, 0.62, 0.58, 0.3} {
		in = append(in, synth(t, base, bench, shape{fmt.Sprint("h", i), h, w, 0.5, 0.5, 1, 0}))
	}
	f, err := Build(in, Options{})
	require.NoError(t, err)
	require.Len(t, f.Outliers, 2)
	o := f.Outliers[0]
	assert.Equal(t, Outlier{Node: "h3", GPU: h, Model: "A", Metric: MetricWakeFraction, Value: 0.3, KindMedian: 0.6, Others: 3, Rule: o.Rule}, o)
	assert.Contains(t, o.Rule, "50% below the median of the kind's 3 other nodes")
	assert.Contains(t, o.Rule, "scaled MADs")
}

func TestFiguresFromReport(t *testing.T) {
	rep, bench := readTestdata(t)
	j, err := json.Marshal(rep)
	require.NoError(t, err)
	f, err := Build([]NodeResult{{Node: "n1", GPU: "Tiny", Status: StatusPass, Report: j, Bench: bench}}, Options{})
	require.NoError(t, err)
	m := f.Nodes[0].Models["A"]
	l := rep.Models["A"].PhysicalLimits
	assert.Equal(t, l.L1WakeFractionOfFloor, m.L1WakeFractionOfFloor)
	assert.Equal(t, rep.Models["A"].Sleep["1"].ResidualGiB.Median, m.ResidualGiB)
	assert.Equal(t, 1, m.OutputTPSConc)
	assert.Equal(t, rep.Models["A"].Performance[0].OutputTPS.Median, m.OutputTPS)
	assert.InDelta(t, m.OutputTPS*l.TPOTFloorS, m.OutputTPSFractionOfHBM, 1e-12, "at concurrency 1: tok/s × the TPOT floor")
	assert.Equal(t, "vllmsim profile tiny, time scale 1", f.Nodes[0].Simulated)
	assert.Equal(t, 1, f.Simulated)
	assert.Empty(t, f.Outliers, "the tiny profile is above the floors")
}

// benchLines is a bench.txt with one sec/wake result line per value.
func benchLines(xs ...float64) []byte {
	var b bytes.Buffer
	b.WriteString("gpu: x\n\n")
	for _, x := range xs {
		fmt.Fprintf(&b, "BenchmarkSleep/model=A/level=1 1 %g sec/wake\n", x)
	}
	return b.Bytes()
}

func TestPooledRawSamples(t *testing.T) {
	rep, _ := readTestdata(t)
	j, err := json.Marshal(rep)
	require.NoError(t, err)
	var fast, slow []float64
	for i := 1; i <= 10; i++ {
		fast = append(fast, float64(i))
		slow = append(slow, float64(100+i))
	}
	f, err := Build([]NodeResult{
		{Node: "fast", GPU: "K", Status: StatusPass, Report: j, Bench: benchLines(fast...)},
		{Node: "slow", GPU: "K", Status: StatusPass, Report: j, Bench: benchLines(slow...)},
		{Node: "failed", GPU: "K", Status: StatusFail, Reason: "evicted", Report: j, Bench: benchLines(1000)},
	}, Options{})
	require.NoError(t, err)
	require.Len(t, f.Kinds, 1)
	k := f.Kinds[0]
	assert.Equal(t, 3, k.Nodes)
	assert.Equal(t, 2, k.Pooled, "a FAIL node's samples stay out of the kind's summaries")
	require.Len(t, k.Summaries, 1)
	s := k.Summaries[0]
	assert.Equal(t, "Sleep/model=A/level=1", s.Name)
	assert.Equal(t, "sec/wake", s.Unit)
	assert.Equal(t, 2, s.Nodes)

	pf, err := stats.Summarize(fast)
	require.NoError(t, err)
	ps, err := stats.Summarize(slow)
	require.NoError(t, err)
	meanOfP95s := (pf.P95 + ps.P95) / 2 // 60: what merging percentiles would say
	pooled := slices.Sorted(slices.Values(append(slices.Clone(fast), slow...)))
	assert.Equal(t, stats.NearestRank(pooled, 95), s.P95)
	assert.Equal(t, 109.0, s.P95, "rank ceil(0.95·20) = 19 of the 20 pooled samples")
	assert.NotEqual(t, meanOfP95s, s.P95)
	assert.Equal(t, 20, s.N)
	assert.Equal(t, 55.5, s.Median)

	// fleet.json writes the summary with its name, unit and nodes (the
	// embedded stats.Summary's own MarshalJSON must not take the struct over).
	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"Sleep/model=A/level=1","unit":"sec/wake","nodes":2,"n":20,"median":55.5,"min":1,"max":110,"p95":109}`, string(b))
}

func TestBadInputs(t *testing.T) {
	rep, bench := readTestdata(t)
	good, err := json.Marshal(rep)
	require.NoError(t, err)
	failed := rep
	failed.Status = StatusFail
	failed.Failures = append(failed.Failures[:0:0], rep.Failures...)
	failed.Failures = append(failed.Failures, record.Failure{Phase: "sleep", Model: "A", Step: "wake", Error: "wake_up: 500"})
	failedJSON, err := json.Marshal(failed)
	require.NoError(t, err)

	f, err := Build([]NodeResult{
		{Node: "garbled", GPU: "K", Status: StatusPass, Report: []byte(`{"status": "PASS", "models": [`), Bench: bench},
		{Node: "noreport", GPU: "K", Status: StatusPass, Bench: bench},
		{Node: "nobench", GPU: "K", Status: StatusPass, Report: good},
		{Node: "runfailed", GPU: "K", Status: StatusPass, Report: failedJSON, Bench: bench},
		{Node: "evicted", GPU: "K", Status: StatusFail, Reason: "pod evicted: node memory pressure"},
		{Node: "ok", GPU: "K", Status: StatusPass, Report: good, Bench: append(slices.Clone(bench), "BenchmarkX 1 zz sec/op\n"...), Truncated: true},
	}, Options{})
	require.NoError(t, err)
	by := map[string]Node{}
	for _, n := range f.Nodes {
		by[n.Node] = n
	}
	assert.Equal(t, StatusFail, by["garbled"].Status)
	assert.Contains(t, by["garbled"].Reason, "report.json cannot be parsed: unexpected end of JSON input")
	assert.Equal(t, StatusFail, by["noreport"].Status)
	assert.Equal(t, "no report.json came back", by["noreport"].Reason)
	assert.Equal(t, StatusPass, by["nobench"].Status)
	assert.Contains(t, by["nobench"].Notes, "no bench.txt came back: the node's samples are not in its kind's summaries")
	assert.Equal(t, StatusFail, by["runfailed"].Status)
	assert.Equal(t, "run failed: sleep/A/wake: wake_up: 500", by["runfailed"].Reason)
	assert.Equal(t, "pod evicted: node memory pressure", by["evicted"].Reason)
	assert.Equal(t, StatusPass, by["ok"].Status)
	assert.Contains(t, by["ok"].Notes, "samples.csv cut short: it came back truncated")
	assert.Contains(t, by["ok"].Notes, "bench.txt: 1 lines do not parse (left out)")
	assert.Equal(t, StatusFail, f.Status)
	assert.Equal(t, []string{"evicted", "garbled", "noreport", "runfailed"}, f.Flagged())
	assert.Equal(t, 1, f.Kinds[0].Pooled, "only the PASS node with a bench.txt")

	_, err = Build(nil, Options{})
	assert.ErrorContains(t, err, "no node results")
	_, err = Build([]NodeResult{{Node: "a", GPU: "K"}, {Node: "a", GPU: "K"}}, Options{})
	assert.ErrorContains(t, err, `node "a": two results`)
	_, err = Build([]NodeResult{{Node: "a"}}, Options{})
	assert.ErrorContains(t, err, "both are needed")
}

// TestTPSFractionIsAFraction: the baseline's lowest concurrency 4 serving
// 100 tok/s on a node whose TPOT floor is 20 ms: a decode step reads the
// weights once for all 4 requests, so the bandwidth allows 4 / 0.02 = 200
// tok/s, and the fraction is 100 / 200 = 0.5 (not 100 × 0.02 = 2, above
// 1). The floor (0.15) then reads it as the fraction it is.
func TestTPSFractionIsAFraction(t *testing.T) {
	rep, _ := readTestdata(t)
	m := rep.Models["A"]
	l := *m.PhysicalLimits
	l.TPOTFloorS = 0.02
	m.PhysicalLimits = &l
	var perf []report.Perf
	for _, p := range m.Performance {
		if p.Stage != "baseline" {
			continue
		}
		p.Concurrency, p.OutputTPS.N, p.OutputTPS.Median = 4, 1, 100
		perf = append(perf, p)
		break
	}
	require.Len(t, perf, 1)
	m.Performance = perf
	got := figures(m)
	assert.Equal(t, 4, got.OutputTPSConc)
	assert.InDelta(t, 0.5, got.OutputTPSFractionOfHBM, 1e-12)
	assert.InDelta(t, 0.5, got.metrics[MetricTPSFraction], 1e-12)
}

// A node that ran variants (fleet mode on a variant config) is judged by its comparison: its
// verdict and reason are the comparison's, its figures and samples (one reference run's, as
// fleetjob.Upload sends them) join its kind's even where a variant was worse, and fleet.md says
// what each node judged.
func TestVariantRunNodes(t *testing.T) {
	rep, _ := readTestdata(t)
	j, err := json.Marshal(rep)
	require.NoError(t, err)
	comparison := func(status string, failures []string, verdicts ...string) []byte {
		c := variants.Comparison{Status: status, Reference: "v0.31", Variants: []string{"v0.31", "v0.33"}, Failures: failures}
		for i, v := range verdicts {
			c.Metrics = append(c.Metrics, variants.Metric{Variant: "v0.33", Name: fmt.Sprintf("m%d", i), Verdict: v, Focus: true})
		}
		b, err := json.Marshal(c)
		require.NoError(t, err)
		return b
	}
	plain := NodeResult{Node: "plain", GPU: "K", Status: StatusPass, Report: j, Bench: benchLines(1, 2, 3)}
	pass := NodeResult{Node: "var-pass", GPU: "K", Status: StatusPass, Report: j, Bench: benchLines(4, 5),
		Comparison: comparison(StatusPass, []string{}, variants.Same, variants.Better, variants.NotJudge, variants.Same)}
	// A worse variant fails the comparison, and the node's go test exits 1: the runner's
	// reason is the exit status's, the comparison's replaces it.
	fail := NodeResult{Node: "var-fail", GPU: "K", Status: StatusFail, Reason: "the suite failed on the node (go test exited 1; see its comparison)",
		Report: j, Bench: benchLines(6),
		Comparison: comparison(StatusFail, []string{"v0.33: Sleep/model=A/level=1 sec/wake worse by 40 %", "v0.33: 1 more"}, variants.Worse, variants.Same)}
	bad := NodeResult{Node: "var-bad", GPU: "K", Status: StatusPass, Report: j, Bench: benchLines(7), Comparison: []byte("{")}
	empty := NodeResult{Node: "var-empty", GPU: "K", Status: StatusPass, Report: j, Bench: benchLines(8), Comparison: []byte{}}
	f, err := Build([]NodeResult{plain, pass, fail, bad, empty}, Options{})
	require.NoError(t, err)
	byNode := map[string]Node{}
	for _, n := range f.Nodes {
		byNode[n.Node] = n
	}
	assert.Nil(t, byNode["plain"].Variants)
	assert.Equal(t, &VariantRun{Status: StatusPass, Reference: "v0.31", Variants: []string{"v0.31", "v0.33"}, Judged: 3, Better: 1, Failures: []string{}}, byNode["var-pass"].Variants)
	assert.Equal(t, StatusPass, byNode["var-pass"].Status)
	assert.NotEmpty(t, byNode["var-pass"].Models, "the reference run's report gives the node's key figures")

	vf := byNode["var-fail"]
	assert.Equal(t, StatusFail, vf.Status)
	assert.Equal(t, "variant run failed: v0.33: Sleep/model=A/level=1 sec/wake worse by 40 % (and 1 more)", vf.Reason)
	assert.Equal(t, 1, vf.Variants.Worse)
	for _, n := range []string{"var-bad", "var-empty"} {
		assert.Equal(t, StatusFail, byNode[n].Status, n)
		assert.Contains(t, byNode[n].Reason, "comparison.json cannot be parsed", n)
	}
	assert.Equal(t, StatusFail, f.Status)

	require.Len(t, f.Kinds, 1)
	k := f.Kinds[0]
	assert.Equal(t, 3, k.Pooled, "plain, var-pass and var-fail, whose reference run passed; not the unreadable ones")
	require.Len(t, k.Summaries, 1)
	assert.Equal(t, 6, k.Summaries[0].N, "plain's 3, var-pass's 2, var-fail's 1")
	assert.Equal(t, 6.0, k.Summaries[0].Max)

	md := Summary(f).Markdown()
	assert.Contains(t, md, "## Variant runs")
	assert.Contains(t, md, "**var-pass** (K, simulated: vllmsim profile tiny, time scale 1): PASS: v0.33 against v0.31; 3 figures judged, 0 worse, 1 better")
	assert.Contains(t, md, "**var-fail** (K, simulated: vllmsim profile tiny, time scale 1): FAIL: v0.33 against v0.31; 2 figures judged, 1 worse, 0 better")
	assert.NotContains(t, md, "**plain** (K, simulated: vllmsim profile tiny, time scale 1): PASS: ")
}
