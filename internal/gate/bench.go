package gate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"

	"golang.org/x/perf/benchfmt"
)

// BenchKey is a benchmark name (without "Benchmark" and without go test's
// -GOMAXPROCS suffix, so go test -bench output compares with bench.txt)
// and a unit as written.
type BenchKey struct{ Name, Unit string }

// Bench is what a benchfmt stream holds, per benchmark and unit.
type Bench struct {
	Values map[BenchKey][]float64
	Meta   benchfmt.UnitMetadataMap
	CPU    string // go test's "cpu:" line, "" when absent
	// Simulated is bench.txt's "simulated:" config line, "" when absent.
	Simulated string
}

// looksJSON follows the name of a file that begins with "{".
const looksJSON = "looks like a report.json (JSON: summaries, not samples, so no difference can be tested): want the run's bench.txt"

// isJSON reports whether a file that begins with head is JSON (its first
// non-blank byte a "{"): a report.json, not a benchfmt stream.
func isJSON(head []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("{"))
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// ReadBench collects every value of a benchfmt stream (bench.txt, go test
// -bench output, scripts/peers.sh lines) per benchmark and unit as
// written: benchfmt tidies ns/op into sec/op, but units and goals are
// compared as the file names them. A malformed result line is an error
// naming the file and line; the rest is still read, so a caller can choose
// to go on.
func ReadBench(r io.Reader, file string) (Bench, error) {
	br := bufio.NewReader(r)
	if b, _ := br.Peek(512); isJSON(b) {
		return Bench{}, fmt.Errorf("%s %s", file, looksJSON)
	}
	out := Bench{Values: map[BenchKey][]float64{}, Meta: benchfmt.UnitMetadataMap{}}
	var errs []error
	rd := benchfmt.NewReader(br, file)
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			errs = append(errs, rec)
		case *benchfmt.UnitMetadata:
			m := *rec
			out.Meta[rec.UnitMetadataKey] = &m
		case *benchfmt.Result:
			if c := rec.GetConfig("cpu"); c != "" {
				out.CPU = c
			}
			if c := rec.GetConfig("simulated"); c != "" {
				out.Simulated = c
			}
			name := procsSuffix.ReplaceAllString(rec.Name.String(), "")
			for _, v := range rec.Values {
				unit, val := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, val = v.OrigUnit, v.OrigValue
				}
				k := BenchKey{name, unit}
				out.Values[k] = append(out.Values[k], val)
			}
		}
	}
	if err := rd.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", file, err))
	}
	return out, errors.Join(errs...)
}
