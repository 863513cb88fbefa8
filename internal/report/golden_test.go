package report

import (
	"bytes"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from this code")

// goldenRaw is sampleRaw with fixed times, checks (each of the phase
// that judged it), a failure and the physical-limit inputs, so every
// writer has something to write.
func goldenRaw() record.Raw {
	raw := sampleRaw()
	raw.Started, raw.Finished = time.Unix(1_700_000_000, 0), time.Unix(1_700_000_600, 500_000_000)
	raw.Checks = []record.Check{
		record.Evaluate("restart.starts", "A", 3, "==", 3),
		record.Evaluate("sleep.level1.to_first_token_s.p95", "A", 4.1, "<=", 3),
	}
	raw.Checks[0].Phase, raw.Checks[1].Phase = "restart", "sleep-level1"
	raw.Failures = []record.Failure{{Phase: "sleep-level1", Model: "A", Step: "cycle 2 wake", Error: "wake A from level 1: wake_up: no answer"}}
	raw.MemorySource = "sim"
	raw.Requests.Executed += 4 // a sleep in pause mode abort ended 4 requests
	raw.Requests.AbortedByDesign = 4
	raw.Phases = []string{"restart", "baseline", "sleep-level1"}
	raw.Windows["A-sleep-level1"] = record.Window{Start: 1_700_000_100, End: 1_700_000_160, Host: &record.HostLoad{OthersCPUPct: 3.5, WaitPerRun: 0.25}}
	raw.GPUFacts = &record.GPUFacts{Name: "G (simulated)", MemoryGiB: 48, PCIeGen: 4, PCIeWidth: 16, MaxPCIeGen: 4, MaxPCIeWidth: 16,
		PCIeGBps: 32, MemBusWidthBits: 384, MaxMemClockMHz: 9001, MemoryGBps: 864.1, Simulated: true}
	raw.Weights = map[string]record.Weight{"A": {GiB: 8, Source: "server log: Model loading took 8.0 GiB"}}
	raw.Links = []record.Link{{GPU: "simulated GPU 0 (G)", H2DGBps: 16.5, D2HGBps: 22, H2DBestGBps: 16.5, D2HBestGBps: 22,
		NominalGBps: 32, H2DFractionOfNominal: 16.5 / 32, Source: "simulated: the vllmsim profile's pinned copy rates", Simulated: true}}
	addTransitions(&raw)
	addCost(&raw)
	return raw
}

// addCost adds A's state costs (KV release skipped, as on a vLLM before
// PR #44890) and a fit table where host memory binds at level 1.
func addCost(raw *record.Raw) {
	nan := math.NaN()
	st := func(name string, gpu, host, pinned, w float64) record.StateCost {
		return record.StateCost{State: name, GPUGiB: []float64{gpu}, HostGiB: host, LockedGiB: pinned, PinnedGiB: pinned, SwapGiB: 0, PowerW: w, DwellS: 1}
	}
	raw.Cost = map[string]record.Cost{"A": {DwellS: 1,
		States: []record.StateCost{st(record.StateAwake, 20, 2, 0, 90), st(record.StateL1, 0.5, 10, 8, 45), st(record.StateL2, 0.5, 2, 0, 44),
			{State: record.StateKVReleased, HostGiB: nan, LockedGiB: nan, PinnedGiB: nan, SwapGiB: nan, PowerW: nan, DwellS: nan,
				Skipped: "the server has no /release_kv_cache_memory (vLLM before PR #44890)"},
			st(record.StateStopped, 0, 0, 0, 30)},
		Transitions: []record.Transition{{Op: record.OpSleepL1, S: 1, J: 120}, {Op: record.OpWakeL1, S: 2, J: 300}, {Op: record.OpSleepL2, S: 0.5, J: 50},
			{Op: record.OpWakeL2, S: 9, J: 1400}, {Op: record.OpStart, S: 60, J: 9000}},
		SleepPeakHostGiB: 1.5, WakeReturnedHostGiB: 0.25,
		BreakEvens: []record.BreakEven{{Level: 1, IdleS: 227, WakeS: 2, ColdStartS: 60, LatencyS: 58}, {Level: 2, IdleS: 213, WakeS: 9, ColdStartS: 60, LatencyS: 51}}}}
	raw.Fit = &record.Fit{GPUFreeGiB: 46, HostGiB: 20, HostSource: "cgroup headroom: /sys/fs/cgroup/memory.max − working set", HostHeadroomGiB: 1,
		Largest: "A", LargestFits: true, Choose: 2, Why: "level 2 keeps 1 asleep, level 1 0 (host binds)",
		Levels: []record.FitLevel{{Level: 1, Others: 1, Fits: 0, Binds: "host", NeedGPUGiB: 0.5, NeedHostGiB: 25, LeftGPUGiB: 26, LeftHostGiB: 17},
			{Level: 2, Others: 1, Fits: 1, Asleep: []string{"B"}, NeedGPUGiB: 0.5, NeedHostGiB: 2, LeftGPUGiB: 25.5, LeftHostGiB: 15}}}
}

// addTransitions adds to raw what the oracle, the servers' logs and a
// three-model soak record: A's reference and replays (one diverging), the
// engine's account of A's level-1 cycles (one disagreeing), each process's
// first sleep, and a soak of 9 cycles whose residual grows.
func addTransitions(raw *record.Raw) {
	nan := math.NaN()
	raw.References["A"] = record.Reference{Basis: "token ids + logprobs", Probes: []string{"short", "long", "lora:sql"}, Seconds: 0.2}
	ok := func(p string) record.ProbeResult { return record.ProbeResult{Probe: p, Match: true, MaxDelta: 0.001} }
	raw.Replays["A"] = []record.Replay{
		{Stage: record.PhaseSleepL1, Cycle: 1, Seconds: 0.2, Results: []record.ProbeResult{ok("short"), ok("long"), ok("lora:sql")}},
		{Stage: record.PhaseSleepL1, Cycle: 2, Seconds: 0.3, Results: []record.ProbeResult{ok("short"), ok("long"),
			{Probe: "lora:sql", Position: 1, Kind: "token", Detail: "token 1 is id 7 (logprob -0.2000), reference id 9 (logprob -0.1000)"}}},
		{Stage: record.PhaseSwitch, Cycle: 1, Seconds: 0.2, Results: []record.ProbeResult{ok("short"), {Probe: "long", Match: true, Tie: 5}, ok("lora:sql")}},
	}
	raw.Cycles["A"][0].Engine = &record.Engine{SleepS: 0.9, WakeS: 1.8, FreedGiB: 7.5, InUseGiB: 9, MetricSleepS: 0.95, MetricWakeS: 1.9, MetricReleaseS: nan}
	raw.Cycles["A"][1].Engine = &record.Engine{SleepS: 2.9, WakeS: 3.9, FreedGiB: 2, InUseGiB: 9, MetricSleepS: nan, MetricWakeS: nan, MetricReleaseS: nan,
		Disagreements: []string{"engine log: freed 2.00 GiB, the harness measured 7.50 GiB released"}}
	raw.FirstSleeps["A"] = []record.FirstSleep{{Level: 1, SleepS: 20}, {Level: 1, SleepS: 22}}
	raw.Health = map[string][]record.Health{"A": {
		{Stage: record.PhaseBaseline, Requests: 4, SpecAcceptance: 0.7, PrefixHitRate: 0.6, DecodeTPS: 300,
			Adapters: []record.AdapterHealth{{Name: "sql", PrefixHitRate: 0.6, DecodeTPS: 250}}},
		{Stage: record.PhaseAfterWakeL2, Requests: 4, SpecAcceptance: 0, PrefixHitRate: 0.6, DecodeTPS: 120,
			Adapters: []record.AdapterHealth{{Name: "sql", PrefixHitRate: 0.8, DecodeTPS: 250}}},
		{Stage: record.PhaseSwitch, Requests: 4, SpecAcceptance: nan, PrefixHitRate: nan, DecodeTPS: nan, Note: "/metrics unreadable: HTTP 500"},
	}}
	raw.LostPrefix = map[string][]record.LostPrefix{"A": {
		{Level: 1, PromptTokens: 2060, WarmTTFTS: 0.05, WokenTTFTS: 0.65, WarmCached: -1, WokenCached: -1},
		{Level: 2, PromptTokens: 2060, WarmTTFTS: 0.05, WokenTTFTS: 0.85, WarmCached: 2048, WokenCached: 0},
	}}
	raw.FirstSleeps["B"] = []record.FirstSleep{{Level: 1, SleepS: 1}}
	raw.SoakPlanned, raw.SoakLevel = 9, 1
	labels := []string{"A", "B", "C"}
	for i := range 9 {
		c := record.SoakCycle{Cycle: i + 1, From: labels[i%3], To: labels[(i+1)%3], Level: 1, OK: true,
			SleepS: 1 + float64(i/3), WakeS: 2, ToFirstTokenS: 3.5, ResidualGiB: 0.5 + float64(i/3)*0.25, ReleasePct: 90,
			FreeGiB: 20 - float64(i), NeedGiB: 8, HeadroomGiB: 12 - float64(i), RSSGiB: 1 + float64(i/3)*0.25,
			LockedGiB: 0, PinnedGiB: 0.5 + float64(i/3)*0.25, EnergyJ: 30 + float64(i/3)*3}
		raw.Soak = append(raw.Soak, c)
	}
}

// TestGoldenOutputs holds report.json, bench.txt and summary.md of a fixed
// record to the files in testdata/golden: a change to any writer shows in
// the diff. go test ./internal/report -run Golden -update rewrites them.
func TestGoldenOutputs(t *testing.T) {
	raw := goldenRaw()
	rep := Build(raw)
	for name, write := range map[string]func(io.Writer) error{
		"report.json": func(w io.Writer) error { return WriteJSON(w, rep) },
		"bench.txt":   func(w io.Writer) error { return WriteBench(w, raw) },
		"summary.md":  func(w io.Writer) error { return WriteSummary(w, rep) },
	} {
		t.Run(name, func(t *testing.T) {
			var got bytes.Buffer
			require.NoError(t, write(&got))
			path := filepath.Join("testdata", "golden", name)
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, got.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "no golden file: run go test ./internal/report -run Golden -update and review the diff")
			assert.Equal(t, string(want), got.String(), "%s differs from %s (if the change is meant, rerun with -update and review the diff)", name, path)
		})
	}
}

// TestResultsPageShowsTheGoldenSummary: the summary.md docs/results.md (the
// README's "what to look at" in full) explains is the golden one, as this
// code writes it (-update rewrites the page's copy).
func TestResultsPageShowsTheGoldenSummary(t *testing.T) {
	const begin, end = "```markdown\n", "```\n<!-- end golden summary.md -->"
	path := filepath.Join("..", "..", "docs", "results.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(b)
	i, j := strings.Index(readme, "<!-- golden summary.md:"), strings.Index(readme, end)
	require.True(t, i >= 0 && j > i, "docs/results.md has no golden summary.md block")
	k := strings.Index(readme[i:], begin)
	require.True(t, k >= 0, "docs/results.md's golden summary.md block has no ```markdown fence")
	k += i + len(begin)
	want, err := os.ReadFile(filepath.Join("testdata", "golden", "summary.md"))
	require.NoError(t, err)
	if *update {
		readme = readme[:k] + string(want) + readme[j:]
		require.NoError(t, os.WriteFile(path, []byte(readme), 0o644))
	}
	assert.Equal(t, string(want), readme[k:j], "docs/results.md's summary.md is not the golden one: go test ./internal/report -run Golden -update")
}

// TestHostFiguresToTheMiB: a host-memory difference of a few pages either
// way (the wake gave back −2 pages, −7.629e-06 GiB) reads 0.000 GiB in
// summary.md, and every host figure of the state costs is printed to the
// MiB, never in scientific notation.
func TestHostFiguresToTheMiB(t *testing.T) {
	raw := goldenRaw()
	c := raw.Cost["A"]
	c.WakeReturnedHostGiB = -2 * 4096.0 / (1 << 30)
	c.SleepPeakHostGiB = 1.0 / 3
	raw.Cost["A"] = c
	var b bytes.Buffer
	require.NoError(t, WriteSummary(&b, Build(raw)))
	assert.Contains(t, b.String(), "transient host peak 0.333 GiB; its wake gave back 0.000 GiB.")
	assert.Contains(t, b.String(), "| awake | 20 | 2.000 (0.000 / 0.000) | 90 (60) |")
	assert.NotRegexp(t, `(host peak|gave back) -?[0-9.]+e-`, b.String())
}
