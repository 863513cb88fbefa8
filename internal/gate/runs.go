package gate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
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
	// Warnings are what of the file was not read (a cut last line).
	Warnings []string
}

// wantBench says what a baseline file must be, in the errors that refuse
// one.
const wantBench = "want the bench.txt of a wakebench run (lines such as `BenchmarkSleep/model=A/level=1 1 0.7 sec/wake`)"

// Median is the run's median of one benchmark × unit (the mean of the two
// middle values when n is even), of a serving metric's later waves where
// its waves can be told (Span); ok is false when the run lacks it.
func (r Run) Median(k BenchKey) (float64, bool) { return r.Stat(k, StatMedian) }

// Stat is the run's statistic st of one benchmark × unit, read where Span
// says: StatMedian, StatP95 (by nearest rank, as stats.Summarize's),
// StatP5 (by nearest rank too, stats.NearestRank) or StatFirstWave (the
// first wave's median); ok is false when the run lacks it. A serving
// metric's StatP95 or StatP5 at a concurrency of 2 or more is a ratio,
// not the unit: of each later request over its wave-mates' median
// (WaveRatios).
func (r Run) Stat(k BenchKey, st string) (float64, bool) { return statOf(r, k, st, true) }

// MaxBenchBytes bounds a bench.txt the gate reads: a run's bench.txt is
// a few hundred KiB (a line per sample); 64 MiB is far beyond any run and
// keeps a wrong file (a disk image, /dev/zero) from filling memory.
const MaxBenchBytes = config.MaxBaselineBytes

// HistoryMaxRuns is the most baseline runs the gate judges against: the
// newest ones of a longer history. The runs rule uses only the runs since
// the last change point, so runs older than the newest hundred matter only
// to a level that has since changed, or to one that a hundred runs
// confirm already; and E-Divisive's work is O(permutations · n²) per
// split of each metric's series, ten thousand times more at 10,000 runs
// than at 100 (a 10,000-run baseline ran past 9.5 minutes and lost the
// report). A hundred runs are three months of nightly runs.
const HistoryMaxRuns = 100

// Benchmarks are the first name elements of wakebench's bench.txt results
// (package report's WriteBench writes them; a test there holds the two
// together): a baseline run with none of them is another project's.
var Benchmarks = []string{"Restart", "Sleep", "Serve", "Switch", "Traffic", "TrafficEnergy", "Memory", "Cost", "Energy", "PodStart", "PodRestart", "PodSwitch", record.HostBench}

// ParseRun reads one run's bench.txt. Its time is the StartedPrefix line
// when there is one, else mtime (bench.txt files written before the line
// existed). A last line without its newline is cut (a copy or a write
// that stopped part-way): it is not read, and Run.Warnings says so. A
// sample the gate cannot judge (NaN, ±Inf, or negative in a unit that
// cannot be: checkSample) refuses the run, the error naming its file and
// line.
func ParseRun(data []byte, path string, mtime time.Time) (Run, error) {
	if isJSON(data[:min(len(data), 512)]) {
		return Run{}, fmt.Errorf("%s %s", path, looksJSON)
	}
	var warnings []string
	if i := bytes.LastIndexByte(data, '\n'); len(data) > 0 && i < len(data)-1 {
		cut := string(data[i+1:])
		if len(cut) > 80 {
			cut = cut[:80] + "…"
		}
		warnings = append(warnings, fmt.Sprintf("last line cut (no newline at the end of the file): %q: not read", cut))
		data = data[:i+1]
	}
	b, err := readBench(bytes.NewReader(data), path, true)
	if err != nil {
		return Run{}, err
	}
	if len(b.Values) == 0 {
		if len(warnings) > 0 {
			return Run{}, fmt.Errorf("%s: no benchmark results (%s): %s", path, warnings[0], wantBench)
		}
		return Run{}, fmt.Errorf("%s: no benchmark results: %s", path, wantBench)
	}
	r := Run{Path: path, Bench: b, Started: mtime, Order: OrderMtime, Warnings: warnings}
	for line := range strings.Lines(string(data)) {
		t, ok, err := startedLine(line)
		if err != nil {
			return Run{}, fmt.Errorf("%s: %w", path, err)
		}
		if ok {
			r.Started, r.Order = t, OrderStarted
			break
		}
	}
	return r, nil
}

// RunOf is the Run of a run's own samples, judged in memory (BenchOf):
// as ParseRun would read its bench.txt, started at started (zero: unknown).
func RunOf(b Bench, path string, started time.Time) (Run, error) {
	if len(b.Values) == 0 {
		return Run{}, fmt.Errorf("%s: no benchmark results: %s", path, wantBench)
	}
	r := Run{Path: path, Bench: b, Started: started, Order: OrderMtime}
	if !started.IsZero() {
		r.Order = OrderStarted
	}
	return r, nil
}

// startedLine is the time of a StartedPrefix line; ok is false for any
// other line.
func startedLine(line string) (t time.Time, ok bool, err error) {
	v, ok := strings.CutPrefix(line, StartedPrefix)
	if !ok {
		return time.Time{}, false, nil
	}
	t, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("started line: %w", err)
	}
	return t, true, nil
}

// CheckRun refuses a run that holds none of wakebench's benchmarks
// (Benchmarks): a bench file of another project, which shares nothing to
// judge.
func CheckRun(r Run) error {
	var names []string
	for k := range r.Bench.Values {
		if slices.Contains(Benchmarks, r.Bench.Name(k.Name).Base) {
			return nil
		}
		names = append(names, "Benchmark"+k.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	return fmt.Errorf("%s: none of its %d benchmark(s) (%s) is wakebench's (Benchmark%s/…): a bench file of another project?",
		r.Path, len(names), strings.Join(names[:min(3, len(names))], ", "), strings.Join(Benchmarks, "/…, Benchmark"))
}

// openRegular opens path for reading if it is a regular file of at most
// MaxBenchBytes. It looks before it opens (opening a FIFO blocks until a
// writer comes; a device may be endless) and opens without blocking, then
// looks again at what it opened, in case the path changed between.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	check := func(fi os.FileInfo) error { return config.CheckBench(path, fi) }
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if err := check(fi); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err == nil {
		err = check(fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readRegular reads the regular file at path, at most MaxBenchBytes.
func readRegular(path string) ([]byte, os.FileInfo, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBenchBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxBenchBytes {
		return nil, nil, fmt.Errorf("%s: grew past the %d MiB a bench.txt may be (gate.MaxBenchBytes) while read", path, MaxBenchBytes>>20)
	}
	return data, fi, nil
}

// ReadRun reads the bench.txt at path: a regular file of at most
// MaxBenchBytes.
func ReadRun(path string) (Run, error) {
	data, fi, err := readRegular(path)
	if err != nil {
		return Run{}, err
	}
	return ParseRun(data, path, fi.ModTime())
}

// stamp is the time that orders the bench.txt at path among a history, as
// ParseRun finds it (its first StartedPrefix line, else its mtime), read
// line by line without parsing its results.
func stamp(path string) (time.Time, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	br := bufio.NewReader(io.LimitReader(f, MaxBenchBytes))
	for first := true; ; first = false {
		line, err := br.ReadString('\n')
		if first && isJSON([]byte(line)) {
			return time.Time{}, fmt.Errorf("%s %s", path, looksJSON)
		}
		if t, ok, perr := startedLine(line); perr != nil {
			return time.Time{}, fmt.Errorf("%s: %w", path, perr)
		} else if ok {
			return t, nil
		}
		if err == io.EOF {
			return fi.ModTime(), nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", path, err)
		}
	}
}

// Baseline is the baseline runs a setting names.
type Baseline struct {
	// Runs are the newest HistoryMaxRuns runs, oldest first.
	Runs []Run
	// Found is how many runs the setting names (more than len(Runs) when
	// the history was bounded).
	Found int
}

// Notes are what the gate could not use of the baseline: the runs left
// out by HistoryMaxRuns, and each run's Warnings (a cut last line).
func (b Baseline) Notes() []string {
	var out []string
	if b.Found > len(b.Runs) {
		out = append(out, fmt.Sprintf("the baseline names %d runs: judged against the newest %d (gate.HistoryMaxRuns bounds a history's runs and so the change-point search's work); the %d older ones are not read",
			b.Found, len(b.Runs), b.Found-len(b.Runs)))
	}
	for _, r := range b.Runs {
		for _, w := range r.Warnings {
			out = append(out, fmt.Sprintf("baseline %s: %s", r.Path, w))
		}
	}
	return out
}

// LoadBaseline reads the baseline runs that spec names: comma- or
// colon-separated bench.txt files and directories. A directory holds runs:
// its own bench.txt, its subdirectories' bench.txt (one out_dir per run)
// and its *.bench.txt files. The runs come back oldest first (by their
// started line, else file mtime; see Run.Order), the newest
// HistoryMaxRuns of them: of a longer history only each file's started
// line is read, to order it.
//
// Each is refused unless it is a regular file of at most MaxBenchBytes
// (a FIFO or a device is not opened for reading) holding benchmark
// results, not JSON, with some of wakebench's benchmarks (CheckRun). ctx
// is checked before each file.
func LoadBaseline(ctx context.Context, spec string) (Baseline, error) {
	var paths []string
	for _, e := range config.BaselineEntries(spec) {
		fi, err := os.Stat(e)
		if err != nil {
			return Baseline{}, fmt.Errorf("baseline: %w", err)
		}
		if !fi.IsDir() {
			paths = append(paths, e)
			continue
		}
		var found []string
		for _, pat := range config.BaselineGlobs() {
			m, err := filepath.Glob(filepath.Join(e, pat))
			if err != nil {
				return Baseline{}, fmt.Errorf("baseline %s: %w", e, err)
			}
			found = append(found, m...)
		}
		if len(found) == 0 {
			return Baseline{}, fmt.Errorf("baseline %s: a directory with no bench.txt, */bench.txt or *.bench.txt", e)
		}
		paths = append(paths, found...)
	}
	if len(paths) == 0 {
		return Baseline{}, errors.New("baseline: empty")
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	out := Baseline{Found: len(paths)}
	if len(paths) > HistoryMaxRuns {
		type stamped struct {
			path string
			t    time.Time
		}
		ss := make([]stamped, len(paths))
		for i, p := range paths {
			if err := ctx.Err(); err != nil {
				return Baseline{}, fmt.Errorf("baseline: %w", context.Cause(ctx))
			}
			t, err := stamp(p)
			if err != nil {
				return Baseline{}, fmt.Errorf("baseline: %w", err)
			}
			ss[i] = stamped{p, t}
		}
		slices.SortStableFunc(ss, func(a, b stamped) int { return a.t.Compare(b.t) })
		paths = paths[:0]
		for _, s := range ss[len(ss)-HistoryMaxRuns:] {
			paths = append(paths, s.path)
		}
		slices.Sort(paths) // as a history of HistoryMaxRuns runs is read
	}
	out.Runs = make([]Run, 0, len(paths))
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return Baseline{}, fmt.Errorf("baseline: %w", context.Cause(ctx))
		}
		r, err := ReadRun(p)
		if err == nil {
			err = CheckRun(r)
		}
		if err != nil {
			return Baseline{}, fmt.Errorf("baseline: %w", err)
		}
		out.Runs = append(out.Runs, r)
	}
	slices.SortStableFunc(out.Runs, func(a, b Run) int { return a.Started.Compare(b.Started) })
	return out, nil
}

// CheckBaseline loads the baseline runs spec names and refuses them as
// the gate would (LoadBaseline): at config load, so a baseline that
// cannot be judged fails the run before it starts, not after it ran. It
// reads the files and judges nothing.
func CheckBaseline(ctx context.Context, spec string) error {
	_, err := LoadBaseline(ctx, spec)
	return err
}
