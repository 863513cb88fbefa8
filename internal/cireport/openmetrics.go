package cireport

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/stats"
)

// statHelp ends the help of a family summarised as stat="p50" and stat="p95".
const statHelp = "; stat p50 is the median, p95 the 95th percentile (nearest rank)"

// WriteOpenMetrics writes rep's headline figures as metrics.txt, OpenMetrics
// text for GitLab's metrics report: per model its restarts, each sleep
// level's sleep, wake and residual memory, serving throughput, TTFT and
// TPOT, the level-1 sleep's release, the server's peak RSS and the
// physical-limit fractions; each switch direction's handoff; the checks by
// verdict, whether the run passed and what it ran on. Every family is a
// gauge named wakebench_<figure>[_<unit>] in base units (seconds, bytes,
// ratio), with a UNIT where it has one; a summarised figure is two samples,
// stat="p50" (the median) and stat="p95". Figures the run does not have (no
// samples, no physical limits, an RSS or limit fraction of 0) and values
// that are not finite are left out. On a simulated run every sample
// carries simulated="true". Families are sorted by name, samples by label
// values.
func WriteOpenMetrics(w io.Writer, rep report.Report) error {
	m := metrics{families: map[string]*dto.MetricFamily{}, simulated: rep.Simulated != nil}
	m.models(rep)
	m.switching(rep.Switch)
	m.run(rep)
	for _, name := range slices.Sorted(maps.Keys(m.families)) {
		f := m.families[name]
		slices.SortFunc(f.Metric, compareLabels)
		if _, err := expfmt.MetricFamilyToOpenMetrics(w, f); err != nil {
			return fmt.Errorf("cireport: openmetrics: %s: %w", name, err)
		}
	}
	if _, err := expfmt.FinalizeOpenMetrics(w); err != nil {
		return fmt.Errorf("cireport: openmetrics: %w", err)
	}
	return nil
}

// metrics collects the families WriteOpenMetrics writes.
type metrics struct {
	families  map[string]*dto.MetricFamily
	simulated bool
}

// family describes one metric family: its name's figure (before the unit
// suffix), its unit ("" for none) and its help.
type family struct {
	figure, unit, help string
}

// name is the family's name: wakebench_<figure>_<unit>.
func (f family) name() string {
	if f.unit == "" {
		return "wakebench_" + f.figure
	}
	return "wakebench_" + f.figure + "_" + f.unit
}

var (
	restartFirstToken = family{"restart_to_first_token", "seconds",
		"Restart time: server process spawned to the first token of a probe request, by start " +
			"(initial: the first start, with fresh compile caches; warm: the later starts, reusing them)" + statHelp}
	restartReady = family{"restart_ready", "seconds",
		"Restart readiness: server process spawned to /health answering 200, by start " +
			"(initial: the first start, with fresh compile caches; warm: the later starts, reusing them)" + statHelp}
	sleepTime = family{"sleep", "seconds",
		"Sleep time: sleep request sent to its response, by sleep level, over the successful cycles" + statHelp}
	wakeAPI = family{"wake_api", "seconds",
		"Wake API time: first wake request sent to the last wake step answered, by sleep level, over the successful cycles" + statHelp}
	wakeFirstToken = family{"wake_to_first_token", "seconds",
		"Wake to first token: first wake request sent to the first token of a probe request, by sleep level, over the successful cycles" + statHelp}
	residual = family{"sleep_residual", "bytes",
		"Residual GPU memory: the model's GPU memory while asleep (GiB x 2^30), by sleep level, over the successful cycles" + statHelp}
	// The unit is no base unit, but OpenMetrics asks only that it end the
	// name (prometheus's parser checks that, and the tests parse it).
	servingTPS = family{"serving_output", "tokens_per_second",
		"Serving throughput: output tokens per second of a round of requests, by stage and concurrency, over the rounds" + statHelp}
	servingTTFT = family{"serving_ttft", "seconds",
		"Serving time to first token: request sent to its first non-empty token, by stage and concurrency, " +
			"over the successful requests" + statHelp}
	servingTPOT = family{"serving_tpot", "seconds",
		"Serving time per output token: first token to last over (completion tokens - 1), by stage and concurrency, " +
			"over the successful requests" + statHelp}
	l1Released = family{"sleep_level1_released", "ratio",
		"Level-1 release: the model's GPU memory a level-1 sleep released over its memory just before it " +
			"(report.json's percent / 100), over the measured level-1 sleeps" + statHelp}
	rssPeak = family{"server_rss_peak", "bytes",
		"Peak host RSS of the model's server process group, its processes summed, sampled every 250 ms (GiB x 2^30)"}
	l1WakeLimit = family{"l1_wake_fraction_of_floor", "ratio",
		"Level-1 wake against the host-to-device link: the wake's floor (weight bytes / the link probe's measured rate, " +
			"or the nominal PCIe rate without a probe) over the median level-1 wake API time, floor / measured: 1 = waking at the link's rate"}
	// l1WakeLimitOld is l1WakeLimit under its name before issue 50, kept
	// for one release so that a metrics report compares across the rename.
	l1WakeLimitOld = family{"l1_wake_fraction_of_pcie_limit", "ratio",
		"Deprecated: wakebench_l1_wake_fraction_of_floor_ratio under its old name (the floor is at the measured link rate, " +
			"not the PCIe limit), written until the release after issue 50"}
	tpotLimit = family{"tpot_fraction_of_hbm_limit", "ratio",
		"TPOT at concurrency 1 against device memory bandwidth: the floor (weight bytes / memory bandwidth) over the median " +
			"baseline TPOT at concurrency 1, limit / measured: 1 = decoding at the hardware's raw rate"}
	switchFirstToken = family{"switch_to_first_token", "seconds",
		"Switch time: sleep request of the model handing over sent to the first token of the model taking over, by direction, over the handoffs" + statHelp}
	checksByVerdict = family{"checks", "",
		"Checks (thresholds) of the run by verdict: PASS, FAIL or NOT EVALUATED"}
	runPassed = family{"run_passed", "",
		"1 if the run's status is PASS, else 0 (FAIL or NOT RUN)"}
	runInfo = family{"run_info", "",
		"The run: its status, GPU, runtime and whether it was simulated (always 1)"}
)

// add adds one sample of f with the label pairs labels (name, value, …),
// unless v is not finite.
func (m *metrics) add(f family, v float64, labels ...string) {
	if !finite(v) {
		return
	}
	name := f.name()
	fam := m.families[name]
	if fam == nil {
		fam = &dto.MetricFamily{Name: ptr(name), Help: ptr(f.help), Type: dto.MetricType_GAUGE.Enum()}
		if f.unit != "" {
			fam.Unit = ptr(f.unit)
		}
		m.families[name] = fam
	}
	if m.simulated {
		labels = append(labels, "simulated", "true")
	}
	metric := &dto.Metric{Gauge: &dto.Gauge{Value: ptr(v)}}
	for i := 0; i+1 < len(labels); i += 2 {
		metric.Label = append(metric.Label, &dto.LabelPair{Name: ptr(labels[i]), Value: ptr(labels[i+1])})
	}
	slices.SortFunc(metric.Label, func(a, b *dto.LabelPair) int { return cmp.Compare(a.GetName(), b.GetName()) })
	fam.Metric = append(fam.Metric, metric)
}

// summary adds s's median and p95, each × scale, unless s has no samples.
func (m *metrics) summary(f family, s stats.Summary, scale float64, labels ...string) {
	if s.N == 0 {
		return
	}
	m.add(f, s.Median*scale, append(slices.Clip(labels), "stat", "p50")...)
	m.add(f, s.P95*scale, append(slices.Clip(labels), "stat", "p95")...)
}

// models adds each model's restarts, sleep levels, serving, memory and
// physical limits.
func (m *metrics) models(rep report.Report) {
	for _, label := range slices.Sorted(maps.Keys(rep.Models)) {
		mod := rep.Models[label]
		if mod == nil {
			continue
		}
		m.summary(restartFirstToken, mod.RestartInitial, 1, "model", label, "start", "initial")
		m.summary(restartFirstToken, mod.RestartWarm, 1, "model", label, "start", "warm")
		m.summary(restartReady, mod.RestartReadyInitial, 1, "model", label, "start", "initial")
		m.summary(restartReady, mod.RestartReadyWarm, 1, "model", label, "start", "warm")
		for _, level := range slices.Sorted(maps.Keys(mod.Sleep)) {
			sl := mod.Sleep[level]
			if sl == nil {
				continue
			}
			m.summary(sleepTime, sl.SleepS, 1, "model", label, "level", level)
			m.summary(wakeAPI, sl.WakeAPIS, 1, "model", label, "level", level)
			m.summary(wakeFirstToken, sl.ToFirstTokenS, 1, "model", label, "level", level)
			m.summary(residual, sl.ResidualGiB, record.GiB, "model", label, "level", level)
		}
		for _, p := range mod.Performance {
			at := []string{"model", label, "stage", p.Stage, "concurrency", strconv.Itoa(p.Concurrency)}
			m.summary(servingTPS, p.OutputTPS, 1, at...)
			m.summary(servingTTFT, p.TTFTS, 1, at...)
			m.summary(servingTPOT, p.TPOTS, 1, at...)
		}
		// report.json's release is a percent, the ratio a fraction (divided,
		// not × 0.01, so 70 % is 0.7 exactly); an RSS peak of 0 was not
		// sampled, a limit fraction of 0 not taken.
		rel := rep.Memory.L1ReleaseFraction[label]
		rel.Median, rel.P95 = rel.Median/100, rel.P95/100
		m.summary(l1Released, rel, 1, "model", label)
		if gib := rep.Memory.RSSPeakGiB[label]; gib > 0 {
			m.add(rssPeak, gib*record.GiB, "model", label)
		}
		if lim := mod.PhysicalLimits; lim != nil {
			if lim.L1WakeFractionOfFloor > 0 {
				m.add(l1WakeLimit, lim.L1WakeFractionOfFloor, "model", label)
				m.add(l1WakeLimitOld, lim.L1WakeFractionOfFloor, "model", label)
			}
			if lim.TPOTFractionOfHBM > 0 {
				m.add(tpotLimit, lim.TPOTFractionOfHBM, "model", label)
			}
		}
	}
}

// switching adds each switch direction's handoffs to first token.
func (m *metrics) switching(sw report.Switch) {
	for _, dir := range slices.Sorted(maps.Keys(sw.Directions)) {
		if d := sw.Directions[dir]; d != nil {
			m.summary(switchFirstToken, d.ToFirstTokenS, 1, "dir", dir)
		}
	}
}

// run adds the checks by verdict, whether the run passed and its info.
func (m *metrics) run(rep report.Report) {
	counts := map[string]int{verdictPass: 0, verdictFail: 0, record.NotEvaluated: 0}
	for _, c := range rep.Checks {
		counts[c.Verdict]++
	}
	for verdict, n := range counts {
		m.add(checksByVerdict, float64(n), "verdict", verdict)
	}
	passed := 0.0
	if rep.Status == verdictPass {
		passed = 1
	}
	m.add(runPassed, passed)
	info := []string{"status", rep.Status, "gpu", rep.GPU, "runtime", rep.Runtime}
	if rep.Simulated != nil {
		info = append(info, "simulation", rep.Simulated.Label()) // m.add adds simulated="true"
	} else {
		info = append(info, "simulated", "false")
	}
	m.add(runInfo, 1, info...)
}

// compareLabels orders samples by their label values, label by label (the
// labels sorted by name), numbers by value.
func compareLabels(a, b *dto.Metric) int {
	for i := range min(len(a.Label), len(b.Label)) {
		x, y := a.Label[i], b.Label[i]
		if c := cmp.Compare(x.GetName(), y.GetName()); c != 0 {
			return c
		}
		if c := compareValues(x.GetValue(), y.GetValue()); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a.Label), len(b.Label))
}

// compareValues compares two label values, as integers where both are.
func compareValues(x, y string) int {
	if i, err := strconv.Atoi(x); err == nil {
		if j, err := strconv.Atoi(y); err == nil {
			return cmp.Compare(i, j)
		}
	}
	return cmp.Compare(x, y)
}
