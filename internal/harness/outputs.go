package harness

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wakebench/wakebench/internal/cireport"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/htmlreport"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// Outputs are the files a run may write into out_dir (besides a log per
// model, and the Kubernetes phase's logs in kubeLogs): the ones of a phase
// that did not run (soak.csv, requests.jsonl) too, and a variant run's
// comparison.json (package variants), so an earlier run's are never read
// beside this run's report.
var Outputs = []string{"report.json", "summary.md", "bench.txt", "timeline.svg", "compare.txt", "samples.csv", "metrics.jsonl",
	"soak.csv", "requests.jsonl", "report.html", "checks.junit.xml", "ctrf.json", "metrics.txt", "comparison.json"}

// kubeLogs is the directory of out_dir that holds the Kubernetes phase's logs.
const kubeLogs = "kubernetes"

// NotFinished is the failure of the provisional report a run writes when it
// starts: a run killed outright (SIGKILL, the OOM killer) leaves it.
const NotFinished = "the run did not finish: wakebench writes this report when a run starts and replaces it when the run ends, so a run that was killed (SIGKILL, out of memory) or is still going leaves this one; samples.csv and metrics.jsonl hold what was measured until then"

// claim makes out_dir this run's (its caller holds the out_dir's lock):
// every output an earlier run left there (Outputs), the logs of this
// run's models and a kubernetes/ folder a run wrote (it holds kubeMarker)
// are removed, so no stale PASS can be read beside this run's files.
// Nothing else is touched: a file or folder of the user's in out_dir,
// kubernetes/ without the marker included, stays.
func claim(cfg config.Config) error {
	var errs []error
	names := append([]string{}, Outputs...)
	for _, m := range cfg.Models {
		names = append(names, m.Label+".log")
	}
	// The baseline's files stay, wherever they are: config load refuses a
	// baseline inside out_dir, and the report of that refusal claims
	// out_dir too.
	baseline := config.BaselineFiles(cfg.Baseline)
	holdsBaseline := func(p string) bool {
		return slices.ContainsFunc(baseline, func(b string) bool { return config.Within(b, p) })
	}
	for _, n := range names {
		p := filepath.Join(cfg.OutDir, n)
		if holdsBaseline(p) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("out_dir: remove the earlier run's %s: %w", n, err))
		}
	}
	if p := filepath.Join(cfg.OutDir, kubeLogs); !holdsBaseline(p) && ownKubeLogs(cfg.OutDir) {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("out_dir: remove the earlier run's %s/: %w", kubeLogs, err))
		}
	}
	return errors.Join(errs...)
}

// writeReport writes the outputs made from the report of raw
// (atomically): report.json and summary.md, and for people and CI systems
// report.html (with timeline, timeline.svg as written, nil without one,
// and results, bench.txt's lines), checks.junit.xml, ctrf.json and
// metrics.txt. All say the same: one
// that cannot be written is in the error (the run's exit and its last
// lines say so), not in the others. md is summary.md as written ("" when
// it could not be).
func writeReport(dir string, raw record.Raw, timeline []byte, results []report.BenchLine) (rep report.Report, md string, err error) {
	rep = report.Build(raw)
	doc := report.Summary(rep)                                        // built once: summary.md and the page render it
	summary := report.FitSummary(doc.Markdown(), report.SummaryLimit) // the page shows it whole
	page := htmlreport.Run{Report: rep, Timeline: timeline, Samples: results, Summary: doc}
	var errs []error
	for _, o := range []struct {
		name  string
		write func(io.Writer) error
	}{
		// The report and its summary first, the biggest (the page) last:
		// on a disk that fills, what CI and people read first is there.
		{"summary.md", func(w io.Writer) error { _, err := io.WriteString(w, summary); return err }},
		{"report.json", func(w io.Writer) error { return report.WriteJSON(w, rep) }},
		{"checks.junit.xml", func(w io.Writer) error { return cireport.WriteJUnit(w, rep) }},
		{"ctrf.json", func(w io.Writer) error { return cireport.WriteCTRF(w, rep) }},
		{"metrics.txt", func(w io.Writer) error { return cireport.WriteOpenMetrics(w, rep) }},
		{"report.html", func(w io.Writer) error { return htmlreport.Write(w, page) }},
	} {
		err := report.WriteFile(filepath.Join(dir, o.name), o.write)
		if err == nil && o.name == "summary.md" {
			md = summary
		}
		errs = append(errs, err)
	}
	return rep, md, errors.Join(errs...)
}

// provisional writes the report a run leaves if it never reaches Close.
func provisional(dir string, raw record.Raw) error {
	raw.Failures = append(raw.Failures, record.Failure{Phase: "run", Error: NotFinished})
	_, _, err := writeReport(dir, raw, nil, report.BenchResults(raw))
	return err
}

// WriteAborted is for a run that ends before it starts (a config error, a
// setup that fails): out_dir gets a FAIL report.json and summary.md naming
// the error, and loses any earlier run's outputs, so a CI step reading it
// never finds a stale PASS. phase names what failed ("config", "setup").
// An out_dir another run holds (LockFile) gets nothing: the error says so.
// A cause that is that refusal (*OutDirBusy) writes nothing, and says it
// once: the cause is the message.
func WriteAborted(cfg config.Config, phase string, cause error) error {
	if errors.As(cause, new(*OutDirBusy)) {
		return nil
	}
	return writeUnstarted(cfg, func(rec *record.Recorder) { rec.Fail(record.Failure{Phase: phase, Error: cause.Error()}) })
}

// WriteNotRun is for a run that cannot measure on this machine (NoGPU):
// out_dir gets a NOT RUN report.json and summary.md with reason, and loses
// any earlier run's outputs, as WriteAborted's.
func WriteNotRun(cfg config.Config, reason string) error {
	return writeUnstarted(cfg, func(rec *record.Recorder) { rec.SetNotRun(reason) })
}

// writeUnstarted writes the report of a run that started no server, with
// what mark records on it, holding out_dir's lock: where another run holds
// it, nothing is written (*OutDirBusy).
func writeUnstarted(cfg config.Config, mark func(*record.Recorder)) error {
	if cfg.OutDir == "" {
		return nil
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return fmt.Errorf("out_dir %s: %w", cfg.OutDir, err)
	}
	lock, err := lockOutDir(cfg.OutDir)
	if err != nil {
		return err
	}
	defer lock.release()
	claimErr := claim(cfg)
	rec := record.New(cfg.ModelNames())
	rec.SetSetup(record.Setup{GPU: "unknown (the run did not start)", Runtime: "unknown (no server reached)", MemorySource: cfg.Memory})
	mark(rec)
	raw := rec.Raw()
	_, _, err = writeReport(cfg.OutDir, raw, nil, report.BenchResults(raw))
	return errors.Join(claimErr, err)
}

// lostOutputs is each output (of Outputs) that err names, with the first
// error naming it: the outputs that could not be written.
func lostOutputs(err error) map[string]error {
	lost := map[string]error{}
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok { // errors.Join: each on its own
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		for _, n := range Outputs {
			if _, seen := lost[n]; !seen && strings.Contains(e.Error(), n) {
				lost[n] = e
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return lost
}

// Ending is what a run prints when it ends: the status (FAIL whenever an
// output could not be written, whatever the report says) and where each
// output is, naming those that could not be written.
func Ending(rep report.Report, closeErr error, outDir string) string {
	var b strings.Builder
	status := rep.Status
	if closeErr != nil {
		status = "FAIL"
	}
	sim := ""
	if rep.Simulated != nil {
		sim = fmt.Sprintf(" [simulated: vllmsim profile %s, time scale %g]", rep.Simulated.Profile, rep.Simulated.TimeScale)
	}
	fmt.Fprintf(&b, "wakebench: status %s%s\n", status, sim)
	if status == report.StatusNotRun {
		fmt.Fprintf(&b, "wakebench: no protocol phase ran (benchmarks only, or a -run filter that matched none): the report measured nothing to pass\n")
	}
	lost := lostOutputs(closeErr)
	switch {
	case len(lost) > 0:
		fmt.Fprintf(&b, "wakebench: not all outputs were written (%s): %v\n", strings.Join(slices.Sorted(maps.Keys(lost)), ", "), closeErr)
	case closeErr != nil: // a server that would not stop, say: no output is named
		fmt.Fprintf(&b, "wakebench: the run ended with an error that names no output as lost (%s written): %v\n", strings.Join(Outputs[:3], ", "), closeErr)
	}
	if err, ok := lost["report.json"]; ok {
		// The provisional report it still holds blames a kill (SIGKILL, out
		// of memory): the run did finish, its report could not be written.
		fmt.Fprintf(&b, "wakebench: report %s was NOT replaced: the run finished, but writing its report failed (%v); the provisional report left there, which says the run was killed, is not what happened\n",
			filepath.Join(outDir, "report.json"), err)
	} else {
		fmt.Fprintf(&b, "wakebench: report %s\n", filepath.Join(outDir, "report.json"))
	}
	file := func(name string) string {
		if _, ok := lost[name]; ok {
			return filepath.Join(outDir, name) + " NOT written"
		}
		return filepath.Join(outDir, name)
	}
	fmt.Fprintf(&b, "wakebench: for a browser %s; for CI %s, %s, %s\n", file("report.html"), file("checks.junit.xml"), file("ctrf.json"), file("metrics.txt"))
	fmt.Fprintf(&b, "wakebench: benchstat file %s, samples %s, server logs in %s\n", file("bench.txt"), file("samples.csv"), outDir)
	return b.String()
}
