package cireport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/stats"
)

// handReport is a small simulated run with every kind of verdict: a PASS,
// a FAIL, a check not evaluated, a required one not evaluated (which fails
// the run), a run-level check, a FAIL whose value is NaN, and one failure.
// Its figures differ from one another (restart from restart_ready, sleep
// and first token from wake, median from p95), so a figure written from
// another's field shows; model B lacks most of them.
func handReport() report.Report {
	return report.Report{
		Status:    "FAIL",
		GPU:       "1 × Tiny Sim GPU (simulated)",
		Runtime:   "vLLM 0.31.0+vllmsim",
		Started:   1700000000.5,
		Finished:  1700000012.845,
		Simulated: &record.Simulated{Profile: "tiny", TimeScale: 1},
		Models: map[string]*report.Model{
			"A": {
				Name:           "model-a",
				RestartInitial: stats.Summary{N: 1, Median: 2, P95: 2},
				RestartWarm:    stats.Summary{N: 2, Median: 1.5, P95: 1.75},
				// spawn → /health 200, short of the first token
				RestartReadyInitial: stats.Summary{N: 1, Median: 1.125, P95: 1.125},
				RestartReadyWarm:    stats.Summary{N: 2, Median: 0.625, P95: 0.875},
				Sleep: map[string]*report.SleepLevel{
					"1": {
						SleepS:        stats.Summary{N: 5, Median: 0.25, P95: 0.5},
						WakeAPIS:      stats.Summary{N: 5, Median: 0.75, P95: 0.9},
						ToFirstTokenS: stats.Summary{N: 5, Median: 1.25, P95: 1.5},
						ResidualGiB:   stats.Summary{N: 5, Median: 0.5, P95: 0.75},
					},
					"2": {ToFirstTokenS: stats.Summary{N: 3, Median: math.NaN(), P95: math.Inf(1)}}, // others absent
				},
				Performance: []report.Perf{
					{Stage: "baseline", Concurrency: 16, OutputTPS: stats.Summary{N: 2, Median: 900, P95: 950},
						TTFTS: stats.Summary{N: 32, Median: 0.125, P95: 0.1875}, TPOTS: stats.Summary{N: 32, Median: 0.015625, P95: 0.03125}},
					{Stage: "baseline", Concurrency: 4, OutputTPS: stats.Summary{N: 2, Median: 300, P95: 310},
						TPOTS: stats.Summary{N: 8, Median: 0.0078125, P95: 0.01}}, // no TTFT
				},
				PhysicalLimits: &report.Limits{L1WakeS: 0.75, L1WakeFloorS: 0.28125, L1WakeFractionOfFloor: 0.375,
					TPOTC1S: 0.0125, TPOTFloorS: 0.0078125, TPOTFractionOfHBM: 0.625},
			},
			"B": {Name: "model-b", RestartInitial: stats.Summary{N: 1, Median: 3, P95: 3}},
		},
		Memory: report.Memory{
			RSSPeakGiB:        map[string]float64{"A": 1.5, "B": 0}, // B's not sampled
			L1ReleaseFraction: map[string]stats.Summary{"A": {N: 16, Median: 70, P95: 92.5}, "B": {}},
		},
		Switch: report.Switch{Directions: map[string]*report.Direction{
			"A→B": {N: 3, ToFirstTokenS: stats.Summary{N: 3, Median: 0.06, P95: 0.07}},
		}},
		Checks: []record.Check{
			{Name: "restart.starts", Model: "A", Value: 3, Op: "==", Limit: 3, Verdict: "PASS"},
			{Name: "sleep.level1.wake_api_s", Model: "A", Value: 0.93, Op: "<=", Limit: 0.8, Verdict: "FAIL"},
			{Name: "sleep.level2.residual_gib", Model: "B", Op: "<=", Limit: 2, Verdict: record.NotEvaluated, Reason: "no level-2 cycle"},
			{Name: "serving.output_tps", Model: "B", Op: ">=", Limit: 100, Verdict: record.NotEvaluated, Reason: "no serving round", Required: true},
			{Name: "memory.l1_release_fraction", Model: "B", Value: math.NaN(), Op: ">=", Limit: 0.5, Verdict: "FAIL"},
			{Name: "switch.failed_handoffs", Value: 0, Op: "<=", Limit: 0, Verdict: "PASS"},
		},
		Failures: []record.Failure{{Phase: "sleep", Model: "B", Step: "wake", Error: "wake: <connection refused> & \x1b[31mgone\x1b[0m"}},
	}
}

// realReport is a real simulated run's report.json.
func realReport(t *testing.T) report.Report {
	t.Helper()
	b, err := os.ReadFile("../fleetreport/testdata/report.json")
	require.NoError(t, err)
	var rep report.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	require.NotEmpty(t, rep.Checks)
	return rep
}

// validateJUnit checks doc against testdata/junit-10.xsd with xmllint.
func validateJUnit(t *testing.T, doc []byte) error {
	t.Helper()
	if _, err := exec.LookPath("xmllint"); err != nil {
		const install = "xmllint is missing: apt-get update -qq && apt-get install -y -qq libxml2-utils"
		if os.Getenv("CI") != "" { // in CI a missing validator is a gap, not a skip
			t.Fatal(install)
		}
		t.Skip(install)
	}
	path := filepath.Join(t.TempDir(), "checks.junit.xml")
	require.NoError(t, os.WriteFile(path, doc, 0o644))
	out, err := exec.Command("xmllint", "--noout", "--schema", "testdata/junit-10.xsd", path).CombinedOutput()
	if err != nil {
		return errors.New(string(out))
	}
	return nil
}

// validateCTRF checks doc against testdata/ctrf-schema-0.0.json, formats
// asserted.
func validateCTRF(t *testing.T, doc []byte) error {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	schema, err := filepath.Abs("testdata/ctrf-schema-0.0.json")
	require.NoError(t, err)
	sch, err := c.Compile(schema)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	require.NoError(t, err)
	return sch.Validate(inst)
}

func junitOf(t *testing.T, rep report.Report) ([]byte, junitSuites) {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, WriteJUnit(&b, rep))
	var doc junitSuites
	require.NoError(t, xml.Unmarshal(b.Bytes(), &doc))
	return b.Bytes(), doc
}

func ctrfOf(t *testing.T, rep report.Report) ([]byte, ctrfDocument) {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, WriteCTRF(&b, rep))
	var doc ctrfDocument
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	return b.Bytes(), doc
}

// TestValidatorsReject: the validators the tests rely on do reject what
// their schemas forbid (a testcase's <properties>; a test's suite as a
// string), so a pass below means something.
func TestValidatorsReject(t *testing.T) {
	assert.Error(t, validateJUnit(t, []byte(`<testsuites><testsuite name="s" tests="1" failures="0" errors="0">`+
		`<testcase name="c"><properties><property name="a" value="b"/></properties></testcase></testsuite></testsuites>`)))
	assert.Error(t, validateCTRF(t, []byte(`{"reportFormat":"CTRF","specVersion":"0.0.0","results":{"tool":{"name":"x"},`+
		`"summary":{"tests":1,"passed":1,"failed":0,"skipped":0,"pending":0,"other":0,"start":0,"stop":0},`+
		`"tests":[{"name":"t","status":"passed","duration":0,"suite":"s"}]}}`)))
}

func TestJUnit(t *testing.T) {
	raw, doc := junitOf(t, handReport())
	require.NoError(t, validateJUnit(t, raw))

	// 6 checks and 1 failure; failures: the 2 FAILs and the required NOT
	// EVALUATED; errors: the failure; skipped: the NOT EVALUATED left optional.
	assert.Equal(t, "wakebench", doc.Name)
	assert.Equal(t, 7, doc.Tests)
	assert.Equal(t, 3, doc.Failures)
	assert.Equal(t, 1, doc.Errors)
	// The run's duration on <testsuites> only; each suite's time is its
	// testcases' sum, 0 here (checks are judged, not timed), so suites
	// summed by a CI view do not count the run 4 times.
	assert.Equal(t, "12.345", doc.Time)
	var names []string
	skipped := 0
	for _, s := range doc.Suites {
		names = append(names, s.Name)
		skipped += s.Skipped
		assert.Equal(t, "0.000", s.Time, s.Name)
		for _, c := range s.Cases {
			assert.Equal(t, "0.000", c.Time, c.Name)
		}
		assert.Equal(t, "2023-11-14T22:13:20Z", s.Timestamp)
		assert.Contains(t, s.Properties, junitProperty{"simulated", "vllmsim profile tiny, time scale 1"})
		assert.Contains(t, s.Properties, junitProperty{"status", "FAIL"})
		assert.Len(t, s.Cases, s.Tests)
	}
	assert.Equal(t, 1, skipped)
	assert.Equal(t, []string{"wakebench", "wakebench.A", "wakebench.B", "wakebench.failures"}, names)
	counts := func(s junitSuite) [4]int { return [4]int{s.Tests, s.Failures, s.Errors, s.Skipped} }
	assert.Equal(t, [4]int{1, 0, 0, 0}, counts(doc.Suites[0]))
	assert.Equal(t, [4]int{2, 1, 0, 0}, counts(doc.Suites[1]))
	assert.Equal(t, [4]int{3, 2, 0, 1}, counts(doc.Suites[2]))
	assert.Equal(t, [4]int{1, 0, 1, 0}, counts(doc.Suites[3]))

	a, b := doc.Suites[1].Cases, doc.Suites[2].Cases
	assert.Equal(t, "wakebench.run", doc.Suites[0].Cases[0].Classname)
	assert.Equal(t, "wakebench.A", a[0].Classname)
	// PASS: nothing but its figures.
	assert.Nil(t, a[0].Failure)
	assert.Nil(t, a[0].Skipped)
	assert.Equal(t, "value=3 op=== limit=3 verdict=PASS\nsimulated: vllmsim profile tiny, time scale 1", a[0].SystemOut)
	// FAIL: the message carries value, op and limit.
	require.NotNil(t, a[1].Failure)
	assert.Equal(t, "0.93 <= 0.8: FAIL", a[1].Failure.Message)
	assert.Equal(t, "threshold", a[1].Failure.Type)
	assert.Equal(t, handReport().Checks[1].String(), a[1].Failure.Text)
	// NOT EVALUATED, optional: skipped with its reason.
	require.NotNil(t, b[0].Skipped)
	assert.Nil(t, b[0].Failure)
	assert.Equal(t, "no level-2 cycle", b[0].Skipped.Message)
	// NOT EVALUATED, required: a failure with its reason.
	require.NotNil(t, b[1].Failure)
	assert.Nil(t, b[1].Skipped)
	assert.Contains(t, b[1].Failure.Message, "no serving round")
	assert.Contains(t, b[1].Failure.Message, "100")
	assert.Contains(t, b[1].SystemOut, "required=true")
	// NaN: written as NaN, the limit beside it.
	require.NotNil(t, b[2].Failure)
	assert.Equal(t, "NaN >= 0.5: FAIL", b[2].Failure.Message)
	// The failure: where it happened, and its error.
	f := doc.Suites[3].Cases[0]
	assert.Equal(t, "sleep/B/wake", f.Name)
	require.NotNil(t, f.Error)
	assert.Contains(t, f.Error.Message, "<connection refused> &")
}

// TestJUnitSuiteTime: a suite's time is the sum of its testcases' seconds,
// those the schema cannot take (negative, not finite) counted as 0, as
// they are written.
func TestJUnitSuiteTime(t *testing.T) {
	assert.Zero(t, casesSeconds(nil))
	assert.Zero(t, casesSeconds([]junitCase{{}, {}}))
	cases := []junitCase{{seconds: 0.25}, {seconds: 1.5}, {seconds: math.NaN()}, {seconds: -2}, {seconds: math.Inf(1)}, {}}
	assert.Equal(t, 1.75, casesSeconds(cases))
	assert.Equal(t, "1.750", junitTime(casesSeconds(cases)))
}

// TestJUnitTimes: a run whose clock ran backwards, or never started, still
// writes times the schema takes.
func TestJUnitTimes(t *testing.T) {
	for name, times := range map[string][2]float64{
		"backwards": {1700000010, 1700000000},
		"unknown":   {0, 0},
		"nan":       {math.NaN(), math.Inf(1)},
	} {
		t.Run(name, func(t *testing.T) {
			rep := handReport()
			rep.Started, rep.Finished = times[0], times[1]
			raw, doc := junitOf(t, rep)
			require.NoError(t, validateJUnit(t, raw))
			assert.Equal(t, "0.000", doc.Time)
			for _, s := range doc.Suites {
				assert.Equal(t, "0.000", s.Time, s.Name)
			}
		})
	}
}

func TestCTRF(t *testing.T) {
	raw, doc := ctrfOf(t, handReport())
	require.NoError(t, validateCTRF(t, raw))

	s := doc.Results.Summary
	assert.Equal(t, ctrfSummary{Tests: 7, Passed: 2, Failed: 4, Skipped: 1, Suites: 4,
		Start: 1700000000500, Stop: 1700000012845, Duration: 12345}, s)
	assert.Equal(t, map[string]any{"gpu": "1 × Tiny Sim GPU (simulated)", "runtime": "vLLM 0.31.0+vllmsim",
		"status": "FAIL", "simulated": "vllmsim profile tiny, time scale 1"}, doc.Results.Environment.Extra)

	tests := map[string]ctrfTest{}
	for _, tc := range doc.Results.Tests {
		tests[tc.Name] = tc
		assert.Equal(t, []string{"simulated"}, tc.Tags, tc.Name)
	}
	require.Len(t, tests, 7)
	assert.Equal(t, "passed", tests["A: restart.starts"].Status)
	assert.Equal(t, []string{"wakebench.A"}, tests["A: restart.starts"].Suite)
	assert.Equal(t, "passed", tests["switch.failed_handoffs"].Status)
	assert.Equal(t, []string{"wakebench"}, tests["switch.failed_handoffs"].Suite)

	fail := tests["A: sleep.level1.wake_api_s"]
	assert.Equal(t, "failed", fail.Status)
	assert.Contains(t, fail.Message, "0.93")
	assert.Contains(t, fail.Message, "0.8")
	assert.Equal(t, map[string]any{"value": 0.93, "op": "<=", "limit": 0.8, "verdict": "FAIL", "reason": "",
		"required": false, "model": "A"}, fail.Extra)

	opt := tests["B: sleep.level2.residual_gib"]
	assert.Equal(t, "skipped", opt.Status)
	assert.Equal(t, "no level-2 cycle", opt.Message)

	req := tests["B: serving.output_tps"]
	assert.Equal(t, "failed", req.Status)
	assert.Contains(t, req.Message, "no serving round")
	assert.Equal(t, true, req.Extra["required"])

	nan := tests["B: memory.l1_release_fraction"]
	assert.Equal(t, "failed", nan.Status)
	assert.Contains(t, nan.Extra, "value")
	assert.Nil(t, nan.Extra["value"])
	assert.Equal(t, 0.5, nan.Extra["limit"])
	assert.Contains(t, nan.Message, "0.5")

	f := tests["failure: sleep/B/wake"]
	assert.Equal(t, "failed", f.Status)
	assert.Equal(t, []string{"wakebench.failures"}, f.Suite)
	assert.Equal(t, handReport().Failures[0].Error, f.Message)
}

// TestCTRFEmpty: a run that measured nothing, on hardware, has no tags, no
// simulated key and an empty, never null, tests array; its JUnit is valid too.
func TestCTRFEmpty(t *testing.T) {
	rep := report.Report{Status: report.StatusNotRun, GPU: "gpu", Runtime: "rt"}
	raw, doc := ctrfOf(t, rep)
	require.NoError(t, validateCTRF(t, raw))
	assert.Contains(t, string(raw), `"tests": []`)
	assert.NotContains(t, string(raw), "simulated")
	assert.Equal(t, ctrfSummary{}, doc.Results.Summary)

	raw, doc2 := junitOf(t, rep)
	require.NoError(t, validateJUnit(t, raw))
	assert.Zero(t, doc2.Tests)
}

// sample is one parsed OpenMetrics sample.
type sample struct {
	labels labels.Labels
	value  float64
}

// parseOpenMetrics parses text with prometheus's own OpenMetrics parser,
// returning its samples and each family's type and unit.
func parseOpenMetrics(t *testing.T, text []byte) (samples []sample, types, units map[string]string) {
	t.Helper()
	types, units = map[string]string{}, map[string]string{}
	p := textparse.NewOpenMetricsParser(text, labels.NewSymbolTable())
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch e {
		case textparse.EntryType:
			name, typ := p.Type()
			types[string(name)] = string(typ)
		case textparse.EntryUnit:
			name, unit := p.Unit()
			units[string(name)] = string(unit)
		case textparse.EntrySeries:
			var l labels.Labels
			p.Labels(&l)
			_, _, v := p.Series()
			samples = append(samples, sample{l, v})
		}
	}
	return samples, types, units
}

// series is the text of the labels of the sample named name with the
// label pairs kv (name, value, …) beside simulated="true".
func series(name string, kv ...string) string {
	return labels.FromStrings(append(slices.Clone(kv), "__name__", name, "simulated", "true")...).String()
}

// find returns the value of the sample named name with exactly the labels
// kv (name, value, …) beside simulated="true", and whether there is one.
func find(samples []sample, name string, kv ...string) (float64, bool) {
	want := labels.FromStrings(append(kv, "__name__", name, "simulated", "true")...)
	for _, s := range samples {
		if labels.Equal(s.labels, want) {
			return s.value, true
		}
	}
	return 0, false
}

func TestOpenMetrics(t *testing.T) {
	rep := handReport()
	var b bytes.Buffer
	require.NoError(t, WriteOpenMetrics(&b, rep))
	text := b.String()
	assert.True(t, strings.HasSuffix(text, "\n# EOF\n"))
	assert.NotContains(t, text, "NaN")
	assert.NotContains(t, text, "Inf")

	samples, types, units := parseOpenMetrics(t, b.Bytes())
	require.NotEmpty(t, samples)
	for _, s := range samples {
		assert.Equal(t, "true", s.labels.Get("simulated"), s.labels.String())
		assert.Equal(t, "gauge", types[s.labels.Get("__name__")], s.labels.String())
	}

	// Every sample, by hand from handReport's figures, each from its own
	// field; nothing else. Absent, so not written: B's warm restart and
	// readiness (no samples), level 1's and 2's sleep and wake at level 2
	// (no samples), level 2's first token (NaN, +Inf), the TTFT at
	// concurrency 4 (no samples), B's release (no samples), B's RSS (0: not
	// sampled) and B's physical limits (none).
	A1, A4, A16 := []string{"model", "A", "level", "1"}, []string{"model", "A", "stage", "baseline", "concurrency", "4"},
		[]string{"model", "A", "stage", "baseline", "concurrency", "16"}
	want := map[string]float64{}
	put := func(name string, p50, p95 float64, kv ...string) {
		want[series(name, append(slices.Clone(kv), "stat", "p50")...)] = p50
		want[series(name, append(slices.Clone(kv), "stat", "p95")...)] = p95
	}
	put("wakebench_restart_to_first_token_seconds", 2, 2, "model", "A", "start", "initial")   // RestartInitial
	put("wakebench_restart_to_first_token_seconds", 1.5, 1.75, "model", "A", "start", "warm") // RestartWarm
	put("wakebench_restart_to_first_token_seconds", 3, 3, "model", "B", "start", "initial")
	put("wakebench_restart_ready_seconds", 1.125, 1.125, "model", "A", "start", "initial") // RestartReadyInitial
	put("wakebench_restart_ready_seconds", 0.625, 0.875, "model", "A", "start", "warm")    // RestartReadyWarm
	put("wakebench_sleep_seconds", 0.25, 0.5, A1...)                                       // SleepS
	put("wakebench_wake_api_seconds", 0.75, 0.9, A1...)                                    // WakeAPIS
	put("wakebench_wake_to_first_token_seconds", 1.25, 1.5, A1...)                         // ToFirstTokenS
	put("wakebench_sleep_residual_bytes", 536870912, 805306368, A1...)                     // 0.5 and 0.75 GiB
	put("wakebench_serving_output_tokens_per_second", 900, 950, A16...)
	put("wakebench_serving_output_tokens_per_second", 300, 310, A4...)
	put("wakebench_serving_ttft_seconds", 0.125, 0.1875, A16...)
	put("wakebench_serving_tpot_seconds", 0.015625, 0.03125, A16...)
	put("wakebench_serving_tpot_seconds", 0.0078125, 0.01, A4...)
	put("wakebench_sleep_level1_released_ratio", 0.7, 0.925, "model", "A")               // 70 % and 92.5 %
	want[series("wakebench_server_rss_peak_bytes", "model", "A")] = 1610612736           // 1.5 GiB
	want[series("wakebench_l1_wake_fraction_of_floor_ratio", "model", "A")] = 0.375      // 0.28125 s floor / 0.75 s
	want[series("wakebench_l1_wake_fraction_of_pcie_limit_ratio", "model", "A")] = 0.375 // its old name, one release
	want[series("wakebench_tpot_fraction_of_hbm_limit_ratio", "model", "A")] = 0.625     // 0.0078125 s floor / 0.0125 s
	put("wakebench_switch_to_first_token_seconds", 0.06, 0.07, "dir", "A→B")
	for verdict, n := range map[string]float64{"PASS": 2, "FAIL": 2, "NOT EVALUATED": 2} {
		want[series("wakebench_checks", "verdict", verdict)] = n
	}
	want[series("wakebench_run_passed")] = 0
	want[series("wakebench_run_info", "status", "FAIL", "gpu", rep.GPU, "runtime", rep.Runtime,
		"simulation", rep.Simulated.Label())] = 1
	got := map[string]float64{}
	for _, s := range samples {
		require.NotContains(t, got, s.labels.String(), "a sample written twice")
		got[s.labels.String()] = s.value
	}
	assert.Equal(t, want, got)

	// Every family with a unit has its UNIT, which prometheus's parser
	// checks ends the name: tokens_per_second, no base unit, passes too.
	assert.Equal(t, map[string]string{
		"wakebench_restart_to_first_token_seconds":       "seconds",
		"wakebench_restart_ready_seconds":                "seconds",
		"wakebench_sleep_seconds":                        "seconds",
		"wakebench_wake_api_seconds":                     "seconds",
		"wakebench_wake_to_first_token_seconds":          "seconds",
		"wakebench_sleep_residual_bytes":                 "bytes",
		"wakebench_serving_output_tokens_per_second":     "tokens_per_second",
		"wakebench_serving_ttft_seconds":                 "seconds",
		"wakebench_serving_tpot_seconds":                 "seconds",
		"wakebench_sleep_level1_released_ratio":          "ratio",
		"wakebench_server_rss_peak_bytes":                "bytes",
		"wakebench_l1_wake_fraction_of_floor_ratio":      "ratio",
		"wakebench_l1_wake_fraction_of_pcie_limit_ratio": "ratio",
		"wakebench_tpot_fraction_of_hbm_limit_ratio":     "ratio",
		"wakebench_switch_to_first_token_seconds":        "seconds",
	}, units)

	// Deterministic: families by name, samples by label values, numbers
	// as numbers.
	var again bytes.Buffer
	require.NoError(t, WriteOpenMetrics(&again, rep))
	assert.Equal(t, text, again.String())
	assert.Less(t, strings.Index(text, `concurrency="4"`), strings.Index(text, `concurrency="16"`))
	assert.Less(t, strings.Index(text, "# TYPE wakebench_checks "), strings.Index(text, "# TYPE wakebench_restart_to_first_token_seconds "))
}

// TestOpenMetricsAbsent: a model whose physical limits are there but not
// taken (fractions 0), whose RSS was not sampled (0) and whose release has
// no samples writes none of those families; nor does one with no serving.
func TestOpenMetricsAbsent(t *testing.T) {
	rep := handReport()
	a := rep.Models["A"]
	a.PhysicalLimits = &report.Limits{Note: "no weight size in the server log"}
	a.Performance = nil
	rep.Memory.RSSPeakGiB = map[string]float64{"A": 0}
	rep.Memory.L1ReleaseFraction = map[string]stats.Summary{"A": {N: 0, Median: 50, P95: 60}}
	var b bytes.Buffer
	require.NoError(t, WriteOpenMetrics(&b, rep))
	text := b.String()
	for _, name := range []string{"wakebench_l1_wake_fraction_of_floor_ratio", "wakebench_l1_wake_fraction_of_pcie_limit_ratio", "wakebench_tpot_fraction_of_hbm_limit_ratio",
		"wakebench_server_rss_peak_bytes", "wakebench_sleep_level1_released_ratio", "wakebench_serving_output_tokens_per_second",
		"wakebench_serving_ttft_seconds", "wakebench_serving_tpot_seconds"} {
		assert.NotContains(t, text, name)
	}
	samples, _, _ := parseOpenMetrics(t, b.Bytes())
	_, ok := find(samples, "wakebench_wake_api_seconds", "model", "A", "level", "1", "stat", "p50")
	assert.True(t, ok) // the rest still written

	// One fraction taken, the other not.
	a.PhysicalLimits = &report.Limits{TPOTFractionOfHBM: 0.5}
	b.Reset()
	require.NoError(t, WriteOpenMetrics(&b, rep))
	assert.NotContains(t, b.String(), "wakebench_l1_wake_fraction_of")
	samples, _, _ = parseOpenMetrics(t, b.Bytes())
	v, ok := find(samples, "wakebench_tpot_fraction_of_hbm_limit_ratio", "model", "A")
	assert.True(t, ok)
	assert.Equal(t, 0.5, v)
}

// TestOpenMetricsNotSimulated: a run on hardware has no simulated label but
// run_info's simulated="false".
func TestOpenMetricsNotSimulated(t *testing.T) {
	rep := handReport()
	rep.Simulated = nil
	var b bytes.Buffer
	require.NoError(t, WriteOpenMetrics(&b, rep))
	samples, _, _ := parseOpenMetrics(t, b.Bytes())
	for _, s := range samples {
		if s.labels.Get("__name__") == "wakebench_run_info" {
			assert.Equal(t, "false", s.labels.Get("simulated"))
			continue
		}
		assert.False(t, s.labels.Has("simulated"), s.labels.String())
	}
}

// TestRealReport writes all three from a real simulated run's report and
// validates each; the run passed (72 checks, all PASS, no failures), so
// its counts are checked again on a failing copy.
func TestRealReport(t *testing.T) {
	rep := realReport(t)
	require.NotNil(t, rep.Simulated)
	require.Equal(t, "PASS", rep.Status)
	require.Len(t, rep.Checks, 72)
	require.Empty(t, rep.Failures)

	raw, doc := junitOf(t, rep)
	require.NoError(t, validateJUnit(t, raw))
	assert.Equal(t, [3]int{72, 0, 0}, [3]int{doc.Tests, doc.Failures, doc.Errors})
	assert.Equal(t, junitTime(rep.Finished-rep.Started), doc.Time)
	for _, s := range doc.Suites {
		assert.Equal(t, "0.000", s.Time, s.Name)
	}

	raw, ctrf := ctrfOf(t, rep)
	require.NoError(t, validateCTRF(t, raw))
	assert.Equal(t, [2]int{72, 0}, [2]int{ctrf.Results.Summary.Tests, ctrf.Results.Summary.Failed})

	var b bytes.Buffer
	require.NoError(t, WriteOpenMetrics(&b, rep))
	samples, _, _ := parseOpenMetrics(t, b.Bytes())
	for _, s := range samples {
		assert.Equal(t, "true", s.labels.Get("simulated"), s.labels.String())
	}
	a := rep.Models["A"]
	a1 := a.Sleep["1"]
	for _, w := range []struct {
		want float64
		name string
		kv   []string
	}{
		{a1.WakeAPIS.Median, "wakebench_wake_api_seconds", []string{"model", "A", "level", "1", "stat", "p50"}},
		{a1.ResidualGiB.Median * (1 << 30), "wakebench_sleep_residual_bytes", []string{"model", "A", "level", "1", "stat", "p50"}},
		{a.Performance[0].TTFTS.P95, "wakebench_serving_ttft_seconds",
			[]string{"model", "A", "stage", a.Performance[0].Stage, "concurrency", "1", "stat", "p95"}},
		{a.Performance[0].TPOTS.Median, "wakebench_serving_tpot_seconds",
			[]string{"model", "A", "stage", a.Performance[0].Stage, "concurrency", "1", "stat", "p50"}},
		{rep.Memory.L1ReleaseFraction["A"].Median / 100, "wakebench_sleep_level1_released_ratio", []string{"model", "A", "stat", "p50"}},
		{rep.Memory.RSSPeakGiB["A"] * (1 << 30), "wakebench_server_rss_peak_bytes", []string{"model", "A"}},
		{a.PhysicalLimits.L1WakeFractionOfFloor, "wakebench_l1_wake_fraction_of_floor_ratio", []string{"model", "A"}},
		{a.PhysicalLimits.TPOTFractionOfHBM, "wakebench_tpot_fraction_of_hbm_limit_ratio", []string{"model", "A"}},
		{1, "wakebench_run_passed", nil},
		{72, "wakebench_checks", []string{"verdict", "PASS"}},
	} {
		v, ok := find(samples, w.name, w.kv...)
		if assert.True(t, ok, w.name) {
			assert.Equal(t, w.want, v, w.name)
		}
	}
	// A release ratio is a fraction, report.json's percent / 100.
	v, _ := find(samples, "wakebench_sleep_level1_released_ratio", "model", "A", "stat", "p50")
	assert.InDelta(t, 0.947, v, 0.001)

	// A failing copy: one FAIL check of model A and one failure of the run.
	rep.Status = "FAIL"
	rep.Checks = append(rep.Checks, record.Check{Name: "serving.output_tps", Model: "A", Value: 90, Op: ">=", Limit: 100, Verdict: "FAIL"})
	rep.Failures = append(rep.Failures, record.Failure{Phase: "serving", Model: "B", Step: "round", Error: "stream cut"})

	raw, doc = junitOf(t, rep)
	require.NoError(t, validateJUnit(t, raw))
	assert.Equal(t, [3]int{74, 1, 1}, [3]int{doc.Tests, doc.Failures, doc.Errors})
	suites := map[string]junitSuite{}
	for _, s := range doc.Suites {
		suites[s.Name] = s
	}
	assert.Equal(t, 1, suites["wakebench.A"].Failures)
	assert.Zero(t, suites["wakebench.B"].Failures)
	assert.Equal(t, [2]int{1, 1}, [2]int{suites["wakebench.failures"].Tests, suites["wakebench.failures"].Errors})

	raw, ctrf = ctrfOf(t, rep)
	require.NoError(t, validateCTRF(t, raw))
	assert.Equal(t, [3]int{74, 72, 2}, [3]int{ctrf.Results.Summary.Tests, ctrf.Results.Summary.Passed, ctrf.Results.Summary.Failed})

	b.Reset()
	require.NoError(t, WriteOpenMetrics(&b, rep))
	samples, _, _ = parseOpenMetrics(t, b.Bytes())
	for verdict, n := range map[string]float64{"PASS": 72, "FAIL": 1, "NOT EVALUATED": 0} {
		v, ok := find(samples, "wakebench_checks", "verdict", verdict)
		assert.True(t, ok, verdict)
		assert.Equal(t, n, v, verdict)
	}
	v, ok := find(samples, "wakebench_run_passed")
	assert.True(t, ok)
	assert.Zero(t, v)
}
