package report

import (
	"fmt"
	"github.com/wakebench/wakebench/internal/record"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/wakebench/wakebench/internal/stats"
)

// WriteSummary writes summary.md: the run's Summary in Markdown, cut to
// fit a CI step summary (FitSummary at SummaryLimit).
func WriteSummary(w io.Writer, rep Report) error {
	_, err := io.WriteString(w, FitSummary(Summary(rep).Markdown(), SummaryLimit))
	return err
}

// Summary is the run's headline figures as one table model (Doc), for
// summary.md and stdout (Markdown, readable as plain text too) and
// report.html: status, what failed first (each cause once, before the
// checks that failed because of it: WhatFailed), then per model
// restarts, sleep levels, serving and memory, then switching, whole
// (report.html shows all of it; summary.md what fits).
func Summary(rep Report) Doc {
	var d Doc
	writeChecks(&d, rep)
	labels := slices.Sorted(maps.Keys(rep.Models))
	writeModels(&d, rep, labels)
	writeServing(&d, rep, labels)
	writePhysicalLimits(&d, rep, labels)
	writeSwitching(&d, rep.Switch)
	writeTransitions(&d, rep, labels)
	writeHealth(&d, rep, labels)
	writeCosts(&d, rep, labels)
	writeTraffic(&d, rep.Traffic)
	writeKubernetes(&d, rep, labels)
	writeGate(&d, rep.Gate)
	writeMemory(&d, rep.Memory)
	return d
}

// SummaryLimit is the most bytes summary.md holds: what GitHub takes of a
// step summary ($GITHUB_STEP_SUMMARY, 1 MiB a step; a bigger one is
// refused whole, not shown cut).
const SummaryLimit = 1 << 20

// FitSummary is md if it fits in limit bytes. Otherwise it is md's first
// whole lines (the verdict and what failed come first, so they stay) and a
// last line saying how much was cut: the rest of the section the cut fell
// in, and the sections after it, by their headings. The whole is within
// limit for any limit of at least 1 KiB (below that, md's first limit
// bytes and no note).
func FitSummary(md string, limit int) string {
	if len(md) <= limit {
		return md
	}
	room := min(2048, limit/4) // for the note, whatever the headings it names
	if room < 256 {
		return strings.ToValidUTF8(md[:limit], "")
	}
	keep := strings.LastIndexByte(md[:limit-room], '\n') + 1
	var sections []string
	if i := strings.LastIndex("\n"+md[:keep], "\n## "); i >= 0 && !strings.HasPrefix(md[keep:], "## ") { // the section the cut fell in
		h, _, _ := strings.Cut(md[i+3:], "\n")
		sections = append(sections, "the rest of "+h)
	}
	for _, line := range strings.Split(md[keep:], "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			sections = append(sections, h)
		}
	}
	head := fmt.Sprintf("\n**summary.md was cut at %d KiB** (a CI step summary holds at most 1 MiB): %d more bytes did not fit", limit>>10, len(md)-keep)
	const tail = ". report.html and report.json hold everything.\n"
	note := head + tail
	for n := len(sections); n > 0; n-- { // as many headings as fit the room
		list := sections[:n]
		more := ""
		if n < len(sections) {
			more = fmt.Sprintf(" and %d more", len(sections)-n)
		}
		if s := head + ", holding " + strings.Join(list, "; ") + more + tail; len(s) <= room {
			note = s
			break
		}
	}
	return md[:keep] + note
}

// writeChecks writes the verdict with the run's setup, what failed, the
// checks not evaluated, and the counts of checks and requests.
func writeChecks(d *Doc, rep Report) {
	sim := ""
	if rep.Simulated != nil {
		sim = " — simulated (" + rep.Simulated.Label() + ")"
	}
	d.Heading(1, "verdict", fmt.Sprintf("wakebench: %s%s", rep.Status, sim))
	d.Para(fmt.Sprintf("%s · %s · phases: %s", rep.GPU, rep.Runtime, strings.Join(rep.Phases, ", ")))
	if rep.Status == StatusNotRun && rep.NotRunReason != "" {
		d.Para("Nothing was measured: " + rep.NotRunReason)
	}

	var failed, notEvaluated []record.Check
	for _, c := range rep.Checks {
		switch {
		case c.Fails():
			failed = append(failed, c)
		case c.Verdict != "PASS":
			notEvaluated = append(notEvaluated, c)
		}
	}
	if len(failed) > 0 || len(rep.Failures) > 0 {
		// The cause first, once (WhatFailed): the first line is the thing
		// to fix.
		d.Heading(2, "failed", "What failed")
		var items []ListItem
		for _, c := range WhatFailed(rep) {
			it := ListItem{Text: c.String()}
			if c.Fix != "" {
				it.Sub = append(it.Sub, "fix: "+c.Fix)
			}
			if s := c.Consequences(); s != "" {
				it.Sub = append(it.Sub, s)
			}
			items = append(items, it)
		}
		d.List(items...)
	}
	if len(notEvaluated) > 0 {
		d.Heading(2, "not-evaluated", "Not evaluated (these do not fail the run: a threshold left at its default, or one whose figure this run cannot measure; each says why)")
		var items []ListItem
		for _, c := range notEvaluated {
			items = append(items, ListItem{Text: fmt.Sprintf("check %s", c)})
		}
		d.List(items...)
	}
	aborted := ""
	if n := rep.Requests.AbortedByDesign; n > 0 {
		aborted = fmt.Sprintf(", %d aborted by design", n)
	}
	d.Para(fmt.Sprintf("%d checks, %d failed. Requests: %d executed, %d failed%s (%d planned for serving).",
		len(rep.Checks), len(failed), rep.Requests.Executed, rep.Requests.Failure, aborted, rep.Requests.PlannedPerformance))
}

// writeModels writes each model's restart, sleep and memory medians.
func writeModels(d *Doc, rep Report, labels []string) {
	d.Heading(2, "models", "Models (medians; seconds unless noted)")
	var rows [][]string
	for _, l := range labels {
		m := rep.Models[l]
		l1, l2 := m.Sleep["1"], m.Sleep["2"]
		rows = append(rows, []string{l + " " + m.Name, num(m.RestartInitial) + " / " + num(m.RestartWarm),
			level(l1), level(l2), num(l1.ResidualGiB), num(rep.Memory.L1ReleaseFraction[l]), fmt.Sprintf("%.3g", rep.Memory.RSSPeakGiB[l])})
	}
	d.Table([]string{"model", "restart initial / warm", "L1 sleep / wake / first token", "L2 sleep / wake / first token", "residual GiB", "L1 released %", "RSS peak GiB"}, rows)
}

// writeServing writes each model's serving, one row per concurrency:
// baseline beside after-wake (the comparison its thresholds judge, shown
// whether or not both ran), then every other serving stage in the order
// the run served them (after-wake-l2, an opt-in phase's), each its tok/s
// and TTFT; no stage is named here but the pair.
func writeServing(d *Doc, rep Report, labels []string) {
	d.Heading(2, "serving", "Serving (median output tok/s; TTFT and TPOT median / p95)")
	fixed := []string{record.PhaseBaseline, record.PhaseAfterWake}
	var extra []string
	for _, l := range labels {
		for _, p := range rep.Models[l].Performance {
			if !slices.Contains(fixed, p.Stage) && !slices.Contains(extra, p.Stage) {
				extra = append(extra, p.Stage)
			}
		}
	}
	var rows [][]string
	for _, l := range labels {
		perf := map[string]map[int]Perf{}
		var concs []int
		for _, p := range rep.Models[l].Performance {
			if perf[p.Stage] == nil {
				perf[p.Stage] = map[int]Perf{}
			}
			perf[p.Stage][p.Concurrency] = p
			if !slices.Contains(concs, p.Concurrency) {
				concs = append(concs, p.Concurrency)
			}
		}
		slices.Sort(concs)
		for _, c := range concs {
			bl, aw := perf[record.PhaseBaseline][c], perf[record.PhaseAfterWake][c]
			tps := num(bl.OutputTPS) + " → " + num(aw.OutputTPS)
			var more []string
			for _, st := range extra {
				x := perf[st][c]
				tps += " → " + num(x.OutputTPS)
				more = append(more, spread(x.TTFTS))
			}
			rows = append(rows, append([]string{l, strconv.Itoa(c), tps,
				spread(bl.TTFTS), spread(aw.TTFTS), spread(bl.TPOTS), spread(aw.TPOTS)}, more...))
		}
	}
	head := []string{"model", "concurrency", "tok/s " + strings.Join(append(fixed, extra...), " → "), "TTFT baseline", "TTFT after-wake", "TPOT baseline", "TPOT after-wake"}
	for _, st := range extra {
		head = append(head, "TTFT "+st)
	}
	d.Table(head, rows)
}

// writePhysicalLimits writes, for the models that have them, the level-1
// wake and TPOT as fractions of their hardware limits.
func writePhysicalLimits(d *Doc, rep Report, labels []string) {
	var rows [][]string
	for _, l := range labels {
		if lim := rep.Models[l].PhysicalLimits; lim != nil {
			wake := fraction(lim.L1WakeFractionOfFloor, lim.L1WakeS, lim.L1WakeFloorS, lim.PCIeGBps)
			if lim.PCIeBasis != "" && wake != "–" {
				wake = strings.TrimSuffix(wake, ")") + " " + lim.PCIeBasis + ")"
			}
			rows = append(rows, []string{l, wake,
				fraction(lim.L1SleepFractionOfLink, lim.L1SleepS, lim.L1SleepFloorS, lim.D2HGBps),
				fraction(lim.TPOTFractionOfHBM, lim.TPOTC1S, lim.TPOTFloorS, lim.HBMGBps)})
		}
	}
	if len(rows) > 0 {
		d.Heading(2, "limits", "Physical limits (fraction of the limit: 1 = at the hardware's raw rate; see report.json for sources)")
		d.Table([]string{"model", "L1 wake vs its host→device floor (basis: measured link, else nominal PCIe)", "L1 sleep vs probed device→host", "TPOT c=1 vs memory bandwidth"}, rows)
	}
	writeLinks(d, rep)
}

// writeLinks writes the link probe's rates against the nominal link, or why there are none.
func writeLinks(d *Doc, rep Report) {
	if len(rep.LinkProbe) == 0 && rep.LinkNote == "" {
		return
	}
	d.Heading(2, "link", "Host link (link probe, before the first server)")
	if len(rep.LinkProbe) > 0 {
		var rows [][]string
		for _, l := range rep.LinkProbe {
			sim := ""
			if l.Simulated && !strings.Contains(l.GPU, "simulated") {
				sim = " (simulated)"
			}
			rows = append(rows, []string{l.GPU + sim, fmt.Sprintf("%.4g", l.H2DGBps), fmt.Sprintf("%.4g", l.D2HGBps), fmt.Sprintf("%.4g", l.NominalGBps), fmt.Sprintf("%.2f", l.H2DFractionOfNominal)})
		}
		d.Table([]string{"GPU", "host→device GB/s", "device→host GB/s", "nominal GB/s", "host→device / nominal"}, rows)
	}
	if rep.LinkNote != "" {
		d.Para(rep.LinkNote)
	}
}

// writeSwitching writes the switch phase by direction, when it ran.
func writeSwitching(d *Doc, sw Switch) {
	if len(sw.Directions) == 0 {
		return
	}
	d.Heading(2, "switching", fmt.Sprintf("Switching (%d of %d handoffs succeeded, each sleeping at level %d)", sw.Success, sw.Handoffs, sw.SleepLevel))
	var rows [][]string
	for _, k := range slices.Sorted(maps.Keys(sw.Directions)) {
		dir := sw.Directions[k]
		rows = append(rows, []string{k, strconv.Itoa(dir.N), num(dir.SleepS), num(dir.WakeS), spread(dir.ToFirstTokenS), num(dir.EnergyJ)})
	}
	d.Table([]string{"direction", "n", "sleep", "wake", "switch → first token (median / p95)", "J/switch"}, rows)
	if sw.EnergyNote != "" {
		d.Para(fmt.Sprintf("No energy per handoff: %s.", sw.EnergyNote))
	}
}

// writeMemory writes the closing line: the device's peak and the memory
// source, with why figures are missing if they are.
func writeMemory(d *Doc, mem Memory) {
	peak := mem.PhysicalPeakGiB
	peak.Median = peak.Max // num prints the median
	s := fmt.Sprintf("GPU memory: peak %s GiB over %d samples (source %s).", num(peak), peak.N, mem.Source)
	if mem.Note != "" {
		s += fmt.Sprintf(" %s.", mem.Note)
	}
	d.section = "memory"
	d.Para(s)
}

func num(s stats.Summary) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.4g", s.Median)
}

func spread(s stats.Summary) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.4g / %.4g", s.Median, s.P95)
}

// fraction is "0.49 (0.52 s vs floor 0.26 s at 31.5 GB/s)", or "–".
func fraction(f, measured, floor, gbps float64) string {
	if f == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f (%.4g s vs floor %.4g s at %.4g GB/s)", f, measured, floor, gbps)
}

func level(l *SleepLevel) string {
	if l == nil || l.SuccessfulCycles == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s (%d/%d ok)", num(l.SleepS), num(l.WakeAPIS), num(l.ToFirstTokenS), l.SuccessfulCycles, l.PlannedCycles)
}

// writeTransitions adds the first sleep against the steady state, the
// correctness replays, the servers' own account and the soak.
func writeTransitions(d *Doc, rep Report, labels []string) {
	var rows [][]string
	for _, l := range labels {
		m := rep.Models[l]
		first := "–"
		if f := m.FirstSleep; f != nil {
			first = fmt.Sprintf("%s s (%d server process%s)", num(f.L1SleepS), f.Processes, map[bool]string{true: "es"}[f.Processes != 1])
			if f.RatioToSteadyState != nil {
				first += fmt.Sprintf(" (%.3g× the steady %.4g s)", *f.RatioToSteadyState, *f.SteadyL1SleepS)
			}
		}
		corr := "off"
		if c := m.Correctness; c != nil {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(c.Stages)) {
				st := c.Stages[k]
				p := fmt.Sprintf("%s %d/%d", k, st.Probes-st.Mismatches, st.Probes)
				if d := st.FirstDivergence; d != nil {
					p += fmt.Sprintf(" (first: %s token %d, %s)", d.Probe, d.Position, d.Kind)
				}
				parts = append(parts, p)
			}
			corr = fmt.Sprintf("%s; %s", c.Basis, strings.Join(parts, ", "))
		}
		eng := "–"
		if e := m.Sleep["1"].Engine; e != nil {
			eng = fmt.Sprintf("sleep %s + %s, wake %s + %s; %d disagreements", num(e.SleepS), num(e.SleepOverheadS), num(e.WakeS), num(e.WakeOverheadS), e.Disagreements)
		}
		rows = append(rows, []string{l, first, corr, eng})
	}
	d.Heading(2, "after-wake", "After the wake (first level-1 sleep of each process; probes matching their answers before the first sleep; L1 engine time + HTTP overhead, medians)")
	d.Table([]string{"model", "first sleep", "correctness (matching / replayed)", "engine (L1)"}, rows)
	sk := rep.Soak
	if sk == nil {
		return
	}
	d.Heading(2, "soak", fmt.Sprintf("Soak (%d of %d cycles succeeded, level %d)", sk.Successful, sk.PlannedCycles, sk.Level))
	rows = nil
	for _, l := range slices.Sorted(maps.Keys(sk.Models)) {
		m := sk.Models[l]
		first := "–"
		if m.First != nil && m.Steady != nil {
			first = fmt.Sprintf("%.4g / %s", m.First.SleepS, num(m.Steady.SleepS))
		}
		rows = append(rows, []string{l, strconv.Itoa(m.Sleeps), num(m.ResidualGiB), slope(m.ResidualSlope, true), first, slope(m.RSSSlope, false),
			fmt.Sprintf("%s (%s / %s)", num(m.RSSGiB), num(m.LockedGiB), num(m.PinnedGiB)), slope(m.HostSlope, true), num(m.EnergyJ), slope(m.EnergySlope, true)})
	}
	d.Table([]string{"model", "sleeps", "residual GiB", "residual slope MiB/cycle (95 % CI)", "first sleep / steady", "RSS slope MiB/cycle", "host GiB (locked / pinned)", "host slope GiB/cycle", "J/cycle", "J slope /cycle"}, rows)
	oom := "headroom is not falling"
	if sk.ProjectedCyclesToOOM != nil {
		oom = fmt.Sprintf("at this trend a wake runs out of memory in about %.0f cycles", *sk.ProjectedCyclesToOOM)
	}
	text := fmt.Sprintf("Headroom before a wake: min %.3g GiB, trend %s GiB/cycle; %s.", sk.MinHeadroomGiB, slope(sk.HeadroomTrendGiB, false), oom)
	if sk.EnergyNote != "" {
		text += fmt.Sprintf("\nNo energy per cycle: %s.", sk.EnergyNote)
	}
	d.Para(text)
}

// slope is a trend's slope (with its 95 % interval), or "–" when too short.
func slope(tr *stats.Trend, ci bool) string {
	if tr == nil {
		return "–"
	}
	if ci {
		return fmt.Sprintf("%.3g (%.3g, %.3g)", tr.Slope, tr.CILow, tr.CIHigh)
	}
	return fmt.Sprintf("%.3g", tr.Slope)
}

// writeTraffic adds the traffic phase: per model the requests that found
// their model awake and asleep with their arrival → first token, the
// queue, switches, goodput against the ideal, and the sleeps with requests
// in flight.
func writeTraffic(d *Doc, t *Traffic) {
	if t == nil {
		return
	}
	ratio := "no ideal run"
	if t.GoodputRatio != nil {
		ratio = fmt.Sprintf("%.3g of the ideal's %.3g", *t.GoodputRatio, t.Ideal.GoodputRPS)
	} else if t.Ideal != nil && t.Ideal.Note != "" {
		ratio = "no ideal run: " + t.Ideal.Note
	}
	d.Heading(2, "traffic", fmt.Sprintf("Traffic (%s; router %s, sleeping at level %d)", t.Arrivals, t.Router, t.SleepLevel))
	d.Para(fmt.Sprintf("%d switches (%.3g a minute, median %s s each), queue up to %d; goodput %.3g req/s, %s.",
		t.Switches, t.SwitchesPerMin, num(t.SwitchS), t.MaxQueueDepth, t.GoodputRPS, ratio))
	en := t.Energy
	switch {
	case en.SharedJ != nil && en.IdealJ != nil && en.Ratio != nil:
		d.Para(fmt.Sprintf("GPU energy over each run: shared %.4g J, ideal (all awake) %.4g J, ratio %.3g.", *en.SharedJ, *en.IdealJ, *en.Ratio))
	case en.SharedJ != nil:
		d.Para(fmt.Sprintf("GPU energy over the shared run: %.4g J (no ideal figure%s).", *en.SharedJ, because(en.Note)))
	default:
		d.Para(fmt.Sprintf("No GPU energy figures%s.", because(en.Note)))
	}
	if t.ShedRequests > 0 {
		d.Para(fmt.Sprintf("%s: the router's queue held traffic.max_queue (%d) already; refused, never sent, not counted as failed (check %s).", Strong(fmt.Sprintf("%d requests shed", t.ShedRequests)), t.MaxQueue, Code("traffic.shed_requests")))
	}
	var rows [][]string
	for _, l := range slices.Sorted(maps.Keys(t.Models)) {
		m := t.Models[l]
		rows = append(rows, []string{l, fmt.Sprintf("%d (%d)", m.Requests, m.Failure), fmt.Sprintf("%d / %d", m.AwakeHits, m.AsleepHits),
			medianP99(m.FirstTokenAwakeS), medianP99(m.FirstTokenAsleepS), p99(m.QueueWaitS), strconv.Itoa(m.Good)})
	}
	d.Table([]string{"model", "requests (failed)", "found awake / asleep", "first token awake (median / p99)", "first token asleep (median / p99)", "queue wait p99", "good"}, rows)
	if len(t.PerSecond) > 0 {
		var q, sw []string
		for _, x := range t.PerSecond {
			q, sw = append(q, strconv.Itoa(x.MaxQueue)), append(sw, strconv.Itoa(x.Switches))
		}
		d.Para(fmt.Sprintf("Second by second: requests waiting for a wake (most) %s; switches begun %s.", Code(strings.Join(q, " ")), Code(strings.Join(sw, " "))))
	}
	if len(t.InFlight) > 0 {
		rows = nil
		for _, mode := range slices.Sorted(maps.Keys(t.InFlight)) {
			f := t.InFlight[mode]
			if f.Off != "" { // not tried: nothing to show but why
				rows = append(rows, []string{mode, "–", "off: " + f.Off, "–", "–", "–"})
				continue
			}
			rows = append(rows, []string{mode, strconv.Itoa(f.Requests), fmt.Sprintf("%d / %d / %d / %d", f.Aborted, f.Finished, f.Held, f.Errors), fmt.Sprintf("%.4g", f.SleepS), fmt.Sprint(f.Survived), strconv.Itoa(f.Unexpected)})
		}
		d.Table([]string{"sleep with requests in flight, mode", "requests", "aborted / finished / held / errors", "sleep s", "server lived on", "unexpected"}, rows)
	}
}

// medianP99 is d's median (the mean of the two middle samples for an
// even n, as every median of the report and report.html's) and its p99.
// Issue 50: this table showed the nearest-rank p50, the same samples'
// other middle, under another name than report.html's median.
func medianP99(d stats.Distribution) string {
	if d.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.4g / %.4g", d.Median, d.P99)
}

func p99(d stats.Distribution) string {
	if d.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.4g", d.P99)
}

// writeGate is the regression gate: what it judged (of how many metrics,
// NOT EVALUATED where fewer than thresholds.regression_min_judged, and why
// not the others), then per metric the rule that decided, the baseline
// runs it used, the change and the smallest worse change the gate flags
// (its power), in the row's unit (a ratio for a "… ratio to wave-mates"
// tail) and in percent.
func writeGate(d *Doc, g *record.Gate) {
	if g == nil {
		return
	}
	if g.Error != "" {
		d.Heading(2, SectionGate, "Regression gate: "+record.NotEvaluated)
		d.Para(fmt.Sprintf("baseline %s: %s", g.Baseline, g.Error))
		return
	}
	n := 0
	for _, r := range g.Rows {
		if r.Regression {
			n++
		}
	}
	cov := g.Coverage
	verdict := ""
	if n == 0 && cov.Judged < g.MinJudged {
		// The gate's check is NOT EVALUATED and the run FAILs: it judged
		// too little to say this run is as good as its baseline.
		verdict = ": " + record.NotEvaluated
	}
	d.Heading(2, SectionGate, fmt.Sprintf("Regression gate%s (%d regressions; judged %d of %d metrics, at least %d needed: thresholds.regression_min_judged; worse by > %g %% and significant at %g; baseline %d run(s): %s)",
		verdict, n, cov.Judged, cov.Metrics, g.MinJudged, g.TolerancePct, g.Alpha, len(g.Runs), strings.Join(g.Runs, ", ")))
	var items []ListItem
	for _, u := range cov.Unjudged {
		items = append(items, ListItem{Text: fmt.Sprintf("not judged: %s", u)})
	}
	d.List(items...)
	items = nil
	for _, n := range g.Notes {
		items = append(items, ListItem{Text: "note: " + n})
	}
	d.List(items...)
	var rows [][]string
	for _, r := range g.Rows {
		verdict, power := "pass", fmt.Sprintf("%.3g (%.3g %%)", r.MinChange, r.MinChangePct)
		switch {
		case r.Regression:
			verdict = Strong("REGRESSION")
		case !r.Gated:
			verdict, power = "not gated", "none"
			if r.Why != "" {
				verdict += ": " + r.Why
			}
		}
		if len(r.ChangePoints) > 0 {
			verdict += "; history changed " + strings.Join(r.ChangePoints, ", ")
		}
		rows = append(rows, []string{r.Metric, r.Unit, fmt.Sprintf("%s (%d)", r.Rule, r.Runs), fmt.Sprintf("%.4g", r.Baseline), fmt.Sprintf("%.4g", r.ThisRun),
			fmt.Sprintf("%+.1f %%", r.ChangePct), power, verdict})
	}
	d.Table([]string{"metric", "unit", "rule (runs)", "baseline", "this run", "change", "smallest flagged", "verdict"}, rows)
}

// because is ": why", or "" without a why.
func because(why string) string {
	if why == "" {
		return ""
	}
	return ": " + why
}
