// Package perf judges wakebench's own overhead. Its benchmarks (this
// package's _test files, run by `make perf`) measure what the harness adds
// to the figures it reports: the receive delay on every token, how many
// tokens and requests one core can drive, what memory sampling costs, and
// how late a ready or awake server is noticed. Goals lists what each must
// reach and Table sets the measurements, read back from the benchmark
// output, against them.
package perf

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/wakebench/wakebench/internal/gate"

	"github.com/wakebench/wakebench/internal/stats"
)

// Goal is one figure the harness must reach.
type Goal struct {
	Figure string // what is measured, in words
	Bench  string // benchmark name without "Benchmark" and the -GOMAXPROCS suffix, e.g. "StreamOverhead/c=1"
	Unit   string // the unit the benchmark reports
	Op     string // "<=" or ">=", or "" for a figure reported without a goal
	Limit  float64
	// Peers, when set, make the limit Limit × the best (highest) value of
	// these benchmarks in the same unit: a figure measured against other tools.
	Peers []string
	// GPUOnly figures are measured only by the gpu-tag build on a GPU
	// runner; elsewhere they are left out of the table.
	GPUOnly bool
}

// Goals are issue 6's goals (docs/overhead.md).
var Goals = []Goal{
	{Figure: "token receive delay p99, c=1", Bench: "StreamOverhead/c=1", Unit: "p99-µs", Op: "<=", Limit: 100},
	{Figure: "token receive delay p50, c=1", Bench: "StreamOverhead/c=1", Unit: "p50-µs"},
	{Figure: "token receive delay p99, c=256", Bench: "StreamOverhead/c=256", Unit: "p99-µs", Op: "<=", Limit: 1000},
	{Figure: "token receive delay p50, c=256", Bench: "StreamOverhead/c=256", Unit: "p50-µs"},
	{Figure: "same, stamped at read time instead, c=1 (raw socket)", Bench: "LoopbackFloor", Unit: "p99-µs"},
	{Figure: "client CPU per chunk (SSE + JSON, in memory)", Bench: "StreamRead", Unit: "ns/chunk"},
	{Figure: "streamed tokens per second, GOMAXPROCS=1", Bench: "StreamCapacity", Unit: "tok/s", Op: ">=", Limit: 50000},
	{Figure: "streamed tokens per client CPU-second", Bench: "StreamCapacity", Unit: "tok/cpu-s"},
	{Figure: "allocations per streamed token", Bench: "StreamCapacity", Unit: "allocs/tok"},
	{Figure: "bytes allocated per streamed token", Bench: "StreamCapacity", Unit: "B/tok"},
	{Figure: "non-streamed requests/s vs wrk, vegeta", Bench: "RequestRate/gen=wakebench", Unit: "req/s", Op: ">=", Limit: 0.5,
		Peers: []string{"RequestRate/gen=wrk", "RequestRate/gen=vegeta"}},
	{Figure: "sampler CPU at the default 20 Hz (% of one core)", Bench: "Sampler/src=sim/hz=20", Unit: "core-%"},
	{Figure: "sampler CPU at 50 Hz (% of one core)", Bench: "Sampler/src=sim/hz=50", Unit: "core-%", Op: "<=", Limit: 2},
	{Figure: "sampler CPU per sample at 50 Hz", Bench: "Sampler/src=sim/hz=50", Unit: "cpu-µs/sample"},
	{Figure: "sampler interval jitter p99 at 50 Hz", Bench: "Sampler/src=sim/hz=50", Unit: "jitter-p99-µs"},
	{Figure: "sampler CPU at 200 Hz (% of one core)", Bench: "Sampler/src=sim/hz=200", Unit: "core-%"},
	{Figure: "sampler interval jitter p99 at 200 Hz", Bench: "Sampler/src=sim/hz=200", Unit: "jitter-p99-µs"},
	{Figure: "same at 50 Hz reading nothing (this machine's wake-up cost)", Bench: "Sampler/src=noop/hz=50", Unit: "core-%"},
	{Figure: "NVML sampler CPU at 50 Hz (gpu tag, GPU runners)", Bench: "SamplerNVML/hz=50", Unit: "core-%", Op: "<=", Limit: 2, GPUOnly: true},
	{Figure: "NVML sampler CPU at 200 Hz (gpu tag, GPU runners)", Bench: "SamplerNVML/hz=200", Unit: "core-%", GPUOnly: true},
	{Figure: "level-1 wake, fraction of its link floor (demo profile, simulated)", Bench: "PhysicalLimits", Unit: "l1-wake/link-floor"},
	{Figure: "TPOT at c=1, fraction of the memory limit (demo profile, simulated)", Bench: "PhysicalLimits", Unit: "tpot-c1/hbm-limit"},
	{Figure: "open-loop schedule error p99, constant 2000 req/s, one core", Bench: "OpenLoopSchedule/sender=none/arrivals=constant/rate=2000", Unit: "schedule-p99-µs", Op: "<=", Limit: 100},
	{Figure: "open-loop schedule error p99, Poisson 2000 req/s, one core", Bench: "OpenLoopSchedule/sender=none/arrivals=poisson/rate=2000", Unit: "schedule-p99-µs", Op: "<=", Limit: 100},
	{Figure: "same, the HTTP client sharing the core (vllmsim), Poisson", Bench: "OpenLoopSchedule/sender=http/arrivals=poisson/rate=2000", Unit: "schedule-p99-µs"},
	{Figure: "same, to the request written", Bench: "OpenLoopSchedule/sender=http/arrivals=poisson/rate=2000", Unit: "send-p99-µs"},
	{Figure: "readiness noticed late, p99", Bench: "ReadyResolution", Unit: "late-p99-ms", Op: "<=", Limit: 10},
	{Figure: "wake noticed late (zero-cost wake), p99", Bench: "WakeResolution", Unit: "late-p99-ms", Op: "<=", Limit: 10},
}

// Row is one line of the table.
type Row struct {
	Goal     Goal
	Measured float64 // NaN when the benchmark did not report it
	Limit    float64 // the goal's limit after peers are applied (NaN when a peer is missing)
	Note     string  // e.g. which peer was best
	Ratio    float64 // ≥ 1 means the goal is met, by that margin; NaN without a goal
	Met      bool
}

// Unmeasured is the number of rows whose figure no benchmark reported: a
// benchmark that broke or was not run (a missed goal has its figure).
func Unmeasured(rows []Row) int {
	n := 0
	for _, r := range rows {
		if math.IsNaN(r.Measured) {
			n++
		}
	}
	return n
}

// Read collects every value per "bench unit" from benchmark output
// (benchfmt: `go test -bench` output, or lines written by scripts/peers.sh)
// with gate.ReadBench, the one benchfmt reader, and the cpu the benchmarks
// ran on (go test's "cpu:" line). A malformed benchmark line (e.g. a
// peer's rate that a script failed to extract) is an error naming the file
// and line; the rest is still read.
func Read(r io.Reader, name string) (vals map[string][]float64, cpu string, err error) {
	b, err := gate.ReadBench(r, name)
	vals = make(map[string][]float64, len(b.Values))
	for k, v := range b.Values {
		vals[k.Name+" "+k.Unit] = v
	}
	return vals, b.CPU, err
}

func median(xs []float64) float64 {
	s, err := stats.Summarize(xs)
	if err != nil {
		return math.NaN()
	}
	return s.Median
}

// Table sets the measurements (medians when a benchmark ran several times)
// against goals. A figure that was not measured fails its goal, but for
// GPU-only figures, which are left out where they were not measured.
func Table(goals []Goal, vals map[string][]float64) []Row {
	rows := make([]Row, 0, len(goals))
	for _, g := range goals {
		if _, ok := vals[g.Bench+" "+g.Unit]; g.GPUOnly && !ok {
			continue
		}
		r := Row{Goal: g, Measured: median(vals[g.Bench+" "+g.Unit]), Limit: g.Limit, Ratio: math.NaN()}
		if len(g.Peers) > 0 {
			best, bestName := math.NaN(), ""
			var missing []string
			for _, p := range g.Peers {
				v := median(vals[p+" "+g.Unit])
				switch {
				case math.IsNaN(v):
					missing = append(missing, p)
				case math.IsNaN(best) || v > best:
					best, bestName = v, p
				}
			}
			r.Limit = g.Limit * best
			if len(missing) > 0 {
				r.Limit = math.NaN()
				r.Note = "peers not measured: " + strings.Join(missing, ", ")
			} else {
				r.Note = fmt.Sprintf("best peer %s %s %s", bestName, num(best), g.Unit)
			}
		}
		switch g.Op {
		case ">=":
			r.Ratio = r.Measured / r.Limit
		case "<=":
			r.Ratio = r.Limit / r.Measured
		}
		r.Met = g.Op == "" || r.Ratio >= 1 // NaN compares false: unmeasured fails
		if math.IsNaN(r.Measured) {
			r.Note = strings.TrimPrefix(r.Note+"; not measured", "; ")
		}
		rows = append(rows, r)
	}
	return rows
}

// num formats a figure: whole numbers from 1000 up, three significant digits below.
func num(v float64) string {
	if math.Abs(v) >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// Write prints the table: figure, goal, measured, ratio (≥ 1 meets the
// goal), verdict. It returns how many goals were missed.
func Write(w io.Writer, rows []Row, machine string) (missed int, err error) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tgoal\tmeasured\tratio\tverdict\tnote\n")
	for _, r := range rows {
		goal, ratio, verdict := "—", "—", "info"
		if r.Goal.Op != "" {
			op := map[string]string{"<=": "≤", ">=": "≥"}[r.Goal.Op]
			goal = fmt.Sprintf("%s %s %s", op, num(r.Limit), r.Goal.Unit)
			if len(r.Goal.Peers) > 0 {
				goal = fmt.Sprintf("%s %g × best peer", op, r.Goal.Limit)
				if !math.IsNaN(r.Limit) {
					goal += fmt.Sprintf(" = %s %s", num(r.Limit), r.Goal.Unit)
				}
			}
			if !math.IsNaN(r.Ratio) {
				ratio = fmt.Sprintf("%.2f", r.Ratio)
			}
			verdict = "PASS"
			if !r.Met {
				verdict = "MISS"
				missed++
			}
		}
		measured := "—"
		if !math.IsNaN(r.Measured) {
			measured = fmt.Sprintf("%s %s", num(r.Measured), r.Goal.Unit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Goal.Figure, goal, measured, ratio, verdict, r.Note)
	}
	if err := tw.Flush(); err != nil {
		return missed, err
	}
	_, err = fmt.Fprintf(w, "machine: %s\n", machine)
	return missed, err
}
