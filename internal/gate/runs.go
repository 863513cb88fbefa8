package gate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/stats"
)

// StartedPrefix begins the bench.txt line that holds the run's start time
// (record.BenchStartedPrefix, which says why it is no config line).
const StartedPrefix = record.BenchStartedPrefix

// Order sources: where a run's place in time came from.
const (
	OrderStarted = "started line"
	OrderMtime   = "file mtime"
)

// Run is one run's bench.txt: the unit of replication of the gate.
type Run struct {
	Path    string
	Bench   Bench
	Started time.Time
	Order   string // OrderStarted or OrderMtime
}

// Median is the run's median of one benchmark × unit (the mean of the two
// middle values when n is even); ok is false when the run lacks it.
func (r Run) Median(k BenchKey) (float64, bool) {
	s, err := stats.Summarize(r.Bench.Values[k])
	return s.Median, err == nil
}

// Best is the run's best sample of one benchmark × unit: its largest
// where better is +1 (higher is better), else its smallest.
func (r Run) Best(k BenchKey, better int) (float64, bool) {
	xs := r.Bench.Values[k]
	if len(xs) == 0 {
		return 0, false
	}
	if better > 0 {
		return slices.Max(xs), true
	}
	return slices.Min(xs), true
}

// ParseRun reads one run's bench.txt. Its time is the StartedPrefix line
// when there is one, else mtime (bench.txt files written before the line
// existed).
func ParseRun(data []byte, path string, mtime time.Time) (Run, error) {
	b, err := ReadBench(bytes.NewReader(data), path)
	if err != nil {
		return Run{}, err
	}
	if len(b.Values) == 0 {
		return Run{}, fmt.Errorf("%s: no benchmark results", path)
	}
	r := Run{Path: path, Bench: b, Started: mtime, Order: OrderMtime}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, StartedPrefix); ok {
			t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
			if err != nil {
				return Run{}, fmt.Errorf("%s: started line: %w", path, err)
			}
			r.Started, r.Order = t, OrderStarted
			break
		}
	}
	return r, nil
}

// ReadRun reads the bench.txt at path.
func ReadRun(path string) (Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Run{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Run{}, err
	}
	return ParseRun(data, path, fi.ModTime())
}

// SplitBaseline splits a baseline setting into its entries: separated by
// commas or by the OS's path-list separator (":" on Unix).
func SplitBaseline(spec string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == os.PathListSeparator }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// LoadBaseline reads the baseline runs that spec names: comma- or
// colon-separated bench.txt files and directories. A directory holds runs:
// its own bench.txt, its subdirectories' bench.txt (one out_dir per run)
// and its *.bench.txt files. The runs come back oldest first (by their
// started line, else file mtime; see Run.Order).
func LoadBaseline(spec string) ([]Run, error) {
	var paths []string
	for _, e := range SplitBaseline(spec) {
		fi, err := os.Stat(e)
		if err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
		if !fi.IsDir() {
			paths = append(paths, e)
			continue
		}
		var found []string
		for _, pat := range []string{"bench.txt", "*/bench.txt", "*.bench.txt"} {
			m, err := filepath.Glob(filepath.Join(e, pat))
			if err != nil {
				return nil, fmt.Errorf("baseline %s: %w", e, err)
			}
			found = append(found, m...)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("baseline %s: a directory with no bench.txt, */bench.txt or *.bench.txt", e)
		}
		paths = append(paths, found...)
	}
	if len(paths) == 0 {
		return nil, errors.New("baseline: empty")
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	runs := make([]Run, 0, len(paths))
	for _, p := range paths {
		r, err := ReadRun(p)
		if err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
		runs = append(runs, r)
	}
	slices.SortStableFunc(runs, func(a, b Run) int { return a.Started.Compare(b.Started) })
	return runs, nil
}
