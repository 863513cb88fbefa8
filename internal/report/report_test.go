package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/shape"
	"github.com/wakebench/wakebench/internal/stats"
)

// sampleRaw is a small but complete run of two models.
func sampleRaw() record.Raw {
	raw := record.NewRaw([]string{"A", "B"}, map[string]string{"A": "big", "B": "small"})
	func(w *record.Raw) {
		w.GPU, w.Runtime, w.ContextTokens, w.KVGiB = "1 × G (simulated)", "vLLM x", 4096, 4
		w.Simulated = &record.Simulated{Profile: "tiny", TimeScale: 1}
		for _, l := range []string{"A", "B"} {
			w.Restarts[l] = []record.Restart{{ReadyS: 10, FirstTokenS: 11}, {Warm: true, ReadyS: 4, FirstTokenS: 5}, {Warm: true, ReadyS: 6, FirstTokenS: 7}}
			w.Planned[l] = map[int]int{1: 2, 2: 1}
			w.Cycles[l] = []record.Cycle{
				{Level: 1, OK: true, SleepS: 1, WakeAPIS: 2, ToFirstTokenS: 2.1, ResidualGiB: 0.5},
				{Level: 1, OK: true, SleepS: 3, WakeAPIS: 4, ToFirstTokenS: 4.1, ResidualGiB: 0.5},
				{Level: 2, OK: true, SleepS: 0.5, WakeAPIS: 9, ToFirstTokenS: 9.1, ResidualGiB: math.NaN()},
			}
			for _, st := range []string{"baseline", "after-wake"} {
				w.Perf[l] = append(w.Perf[l], record.PerfRun{Stage: st, Concurrency: 1, Rounds: 2, Planned: 4, Success: 4, RoundsPassed: 2,
					RoundTPS: []float64{100, 110}, TTFT: []float64{.1, .1, .2, .1}, TPOT: []float64{.01, .01, .01, .02}, ReqTPS: []float64{80, 81, 79, 80}, PromptTokens: []int{26, 26, 26, 26}})
			}
			w.Release[l] = []float64{90, 92, 91}
		}
		w.Handoffs = []record.Handoff{
			{From: "B", To: "A", Initial: true, OK: true, ToFirstTokenS: 1, EnergyJ: 50},
			{From: "A", To: "B", OK: true, SleepS: 1, WakeS: 0.2, ToFirstTokenS: 1.3, EnergyJ: 130},
			{From: "B", To: "A", OK: true, SleepS: 0.2, WakeS: 1, ToFirstTokenS: 1.3, EnergyJ: 120},
			{From: "A", To: "B", OK: false, EnergyJ: math.NaN()},
		}
		w.Requests = record.Requests{Executed: 30, Success: 30}
		w.DeviceUsedGiB = []float64{0, 10, 20, 12}
		w.RSSPeak = map[string]uint64{"A": 2 << 30, "B": 1 << 30}
	}(&raw)
	raw.Windows["A-baseline"] = record.Window{Start: 98, End: 112}
	raw.Phases = []string{"restart", "baseline", "sleep-level1", "after-wake", "sleep-level2", "switch"}
	return raw
}

func TestBuildSummarises(t *testing.T) {
	rep := Build(sampleRaw())
	assert.Equal(t, "PASS", rep.Status)
	a := rep.Models["A"]
	assert.Equal(t, "big", a.Name)
	assert.Equal(t, 1, a.RestartInitial.N)
	assert.Equal(t, 11.0, a.RestartInitial.Median)
	assert.Equal(t, 6.0, a.RestartWarm.Median, "mean of the two warm starts")
	assert.Equal(t, 5.0, a.RestartReadyWarm.Median)
	l1 := a.Sleep["1"]
	assert.Equal(t, 2, l1.SuccessfulCycles)
	assert.Equal(t, 2.0, l1.SleepS.Median)
	assert.Equal(t, 0.5, l1.ResidualGiB.Median)
	assert.Equal(t, 0, a.Sleep["2"].ResidualGiB.N, "unknown residuals are left out, not zero")
	require.Len(t, a.Performance, 2)
	assert.Equal(t, []int{26}, a.Performance[0].PromptTokenCounts)
	assert.Equal(t, 105.0, a.Performance[0].OutputTPS.Median)
	assert.Equal(t, 16, rep.Requests.PlannedPerformance)
	assert.Equal(t, 1, rep.Switch.InitialActivation)
	assert.Equal(t, 3, rep.Switch.Handoffs)
	assert.Equal(t, 2, rep.Switch.Success)
	assert.Equal(t, 1, rep.Switch.Directions["A→B"].N)
	assert.Equal(t, 20.0, rep.Memory.PhysicalPeakGiB.Max)
	assert.Equal(t, 2.0, rep.Memory.RSSPeakGiB["A"])
	assert.Equal(t, 91.0, rep.Memory.L1ReleaseFraction["B"].Median)
	assert.Equal(t, record.Window{Start: 98, End: 112}, rep.Windows["A-baseline"])
}

// TestNoPhaseIsNotPass: a run in which no phase ran (benchmarks only, a
// -run filter matching none) is NOT RUN, not PASS; a failure still fails.
func TestNoPhaseIsNotPass(t *testing.T) {
	raw := sampleRaw()
	raw.Phases = nil
	assert.Equal(t, StatusNotRun, Build(raw).Status)
	raw.Failures = []record.Failure{{Phase: "config", Error: "bad"}}
	assert.Equal(t, "FAIL", Build(raw).Status)
}

func TestBuildFailsOnFailureOrFailedCheck(t *testing.T) {
	raw := sampleRaw()
	raw.Checks = []record.Check{{Name: "x", Verdict: "FAIL"}}
	assert.Equal(t, "FAIL", Build(raw).Status)
	raw = sampleRaw()
	raw.Failures = []record.Failure{{Phase: "switch", Model: "B", Step: "wake", Error: "boom"}}
	assert.Equal(t, "FAIL", Build(raw).Status)
}

func TestReportHasTheReferenceShape(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join("..", "..", "testdata", "l20-reference-report.json"))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, Build(sampleRaw())))
	assert.Contains(t, buf.String(), `"A→B"`, "direction keys are written unescaped")
	diffs, err := shape.Diff(ref, buf.Bytes())
	require.NoError(t, err)
	// sampleRaw records only A-baseline of the reference's windows; the
	// reference's restart_baseline and dra sentences are objects here.
	var widened []string
	for _, d := range diffs {
		if WidenedDiff(d) {
			widened = append(widened, d)
			continue
		}
		assert.True(t, strings.HasPrefix(d, "windows."), d)
	}
	assert.Len(t, widened, len(Widened))
}

func TestWriteBenchIsBenchfmt(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteBench(&buf, sampleRaw()))
	rd := benchfmt.NewReader(bytes.NewReader(buf.Bytes()), "bench.txt")
	perName := map[string]int{}
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Fatalf("syntax error: %v", rec)
		case *benchfmt.Result:
			perName[rec.Name.String()]++
			assert.Equal(t, "yes (vllmsim profile tiny, time scale 1)", rec.GetConfig("simulated"))
			assert.Equal(t, "big", rec.GetConfig("model-a"))
		}
	}
	require.NoError(t, rd.Err())
	assert.Equal(t, 2, perName["Sleep/model=A/level=1"], "one line per cycle")
	assert.Equal(t, 2+4, perName["Serve/model=A/stage=baseline/conc=1"], "one line per round and per request")
	assert.Equal(t, 2, perName["Restart/model=B/kind=warm"])
	assert.Equal(t, 1, perName["Switch/dir=A→B"], "failed handoffs and the initial activation are not samples")
	assert.Equal(t, 3, perName["Memory/model=A"])
	assert.Equal(t, 1, perName["Memory/device"])
	assert.Contains(t, buf.String(), "Unit tok/s better=higher\n")
}

// TestBenchstatReadsIt runs the real benchstat (a go tool of this module) on
// two files and checks it compares them without complaint.
func TestBenchstatReadsIt(t *testing.T) {
	dir := t.TempDir()
	raw := sampleRaw()
	for _, name := range []string{"old.txt", "new.txt"} {
		require.NoError(t, WriteFile(filepath.Join(dir, name), func(w io.Writer) error { return WriteBench(w, raw) }))
	}
	cmd := exec.Command("go", "tool", "benchstat", "-col", "/stage", filepath.Join(dir, "old.txt"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	assert.Empty(t, stderr.String())
	assert.Contains(t, stdout.String(), "after-wake")
	assert.Contains(t, stdout.String(), "tok/s")

	cmd = exec.Command("go", "tool", "benchstat", filepath.Join(dir, "old.txt"), filepath.Join(dir, "new.txt"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "Sleep/model=A/level=1")
	assert.Contains(t, string(out), "new.txt")
}

func TestWriteFileIsAtomic(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	err := WriteFile(p, func(w io.Writer) error {
		w.Write([]byte("half"))
		return errors.New("disk full")
	})
	assert.ErrorContains(t, err, "disk full")
	b, _ := os.ReadFile(p)
	assert.Equal(t, "old", string(b), "a failed write leaves the old file")
	entries, _ := os.ReadDir(filepath.Dir(p))
	assert.Len(t, entries, 1, "no temporary file left behind")
	require.NoError(t, WriteFile(p, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }))
	b, _ = os.ReadFile(p)
	assert.Equal(t, "new", string(b))
}

func TestWriteSamples(t *testing.T) {
	at := time.Unix(1700000000, 500000000)
	var buf bytes.Buffer
	require.NoError(t, WriteSamples(&buf,
		[]gpu.Sample{{Time: at, Reading: gpu.Reading{Used: 30, Total: 100, Procs: map[int]uint64{7: 20, 3: 10}}}},
		[]record.RSSSample{{Time: at, Label: "A", Bytes: 5}},
		func(pid int) string { return map[int]string{7: "A"}[pid] }, true))
	assert.Equal(t, `unix_s,source,label,pid,bytes,simulated
1700000000.500000,device_used,,,30,1
1700000000.500000,device_total,,,100,1
1700000000.500000,process_gpu,,3,10,1
1700000000.500000,process_gpu,A,7,20,1
1700000000.500000,host_rss,A,,5,1
`, buf.String())
	buf.Reset()
	two := gpu.Merge([]gpu.Reading{{Used: 10, Total: 50, Procs: map[int]uint64{7: 8}}, {Used: 12, Total: 50, Procs: map[int]uint64{7: 8}}})
	require.NoError(t, WriteSamples(&buf, []gpu.Sample{{Time: at, Reading: two}}, nil, func(int) string { return "A" }, false))
	assert.Equal(t, `unix_s,source,label,pid,bytes,simulated
1700000000.500000,device_used,,,22,0
1700000000.500000,device_total,,,100,0
1700000000.500000,process_gpu,A,7,16,0
1700000000.500000,gpu_used,gpu0,,10,0
1700000000.500000,gpu_used,gpu1,,12,0
`, buf.String(), "a run of two GPUs: the sum, then each GPU")
	buf.Reset()
	require.NoError(t, WriteSamples(&buf, nil, []record.RSSSample{{Time: at, Label: "A", Bytes: 5}}, nil, false))
	assert.Equal(t, "unix_s,source,label,pid,bytes,simulated\n1700000000.500000,host_rss,A,,5,0\n", buf.String())
}

func TestSummaryPutsFailuresFirst(t *testing.T) {
	raw := sampleRaw()
	raw.Checks = []record.Check{record.Evaluate("sleep.level1.residual_gib.median", "A", 0.75, "<=", 0.5), record.Evaluate("x", "B", 1, "==", 1)}
	raw.Failures = []record.Failure{{Phase: "switch", Model: "B", Step: "wake A→B", Error: "HTTP 500"}}
	var b strings.Builder
	require.NoError(t, WriteSummary(&b, Build(raw)))
	s := b.String()
	assert.True(t, strings.HasPrefix(s, "# wakebench: FAIL — simulated (vllmsim profile tiny, time scale 1)"), s)
	failedAt := strings.Index(s, "check sleep.level1.residual_gib.median (model A) = 0.75, limit <= 0.5: FAIL")
	modelsAt := strings.Index(s, "## Models")
	assert.True(t, failedAt > 0 && failedAt < modelsAt, "failed checks come before the figures")
	assert.Contains(t, s, "- switch / B / wake A→B: HTTP 500")
	assert.Contains(t, s, "2 checks, 1 failed")
	assert.Contains(t, s, "| A big | 11 / 6 |")
	assert.Contains(t, s, "| A→B | 1 |")
}

func TestTimelineSVG(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	var samples []gpu.Sample
	for i := range 50 {
		a := uint64(10 << 30)
		if i >= 20 && i < 30 { // A asleep
			a = 1 << 29
		}
		samples = append(samples, gpu.Sample{Time: t0.Add(time.Duration(i) * 100 * time.Millisecond),
			Reading: gpu.Reading{Used: a + 2<<30, Total: 48 << 30, Procs: map[int]uint64{11: a, 22: 2 << 30}}})
	}
	var b bytes.Buffer
	err := WriteTimelineSVG(&b, Timeline{Samples: samples,
		LabelOf: func(pid int) string { return map[int]string{11: "A", 22: "B"}[pid] },
		Names:   map[string]string{"A": "big", "B": "small"},
		Windows: map[string]record.Window{"A-sleep-level1": {Start: 1700000001.5, End: 1700000003.5}}, Pad: 0,
		Events: []record.Event{{Time: t0.Add(2 * time.Second), Label: "A", Kind: "sleep L1"}, {Time: t0.Add(3 * time.Second), Label: "A", Kind: "wake"}},
		Title:  "t"})
	require.NoError(t, err)
	var texts []string
	dec := xml.NewDecoder(&b)
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		switch el := tok.(type) {
		case xml.StartElement:
			inText = el.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(el)))
			}
		}
	}
	for _, want := range []string{"A (big)", "B (small)", "device used", "A-sleep-level1", "sleep sent", "wake sent"} {
		assert.Contains(t, texts, want, "one series per model, the window and the event marks are labelled")
	}
	assert.NotContains(t, texts, "router queue (traffic phase)", "no traffic, no queue panel")
	assert.ErrorContains(t, WriteTimelineSVG(io.Discard, Timeline{}), "no GPU samples")

	// With the traffic phase's queue: a second panel below, same time axis.
	b.Reset()
	err = WriteTimelineSVG(&b, Timeline{Samples: samples, LabelOf: func(int) string { return "" }, Title: "t",
		Queue: []record.QueueDepth{{At: t0.Add(time.Second), Queued: 1}, {At: t0.Add(1500 * time.Millisecond), Queued: 3}, {At: t0.Add(2 * time.Second), Queued: 0}}})
	require.NoError(t, err)
	assert.Contains(t, b.String(), "router queue (traffic phase)")
	assert.Contains(t, b.String(), "requests waiting for a wake")
}

// TestPhysicalLimits: the floors are weight bytes over the link and memory
// bandwidths (scaled like every simulated time), the fractions floor over
// the measured medians, and each says where its inputs came from.
func TestPhysicalLimits(t *testing.T) {
	raw := sampleRaw()
	raw.Simulated.TimeScale = 0.5
	raw.Weights["A"] = record.Weight{GiB: 10, Source: "server log: Model loading took 10.0000 GiB"}
	raw.GPUFacts = &record.GPUFacts{Name: "G (simulated)", MaxPCIeGen: 4, MaxPCIeWidth: 16, PCIeGBps: 31.5,
		MemBusWidthBits: 384, MaxMemClockMHz: 9001, MemoryGBps: 864.048, Simulated: true}
	rep := Build(raw)
	a := rep.Models["A"].PhysicalLimits
	require.NotNil(t, a)
	weight := 10.0 * GiB
	assert.InDelta(t, weight/31.5e9*0.5, a.L1WakeFloorS, 1e-12)
	assert.Equal(t, 3.0, a.L1WakeS, "median level-1 wake API time")
	assert.InDelta(t, a.L1WakeFloorS/3, a.L1WakeFractionOfFloor, 1e-12)
	assert.InDelta(t, weight/864.048e9*0.5, a.TPOTFloorS, 1e-12)
	assert.Equal(t, 0.01, a.TPOTC1S, "median baseline TPOT at concurrency 1")
	assert.InDelta(t, a.TPOTFloorS/0.01, a.TPOTFractionOfHBM, 1e-12)
	assert.Contains(t, a.PCIeSource, "simulated GPU (vllmsim profile tiny)")
	assert.Contains(t, a.PCIeSource, "PCIe gen 4 x16")
	assert.Contains(t, a.HBMSource, "384-bit memory bus × 9001 MHz maximum memory clock × 2")
	assert.Contains(t, a.PCIeSource, "time scale 0.5")
	assert.Empty(t, a.Note)

	b := rep.Models["B"].PhysicalLimits
	require.NotNil(t, b, "the GPU's limits are known even without B's weight size")
	assert.Zero(t, b.L1WakeFloorS)
	assert.Zero(t, b.L1WakeFractionOfFloor)
	assert.Contains(t, b.Note, "weight size")

	// NVML without the maximum link: the floor says it used the current one.
	raw.GPUFacts = &record.GPUFacts{Name: "G", PCIeGen: 1, PCIeWidth: 16, PCIeGBps: 4, MemoryGBps: 864}
	a = Build(raw).Models["A"].PhysicalLimits
	assert.Contains(t, a.PCIeSource, "PCIe gen 1 x16 (the current link: NVML gave no maximum")
	assert.NotContains(t, a.PCIeSource, "gen 0 x0")
	assert.NotContains(t, a.PCIeSource, "maximum link")

	raw.GPUFacts, raw.Simulated = nil, nil
	a = Build(raw).Models["A"].PhysicalLimits
	assert.Contains(t, a.Note, "GPU facts")
	assert.Zero(t, a.TPOTFractionOfHBM)
	assert.Nil(t, Build(sampleRaw()).Models["A"].PhysicalLimits, "nothing known, nothing said")

	raw = sampleRaw()
	raw.Weights["A"] = record.Weight{GiB: 10, Source: "log"}
	raw.GPUFacts = &record.GPUFacts{PCIeGBps: 31.5, MemoryGBps: 864}
	var sb strings.Builder
	require.NoError(t, WriteSummary(&sb, Build(raw)))
	assert.Contains(t, sb.String(), "| A | 0.11 (3 s vs floor 0.3409 s at 31.5 GB/s nominal) | – | 1.24 (0.01 s vs floor 0.01243 s at 864 GB/s) |")
	assert.Contains(t, sb.String(), "| B | – | – | – |")
	assert.Contains(t, Build(raw).Models["A"].PhysicalLimits.Note, "TPOT below the memory floor",
		"a fraction above 1 says the floor does not hold")
}

// TestPhysicalLimitsMeasuredLink: with a link probe the wake's floor is the measured
// host→device rate, the slowest GPU's, and the report says so; the nominal link stays beside
// it with the measured rate's fraction of it. Hand computation: 10 GiB at 20 GB/s measured is
// 10·2^30/20e9 = 0.536870912 s, × time scale 0.5 = 0.268435456 s; the wake's median is 3 s,
// so 0.0894785; 20 / 31.5 nominal = 0.634921. In real-device mode the copies are unscaled.
func TestPhysicalLimitsMeasuredLink(t *testing.T) {
	raw := sampleRaw()
	raw.Simulated.TimeScale = 0.5
	raw.Weights["A"] = record.Weight{GiB: 10, Source: "log"}
	raw.GPUFacts = &record.GPUFacts{Name: "G", MaxPCIeGen: 4, MaxPCIeWidth: 16, PCIeGBps: 31.5, MemoryGBps: 864}
	raw.Links = []record.Link{
		{GPU: "GPU 0", H2DGBps: 24, D2HGBps: 26, H2DFractionOfNominal: 24 / 31.5, Source: "measured: …"},
		{GPU: "GPU 1", H2DGBps: 20, D2HGBps: 25, H2DFractionOfNominal: 20 / 31.5, Source: "measured: …"},
	}
	a := Build(raw).Models["A"].PhysicalLimits
	require.NotNil(t, a)
	assert.Equal(t, "measured", a.PCIeBasis)
	assert.Equal(t, 20.0, a.PCIeGBps, "the slowest GPU's link")
	assert.Equal(t, 31.5, a.PCIeNominalGBps)
	assert.InDelta(t, 0.634921, a.LinkFractionOfNominal, 1e-6)
	assert.InDelta(t, 0.268435456, a.L1WakeFloorS, 1e-12)
	assert.InDelta(t, 0.0894785, a.L1WakeFractionOfFloor, 1e-6)
	assert.Contains(t, a.PCIeSource, "link probe, host→device (GPU 1")
	// The level-1 sleep against the same GPU's device→host rate: 10·2^30 / 25e9 × 0.5 =
	// 0.2147483648 s, over the median level-1 sleep (2 s).
	assert.Equal(t, 25.0, a.D2HGBps)
	assert.Equal(t, 2.0, a.L1SleepS)
	assert.InDelta(t, 0.2147483648, a.L1SleepFloorS, 1e-12)
	assert.InDelta(t, 0.1073741824, a.L1SleepFractionOfLink, 1e-12)

	raw.LinkNote = "link probe failed: NVML index 2 (PCI 0000:3b:00.0): cuInit: CUDA_ERROR_NO_DEVICE (100)"
	a = Build(raw).Models["A"].PhysicalLimits
	assert.Contains(t, a.PCIeSource, raw.LinkNote, "a GPU left unprobed is said")
	raw.LinkNote = ""

	raw.Links[1].Simulated = true
	assert.Equal(t, "simulated", Build(raw).Models["A"].PhysicalLimits.PCIeBasis, "a simulated GPU's rates are not measured")
	raw.Links[1].Simulated = false

	raw.Simulated.RealDevice = true
	a = Build(raw).Models["A"].PhysicalLimits
	assert.InDelta(t, 0.536870912, a.L1WakeFloorS, 1e-12, "real-device mode: the copies are the GPU's, never scaled")
	assert.InDelta(t, 10*GiB/864e9, a.TPOTFloorS, 1e-12)
	assert.Contains(t, a.Note, "real-device mode")

	raw.Links = nil
	a = Build(raw).Models["A"].PhysicalLimits
	assert.Equal(t, "nominal", a.PCIeBasis)
	assert.Equal(t, 31.5, a.PCIeGBps)
	assert.Zero(t, a.LinkFractionOfNominal)
}

// TestPerGPUSummaries: a run of two GPUs reports the residual, the level-1
// release and the device peak per GPU beside the totals; a run of one GPU
// has no such keys.
func TestPerGPUSummaries(t *testing.T) {
	raw := sampleRaw()
	raw.Cycles["A"] = []record.Cycle{
		{Level: 1, OK: true, ResidualGiB: 1, ResidualPerGPU: []float64{0.4, 0.6}},
		{Level: 1, OK: true, ResidualGiB: 1.2, ResidualPerGPU: []float64{0.5, 0.7}},
	}
	raw.ReleasePerGPU = map[string][][]float64{"A": {{90, 80}, {92, 82}}}
	raw.DeviceUsedGiBPerGPU = [][]float64{{1, 2}, {9, 8}, {3, 4}} // three samples of two GPUs
	rep := Build(raw)
	l1 := rep.Models["A"].Sleep["1"]
	require.Len(t, l1.ResidualGiBPerGPU, 2)
	assert.InDelta(t, 0.45, l1.ResidualGiBPerGPU[0].Median, 1e-12)
	assert.InDelta(t, 0.65, l1.ResidualGiBPerGPU[1].Median, 1e-12)
	require.Len(t, rep.Memory.L1ReleaseFractionPerGPU["A"], 2)
	assert.Equal(t, 81.0, rep.Memory.L1ReleaseFractionPerGPU["A"][1].Median)
	require.Len(t, rep.Memory.PhysicalPeakGiBPerGPU, 2)
	assert.Equal(t, 9.0, rep.Memory.PhysicalPeakGiBPerGPU[0].Max)
	assert.Equal(t, 8.0, rep.Memory.PhysicalPeakGiBPerGPU[1].Max)
	assert.Nil(t, Build(sampleRaw()).Models["B"].Sleep["1"].ResidualGiBPerGPU, "one GPU: no per-GPU keys")
}

// TestTransitionsSummarised: the oracle's replays, the engine's account,
// first sleeps and the soak, summarised as worked out by hand from
// addTransitions.
func TestTransitionsSummarised(t *testing.T) {
	raw := sampleRaw()
	addTransitions(&raw)
	rep := Build(raw)
	a := rep.Models["A"]

	c := a.Correctness
	require.NotNil(t, c)
	assert.Equal(t, []string{"short", "long", "lora:sql"}, c.Probes)
	l1 := c.Stages[record.PhaseSleepL1]
	assert.Equal(t, 2, l1.Replays)
	assert.Equal(t, 6, l1.Probes)
	assert.Equal(t, 1, l1.Mismatches)
	require.NotNil(t, l1.FirstDivergence)
	assert.Equal(t, Divergence{Cycle: 2, Probe: "lora:sql", Position: 1, Kind: "token", Detail: "token 1 is id 7 (logprob -0.2000), reference id 9 (logprob -0.1000)"}, *l1.FirstDivergence)
	assert.Equal(t, 0.25, l1.ReplayS.Median)
	sw := c.Stages[record.PhaseSwitch]
	assert.Equal(t, 0, sw.Mismatches, "a near-tie is not a mismatch")
	assert.Equal(t, 1, sw.Ties)
	assert.Nil(t, rep.Models["B"].Correctness, "no reference, no correctness")

	e := a.Sleep["1"].Engine
	require.NotNil(t, e)
	assert.Equal(t, 2, e.Cycles)
	assert.Equal(t, 1.9, e.SleepS.Median) // (0.9 + 2.9) / 2
	assert.InDelta(t, 0.1, e.SleepOverheadS.Median, 1e-12, "HTTP 1 − 0.9 and 3 − 2.9")
	assert.Equal(t, 1, e.MetricSleepS.N, "a NaN metric is left out")
	assert.Equal(t, 1, e.Disagreements)
	assert.Contains(t, e.FirstDisagreement, "cycle 2: engine log: freed 2.00 GiB")

	first, steady := a.Sleep["1"].FirstCycle, a.Sleep["1"].SteadyState
	assert.Equal(t, FirstCycle{SleepS: 1, WakeS: 2, ToFirstTokenS: 2.1}, *first)
	assert.Equal(t, 1, steady.N)
	assert.Equal(t, 3.0, steady.SleepS.Median)
	assert.Equal(t, 21.0, a.FirstSleep.L1SleepS.Median)
	require.NotNil(t, a.FirstSleep.RatioToSteadyState)
	assert.Equal(t, 7.0, *a.FirstSleep.RatioToSteadyState, "21 s against the steady 3 s")
	// Without a steady state (one level-1 cycle), null, not 0 (issue 50).
	alone := firstSleep([]record.FirstSleep{{Level: 1, SleepS: 21}}, &SleepLevel{SteadyState: &Steady{}})
	require.NotNil(t, alone)
	assert.Nil(t, alone.SteadyL1SleepS)
	assert.Nil(t, alone.RatioToSteadyState)
	d := rep.Switch.Directions["A→B"]
	assert.Equal(t, 1.0, d.FirstCycle.SleepS)
	assert.Equal(t, 0, d.SteadyState.N, "one handoff A→B succeeded: no steady state")

	sk := rep.Soak
	require.NotNil(t, sk)
	assert.Equal(t, 9, sk.Successful)
	for _, l := range []string{"A", "B", "C"} {
		m := sk.Models[l]
		assert.Equal(t, 3, m.Sleeps, l)
		require.NotNil(t, m.ResidualSlope, l)
		assert.InDelta(t, 256, m.ResidualSlope.Slope, 1e-9, "0.5, 0.75, 1 GiB: 256 MiB per cycle (%s)", l)
		assert.Equal(t, 1.0, m.First.SleepS)
		assert.Equal(t, 2.5, m.Steady.SleepS.Median)
	}
	assert.Equal(t, 4.0, sk.MinHeadroomGiB)
	require.NotNil(t, sk.ProjectedCyclesToOOM)
	assert.Equal(t, 4.0, *sk.ProjectedCyclesToOOM, "headroom 12 … 4 GiB falls 1 GiB a cycle")

	var buf bytes.Buffer
	require.NoError(t, WriteSoakCSV(&buf, raw))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 10, "a header and a row per cycle")
	assert.True(t, strings.HasPrefix(lines[1], "1,A,B,1,true,1,2,3.5,0.5,90,20,8,12,1,0,0.5,30,NaN,NaN,NaN,0,,true"), lines[1])
	for _, l := range []string{"A", "B", "C"} {
		m := sk.Models[l]
		require.NotNil(t, m.PinnedSlope, l)
		assert.InDelta(t, 0.25, m.PinnedSlope.Slope, 1e-9, "pinned 0.5, 0.75, 1 GiB: 0.25 GiB per cycle (%s)", l)
		require.NotNil(t, m.EnergySlope, l)
		assert.InDelta(t, 3, m.EnergySlope.Slope, 1e-9, "30, 33, 36 J: 3 J per cycle (%s)", l)
		assert.Equal(t, 33.0, m.EnergyJ.Median, l)
	}
}

// TestTrafficSummarised: the traffic phase's figures as worked out by hand.
func TestTrafficSummarised(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	req := func(run, model string, planned int, waited bool, ttft float64, good bool, err string) record.TrafficRequest {
		return record.TrafficRequest{Run: run, Model: model, Planned: at(planned), Issued: at(planned), Dispatched: at(planned + 100*btoi(waited)),
			FirstToken: at(planned + int(ttft*1000)), Done: at(planned + int(ttft*1000) + 100), Waited: waited, TTFTS: ttft, E2ES: ttft + 0.1,
			HasTPOT: true, TPOTS: 0.01, ITLS: []float64{0.01, 0.01}, Good: good, Err: err}
	}
	raw := sampleRaw()
	raw.Traffic = &record.Traffic{Start: t0, DurationS: 2.5, Arrivals: "x", Level: 1,
		Requests: []record.TrafficRequest{
			{Run: record.RunShared, Model: "A", WarmUp: true},
			req(record.RunShared, "A", 0, false, 0.05, true, ""),
			req(record.RunShared, "B", 500, true, 0.3, true, ""),
			req(record.RunShared, "A", 1000, true, 0.4, false, ""),
			req(record.RunShared, "B", 1900, false, 0.05, false, "boom"),
			req(record.RunIdeal, "A", 0, false, 0.05, true, ""),
			req(record.RunIdeal, "B", 500, false, 0.05, true, ""),
			req(record.RunIdeal, "A", 1000, false, 0.05, true, ""),
			req(record.RunIdeal, "B", 1900, false, 0.05, true, ""),
		},
		Switches: []record.RouterSwitch{{From: "A", To: "B", Start: at(500), End: at(700)}, {From: "B", To: "A", Start: at(1000), End: at(1300)}},
		Depth:    []record.QueueDepth{{At: at(500), Queued: 1}, {At: at(700), Queued: 0}, {At: at(1000), Queued: 2}, {At: at(2200), Queued: 0}},
		IdealRan: true, SharedJ: 300, IdealJ: 200,
		InFlight: []record.InFlight{{Mode: "keep", Requests: 2, Held: 2, Survived: true}, {Mode: "abort", Off: "no /is_paused: not tried"}},
	}
	tr := Build(raw).Traffic
	require.NotNil(t, tr)
	a, b := tr.Models["A"], tr.Models["B"]
	assert.Equal(t, 2, a.Requests, "the warm-up is not counted")
	assert.Equal(t, 1, a.WarmUp)
	assert.Equal(t, 1, a.AwakeHits)
	assert.Equal(t, 1, a.AsleepHits)
	assert.Equal(t, 0.4, a.FirstTokenAsleepS.Median)
	assert.Equal(t, 1, b.Failure)
	assert.Equal(t, 1, b.Good)
	// Shared: 2 good of 4 over 0 → 2.05 s (the last Done); ideal: 4 good
	// over the same span.
	assert.InDelta(t, 2/2.05, tr.GoodputRPS, 1e-9)
	assert.InDelta(t, 4/2.05, tr.Ideal.GoodputRPS, 1e-9)
	require.NotNil(t, tr.GoodputRatio)
	assert.InDelta(t, 0.5, *tr.GoodputRatio, 1e-9)
	require.NotNil(t, tr.Energy.Ratio)
	assert.Equal(t, 300.0, *tr.Energy.SharedJ)
	assert.InDelta(t, 1.5, *tr.Energy.Ratio, 1e-9, "300 J shared over 200 J ideal")
	var bench bytes.Buffer
	require.NoError(t, WriteBench(&bench, raw))
	assert.Contains(t, bench.String(), "BenchmarkTrafficEnergy/run=shared 1 300 J")
	assert.Contains(t, bench.String(), "BenchmarkTrafficEnergy/run=ideal 1 200 J")
	assert.Contains(t, bench.String(), "Unit J better=lower")

	// Without a counter: null figures and why, no bench line.
	raw.Traffic.SharedJ, raw.Traffic.IdealJ, raw.Traffic.EnergyNote = math.NaN(), math.NaN(), "no energy counter"
	tr = Build(raw).Traffic
	assert.Nil(t, tr.Energy.SharedJ)
	assert.Nil(t, tr.Energy.Ratio)
	assert.Equal(t, "no energy counter", tr.Energy.Note)
	bench.Reset()
	require.NoError(t, WriteBench(&bench, raw))
	assert.NotContains(t, bench.String(), "TrafficEnergy")
	assert.Equal(t, 2, tr.Switches)
	assert.InDelta(t, 2/2.5*60, tr.SwitchesPerMin, 1e-9)
	assert.Equal(t, 0.25, tr.SwitchS.Median, "0.2 s and 0.3 s")
	assert.Equal(t, 2, tr.MaxQueueDepth)
	assert.Equal(t, []TrafficSecond{{0, 1, 1}, {1, 2, 1}, {2, 2, 0}}, tr.PerSecond)
	assert.Equal(t, 2, tr.InFlight["keep"].Held)

	var buf bytes.Buffer
	require.NoError(t, WriteRequestsJSONL(&buf, raw))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 9)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[3]), &first))
	assert.Equal(t, "asleep", first["found"])
	assert.Equal(t, 0.1, first["queue_wait_s"])
	assert.Equal(t, 0.4, first["ttft_s"])
	assert.Equal(t, true, first["simulated"])
	var s bytes.Buffer
	require.NoError(t, WriteSummary(&s, Build(raw)))
	assert.Contains(t, s.String(), "requests waiting for a wake (most) `1 2 2`; switches begun `1 1 0`")
	assert.Contains(t, s.String(), "| abort | – | off: no /is_paused: not tried | – | – | – |", "a mode not tried says why, not that its server died")
	assert.Contains(t, s.String(), "| keep | 2 | 0 / 0 / 2 / 0 |")
}

// TestShedRequestsReported: requests the router shed are counted apart
// (not failures, not awake hits) in report.json, named in summary.md and
// marked in requests.jsonl.
func TestShedRequestsReported(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ok := record.TrafficRequest{Run: record.RunShared, Model: "A", Planned: t0, Issued: t0, Dispatched: t0, FirstToken: t0.Add(time.Second),
		Done: t0.Add(2 * time.Second), TTFTS: 1, E2ES: 2, Good: true}
	shed := record.TrafficRequest{Run: record.RunShared, Model: "A", Planned: t0, Issued: t0, Done: t0, Shed: true,
		Err: "shed: the router's queue is full (8 requests waiting, traffic.max_queue 8): not sent"}
	raw := sampleRaw()
	raw.Traffic = &record.Traffic{Start: t0, DurationS: 2, Arrivals: "x", Level: 1, MaxQueue: 8, Requests: []record.TrafficRequest{ok, shed, shed}}
	rep := Build(raw)
	a := rep.Traffic.Models["A"]
	assert.Equal(t, 3, a.Requests)
	assert.Equal(t, 2, a.Shed)
	assert.Zero(t, a.Failure, "shed is not failed")
	assert.Equal(t, 1, a.AwakeHits, "a shed request found no model")
	assert.Equal(t, 2, rep.Traffic.ShedRequests)
	assert.Equal(t, 8, rep.Traffic.MaxQueue)
	var s bytes.Buffer
	require.NoError(t, WriteSummary(&s, rep))
	assert.Contains(t, s.String(), "**2 requests shed**: the router's queue held traffic.max_queue (8) already")
	var buf bytes.Buffer
	require.NoError(t, WriteRequestsJSONL(&buf, raw))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3)
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &line))
	assert.Equal(t, true, line["shed"])
	assert.Contains(t, line["error"], "shed")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSummaryFitsAStepSummary: a run whose summary would pass GitHub's
// 1 MiB step-summary limit (tens of thousands of failed checks) keeps its
// first lines whole, ends with a line naming what was cut, and fits.
func TestSummaryFitsAStepSummary(t *testing.T) {
	rep := Build(record.New([]string{"A"}, map[string]string{"A": "m"}).Raw())
	for i := range 30000 {
		rep.Checks = append(rep.Checks, record.Check{Name: fmt.Sprintf("soak.cycle%05d.first_token_s", i), Model: "A", Value: 9, Op: "<=", Limit: 1, Verdict: "FAIL"})
	}
	rep.Status = "FAIL"
	var full Doc
	writeChecks(&full, rep)
	require.Greater(t, len(full.Markdown()), SummaryLimit, "the case must not fit")

	var b bytes.Buffer
	require.NoError(t, WriteSummary(&b, rep))
	md := b.String()
	assert.LessOrEqual(t, len(md), SummaryLimit)
	assert.True(t, strings.HasPrefix(md, "# wakebench: FAIL"), "the verdict stays first")
	assert.Contains(t, md, "soak.cycle00000.first_token_s", "the first failed check stays")
	last := md[strings.LastIndex(strings.TrimSuffix(md, "\n"), "\n")+1:]
	assert.Contains(t, last, "summary.md was cut at 1024 KiB")
	assert.Contains(t, last, "holding the rest of What failed; Models (medians", "the cut line names the section it fell in and those after it")
	assert.Contains(t, Summary(rep).Markdown(), "soak.cycle29999.first_token_s", "Summary is whole (report.html shows it)")
	cut := md[:strings.Index(md, "\n**summary.md was cut")]
	assert.True(t, strings.HasSuffix(cut, "\n"), "only whole lines are kept")
	assert.True(t, utf8.ValidString(md))

	small := "# wakebench: PASS\n\nall fits\n"
	assert.Equal(t, small, FitSummary(small, SummaryLimit), "a summary that fits is not touched")

	// Headings of many multibyte runes: the note drops the ones that do
	// not fit its room and says how many, and the whole still fits.
	var long strings.Builder
	long.WriteString("# wakebench: FAIL\n\n")
	for i := range 400 {
		fmt.Fprintf(&long, "## %03d %s\n\n%s\n\n", i, strings.Repeat("模型", 100), strings.Repeat("x", 200))
	}
	fit := FitSummary(long.String(), 32<<10)
	assert.LessOrEqual(t, len(fit), 32<<10)
	assert.Regexp(t, `and \d+ more\. report\.html`, fit)
	assert.True(t, utf8.ValidString(fit))
	assert.Equal(t, "# wake", FitSummary(long.String(), 6), "below 1 KiB: the first bytes, no room for a note")
}

// TestSpeculativeTPOTBelowTheFloorIsAFact: a model that decodes
// speculatively emits several tokens per read of its weights, so its TPOT
// below the one-read floor (fraction above 1) is explained as speculation,
// not as a wrong weight size; the same TPOT without speculation is.
func TestSpeculativeTPOTBelowTheFloorIsAFact(t *testing.T) {
	raw := sampleRaw()
	raw.Simulated = nil
	raw.Weights["A"] = record.Weight{GiB: 16, Source: "log"}
	// Floor: 16 GiB / 1000 GB/s = 0.01718 s per read; A's median TPOT at
	// c=1 is 0.01 s (sampleRaw), so the fraction is 1.718.
	raw.GPUFacts = &record.GPUFacts{PCIeGBps: 31.5, MemoryGBps: 1000}
	want := 16 * GiB / 1000e9 / 0.01
	plain := Build(raw).Models["A"].PhysicalLimits
	require.NotNil(t, plain)
	assert.InDelta(t, want, plain.TPOTFractionOfHBM, 1e-12)
	assert.Contains(t, plain.Note, "mixture of experts?")
	assert.NotContains(t, plain.Note, SpeculativeNote)

	raw.Speculative = []string{"A"}
	spec := Build(raw).Models["A"].PhysicalLimits
	assert.InDelta(t, want, spec.TPOTFractionOfHBM, 1e-12, "the figure is the same: only its reading changes")
	assert.Contains(t, spec.Note, SpeculativeNote)
	assert.NotContains(t, spec.Note, "mixture of experts?")
}

// BenchmarkWhatFailed: a soak's 30000 failed checks beside one failure.
// Each check was searched for among every cause before it, its own
// included (13 s a call); now among the failures' causes only.
func BenchmarkWhatFailed(b *testing.B) {
	rep := Build(record.New([]string{"A"}, map[string]string{"A": "m"}).Raw())
	rep.Failures = []record.Failure{{Phase: "soak", Model: "A", Step: "wake", Error: "wake A: 500 Internal Server Error"}}
	for i := range 30000 {
		rep.Checks = append(rep.Checks, record.Check{Name: fmt.Sprintf("soak.cycle%05d.first_token_s", i), Model: "A", Phase: "switch", Value: 9, Op: "<=", Limit: 1, Verdict: "FAIL"})
	}
	for b.Loop() {
		if got := len(WhatFailed(rep)); got != 30001 {
			b.Fatalf("%d causes, want the failure's and each check's", got)
		}
	}
}

// TestUnknownLimitsAreNull (issue 50): a physical-limits figure whose
// input is unknown (here the weight size) is null in report.json, not
// 0; the figures with known inputs are written as they are.
func TestUnknownLimitsAreNull(t *testing.T) {
	b, err := json.Marshal(Limits{PCIeGBps: 16.5, PCIeSource: "probe", L1WakeS: 3, HBMGBps: 864.1, TPOTC1S: 0.01, Note: "unknown: weight size"})
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	for _, k := range []string{"weight_gib", "l1_wake_floor_s", "l1_wake_fraction_of_floor", "l1_wake_fraction_of_nominal_pcie", "l1_wake_fraction_of_pcie_limit", "tpot_floor_s", "tpot_c1_fraction_of_hbm_limit"} {
		v, ok := got[k]
		assert.True(t, ok, k)
		assert.Nil(t, v, "%s: unknown, so null", k)
	}
	assert.Equal(t, 16.5, got["pcie_gbps"])
	assert.Equal(t, 3.0, got["l1_wake_s"])
	assert.Equal(t, 0.01, got["tpot_c1_s"])
	assert.NotContains(t, got, "d2h_gbps", "omitempty figures are left out, as before")
	var back Limits
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Zero(t, back.WeightGiB, "null reads back as 0")
	assert.Equal(t, 16.5, back.PCIeGBps)
}

// TestWakeFractionsByHand (issue 50): l1_wake_fraction_of_floor is the
// wake against its floor at the link probe's measured rate, and
// l1_wake_fraction_of_nominal_pcie against the nominal link's; by hand
// for the golden raw's A (8 GiB of weights, probe 16.5 GB/s, nominal 32 GB/s,
// median level-1 wake 3 s). 650cbfc had only the first, under the name
// l1_wake_fraction_of_pcie_limit, which report.json still writes.
func TestWakeFractionsByHand(t *testing.T) {
	lim := Build(goldenRaw()).Models["A"].PhysicalLimits
	require.NotNil(t, lim)
	weight := 8.0 * (1 << 30)
	assert.InDelta(t, weight/16.5e9/3, lim.L1WakeFractionOfFloor, 1e-12)
	assert.InDelta(t, weight/32e9/3, lim.L1WakeFractionOfNominal, 1e-12)
	b, err := json.Marshal(lim)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.InDelta(t, weight/16.5e9/3, got["l1_wake_fraction_of_floor"], 1e-12)
	assert.InDelta(t, weight/16.5e9/3, got["l1_wake_fraction_of_pcie_limit"], 1e-12, "the old name, one release")
	assert.InDelta(t, weight/32e9/3, got["l1_wake_fraction_of_nominal_pcie"], 1e-12)
}

// TestOwnPowerByHand (issue 50): a state's power_w is the whole GPU's
// draw, own_power_w the model's: the golden raw's A draws 90 W awake, 45
// asleep at level 1, 30 stopped, so its own is 60 and 15 W, and 0
// stopped; a skipped state has neither.
func TestOwnPowerByHand(t *testing.T) {
	c := Build(goldenRaw()).Models["A"].Cost
	require.NotNil(t, c)
	for st, want := range map[string][2]float64{"awake": {90, 60}, "asleep-l1": {45, 15}, "stopped": {30, 0}} {
		s := c.States[st]
		require.NotNil(t, s.PowerW, st)
		require.NotNil(t, s.OwnPowerW, st)
		assert.Equal(t, want[0], *s.PowerW, "%s: the whole GPU", st)
		assert.Equal(t, want[1], *s.OwnPowerW, "%s: the model's own", st)
	}
	assert.Nil(t, c.States["kv-released"].OwnPowerW, "skipped")
}

// TestTrafficTableShowsTheMedian (issue 50): summary.md's traffic table
// shows the median, as report.html's tables and every other median of
// the report, under that name: of first tokens 0.1 and 0.3 s, 0.2 (the
// nearest-rank p50 it showed as "p50" on 650cbfc is 0.1).
func TestTrafficTableShowsTheMedian(t *testing.T) {
	raw := sampleRaw()
	t0 := raw.Started
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	asleep := func(planned int, ttft float64) record.TrafficRequest {
		return record.TrafficRequest{Run: record.RunShared, Model: "A", Planned: at(planned), Issued: at(planned), Waited: true,
			FirstToken: at(planned + int(ttft*1000)), Done: at(planned + int(ttft*1000) + 100), TTFTS: ttft, E2ES: ttft + 0.1, Good: true}
	}
	raw.Traffic = &record.Traffic{Start: t0, DurationS: 2, Arrivals: "x", Level: 1,
		Requests: []record.TrafficRequest{asleep(0, 0.1), asleep(1000, 0.3)}}
	rep := Build(raw)
	require.InDelta(t, 0.2, rep.Traffic.Models["A"].FirstTokenAsleepS.Median, 1e-9)
	require.InDelta(t, 0.1, rep.Traffic.Models["A"].FirstTokenAsleepS.P50, 1e-9)
	var b bytes.Buffer
	require.NoError(t, WriteSummary(&b, rep))
	assert.Contains(t, b.String(), "first token asleep (median / p99)")
	assert.Contains(t, b.String(), "| 0.2 / 0.3 |")
}

// TestMeasuredZeroTPOTIsZero: a TPOT measured 0 (a run's tokens that came
// in one chunk, as under a slowed prefill) is 0 in report.json, not null:
// null is for a figure not measured (issue 50's whole-run figure test
// found the difference).
func TestMeasuredZeroTPOTIsZero(t *testing.T) {
	b, err := json.Marshal(Limits{TPOTC1S: 0, tpotMeasured: true})
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, 0.0, got["tpot_c1_s"], "measured")
	assert.Nil(t, got["l1_wake_s"], "not measured")
	assert.Nil(t, got["tpot_c1_fraction_of_hbm_limit"], "a fraction of a zero TPOT is unknown")
}

// TestDocRendersItsSpans: a Doc's typed spans are Markdown's marks in
// summary.md, an empty table cell is one space, a paragraph's lines stay
// lines, and text that looks like markup ("*", "<nil>") is written as it
// is: nothing is parsed back.
func TestDocRendersItsSpans(t *testing.T) {
	var d Doc
	d.Heading(2, "s", "Title "+Code("a.b"))
	d.Para(Strong("3 shed") + ": see " + Em("this") + "\nsecond line with * and <nil>")
	d.List(ListItem{Text: "one", Sub: []string{"fix: " + Code("x")}})
	d.Table([]string{"a", "b", "c"}, [][]string{{"1", "", "3"}})
	assert.Equal(t, "## Title `a.b`\n\n**3 shed**: see _this_\nsecond line with * and <nil>\n\n- one\n  - fix: `x`\n\n| a | b | c |\n|---|---|---|\n| 1 | | 3 |\n", d.Markdown())
	for _, b := range d.Blocks {
		assert.Equal(t, "s", b.Section, "every block is in the heading's section")
	}
	html := Inline(d.Blocks[1].Text, strings.ToUpper, func(k string) string { return "<" + k + ">" }, func(k string) string { return "</" + k + ">" })
	assert.Equal(t, "<strong>3 SHED</strong>: SEE <em>THIS</em>\nSECOND LINE WITH * AND <NIL>", html, "plain text through plain, spans through open and close")
	// A stray mark (an error's text holding the rune) restyles nothing
	// past its text: a close without its open is dropped, an open is
	// closed at the end.
	stray := "a" + string(strongClose) + "b" + string(codeOpen) + "c"
	assert.Equal(t, "ab<code>c</code>", Inline(stray, func(s string) string { return s }, func(k string) string { return "<" + k + ">" }, func(k string) string { return "</" + k + ">" }))
}

// TestSummaryServesEveryStage: a serving stage beyond baseline and the
// after-wake ones (an opt-in phase's) joins the serving table's tok/s
// chain and gets its own TTFT column; without one the table is as before.
func TestSummaryServesEveryStage(t *testing.T) {
	s := func(median float64) stats.Summary {
		return stats.Summary{N: 1, Median: median, Min: median, Max: median, P95: median}
	}
	perf := []Perf{
		{Stage: record.PhaseBaseline, Concurrency: 1, OutputTPS: s(100), TTFTS: s(0.01), TPOTS: s(0.001)},
		{Stage: record.PhaseAfterWake, Concurrency: 1, OutputTPS: s(90), TTFTS: s(0.02), TPOTS: s(0.002)},
	}
	rows := func(perf []Perf) (head, row string) {
		var d Doc
		writeServing(&d, Report{Models: map[string]*Model{"A": {Performance: perf}}}, []string{"A"})
		lines := strings.Split(d.Markdown(), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "| model |") {
				return l, lines[i+2]
			}
		}
		t.Fatalf("no serving table in %q", d.Markdown())
		return "", ""
	}
	head, row := rows(perf)
	assert.Equal(t, "| model | concurrency | tok/s baseline → after-wake | TTFT baseline | TTFT after-wake | TPOT baseline | TPOT after-wake |", head)
	assert.Equal(t, "| A | 1 | 100 → 90 | 0.01 / 0.01 | 0.02 / 0.02 | 0.001 / 0.001 | 0.002 / 0.002 |", row)
	// Every other stage in the order served, each its tok/s and TTFT.
	head, row = rows(append(perf, Perf{Stage: record.PhaseAfterWakeL2, Concurrency: 1, OutputTPS: s(80), TTFTS: s(0.03)}, Perf{Stage: "wake-burst", Concurrency: 1, OutputTPS: s(70), TTFTS: s(0.05)}))
	assert.Equal(t, "| model | concurrency | tok/s baseline → after-wake → after-wake-l2 → wake-burst | TTFT baseline | TTFT after-wake | TPOT baseline | TPOT after-wake | TTFT after-wake-l2 | TTFT wake-burst |", head)
	assert.Equal(t, "| A | 1 | 100 → 90 → 80 → 70 | 0.01 / 0.01 | 0.02 / 0.02 | 0.001 / 0.001 | 0.002 / 0.002 | 0.03 / 0.03 | 0.05 / 0.05 |", row)
}
