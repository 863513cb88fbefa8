package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// Widened are the reference report's keys whose string ours widens into an
// object: its "summary" is the reference's kind of sentence, and the rest
// is what the Kubernetes phase measured. The shape check allows exactly
// these (TestOutputs).
var Widened = []string{"restart_baseline", "dra"}

// WidenedDiff is whether a shape.Diff line is one of the Widened keys.
func WidenedDiff(d string) bool {
	for _, k := range Widened {
		if d == k+": reference has string, ours object" {
			return true
		}
	}
	return false
}

// RestartBaseline is report.json's restart_baseline: what the restart
// figures were measured from and, when the Kubernetes phase ran, per model
// a Pod's cold start beside the in-Pod restart and the wake.
type RestartBaseline struct {
	Summary string               `json:"summary"`
	Pod     map[string]*PodTable `json:"pod,omitempty"`
}

// PodTable is one model's table: a new Pod, the same Pod's container
// restarted, a sleeping Pod woken, each to its first token.
type PodTable struct {
	ColdStart    *PodStartFigures `json:"cold_start"`
	InPodRestart *PodRestart      `json:"in_pod_restart,omitempty"`
	// Wake is the handoffs to this model across Pods (level 1).
	Wake *PodWake `json:"wake,omitempty"`
}

// PodStartFigures summarise a model's Pod starts, each from Pod created.
type PodStartFigures struct {
	Kinds             []string      `json:"kinds"` // each start's kind, in order (cold, scale-up, per-pod-claim)
	ScheduledS        stats.Summary `json:"scheduled_s"`
	ClaimAllocatedS   stats.Summary `json:"claim_allocated_s"`
	ContainerStartedS stats.Summary `json:"container_started_s"`
	HealthS           stats.Summary `json:"health_s"`
	ModelsS           stats.Summary `json:"models_s"`
	ToFirstTokenS     stats.Summary `json:"to_first_token_s"`
	ContainersReadyS  stats.Summary `json:"containers_ready_s"`
	ReadyS            stats.Summary `json:"ready_s"`
	RoutableS         stats.Summary `json:"routable_s"`
}

// PodRestart is the in-Pod restart: container killed → /health, → first token.
type PodRestart struct {
	HealthS       stats.Summary `json:"health_s"`
	ToFirstTokenS stats.Summary `json:"to_first_token_s"`
}

// PodWake is a handoff to the model: begun → first token, → routable.
type PodWake struct {
	WakeS         stats.Summary `json:"wake_s"`
	ToFirstTokenS stats.Summary `json:"to_first_token_s"`
	RoutableS     stats.Summary `json:"routable_s"`
}

// DRA is report.json's dra: whether the Kubernetes phase ran, where, and
// what the claims did.
type DRA struct {
	Summary   string `json:"summary"`
	Executed  bool   `json:"executed"`
	Cluster   string `json:"cluster,omitempty"`
	Simulated string `json:"simulated,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// SharedClaim is the one ResourceClaim both models' Pods held.
	SharedClaim *SharedClaim `json:"shared_claim,omitempty"`
	// Switch is the handoffs across Pods by direction ("A→B").
	Switch map[string]*PodSwitch `json:"switch,omitempty"`
	// Capacity is per-Pod claims on the device's memory capacity.
	Capacity    *Capacity     `json:"capacity,omitempty"`
	ScaleToZero []ScaleToZero `json:"scale_to_zero,omitempty"`
	PodStarts   []PodStart    `json:"pod_starts,omitempty"`
	Notes       []string      `json:"notes,omitempty"`
}

// SharedClaim is the shared claim in report.json.
type SharedClaim struct {
	Claim        string   `json:"claim"`
	Device       string   `json:"device"`
	ReservedFor  []string `json:"reserved_for"`
	UsedGiB      float64  `json:"used_gib"`
	DeallocatedS float64  `json:"deallocated_s"`
}

// PodSwitch is one direction's handoffs across Pods: the switch's own
// figures (as a direction's steady state), then the Pod's.
type PodSwitch struct {
	Steady
	ReadyS      stats.Summary `json:"ready_s"`
	RoutableS   stats.Summary `json:"routable_s"`
	UnroutableS stats.Summary `json:"unroutable_s"`
}

// Capacity is the claim accounting in report.json.
type Capacity struct {
	DeviceGiB    float64            `json:"device_gib"`
	Enabled      bool               `json:"multiple_allocations"`
	RequestGiB   map[string]float64 `json:"request_gib"`
	Scheduled    []string           `json:"scheduled"`
	AsleepPods   []string           `json:"asleep"`
	Refused      string             `json:"refused"`
	Message      string             `json:"message"`
	RequestedGiB float64            `json:"refused_request_gib"`
	UsedGiB      float64            `json:"used_gib"`
	FreeGiB      float64            `json:"free_gib"`
	WouldFit     bool               `json:"would_fit"`
}

// ScaleToZero is one scale to zero and back in report.json.
type ScaleToZero struct {
	Model     string  `json:"model"`
	Pod       string  `json:"pod"`
	GoneS     float64 `json:"gone_s"`
	ReleasedS float64 `json:"claim_released_s"`
	FreedGiB  float64 `json:"freed_gib"`
	BackS     float64 `json:"back_to_first_token_s"`
	WakeS     float64 `json:"wake_to_first_token_s"`
}

// PodStart is one Pod start in report.json (seconds from Pod created; −1 absent).
type PodStart struct {
	Model             string  `json:"model"`
	Pod               string  `json:"pod"`
	Kind              string  `json:"kind"`
	ScheduledS        float64 `json:"scheduled_s"`
	ClaimAllocatedS   float64 `json:"claim_allocated_s"`
	ContainerStartedS float64 `json:"container_started_s"`
	HealthS           float64 `json:"health_s"`
	ModelsS           float64 `json:"models_s"`
	ToFirstTokenS     float64 `json:"to_first_token_s"`
	ContainersReadyS  float64 `json:"containers_ready_s"`
	ReadyS            float64 `json:"ready_s"`
	RoutableS         float64 `json:"routable_s"`
	OtherAsleep       bool    `json:"other_asleep"`
}

const draNotExecuted = "not executed; shared GPU within one host (the Kubernetes phase is off: make k8s)"

// kubernetes fills restart_baseline's Pod tables and dra from the phase.
func kubernetes(rep *Report, labels []string, k *record.Kubernetes) {
	if k == nil {
		rep.DRA = DRA{Summary: draNotExecuted}
		return
	}
	d := DRA{Executed: true, Cluster: k.Cluster, Simulated: k.Simulated, Namespace: k.Namespace, Notes: k.Notes, Switch: map[string]*PodSwitch{}}
	if s := k.Shared; s != nil {
		d.SharedClaim = &SharedClaim{Claim: s.Claim, Device: s.Device, ReservedFor: s.ReservedFor, UsedGiB: s.UsedGiB, DeallocatedS: s.DeallocatedS}
	}
	if c := k.Capacity; c != nil {
		d.Capacity = &Capacity{DeviceGiB: c.DeviceGiB, Enabled: c.Enabled, RequestGiB: maps.Clone(c.RequestGiB), Scheduled: c.Scheduled,
			AsleepPods: c.AsleepPods, Refused: c.Refused, Message: c.Message, RequestedGiB: c.RequestedGiB, UsedGiB: c.UsedGiB, FreeGiB: c.FreeGiB, WouldFit: c.WouldFit}
	}
	for _, s := range k.Scale {
		d.ScaleToZero = append(d.ScaleToZero, ScaleToZero{Model: s.Model, Pod: s.Pod, GoneS: s.GoneS, ReleasedS: s.ReleasedS, FreedGiB: s.FreedGiB, BackS: s.BackS, WakeS: s.WakeS})
	}
	for _, s := range k.Starts {
		d.PodStarts = append(d.PodStarts, PodStart{Model: s.Model, Pod: s.Pod, Kind: s.Kind, ScheduledS: s.ScheduledS, ClaimAllocatedS: s.ClaimAllocatedS,
			ContainerStartedS: s.ContainerStartedS, HealthS: s.HealthS, ModelsS: s.ModelsS, ToFirstTokenS: s.FirstTokenS,
			ContainersReadyS: s.ContainersReadyS, ReadyS: s.ReadyS, RoutableS: s.RoutableS, OtherAsleep: s.OtherAsleep})
	}
	type col struct{ sleep, wake, ft, ready, route, unroute []float64 }
	cols := map[string]*col{}
	for _, h := range k.Handoffs {
		dir := record.DirectionKey(h.From, h.To)
		if cols[dir] == nil {
			cols[dir] = &col{}
		}
		c := cols[dir]
		c.sleep, c.wake, c.ft = append(c.sleep, h.SleepS), append(c.wake, h.WakeS), append(c.ft, h.FirstTokenS)
		c.ready, c.route, c.unroute = appendSeen(c.ready, h.ReadyS), appendSeen(c.route, h.RoutableS), appendSeen(c.unroute, h.UnroutableS)
	}
	for dir, c := range cols {
		d.Switch[dir] = &PodSwitch{Steady: Steady{N: len(c.ft), SleepS: record.Summary(c.sleep), WakeS: record.Summary(c.wake), ToFirstTokenS: record.Summary(c.ft)},
			ReadyS: record.Summary(c.ready), RoutableS: record.Summary(c.route), UnroutableS: record.Summary(c.unroute)}
	}
	var pods []string
	for _, s := range k.Starts {
		if !slices.Contains(pods, s.Pod) {
			pods = append(pods, s.Pod)
		}
	}
	d.Summary = fmt.Sprintf("executed on %s: %d Pods; both models' Pods on one ResourceClaim, %d handoffs across them, per-Pod claims on the device's memory capacity, scale to zero and back",
		k.Cluster, len(pods), len(k.Handoffs))
	if k.Simulated != "" {
		d.Summary += " (" + k.Simulated + ")"
	}
	rep.DRA = d

	rep.RestartBaseline.Pod = map[string]*PodTable{}
	for _, l := range labels {
		t := &PodTable{ColdStart: &PodStartFigures{}}
		var sch, alloc, started, health, models, ft, cready, ready, route []float64
		for _, s := range k.Starts {
			if s.Model != l {
				continue
			}
			t.ColdStart.Kinds = append(t.ColdStart.Kinds, s.Kind)
			sch, alloc, started = appendSeen(sch, s.ScheduledS), appendSeen(alloc, s.ClaimAllocatedS), appendSeen(started, s.ContainerStartedS)
			health, models, ft = appendSeen(health, s.HealthS), appendSeen(models, s.ModelsS), appendSeen(ft, s.FirstTokenS)
			cready, ready, route = appendSeen(cready, s.ContainersReadyS), appendSeen(ready, s.ReadyS), appendSeen(route, s.RoutableS)
		}
		cs := t.ColdStart
		cs.ScheduledS, cs.ClaimAllocatedS, cs.ContainerStartedS = record.Summary(sch), record.Summary(alloc), record.Summary(started)
		cs.HealthS, cs.ModelsS, cs.ToFirstTokenS = record.Summary(health), record.Summary(models), record.Summary(ft)
		cs.ContainersReadyS, cs.ReadyS, cs.RoutableS = record.Summary(cready), record.Summary(ready), record.Summary(route)
		var rh, rft []float64
		for _, r := range k.Restarts {
			if r.Model == l {
				rh, rft = append(rh, r.HealthS), append(rft, r.FirstTokenS)
			}
		}
		if len(rft) > 0 {
			t.InPodRestart = &PodRestart{HealthS: record.Summary(rh), ToFirstTokenS: record.Summary(rft)}
		}
		var ww, wft, wr []float64
		for _, h := range k.Handoffs {
			if h.To == l {
				ww, wft, wr = append(ww, h.WakeS), append(wft, h.FirstTokenS), appendSeen(wr, h.RoutableS)
			}
		}
		if len(wft) > 0 {
			t.Wake = &PodWake{WakeS: record.Summary(ww), ToFirstTokenS: record.Summary(wft), RoutableS: record.Summary(wr)}
		}
		rep.RestartBaseline.Pod[l] = t
	}
	rep.RestartBaseline.Summary += "; Pod cold starts, in-Pod restarts and wakes across Pods measured too (restart_baseline.pod, on " + k.Cluster + ")"
}

// writeKubernetes adds the Kubernetes phase to summary.md: per model a new
// Pod, the in-Pod restart and the wake, each to its first token; the
// claims' accounting; scale to zero.
func writeKubernetes(dc *Doc, rep Report, labels []string) {
	d := rep.DRA
	if !d.Executed {
		return
	}
	dc.Heading(2, "kubernetes", fmt.Sprintf("Kubernetes (%s)", d.Cluster))
	if d.Simulated != "" {
		dc.Para(Em(d.Simulated + "."))
	}
	var rows [][]string
	for _, l := range labels {
		t := rep.RestartBaseline.Pod[l]
		if t == nil {
			continue
		}
		cs := t.ColdStart
		restart, wake := "–", "–"
		if t.InPodRestart != nil {
			restart = num(t.InPodRestart.ToFirstTokenS)
		}
		if t.Wake != nil {
			wake = fmt.Sprintf("%s (%s)", num(t.Wake.ToFirstTokenS), num(t.Wake.RoutableS))
		}
		rows = append(rows, []string{l, fmt.Sprintf("%s (%s / %s / %s; n = %d)", num(cs.ToFirstTokenS), num(cs.ScheduledS), num(cs.ContainerStartedS), num(cs.RoutableS), cs.ToFirstTokenS.N), restart, wake})
	}
	dc.Table([]string{"model", "new Pod → first token (→ scheduled / started / routable)", "in-Pod restart → first token", "wake across Pods → first token (→ routable)"}, rows)
	if s := d.SharedClaim; s != nil {
		dc.Para(fmt.Sprintf("Shared claim %s on %s, reserved for %s; deallocated %.3f s after its last Pod was deleted.", s.Claim, s.Device, strings.Join(s.ReservedFor, ", "), s.DeallocatedS))
	}
	if c := d.Capacity; c != nil {
		if c.Refused != "" {
			fit := "would not fit either"
			if c.WouldFit {
				fit = "would fit"
			}
			dc.Para(fmt.Sprintf("Per-Pod claims on %.1f GiB: the scheduler placed %s (%s asleep) and refused %s, whose %.2f GiB %s the %.2f GiB free: it counts a sleeping Pod's request. (%s)",
				c.DeviceGiB, strings.Join(c.Scheduled, ", "), strings.Join(c.AsleepPods, ", "), c.Refused, c.RequestedGiB, fit, c.FreeGiB, c.Message))
		} else {
			dc.Para(fmt.Sprintf("Per-Pod claims on %.1f GiB: the scheduler placed %s; none was refused.", c.DeviceGiB, strings.Join(c.Scheduled, ", ")))
		}
	}
	for _, s := range d.ScaleToZero {
		dc.Para(fmt.Sprintf("Scale to zero of %s: Pod gone %.3f s after delete, claim released %.3f s, %.2f GiB freed; a new Pod to first token %.3f s against a wake's %.3f s.",
			s.Model, s.GoneS, s.ReleasedS, s.FreedGiB, s.BackS, s.WakeS))
	}
	for _, n := range d.Notes {
		dc.Para("Note: " + n)
	}
}

// kubernetesBench is the phase's benchfmt results: one line per Pod start,
// in-Pod restart and handoff across Pods (an absent milestone, −1, is left out).
func kubernetesBench(k *record.Kubernetes, line func(name record.BenchName, vals ...benchfmt.Value)) {
	if k == nil {
		return
	}
	vals := func(kv ...any) []benchfmt.Value {
		var out []benchfmt.Value
		for i := 0; i < len(kv); i += 2 {
			if x := kv[i].(float64); x >= 0 {
				out = append(out, benchfmt.Value{Value: x, Unit: kv[i+1].(string)})
			}
		}
		return out
	}
	for _, s := range k.Starts {
		line(record.NewBenchName("PodStart", "model", s.Model, "kind", s.Kind), vals(s.FirstTokenS, UnitFirstToken, s.ScheduledS, UnitScheduled, s.RoutableS, UnitRoutable)...)
	}
	for _, r := range k.Restarts {
		line(record.NewBenchName("PodRestart", "model", r.Model), vals(r.HealthS, UnitReady, r.FirstTokenS, UnitFirstToken)...)
	}
	for _, h := range k.Handoffs {
		line(record.NewBenchName("PodSwitch", "dir", record.DirectionKey(h.From, h.To)), vals(h.SleepS, UnitSleep, h.WakeS, UnitWake, h.FirstTokenS, UnitFirstToken, h.RoutableS, UnitRoutable)...)
	}
}

// appendSeen appends x unless it is negative: a milestone the phase never
// saw (record.Kubernetes writes −1 for those).
func appendSeen(xs []float64, x float64) []float64 {
	if x < 0 {
		return xs
	}
	return append(xs, x)
}
