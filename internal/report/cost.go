package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/record"
)

// Cost is one model's state costs (the state-cost phase, docs/cost.md)
// in report.json: models.<label>.cost. A figure not measured is null.
type Cost struct {
	DwellS float64 `json:"dwell_s"`
	// States by name: awake, asleep-l1, asleep-l2, kv-released, stopped.
	States map[string]CostState `json:"states"`
	// Transitions by name: sleep-l1, wake-l1, sleep-l2, wake-l2, start.
	Transitions map[string]CostTransition `json:"transitions"`
	// SleepPeakHostGiB: the level-1 sleep call's transient host memory
	// above the tree's before; WakeReturnedHostGiB: host memory the
	// level-1 wake gave back.
	SleepPeakHostGiB    *float64 `json:"sleep_peak_host_gib"`
	WakeReturnedHostGiB *float64 `json:"wake_returned_host_gib"`
	ReleaseHostEnv      string   `json:"release_host_memory_env,omitempty"`
	// BreakEven by level ("1", "2").
	BreakEven  map[string]BreakEven `json:"break_even"`
	EnergyNote string               `json:"energy_note,omitempty"`
	// Simulated: every figure is vllmsim's (the report's simulated says how).
	Simulated bool `json:"simulated"`
}

// CostState is one state's figures.
type CostState struct {
	GPUGiB    []float64 `json:"gpu_gib"` // per GPU
	HostGiB   *float64  `json:"host_gib"`
	LockedGiB *float64  `json:"host_locked_gib"`
	PinnedGiB *float64  `json:"host_pinned_gib"`
	SwapGiB   *float64  `json:"host_swap_gib"`
	// PowerW is the whole GPU's draw in the state (every GPU of the run,
	// the board and every other model included: NVML has no per-process
	// energy); OwnPowerW is the model's own, PowerW less the stopped
	// state's (the others held as they were in both dwells), what the
	// break-even uses (issue 50: power_w alone read as the model's).
	PowerW    *float64 `json:"power_w"`
	OwnPowerW *float64 `json:"own_power_w"`
	DwellS    *float64 `json:"dwell_s"`
	Skipped   string   `json:"skipped,omitempty"`
}

// CostTransition is one transition's latency and energy.
type CostTransition struct {
	S float64  `json:"s"`
	J *float64 `json:"j"`
}

// BreakEven is one level's break-even: idle_s null with never true when
// sleeping draws no more than stopped (stopping never pays), null without
// never when a figure is unknown.
type BreakEven struct {
	IdleS      *float64 `json:"idle_s"`
	Never      bool     `json:"never,omitempty"`
	WakeS      *float64 `json:"wake_s"`
	ColdStartS *float64 `json:"cold_start_s"`
	LatencyS   *float64 `json:"latency_s"`
}

// Fit is the node's fit table (report.json's fit).
type Fit struct {
	GPUFreeGiB      float64    `json:"gpu_free_gib"`
	HostGiB         float64    `json:"host_gib"`
	HostSource      string     `json:"host_source"`
	HostHeadroomGiB float64    `json:"host_headroom_gib"`
	Largest         string     `json:"largest"`
	LargestFits     bool       `json:"largest_fits"`
	Short           string     `json:"short,omitempty"`
	Levels          []FitLevel `json:"levels"`
	Choose          int        `json:"choose_level"`
	Why             string     `json:"why"`
	Simulated       bool       `json:"simulated"`
}

// FitLevel is one level's row of the fit table.
type FitLevel struct {
	Level       int      `json:"level"`
	Others      int      `json:"others"`
	Fits        int      `json:"fits"`
	Asleep      []string `json:"asleep"`
	Binds       string   `json:"binds"`
	NeedGPUGiB  float64  `json:"need_gpu_gib"`
	NeedHostGiB float64  `json:"need_host_gib"`
	LeftGPUGiB  float64  `json:"left_gpu_gib"`
	LeftHostGiB float64  `json:"left_host_gib"`
}

// Opt is x, nil when not a number: JSON has no NaN or Inf, and a figure
// that could not be computed is written null (report.json, comparison.json).
func Opt(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// costs adds each model's cost and the fit to rep.
func costs(rep *Report, raw record.Raw) {
	sim := raw.Simulated != nil
	for l, c := range raw.Cost {
		m := rep.Models[l]
		if m == nil {
			continue
		}
		out := &Cost{DwellS: c.DwellS, States: map[string]CostState{}, Transitions: map[string]CostTransition{},
			SleepPeakHostGiB: Opt(c.SleepPeakHostGiB), WakeReturnedHostGiB: Opt(c.WakeReturnedHostGiB),
			ReleaseHostEnv: c.ReleaseHostEnv, BreakEven: map[string]BreakEven{}, EnergyNote: c.EnergyNote, Simulated: sim}
		for _, s := range c.States {
			out.States[s.State] = CostState{GPUGiB: s.GPUGiB, HostGiB: Opt(s.HostGiB), LockedGiB: Opt(s.LockedGiB), PinnedGiB: Opt(s.PinnedGiB),
				SwapGiB: Opt(s.SwapGiB), PowerW: Opt(s.PowerW), OwnPowerW: Opt(c.OwnPowerW(s.State)), DwellS: Opt(s.DwellS), Skipped: s.Skipped}
		}
		for _, t := range c.Transitions {
			out.Transitions[t.Op] = CostTransition{S: t.S, J: Opt(t.J)}
		}
		for _, b := range c.BreakEvens {
			out.BreakEven[fmt.Sprint(b.Level)] = BreakEven{IdleS: Opt(b.IdleS), Never: math.IsInf(b.IdleS, 1),
				WakeS: Opt(b.WakeS), ColdStartS: Opt(b.ColdStartS), LatencyS: Opt(b.LatencyS)}
		}
		m.Cost = out
	}
	if f := raw.Fit; f != nil {
		out := &Fit{GPUFreeGiB: f.GPUFreeGiB, HostGiB: f.HostGiB, HostSource: f.HostSource, HostHeadroomGiB: f.HostHeadroomGiB,
			Largest: f.Largest, LargestFits: f.LargestFits, Short: f.Short, Choose: f.Choose, Why: f.Why, Simulated: sim}
		for _, lf := range f.Levels {
			out.Levels = append(out.Levels, FitLevel{Level: lf.Level, Others: lf.Others, Fits: lf.Fits, Asleep: orEmpty(lf.Asleep), Binds: lf.Binds,
				NeedGPUGiB: lf.NeedGPUGiB, NeedHostGiB: lf.NeedHostGiB, LeftGPUGiB: lf.LeftGPUGiB, LeftHostGiB: lf.LeftHostGiB})
		}
		rep.Fit = out
	}
}

func orEmpty(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// costBench writes model l's state-cost lines: per state its W, host GiB
// and their locked part, per transition its joules (figures not measured
// left out).
func costBench(raw record.Raw, l string, line func(record.BenchName, ...benchfmt.Value)) {
	c, ok := raw.Cost[l]
	if !ok {
		return
	}
	for _, s := range c.States {
		var vals []benchfmt.Value
		if !math.IsNaN(s.PowerW) {
			vals = append(vals, val(s.PowerW, UnitPower))
		}
		if !math.IsNaN(s.HostGiB) {
			vals = append(vals, val(s.HostGiB, UnitHostGiB))
		}
		if !math.IsNaN(s.LockedGiB) {
			vals = append(vals, val(s.LockedGiB, UnitHostLockedGiB))
		}
		line(record.NewBenchName("Cost", "model", l, "state", s.State), vals...)
	}
	for _, t := range c.Transitions {
		if math.IsNaN(t.J) {
			continue
		}
		unit := UnitWakeJ
		switch {
		case strings.HasPrefix(t.Op, "sleep"):
			unit = UnitSleepJ
		case t.Op == record.OpStart:
			unit = UnitStartJ
		}
		line(record.NewBenchName("Energy", "model", l, "op", t.Op), val(t.J, unit))
	}
}

// writeCosts writes a table per model (state × GPU GiB, host GiB, W), its
// transitions and break-even, and the node's fit table.
func writeCosts(d *Doc, rep Report, labels []string) {
	sim := ""
	if rep.Simulated != nil {
		sim = " — simulated: vllmsim's modelled memory and power, not hardware's"
	}
	for _, l := range labels {
		c := rep.Models[l].Cost
		if c == nil {
			continue
		}
		d.Heading(2, "cost-"+l, fmt.Sprintf("State costs of %s (held %g s each)%s", l, c.DwellS, sim))
		var rows [][]string
		for _, st := range record.States() {
			s, ok := c.States[st]
			if !ok {
				continue
			}
			if s.Skipped != "" {
				rows = append(rows, []string{st, "skipped: " + s.Skipped, "", ""})
				continue
			}
			var g []string
			for _, x := range s.GPUGiB {
				g = append(g, fmt.Sprintf("%.3g", x))
			}
			rows = append(rows, []string{st, orDash(strings.Join(g, " + ")), fmt.Sprintf("%s (%s / %s)", gib3(s.HostGiB), gib3(s.LockedGiB), gib3(s.PinnedGiB)), fmt.Sprintf("%s (%s)", f3(s.PowerW), f3(s.OwnPowerW))})
		}
		d.Table([]string{"state", "GPU GiB", "host GiB (locked / pinned)", "GPU W (the model's own)"}, rows)
		var tr []string
		for _, op := range record.Ops() {
			if t, ok := c.Transitions[op]; ok {
				tr = append(tr, fmt.Sprintf("%s %.3g s / %s J", op, t.S, f3(t.J)))
			}
		}
		lines := []string{fmt.Sprintf("Transitions (sleep-l1 is the fresh process's first level-1 sleep, which allocates the pinned host copy: slower than the sleep-level1 phase's median): %s. Level-1 sleep's transient host peak %s GiB; its wake gave back %s GiB.", strings.Join(tr, "; "), gib3(c.SleepPeakHostGiB), gib3(c.WakeReturnedHostGiB))}
		for _, lv := range []string{"1", "2"} {
			be, ok := c.BreakEven[lv]
			if !ok {
				continue
			}
			pays := "stopping pays after " + f3(be.IdleS) + " s idle"
			switch {
			case be.Never:
				pays = "stopping never pays (asleep draws no more than stopped)"
			case be.IdleS != nil && *be.IdleS == 0:
				pays = "stopping pays at once (the cold start costs no more than the sleep call, the wake and the wait awake)"
			}
			lines = append(lines, fmt.Sprintf("Break-even level %s (the sleep call's energy included): %s; the price is %s s more to the first token.", lv, pays, f3(be.LatencyS)))
		}
		if c.EnergyNote != "" {
			lines = append(lines, fmt.Sprintf("No power or energy figures: %s.", c.EnergyNote))
		}
		d.Para(strings.Join(lines, "\n"))
	}
	f := rep.Fit
	if f == nil {
		return
	}
	d.Heading(2, "fit", fmt.Sprintf("Fit: how many models sleep beside %s awake%s", f.Largest, sim))
	d.Para(fmt.Sprintf("GPU free %.3g GiB; host %.3g GiB (%s), %.3g GiB kept free.", f.GPUFreeGiB, f.HostGiB, f.HostSource, f.HostHeadroomGiB))
	var rows [][]string
	for _, lf := range f.Levels {
		rows = append(rows, []string{strconv.Itoa(lf.Level), fmt.Sprintf("%d / %d", lf.Fits, lf.Others), orDash(strings.Join(lf.Asleep, ", ")), orDash(lf.Binds), fmt.Sprintf("%.3g", lf.LeftGPUGiB), fmt.Sprintf("%.3g", lf.LeftHostGiB)})
	}
	d.Table([]string{"level", "fit / others", "asleep", "binds", "GPU GiB left", "host GiB left"}, rows)
	d.Para(fmt.Sprintf("Choose level %d: %s.", f.Choose, f.Why))
}

func f3(x *float64) string {
	if x == nil {
		return "—"
	}
	return fmt.Sprintf("%.4g", *x)
}

// gib3 is a host-memory figure in GiB to the MiB (three decimals): RSS
// moves by pages, and a difference of two reads that is a few pages
// either way (-7.629e-06 GiB: two pages) is 0.000, not noise in
// scientific notation.
func gib3(x *float64) string {
	if x == nil {
		return "—"
	}
	s := fmt.Sprintf("%.3f", *x)
	if s == "-0.000" {
		return "0.000"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
