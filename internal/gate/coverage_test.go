package gate

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
)

// demoBench is testdata/demo-bench.txt: the bench.txt of a make bench run
// (testdata/demo.json: the demo profile, two models, the default protocol's
// five level-1 cycles, nineteen handoffs, 2 rounds of serving) on a quiet
// machine (others took at most 2 % of the CPU in each phase).
func demoBench(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/demo-bench.txt")
	require.NoError(t, err)
	return string(b)
}

// scaled is bench with every value of the units units of the benchmarks
// whose name begins with one of prefixes multiplied by f.
func scaled(t *testing.T, bench string, f float64, units []string, prefixes ...string) string {
	t.Helper()
	var out strings.Builder
	for _, line := range strings.SplitAfter(bench, "\n") {
		fs := strings.Fields(line)
		if len(fs) > 3 && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(fs[0], p) }) {
			for i := 2; i+1 < len(fs); i += 2 {
				if slices.Contains(units, fs[i+1]) {
					x, err := strconv.ParseFloat(fs[i], 64)
					require.NoError(t, err)
					fs[i] = strconv.FormatFloat(f*x, 'g', -1, 64)
				}
			}
			line = strings.Join(fs, " ") + "\n"
		}
		out.WriteString(line)
	}
	return out.String()
}

// busied is bench as if others had taken 60 % of the CPU in every phase
// (the run's own waits unchanged).
func busied(bench string) string {
	return regexp.MustCompile(`(?m)^(BenchmarkHost/\S+ 1) \S+ %-others-cpu`).ReplaceAllString(bench, "$1 60 %-others-cpu")
}

func parse(t *testing.T, text, path string) Run {
	t.Helper()
	r, err := ParseRun([]byte(text), path, time.Time{})
	require.NoError(t, err)
	return r
}

// TestOneRunBaselineFlagsEveryWakeTwiceAsSlow is issue 47's done-when: one
// baseline run (make bench's), this run with every wake twice as slow
// (each sleep level's and each handoff's wake and wake → first token).
// Against the run on a quiet machine, and against the same run taken on a
// busy one (others took 60 % of the CPU in every phase: its timed metrics
// gated on BusyOneRunFloor instead of not at all), the level-1 and switch
// wakes (five and nine or ten samples a run) are flagged and the
// comparison FAILs; the level-2, level-0 and KV-release wakes (three
// samples) are not judged, and the gate's coverage names them with the
// runs that would judge them and their +100 %. The same code, and every
// timed figure 30 % slower (a busy machine's drift), pass against the busy
// run.
func TestOneRunBaselineFlagsEveryWakeTwiceAsSlow(t *testing.T) {
	wakes := []string{"sec/wake", "sec/first-token"}
	for _, c := range []struct {
		name string
		base string
	}{
		{"quiet baseline", demoBench(t)},
		{"busy baseline", busied(demoBench(t))},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := parse(t, c.base, "base/bench.txt")
			slow := parse(t, scaled(t, demoBench(t), 2, wakes, "BenchmarkSleep/", "BenchmarkSwitch/"), "this/bench.txt")
			vs, err := Judge(t.Context(), []Run{base}, slow, 10, 0.05)
			require.NoError(t, err)
			for _, name := range []string{"Sleep/model=A/level=1", "Sleep/model=B/level=1", "Switch/dir=A→B", "Switch/dir=B→A"} {
				for _, unit := range wakes {
					v := verdict(t, vs, name+" "+unit)
					assert.True(t, v.Regression, "%s %s %+.0f %%: %s", name, unit, v.ChangePct, v.How)
					assert.Equal(t, RuleOneRun, v.Rule)
				}
			}
			for _, name := range []string{"Sleep/model=A/level=2", "Sleep/model=B/level=0", "Sleep/model=A/level=kv"} {
				v := verdict(t, vs, name+" sec/wake")
				assert.False(t, v.Judged(), "%s: three samples a run", name)
				assert.Equal(t, UnjudgedFewSamples, v.Unjudged)
				assert.Equal(t, FewMinRuns-1, v.NeedRuns)
			}
			check := Comparison("regressions against baseline", vs, 1)
			assert.Equal(t, "FAIL", check.Verdict, check.String())
			cov := CoverageOf(vs)
			assert.Positive(t, cov.Judged)
			assert.Contains(t, cov.String(), fmt.Sprintf("with fewer than %d samples in a run", OneRunMinSamples))
			assert.Regexp(t, `with fewer than 5 samples in a run [^;]*: 9 more baseline runs needed \(the runs rule gates them from 10\), or 5 or more samples a run \(more cycles\); worst change among them Sleep/model=./level=. sec/(wake|first-token) \+100\.0 %`, cov.String())

			for _, same := range []struct {
				name string
				text string
			}{
				{"the same code", demoBench(t)},
				{"every timed figure 30 % slower", scaled(t, demoBench(t), 1.3, []string{"sec/wake", "sec/first-token", "sec/sleep", "sec/ttft", "sec/tpot", "sec/ready", "sec/release", "sec/held"}, "Benchmark")},
			} {
				if c.name == "quiet baseline" && same.name != "the same code" {
					continue // a quiet run's floors are its own: +30 % is beyond several
				}
				vs, err := Judge(t.Context(), []Run{base}, parse(t, same.text, "same/bench.txt"), 10, 0.05)
				require.NoError(t, err)
				for _, v := range vs {
					assert.False(t, v.Regression, "%s: %s %s %+.1f %% (%s)", same.name, v.Name, v.Unit, v.ChangePct, v.How)
				}
				check := Comparison("regressions against baseline", vs, 1)
				assert.Equal(t, "PASS", check.Verdict, check.String())
				assert.True(t, strings.HasPrefix(check.Reason, "judged "), check.Reason)
			}
		})
	}
}

// TestCoverageNamesWhatItDidNotJudge: every metric is either judged or in
// one group of the coverage, each group with the baseline runs or the
// setting that would judge it; a +1300 % change on a metric no rule can
// judge (a level-2 wake: three samples in one baseline run) is named with
// its change, never passed in silence.
func TestCoverageNamesWhatItDidNotJudge(t *testing.T) {
	const l2 = "Sleep/model=A/level=2 sec/wake"
	rounds := "Serve/model=A/stage=after-wake/conc=4 tok/s"
	host := "Host/window=A-sleep-level1 %-others-cpu"
	mk := func(i int, f float64) Run {
		return mkRun(t, i, map[string][]float64{
			wake: around(1, 0.01, 5), l2: around(f, 0.01, 3), ttft: around(0.01, 0.02, 20), rounds: {100, 101},
			host: {2}, "Host/window=A-sleep-level1 wait/run": {0.2},
		})
	}
	vs, err := Judge(t.Context(), []Run{mk(0, 1)}, mk(1, 14), 10, 0.05)
	require.NoError(t, err)
	v := verdict(t, vs, l2)
	assert.False(t, v.Regression)
	assert.False(t, v.Judged())
	assert.InDelta(t, 1300, v.ChangePct, 1e-6)

	cov := CoverageOf(vs)
	assert.Equal(t, 1, cov.Judged, "the level-1 wake alone: %s", cov)
	assert.Equal(t, len(vs), cov.Metrics)
	sum := cov.Judged
	for _, u := range cov.Unjudged {
		sum += u.Metrics
	}
	assert.Equal(t, cov.Metrics, sum, "every metric judged or in one group")
	want := []record.GateUnjudged{
		{Reason: UnjudgedNoDirection.String(), Remedy: "shown, never gated", Metrics: 2},
		{Reason: UnjudgedFewSamples.String(), Remedy: "9 more baseline runs needed (the runs rule gates them from 10), or 5 or more samples a run (more cycles)", Metrics: 2,
			Worst: "Sleep/model=A/level=2 sec/wake +1300.0 %"},
		{Reason: UnjudgedFewRounds.String(), Remedy: "1 more baseline run needed (the runs rule judges the runs' medians), or protocol.rounds of 5 or more (6 where a round is one wave: the first is judged apart)", Metrics: 1},
		{Reason: UnjudgedFirstWave.String(), Remedy: "9 more baseline runs needed (a first wave is gated from 10 runs)", Metrics: 1},
	}
	assert.Equal(t, want, cov.Unjudged)
	assert.Equal(t, "judged 1 of 7 metrics; not judged: 2 without a better= direction (the machine's load over a phase, read to tell a busy machine): shown, never gated; "+
		"2 with fewer than 5 samples in a run (one or two events a run, which a hiccup of the machine moves whole): 9 more baseline runs needed (the runs rule gates them from 10), or 5 or more samples a run (more cycles); worst change among them Sleep/model=A/level=2 sec/wake +1300.0 %; "+
		"1 of requests in fewer than 5 rounds of concurrent requests in the one baseline run (a round is one moment of the machine): 1 more baseline run needed (the runs rule judges the runs' medians), or protocol.rounds of 5 or more (6 where a round is one wave: the first is judged apart); "+
		"1 a serving stage's first wave of requests (one event a run): 9 more baseline runs needed (a first wave is gated from 10 runs)", cov.String())

	// Against two runs the requests' medians are judged (their tail needs
	// ten runs); a level-2 wake of three samples a run still needs ten
	// runs, and the coverage says 8 more; a metric this run lacks, and one
	// the baseline lacks, are groups of their own.
	two := []Run{mk(0, 1), mk(1, 1.01)}
	cur := mkRun(t, 2, map[string][]float64{wake: around(1, 0.01, 5), l2: around(14, 0.01, 3), ttft: around(0.01, 0.02, 20), rounds: {100, 101}, "Restart/model=A/kind=warm sec/ready": {3}})
	vs, err = Judge(t.Context(), two, cur, 10, 0.05)
	require.NoError(t, err)
	assert.True(t, verdict(t, vs, ttft).Judged(), "two runs' medians")
	cov = CoverageOf(vs)
	s := cov.String()
	assert.Contains(t, s, "2 with fewer than 5 samples in a run (one or two events a run, which a hiccup of the machine moves whole): 8 more baseline runs needed", "the level-2 wake and the rounds' tok/s")
	assert.Contains(t, s, "1 a run's tail (its slowest request or two: one event a run): 8 more baseline runs needed (a tail is gated from 10 runs); 1 a serving stage's first wave", "an unchanged tail: no worst change named")
	assert.Contains(t, s, "1 a serving stage's first wave of requests (one event a run): 8 more baseline runs needed (a first wave is gated from 10 runs); 1 in")
	assert.Contains(t, s, "worst change among them Sleep/model=A/level=2 sec/wake +1293.1 %")
	assert.Contains(t, s, "1 in this run and in no baseline run: a baseline run that has them")
	assert.Contains(t, s, "in the baseline and not in this run: this run lacks them")
}

// TestComparisonNeverPassesWhatItDidNotJudge: the whole comparison's check
// is PASS only where the gate judged at least thresholds.regression_min_judged
// metrics, and always says how many of how many; a gate that judged none
// (one baseline run of single samples) is NOT EVALUATED and required, so
// the run FAILs, unless the setting is 0; a regression FAILs it whatever
// the count.
func TestComparisonNeverPassesWhatItDidNotJudge(t *testing.T) {
	single := func(i int, f float64) Run {
		return mkRun(t, i, map[string][]float64{rdy: {f}, "Sleep/model=A/level=2 sec/wake": {f, f, f}})
	}
	vs, err := Judge(t.Context(), []Run{single(0, 1)}, single(1, 2), 10, 0.05)
	require.NoError(t, err)
	c := Comparison("regressions against baseline", vs, 1)
	assert.Equal(t, record.NotEvaluated, c.Verdict)
	assert.True(t, c.Required)
	assert.True(t, c.Fails(), "a gate that judged nothing fails the run")
	assert.Contains(t, c.Reason, "judged 0 of 2 metrics, fewer than thresholds.regression_min_judged (1) asks")
	assert.Contains(t, c.Reason, "not judged: 2 with fewer than 5 samples in a run")
	var head strings.Builder
	require.NoError(t, WriteCoverage(&head, vs, 1))
	assert.True(t, strings.HasPrefix(head.String(), "NOT EVALUATED: judged 0 of 2 metrics"), head.String())
	assert.Contains(t, head.String(), "\nnot judged:\n  2 with fewer than 5 samples in a run")

	c = Comparison("regressions against baseline", vs, 0)
	assert.Equal(t, "PASS", c.Verdict, "0 accepts a gate that judged nothing")
	assert.True(t, strings.HasPrefix(c.Reason, "judged 0 of 2 metrics; not judged: "), c.Reason)

	five := func(i int, f float64) Run {
		return mkRun(t, i, map[string][]float64{rdy: {f}, wake: around(f, 0.01, 5)})
	}
	vs, err = Judge(t.Context(), []Run{five(0, 1)}, five(1, 1), 10, 0.05)
	require.NoError(t, err)
	c = Comparison("regressions against baseline", vs, 1)
	assert.Equal(t, "PASS", c.Verdict)
	assert.True(t, strings.HasPrefix(c.Reason, "judged 1 of 2 metrics; not judged: 1 with fewer than 5 samples"), c.Reason)
	c = Comparison("regressions against baseline", vs, 2)
	assert.Equal(t, record.NotEvaluated, c.Verdict, "judged 1, 2 asked")

	vs, err = Judge(t.Context(), []Run{five(0, 1)}, five(1, 2), 10, 0.05)
	require.NoError(t, err)
	c = Comparison("regressions against baseline", vs, 2)
	assert.Equal(t, "FAIL", c.Verdict, "a regression fails it, however few were judged")
	assert.InDelta(t, 1, c.Value, 0)
}
