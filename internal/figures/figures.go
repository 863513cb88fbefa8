// Package figures reads the figure table of docs/metrics.md and matches
// report.json against it: for every figure, from which event to which it
// runs and which server operations lie inside it. The whole-run figure
// test (figures_test.go at the top level) slows each operation in turn
// and checks that exactly the figures whose row names it move; a figure
// of report.json without a row fails that test, so a figure added later
// is covered the day it lands.
package figures

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/wakebench/wakebench/internal/stats"
)

// Ops are the operations a row's "inside" column may name, each one a
// thing the whole-run test can slow: the harness's own reads (the
// server's read-only endpoints, GPU memory reads, process scans, log
// parses) and the server's own operations.
var Ops = []string{"reads", "start", "prefill", "decode", "sleep", "wake", "reload", "pause", "release"}

// Header is the figure table's header row, by which Parse finds it.
const Header = "| figure | from event | to event | inside |"

// Row is one row of the figure table.
type Row struct {
	Patterns []string // report.json paths, "*" for any one key or index
	// Inside are the operations that lie wholly inside every sample of
	// the figure; Partly those that may lie partly inside some (the
	// remainder of a switch a request waited on): the test asserts
	// neither that they move the figure nor that they do not.
	Inside, Partly []string
	// Schedule ("~any"): where the figure's samples fall depends on the
	// run's schedule (open-loop traffic: where an arrival lands against a
	// switch), so any slowed operation may move it; the test asserts only
	// that the operations in Inside do.
	Schedule bool
	Interval bool // the figure is an interval or the energy over one ("—" in the column: it is not)
	Line     int  // the row's line in the document (1-based)
}

// Table is the parsed figure table.
type Table []Row

var code = regexp.MustCompile("`([^`]+)`")

// Parse reads the figure table from a Markdown document: the table under
// Header. Every row's first cell holds its report paths in backticks; its
// fourth the operations inside, comma-separated ("~op": partly), or "—"
// where the figure is not an interval.
func Parse(md []byte) (Table, error) {
	var t Table
	in := false
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == Header:
			if in || t != nil {
				return nil, fmt.Errorf("line %d: a second figure table", line)
			}
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(l, "|"):
			in = false
			continue
		case strings.HasPrefix(l, "|---"):
			continue
		}
		cells := splitRow(l)
		if len(cells) != 4 {
			return nil, fmt.Errorf("line %d: %d cells, want 4 (figure, from event, to event, inside)", line, len(cells))
		}
		r := Row{Line: line}
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			r.Patterns = append(r.Patterns, m[1])
		}
		if len(r.Patterns) == 0 {
			return nil, fmt.Errorf("line %d: no report path in backticks in the figure cell", line)
		}
		if err := r.parseInside(cells[3]); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		t = append(t, r)
	}
	if t == nil {
		return nil, fmt.Errorf("no figure table (a table headed %q)", Header)
	}
	return t, sc.Err()
}

// splitRow splits a table row into its cells, outside backticks.
func splitRow(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	var cells []string
	var cur strings.Builder
	tick := false
	for _, c := range l {
		switch {
		case c == '`':
			tick = !tick
		case c == '|' && !tick:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteRune(c)
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

func (r *Row) parseInside(cell string) error {
	cell = strings.TrimSpace(cell)
	if cell == "—" {
		return nil
	}
	r.Interval = true
	if cell == "nothing" {
		return nil
	}
	for _, f := range strings.Split(cell, ",") {
		op, partly := strings.CutPrefix(strings.TrimSpace(f), "~")
		if partly && op == "any" {
			r.Schedule = true
			continue
		}
		if !slices.Contains(Ops, op) {
			return fmt.Errorf("inside: %q is not an operation (%s; ~op: partly; ~any: the schedule's; \"nothing\"; — for no interval)", op, strings.Join(Ops, ", "))
		}
		if partly {
			r.Partly = append(r.Partly, op)
		} else {
			r.Inside = append(r.Inside, op)
		}
	}
	return nil
}

// Row is the row of path: an error when no row's pattern matches it, or
// when two rows' do (a figure has one definition).
func (t Table) Row(path string) (Row, error) {
	var found []Row
	for _, r := range t {
		if slices.ContainsFunc(r.Patterns, func(p string) bool { return Match(p, path) }) {
			found = append(found, r)
		}
	}
	switch len(found) {
	case 0:
		return Row{}, fmt.Errorf("%s: no row of the figure table names it", path)
	case 1:
		return found[0], nil
	}
	lines := make([]string, len(found))
	for i, r := range found {
		lines[i] = strconv.Itoa(r.Line)
	}
	return Row{}, fmt.Errorf("%s: rows at lines %s all name it", path, strings.Join(lines, ", "))
}

// Match reports whether a path matches a pattern: the same keys and
// indices (a bench.txt path: the same sub-names and unit parts), "*"
// standing for any one, "key=*" for any value of that key.
func Match(pattern, path string) bool {
	ps, xs := split(pattern), split(path)
	if len(ps) != len(xs) {
		return false
	}
	for i, p := range ps {
		if prefix, ok := strings.CutSuffix(p, "*"); !ok && p != xs[i] || ok && !strings.HasPrefix(xs[i], prefix) {
			return false
		}
	}
	return true
}

// split cuts a path into its keys and indices, "a.b[2].c" → a, b, 2, c;
// a bench.txt path into its sub-names and unit,
// "bench:Sleep/model=A/level=1 sec/wake" → bench:Sleep,
// model=A, level=1, sec, wake.
func split(path string) []string {
	return strings.FieldsFunc(path, func(r rune) bool { return strings.ContainsRune(".[]/ ", r) })
}

// BenchPath is the path of a bench.txt benchmark's unit in the figure
// table: "bench:" + the benchmark's name without "Benchmark" (as
// gate.ReadBench keys it) + " " + the unit.
func BenchPath(name, unit string) string { return "bench:" + name + " " + unit }

// Values is a figure of samples (a bench.txt benchmark's values in one
// unit): n, median and smallest as stats.Summarize takes them (NaN with
// none).
func Values(xs []float64) Figure {
	s, err := stats.Summarize(xs)
	if err != nil {
		return Figure{N: len(xs), Median: math.NaN(), Min: math.NaN()}
	}
	return Figure{N: s.N, Median: s.Median, Min: s.Min}
}

// Figure is one figure's value in a report: a summary's (n, median, min)
// or a plain number's (n 1, the number as median and min).
type Figure struct {
	N           int
	Median, Min float64
	Summary     bool
}

// Flatten lists the figures of a report.json: every summary ({n, median,
// …}) and every number, keyed by path ("models.A.sleep.1.sleep_s",
// "models.A.performance[0].ttft_s"); a summary's own fields are not
// listed apart. Strings, booleans and nulls are not figures.
func Flatten(report []byte) (map[string]Figure, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(report))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("report.json: %w", err)
	}
	out := map[string]Figure{}
	walk(v, "", out)
	return out, nil
}

func walk(v any, path string, out map[string]Figure) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["median"]; ok {
			if n, ok := x["n"].(json.Number); ok {
				f := Figure{Summary: true, Median: math.NaN(), Min: math.NaN()}
				i, _ := n.Int64()
				f.N = int(i)
				f.Median, f.Min = num(x["median"]), num(x["min"])
				out[path] = f
				return
			}
		}
		for k, e := range x {
			walk(e, join(path, k), out)
		}
	case []any:
		for i, e := range x {
			walk(e, path+"["+strconv.Itoa(i)+"]", out)
		}
	case json.Number:
		f := num(x)
		out[path] = Figure{N: 1, Median: f, Min: f}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func num(v any) float64 {
	if n, ok := v.(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			return f
		}
	}
	return math.NaN()
}
