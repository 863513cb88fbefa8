package gate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"

	"golang.org/x/perf/benchfmt"
)

// BenchKey is a benchmark name (without "Benchmark"; read from a file,
// without go test's -GOMAXPROCS suffix, FileName, so go test -bench
// output compares with bench.txt) and a unit as written.
type BenchKey struct{ Name, Unit string }

// Bench is what a benchfmt stream holds, per benchmark and unit.
type Bench struct {
	Values map[BenchKey][]float64
	// Names are each benchmark's name as fields, by its name as written:
	// a run's own lines carry them (BenchOf), a file's names are split
	// once where the file is read (ReadBench). The gate reads a name's
	// base and keys here (Name), never from the string.
	Names map[string]record.BenchName
	Meta  benchfmt.UnitMetadataMap
	CPU   string // go test's "cpu:" line, "" when absent
	// Simulated is bench.txt's "simulated:" config line, "" when absent.
	Simulated string
}

func newBench() Bench {
	return Bench{Values: map[BenchKey][]float64{}, Names: map[string]record.BenchName{}, Meta: benchfmt.UnitMetadataMap{}}
}

// BenchOf is the Bench of result lines and unit metadata, each name's
// fields as the lines carry them: a run's own, in memory
// (report.BenchResults, report.BenchUnits), which is what ReadBench reads
// back from the bench.txt they are written to, without the file; or a
// file's, read by a caller that splits each name with FileName.
func BenchOf(units []*benchfmt.UnitMetadata, lines []report.BenchLine) Bench {
	b := newBench()
	for _, m := range units {
		b.addMeta(m)
	}
	for _, l := range lines {
		b.add(l.Name, l.Result)
	}
	return b
}

// Add appends samples xs of unit to the benchmark named n.
func (b *Bench) Add(n record.BenchName, unit string, xs ...float64) {
	if b.Values == nil {
		b.Values = map[BenchKey][]float64{}
	}
	if b.Names == nil {
		b.Names = map[string]record.BenchName{}
	}
	name := n.String()
	b.Names[name] = n
	k := BenchKey{name, unit}
	b.Values[k] = append(b.Values[k], xs...)
}

// Name is the fields of a benchmark b holds, by its name as written; of
// one it does not hold, the whole name as its base, with no key.
func (b Bench) Name(name string) record.BenchName {
	if n, ok := b.Names[name]; ok {
		return n
	}
	return record.BenchName{Base: name}
}

func (b *Bench) addMeta(m *benchfmt.UnitMetadata) {
	c := *m
	b.Meta[m.UnitMetadataKey] = &c
}

// add collects one result line's values per benchmark and unit, as
// written (OrigUnit where benchfmt tidied it), under its name's fields n
// (of a file's line, without go test's -GOMAXPROCS suffix: ReadBench).
func (b *Bench) add(n record.BenchName, rec *benchfmt.Result) {
	if c := rec.GetConfig("cpu"); c != "" {
		b.CPU = c
	}
	if c := rec.GetConfig("simulated"); c != "" {
		b.Simulated = c
	}
	for _, v := range rec.Values {
		unit, val := v.Unit, v.Value
		if v.OrigUnit != "" {
			unit, val = v.OrigUnit, v.OrigValue
		}
		b.Add(n, unit, val)
	}
}

// looksJSON follows the name of a file that begins with "{".
const looksJSON = "looks like a report.json (JSON: summaries, not samples, so no difference can be tested): want the run's bench.txt"

// isJSON reports whether a file that begins with head is JSON (its first
// non-blank byte a "{"): a report.json, not a benchfmt stream.
func isJSON(head []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("{"))
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// FileName is the fields of a benchmark name read from a file (bench.txt,
// go test -bench output): go test's -GOMAXPROCS suffix dropped, then split
// (record.ParseBenchName), once, where the file is read; the gate reads
// the fields from then on. A run's own lines carry theirs.
func FileName(n benchfmt.Name) record.BenchName {
	return record.ParseBenchName(procsSuffix.ReplaceAllString(n.String(), ""))
}

// ReadBench collects every value of a benchfmt stream (bench.txt, go test
// -bench output, scripts/peers.sh lines) per benchmark and unit as
// written: benchfmt tidies ns/op into sec/op, but units and goals are
// compared as the file names them. A malformed result line is an error
// naming the file and line; the rest is still read, so a caller can choose
// to go on.
func ReadBench(r io.Reader, file string) (Bench, error) {
	return readBench(r, file, false)
}

// readBench is ReadBench; with judged, a sample the gate cannot judge
// (checkSample: NaN, ±Inf, or negative in a unit that cannot be) is an
// error naming the file, the line and the sample, and is left out.
func readBench(r io.Reader, file string, judged bool) (Bench, error) {
	br := bufio.NewReader(r)
	if b, _ := br.Peek(512); isJSON(b) {
		return Bench{}, fmt.Errorf("%s %s", file, looksJSON)
	}
	out := newBench()
	var errs []error
	rd := benchfmt.NewReader(br, file)
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			errs = append(errs, rec)
		case *benchfmt.UnitMetadata:
			out.addMeta(rec)
		case *benchfmt.Result:
			if judged {
				errs = append(errs, refuseSamples(rec)...)
			}
			out.add(FileName(rec.Name), rec)
		}
	}
	if err := rd.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", file, err))
	}
	return out, errors.Join(errs...)
}

// refuseSamples drops from rec the samples the gate cannot judge
// (checkSample) and returns an error for each, naming its file and line.
func refuseSamples(rec *benchfmt.Result) []error {
	var errs []error
	kept := rec.Values[:0]
	for _, v := range rec.Values {
		unit, x := v.Unit, v.Value
		if v.OrigUnit != "" {
			unit, x = v.OrigUnit, v.OrigValue
		}
		if why := checkSample(x, unit); why != "" {
			file, line := rec.Pos()
			errs = append(errs, fmt.Errorf("%s:%d: Benchmark%s: %v %s: %s", file, line, rec.Name, x, unit, why))
			continue
		}
		kept = append(kept, v)
	}
	rec.Values = kept
	return errs
}

// checkSample says why the gate cannot judge sample x of unit: NaN or
// ±Inf (no figure: one +Inf makes its run's median infinite, a change of
// −100 %), or below zero in a unit that cannot be (a duration, a rate, a
// memory size, a power, a share of the CPU: a clock or a counter that went
// wrong); "" where it can. A share released (%-released: a model that held
// more asleep than awake) and an energy (J, J/…: a counter's difference
// less the reads around it) may be below zero.
func checkSample(x float64, unit string) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "not a finite number: the gate cannot judge a run with it (rewrite or drop the line, or the run)"
	case x < 0 && !signed(unit):
		return "negative, which a " + unit + " cannot be: the gate cannot judge a run with it (rewrite or drop the line, or the run)"
	}
	return ""
}

// signed says whether a sample of unit may be below zero: a share
// released and an energy (checkSample).
func signed(unit string) bool {
	return unit == unitReleased || unit == "J" || strings.HasPrefix(unit, "J/")
}

// unitReleased is the share of a model's memory a level-1 sleep released
// (report.UnitRelease).
const unitReleased = "%-released"
