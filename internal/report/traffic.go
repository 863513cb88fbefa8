package report

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"time"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// Traffic is the traffic phase in report.json.
type Traffic struct {
	Arrivals       string                   `json:"arrivals"`
	DurationS      float64                  `json:"duration_s"`
	Router         string                   `json:"router"` // its policy
	SleepLevel     int                      `json:"sleep_level"`
	Models         map[string]*TrafficModel `json:"models"` // the shared run
	Switches       int                      `json:"switches"`
	SwitchesPerMin float64                  `json:"switches_per_min"`
	SwitchS        stats.Summary            `json:"switch_s"` // one handover: drain done → woken
	FailedSwitches int                      `json:"failed_switches"`
	MaxQueueDepth  int                      `json:"max_queue_depth"`
	// MaxQueue is the router's queue bound (traffic.max_queue); a request
	// that found it full was shed: refused, never sent, not a failure.
	MaxQueue     int           `json:"max_queue"`
	ShedRequests int           `json:"shed_requests"`
	GoodputRPS   float64       `json:"goodput_rps"`
	Ideal        *TrafficIdeal `json:"ideal"`
	GoodputRatio *float64      `json:"goodput_ratio"` // shared / ideal; null without an ideal run
	// Energy is the GPU energy of each run over its duration_s.
	Energy TrafficEnergy `json:"energy"`
	// PerSecond is the shared run second by second from its start: the
	// most requests waiting for a wake, and the switches begun.
	PerSecond []TrafficSecond             `json:"per_second"`
	InFlight  map[string]*record.InFlight `json:"sleep_in_flight"`
}

// TrafficModel is one model's requests of a run.
type TrafficModel struct {
	Requests          int                `json:"requests"`
	Success           int                `json:"success"`
	Failure           int                `json:"failure"`
	WarmUp            int                `json:"warmup"`      // sent, not counted
	Shed              int                `json:"shed"`        // refused with the router's queue full, not sent (not in failure)
	AwakeHits         int                `json:"awake_hits"`  // found their model awake, sent at once
	AsleepHits        int                `json:"asleep_hits"` // waited for a wake
	FirstTokenAwakeS  stats.Distribution `json:"first_token_awake_s"`
	FirstTokenAsleepS stats.Distribution `json:"first_token_asleep_s"`
	QueueWaitS        stats.Distribution `json:"queue_wait_s"` // issued → left the router
	TTFTS             stats.Distribution `json:"ttft_s"`
	TPOTS             stats.Distribution `json:"tpot_s"`
	ITLS              stats.Distribution `json:"itl_s"`
	E2ES              stats.Distribution `json:"e2e_s"`
	Good              int                `json:"good"`
}

// TrafficSecond is one second of the shared run.
type TrafficSecond struct {
	T        int `json:"t_s"`
	MaxQueue int `json:"max_queue"`
	Switches int `json:"switches"`
}

// perSecond buckets the queue depth and switches by second from start.
func perSecond(t *record.Traffic) []TrafficSecond {
	if t.Start.IsZero() || t.DurationS <= 0 {
		return nil
	}
	out := make([]TrafficSecond, int(t.DurationS)+1)
	for i := range out {
		out[i].T = i
	}
	at := func(x time.Time) int { return min(max(0, int(x.Sub(t.Start).Seconds())), len(out)-1) }
	queued := 0
	last := 0
	for _, d := range t.Depth {
		i := at(d.At)
		for k := last + 1; k < i; k++ { // seconds without a change keep the depth
			out[k].MaxQueue = max(out[k].MaxQueue, queued)
		}
		out[i].MaxQueue = max(out[i].MaxQueue, queued, d.Queued)
		queued, last = d.Queued, i
	}
	for _, sw := range t.Switches {
		out[at(sw.Start)].Switches++
	}
	return out
}

// TrafficIdeal is the run with every model awake.
type TrafficIdeal struct {
	Executed   bool                     `json:"executed"`
	Note       string                   `json:"note,omitempty"`
	GoodputRPS float64                  `json:"goodput_rps"`
	Models     map[string]*TrafficModel `json:"models,omitempty"`
}

func trafficModels(t *record.Traffic, run string) map[string]*TrafficModel {
	type series struct{ awake, asleep, wait, ttft, tpot, itl, e2e []float64 }
	out, by := map[string]*TrafficModel{}, map[string]*series{}
	for _, r := range t.Requests {
		if r.Run != run {
			continue
		}
		m := out[r.Model]
		if m == nil {
			m, by[r.Model] = &TrafficModel{}, &series{}
			out[r.Model] = m
		}
		if r.WarmUp {
			m.WarmUp++
			continue
		}
		s := by[r.Model]
		m.Requests++
		if r.Shed {
			m.Shed++
			continue
		}
		if r.Waited {
			m.AsleepHits++
		} else {
			m.AwakeHits++
		}
		if r.Err != "" {
			m.Failure++
			continue
		}
		m.Success++
		if r.Good {
			m.Good++
		}
		if r.Waited {
			s.asleep = append(s.asleep, r.TTFTS)
		} else {
			s.awake = append(s.awake, r.TTFTS)
		}
		if !r.Dispatched.IsZero() {
			s.wait = append(s.wait, r.Dispatched.Sub(r.Issued).Seconds())
		}
		s.ttft, s.e2e = append(s.ttft, r.TTFTS), append(s.e2e, r.E2ES)
		if r.HasTPOT {
			s.tpot = append(s.tpot, r.TPOTS)
		}
		s.itl = append(s.itl, r.ITLS...)
	}
	for l, m := range out {
		s := by[l]
		d := stats.Distribute
		m.FirstTokenAwakeS, m.FirstTokenAsleepS, m.QueueWaitS = d(s.awake), d(s.asleep), d(s.wait)
		m.TTFTS, m.TPOTS, m.ITLS, m.E2ES = d(s.ttft), d(s.tpot), d(s.itl), d(s.e2e)
	}
	return out
}

// TrafficEnergy is the GPU energy (every GPU, from the energy counter) of
// the shared run and of the ideal run, each over its own span (first
// planned arrival → last request done), and their ratio; null where
// unknown, Note says why.
type TrafficEnergy struct {
	SharedJ *float64 `json:"shared_j"`
	IdealJ  *float64 `json:"ideal_j"`
	Ratio   *float64 `json:"shared_over_ideal"`
	Note    string   `json:"note,omitempty"`
}

// known is x, nil when NaN.
func known(x float64) *float64 {
	if math.IsNaN(x) {
		return nil
	}
	return &x
}

// traffic summarises the traffic phase; nil when it did not run.
func traffic(t *record.Traffic) *Traffic {
	if t == nil {
		return nil
	}
	out := &Traffic{Arrivals: t.Arrivals, DurationS: t.DurationS, SleepLevel: t.Level, Router: t.Router, Models: trafficModels(t, record.RunShared),
		Switches: len(t.Switches), GoodputRPS: t.GoodputRPS(record.RunShared), InFlight: map[string]*record.InFlight{}}
	var sw []float64
	for _, s := range t.Switches {
		if s.Err != "" {
			out.FailedSwitches++
			continue
		}
		sw = append(sw, s.End.Sub(s.Start).Seconds())
	}
	out.SwitchS = record.Summary(sw)
	if t.DurationS > 0 {
		out.SwitchesPerMin = float64(len(t.Switches)) / t.DurationS * 60
	}
	for _, d := range t.Depth {
		out.MaxQueueDepth = max(out.MaxQueueDepth, d.Queued)
	}
	out.MaxQueue = t.MaxQueue
	for _, m := range out.Models {
		out.ShedRequests += m.Shed
	}
	out.PerSecond = perSecond(t)
	out.Ideal = &TrafficIdeal{Executed: t.IdealRan, Note: t.IdealNote}
	if t.IdealRan {
		out.Ideal.GoodputRPS = t.GoodputRPS(record.RunIdeal)
		out.Ideal.Models = trafficModels(t, record.RunIdeal)
		if out.Ideal.GoodputRPS > 0 {
			r := out.GoodputRPS / out.Ideal.GoodputRPS
			out.GoodputRatio = &r
		}
	}
	out.Energy = TrafficEnergy{SharedJ: known(t.SharedJ), IdealJ: known(t.IdealJ), Note: t.EnergyNote}
	if out.Energy.SharedJ != nil && out.Energy.IdealJ != nil && t.IdealJ > 0 {
		out.Energy.Ratio = known(t.SharedJ / t.IdealJ)
	}
	for i := range t.InFlight {
		f := t.InFlight[i]
		out.InFlight[f.Mode] = &f
	}
	return out
}

// WriteRequestsJSONL writes requests.jsonl: every request of the traffic
// phase, a JSON object a line: run, index, model, warmup, found (awake or
// asleep), the times planned_s, issued_s, dispatched_s, first_token_s,
// done_s (Unix seconds, 0 when not reached), queue_wait_s, ttft_s,
// tpot_s (absent under two tokens), e2e_s, itl_s, the token counts, good,
// error, shed (refused with the router's queue full, never sent) and
// simulated.
func WriteRequestsJSONL(w io.Writer, raw record.Raw) error {
	bw := bufio.NewWriter(w)
	if raw.Traffic == nil {
		return bw.Flush()
	}
	enc := json.NewEncoder(bw)
	unix := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return record.Unix(t)
	}
	for _, r := range raw.Traffic.Requests {
		found := "awake"
		if r.Waited {
			found = "asleep"
		}
		itl := r.ITLS
		if itl == nil {
			itl = []float64{}
		}
		line := map[string]any{"run": r.Run, "index": r.Index, "model": r.Model, "warmup": r.WarmUp, "found": found,
			"planned_s": unix(r.Planned), "issued_s": unix(r.Issued), "dispatched_s": unix(r.Dispatched),
			"first_token_s": unix(r.FirstToken), "done_s": unix(r.Done), "queue_wait_s": 0.0,
			"prompt_tokens": r.PromptTokens, "output_tokens": r.OutputTokens, "ttft_s": r.TTFTS, "e2e_s": r.E2ES,
			"itl_s": itl, "good": r.Good, "error": r.Err, "shed": r.Shed, "simulated": raw.Simulated != nil}
		if r.HasTPOT {
			line["tpot_s"] = r.TPOTS
		}
		if !r.Dispatched.IsZero() {
			line["queue_wait_s"] = r.Dispatched.Sub(r.Issued).Seconds()
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}
