package gate

import (
	"fmt"
	"strings"

	"github.com/wakebench/wakebench/internal/phases"
	"github.com/wakebench/wakebench/internal/record"
)

// The machine's load over each phase window, as bench.txt carries it
// (record.HostWindowName: Host/window=<window> with %-others-cpu and
// wait/run, package hostload). The gate reads it to tell a phase the
// machine crowded from a slower code: a same-code rerun under a CPU hog on
// both cores of a 2-core runner took +34 % on a level-1 sleep and +24 % on
// a traffic first token against quiet runs, while its windows read 65–93 %
// of the CPU taken by others (quiet: at most 3.3 %) and 0.6–2.9 s of
// run-queue wait per second run (quiet: 0.06–0.77).

// Disturbance thresholds: a phase of this run is disturbed where other
// processes took at least DisturbOthersPct of the machine's CPU during it,
// and the run's own threads waited on a run queue, per second they ran,
// DisturbWaitRatio times as long as in every baseline run and
// DisturbWaitMin s/s more. Both: a busy neighbour the run did not wait
// for (a nice 19 batch job on idle cores) disturbs nothing, and threads
// that waited for each other on a machine nobody else used (a server that
// burns more CPU: the code) are no neighbour's doing. Under a constant CPU
// hog the runs' waits still wander (0.97 to 1.89 s/s over one window in
// five baseline runs); a rerun that waited 14 % longer than the most of
// them took B's KV-release wake from 6.7 ms to 13.4 ms.
const (
	DisturbOthersPct = 10.0
	DisturbWaitRatio = 1.1
	DisturbWaitMin   = 0.05
)

// hostLoad is one window's load in one run.
type hostLoad struct{ others, wait float64 }

// hostLoads is a run's load per window name.
func hostLoads(r Run) map[string]hostLoad {
	out := map[string]hostLoad{}
	for k, xs := range r.Bench.Values {
		n := r.Bench.Name(k.Name)
		w := n.Get(record.HostWindowKey)
		if n.Base != record.HostBench || w == "" || len(xs) == 0 {
			continue
		}
		l := out[w]
		switch k.Unit {
		case record.UnitOthersCPU:
			l.others = xs[0]
		case record.UnitWaitPerRun:
			l.wait = xs[0]
		default:
			continue
		}
		out[w] = l
	}
	return out
}

// timed says whether a unit's figure takes longer, or less per second,
// when the machine is busy: every unit but memory (GiB, host-GiB,
// %-released), which counts bytes, not time.
func timed(unit string) bool {
	return !strings.Contains(unit, "GiB") && unit != unitReleased
}

// loadIn is the load of the window a benchmark's samples were taken in:
// its model's window of its phase, or for a phase over every model the one
// window of that phase.
func loadIn(loads map[string]hostLoad, name record.BenchName) (hostLoad, string, bool) {
	model, phase, ok := phases.WindowOf(name)
	if !ok {
		return hostLoad{}, "", false
	}
	if model != "" {
		w := record.WindowName(phase, model)
		l, ok := loads[w]
		return l, w, ok
	}
	for w, l := range loads {
		if w == phase || strings.HasSuffix(w, "-"+phase) {
			return l, w, true
		}
	}
	return hostLoad{}, "", false
}

// HostWindow is the phase window whose host load tells whether the
// machine disturbed metric k of run r (docs/compare.md): ok is false for
// a timed metric of no window with a load in r; a metric the load does
// not bear on (memory, the host lines) has none and is ok.
func (r Run) HostWindow(k BenchKey) (window string, ok bool) {
	n := r.Bench.Name(k.Name)
	if !timed(k.Unit) || n.Base == record.HostBench {
		return "", true
	}
	_, w, ok := loadIn(hostLoads(r), n)
	return w, ok
}

// disturbed says why a metric of this run is NOT EVALUATED: during its
// phase window other processes took the CPU and the run waited for it
// longer than in every baseline run (DisturbOthersPct, DisturbWaitRatio);
// "" where it did not, or where this run or no baseline run measured the
// window's load.
func disturbed(base []map[string]hostLoad, cur map[string]hostLoad, name record.BenchName, unit string) string {
	if !timed(unit) {
		return ""
	}
	c, w, ok := loadIn(cur, name)
	if !ok {
		return ""
	}
	var b hostLoad
	n := 0
	for _, loads := range base {
		if l, ok := loads[w]; ok {
			b.others, b.wait = max(b.others, l.others), max(b.wait, l.wait)
			n++
		}
	}
	if n == 0 {
		return ""
	}
	if c.others >= DisturbOthersPct && c.wait >= DisturbWaitRatio*b.wait+DisturbWaitMin {
		return fmt.Sprintf("NOT EVALUATED: the machine was busy during %s: other processes took %.0f %% of its CPU (at most %.0f %% in the %d baseline runs) and this run's threads waited %.2f s for a CPU per second they ran, more than in any baseline run (at most %.2f): a change here is not attributed to the code; rerun on a quieter runner, or take the baseline under the same load",
			w, c.others, b.others, n, c.wait, b.wait)
	}
	return ""
}

// busyBaseline says why one baseline run gates metric k only on a wider
// floor (BusyOneRunFloor): the run's phase window was shared with others
// taking DisturbOthersPct or more of the CPU, where a run's hiccups last
// as long as its phases, so its within-run spread understates run-to-run
// drift (under a CPU hog one run's six traffic first tokens agreed to 7 %
// while same-code runs' medians stood 14 to 19 ms apart); "" where it was
// quiet, the metric is not timed, or the load was not measured.
func busyBaseline(loads map[string]hostLoad, name record.BenchName, unit string) string {
	if !timed(unit) {
		return ""
	}
	l, w, ok := loadIn(loads, name)
	if !ok || l.others < DisturbOthersPct {
		return ""
	}
	return fmt.Sprintf("the one baseline run shared %s with other processes (they took %.0f %% of the CPU): on a busy machine a hiccup lasts a phase, so one run's within-run spread understates run-to-run drift; a baseline of several runs gates it closer", w, l.others)
}

// BusyOneRunFloor is the least noise floor of a timed metric judged
// against one baseline run whose phase others crowded (busyBaseline):
// there a hiccup lasts as long as a phase, and one run's within-run
// spread understates its run-to-run drift (one run's six traffic first
// tokens agreed to 7 % while same-code runs' medians under the same CPU
// hog stood 14 to 19 ms apart: a run-to-run sd near 13 %). At 15 %, five
// samples a run and a few dozen metrics gated, the one-run rule flags
// beyond about +70 %: a wake twice as slow is flagged, the hog's drift is
// not (TestOneRunBaselineFlagsEveryWakeTwiceAsSlow).
const BusyOneRunFloor = 0.15

// busyFloor raises v's one-run noise floor (oneRunFloor's, a fraction
// in v.MinPct) to BusyOneRunFloor, why being busyBaseline's, and says so.
func (v *Verdict) busyFloor(why string) {
	if v.MinPct >= BusyOneRunFloor {
		v.How += fmt.Sprintf("; %s (its floor is gate.BusyOneRunFloor's %.3g %% or more already)", why, 100*BusyOneRunFloor)
		return
	}
	v.How = fmt.Sprintf("noise floor %.3g %% (gate.BusyOneRunFloor, raised from %.3g %%: %s; labelled: a floor standing in for run-to-run drift)",
		100*BusyOneRunFloor, 100*v.MinPct, why)
	v.MinPct = BusyOneRunFloor
}
