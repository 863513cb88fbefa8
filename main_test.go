package wakebench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/fleetjob"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/harness"
	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/phases"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/traffic"
)

// suite is the run TestMain owns. Tests read it; only TestMain sets it.
var suite struct {
	h   *harness.Run
	ctx context.Context

	// skipped says why no run was opened (shortSkips): every test of
	// the run then skips saying so.
	skipped string

	mu     sync.Mutex
	failed []record.Failure
}

func TestMain(m *testing.M) {
	if os.Getenv(fleetjob.EnvConfig) != "" { // a fleet Pod: the suite on its node, then its result uploaded
		os.Exit(fleetNode(m))
	}
	os.Exit(run(m))
}

// protocolTests are the tests the design card's `go test -tags gpu ./...`
// runs on a GPU runner: the protocol and the opt-in phases. The rest of
// this package's tests are the harness's own, child runs on vllmsim that
// make test runs; under the gpu tag they run only when asked for (-run, or
// testmain.EnvUnitTests=1).
const protocolTests = "^Test(GPUFacts|Protocol|Outputs|RegressionGate|Soak|Kubernetes|Fleet)$"

func run(m *testing.M) int {
	flag.Parse()
	testmain.Narrow(protocolTests)
	// A CI job that ends (a cancelled job, timeout, kill -TERM of the
	// process group) kills go test, which held this binary's stdout: the
	// next write would kill the run with SIGPIPE before its report. Ignored,
	// such writes fail and the run ends as for any signal.
	signal.Ignore(syscall.SIGPIPE)
	cfg, err := config.Load(os.Getenv)
	if ferr := testFlagsError(); ferr != nil { // the flags first: the config's problems after them
		err = errors.Join(ferr, err)
	}
	if err == nil { // a misspelt WAKEBENCH_ variable would leave its setting off without a word
		if err = config.CheckEnv(os.Environ()); err != nil {
			err = fmt.Errorf("config: %w", err)
		}
	}
	if err == nil { // an opt-in phase misspelt would not run, and nothing would say so
		if err = phases.CheckOptIn(cfg); err != nil {
			err = fmt.Errorf("config: %w", err)
		}
	}
	var plan traffic.Plan
	if err == nil { // the trace and the dataset, read and checked once, before any server starts
		budget := guardAfter(cfg, goTestTimeout())
		if f := flag.Lookup("test.run"); f != nil && !selected(f.Value.String(), "TestProtocol", record.PhaseTraffic) {
			budget = 0 // the traffic phase will not run: its inputs are checked, not its time
		}
		plan, err = traffic.NewPlan(cfg, budget)
		if err == nil && servingSelected(flagValue("test.run"), cfg) { // the serving rounds' requests in flight at once, each an open file
			c := slices.Max(cfg.Protocol.Concurrency)
			err = load.CheckOpenFiles("protocol.concurrency", c, "at that concurrency", c, load.OpenFileLimit())
		}
		if err == nil && cfg.Baseline != "" {
			// The baseline, read and checked as the gate will read it: a
			// FIFO, a report.json or another project's bench file fails
			// now, not after the whole protocol ran.
			err = gate.CheckBaseline(context.Background(), cfg.Baseline)
		}
		if err != nil {
			err = fmt.Errorf("config: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "wakebench: %v\n", err)
		if werr := harness.WriteAborted(cfg, "config", err); werr != nil {
			fmt.Fprintf(os.Stderr, "wakebench: %v\n", werr)
		}
		return 2
	}
	// A -run that selects no test (a typo) runs nothing, which go test
	// calls ok: a gate must not be green where nothing ran.
	if reason := selectsNothing(cfg); reason != "" {
		fmt.Fprintf(os.Stderr, "wakebench: NOT RUN: %s\n", reason)
		if werr := harness.WriteNotRun(cfg, reason); werr != nil {
			fmt.Fprintf(os.Stderr, "wakebench: %v\n", werr)
		}
		return 1
	}
	// -tags gpu with no config file on a machine without a GPU: nothing can
	// be measured, and a gate must not be green where nothing ran, so the
	// run FAILs with a NOT RUN report saying why; -short skips it.
	if reason := harness.NoGPU(cfg, os.Getenv); reason != "" {
		if testing.Short() {
			fmt.Printf("wakebench: skipped (-short): %s\n", reason)
			return 0
		}
		fmt.Fprintf(os.Stderr, "wakebench: FAIL: %s\n", reason)
		if werr := harness.WriteNotRun(cfg, reason); werr != nil {
			fmt.Fprintf(os.Stderr, "wakebench: %v\n", werr)
		}
		return 1
	}
	// go test -short with no -run and no -bench (make test): the whole
	// protocol is long; its tests skip, the harness's own quick ones run,
	// out_dir is left alone.
	if why := shortSkips(); why != "" {
		fmt.Printf("wakebench: %s\n", why)
		suite.skipped = why
		return m.Run()
	}
	// A run go test's -timeout cannot hold is refused before it starts, not
	// cut short by -timeout's panic part-way.
	if err := cfg.CheckTimeout(goTestTimeout()); err != nil {
		fmt.Fprintf(os.Stderr, "wakebench: %v\n", err)
		if werr := harness.WriteAborted(cfg, "config", err); werr != nil {
			fmt.Fprintf(os.Stderr, "wakebench: %v\n", werr)
		}
		return 2
	}
	if variantParent(cfg) { // no server here: each block's run of a variant is a child run
		return runVariants(cfg)
	}
	if config.GPUTag {
		// The GPU is the run's alone: internal/backend's and internal/cuda's
		// hardware tests, which go test ./... runs beside this package,
		// wait for it (and it for them).
		release, err := testmain.LockGPU()
		if err != nil {
			fmt.Fprintf(os.Stderr, "wakebench: %v\n", err)
			return 2
		}
		defer release()
	}
	// Ctrl-C, SIGTERM and SIGHUP end the phases; Close then stops every
	// server and writes the report. Signals are received until the last
	// output is written: a second one while the servers stop is absorbed
	// and noted in the report (stopSignals).
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := watchSignals(cancel)
	stop := sigs.stop
	var h *harness.Run
	hooks, err := harness.HooksFromEnv(os.Getenv)
	if err == nil {
		h, err = harness.OpenWith(ctx, cfg, hooks)
	}
	if err != nil {
		cancel(nil)
		stop()
		fmt.Fprintf(os.Stderr, "wakebench: %v\n", err)
		if werr := harness.WriteAborted(cfg, "setup", err); werr != nil {
			fmt.Fprintf(os.Stderr, "wakebench: %v\n", werr)
		}
		return 2
	}
	h.UseTrafficPlan(plan)
	suite.h, suite.ctx = h, ctx
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		report.WriteUnitMetadata(os.Stdout) // benchstat reads units' better= from go test output too
	}
	// go test -timeout panics without running deferred code: stop short of
	// it so the servers are stopped and the report is written.
	if guard := timeoutGuard(cfg, cancel, h); guard != nil {
		defer guard.Stop()
	}
	code := m.Run()
	cancel(nil)
	defer stop() // after the last output: a signal while the servers stop or the outputs are written is absorbed

	suite.mu.Lock()
	failed := suite.failed
	suite.mu.Unlock()
	if code != 0 && len(failed) == 0 && report.Build(h.Raw()).Status != "FAIL" {
		// A failed test outside the phases (a child run, TestOutputs) has
		// recorded nothing itself: the report must not say PASS.
		failed = append(failed, record.Failure{Phase: "go test", Error: fmt.Sprintf("go test exits %d: a test failed (see its output)", code)})
	}
	h.Stop()
	failed = append(failed, sigs.failures(h.Failures())...)
	if err := goleak.Find(goleak.IgnoreAnyFunction(signalWatcher)); err != nil {
		failed = append(failed, record.Failure{Phase: "go test", Error: fmt.Sprintf("goroutines left behind: %v", err)})
		code = max(code, 1)
	}
	rep, err := h.Write(failed)
	if err != nil {
		code = max(code, 1)
	}
	if rep.Status == "FAIL" { // NOT RUN (no phase ran: benchmarks only) is no failure
		code = max(code, 1)
	}
	// summary.md as Write wrote it (the summary is built and rendered
	// once); one that could not be written is rendered here instead.
	if md := h.Summary(); md != "" {
		_, _ = io.WriteString(os.Stdout, md)
	} else {
		_ = report.WriteSummary(os.Stdout, rep)
	}
	fmt.Print(harness.Ending(rep, err, cfg.OutDir))
	return code
}

// timeoutGuard arms a timer that ends the run before go test's -timeout
// fires: the phases are cancelled, and if they do not return in time every
// server is stopped anyway.
func timeoutGuard(cfg config.Config, cancel context.CancelCauseFunc, h *harness.Run) *time.Timer {
	d := goTestTimeout()
	if d <= 0 {
		return nil
	}
	grace := stopGrace(cfg)
	return time.AfterFunc(guardAfter(cfg, d), func() {
		fmt.Fprintf(os.Stderr, "wakebench: go test -timeout %v is near: stopping the run\n", d)
		cancel(record.Stopped{Reason: fmt.Sprintf("go test -timeout %v is near", d)})
		time.AfterFunc(grace, func() { _ = h.StopAll() }) // Close reports stop errors
	})
}

// stopGrace is what stopping every server may take: stop_s and 5 s.
func stopGrace(cfg config.Config) time.Duration {
	return time.Duration(cfg.Timeouts.StopS*float64(time.Second)) + 5*time.Second
}

// guardAfter is when the -timeout guard stops a run under go test's
// timeout d (0: none): two stop graces before d, or halfway.
func guardAfter(cfg config.Config, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return max(d-2*stopGrace(cfg), d/2)
}

// selected reports whether go test's -run pattern selects the test whose
// name at each level (a top-level test, then its subtest …) is names, as
// go test matches them: the pattern's |-separated alternatives, each
// /-separated part a regexp matching its level (config.RunPattern), a
// pattern without a part for a level selecting every name there.
func selected(pattern string, names ...string) bool {
	if pattern == "" {
		return true
	}
	return slices.ContainsFunc(config.RunPattern(pattern), func(alt []string) bool {
		for i, name := range names {
			if i >= len(alt) {
				return true
			}
			re, err := regexp.Compile(alt[i])
			if err != nil || !re.MatchString(name) {
				return false
			}
		}
		return true
	})
}

// packageTests are this package's top-level tests (its Test and Fuzz
// functions but TestMain) that a build with or without the gpu tag has:
// gpuTests are gpu_test.go's. go test's -run matches these names;
// TestTheTestListIsComplete keeps the lists the package's.
var (
	packageTests = []string{
		"TestAFleetCoordinatorIsNoVariantParent", "TestAnyServerWithoutMemoryPasses", "TestBadBaselineIsRefusedBeforeAnyServer", "TestBadTraceIsRefusedBeforeAnyServer",
		"TestBenchmarksLeaveTheReportAlone", "TestCIJobEndsWritesEverything", "TestConcurrencyBeyondTheFileLimitIsRefused", "TestConfigErrorReportsInTheConfiguredOutDir",
		"TestEveryEraPasses", "TestEveryFigureMeansItsName", "TestExitAndStatusAgree", "TestFleet", "TestFlagsThatCannotRunTheProtocol",
		"TestGoTestTimeoutStillCleansUp", "TestInterruptStopsEverything", "TestKilledHarnessLosesAtMostASecond", "TestKubernetes",
		"TestOutputs", "TestProtocol", "TestRegressionGate", "TestSelected", "TestSignalFailures", "TestSoak", "TestStaleOutputsAreReplaced",
		"TestTensorParallelTwoGPUs", "TestTheTestListIsComplete", "TestTrafficWithoutInFlightSleeps", "TestUnknownVariableIsRefusedBeforeAnyServer",
	}
	gpuTests = []string{"TestGPUFacts"}
)

// testsOf is the package's top-level tests in a build with the gpu tag
// (gpu) or without.
func testsOf(gpu bool) []string {
	if gpu {
		return append(slices.Clone(packageTests), gpuTests...)
	}
	return packageTests
}

// shortSkips says why this go test opens no run: -short with no -run
// and no -bench, as make test runs every package ("" otherwise). The
// protocol runs whole in make stress (this package without -short, under
// load), make bench, make runner and make figures (docs/testing.md).
func shortSkips() string {
	if !testing.Short() || flagValue("test.run") != "" || flagValue("test.bench") != "" {
		return ""
	}
	return "the protocol is long (simulated minutes): skipped by -short with no -run (make test); make stress runs it whole, once, under load, and make bench, make runner and make figures on their configs; -short -run TestProtocol runs it"
}

// skipShort skips a test of the run when none was opened (shortSkips).
func skipShort(t testing.TB) {
	t.Helper()
	if suite.skipped != "" {
		t.Skip(suite.skipped)
	}
}

// flagValue is go test's flag name ("test.run") as given, "" if none.
func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// testFlagsError says why go test's flags cannot run this package:
// -shuffle reorders the tests, whose order is the protocol's (TestOutputs
// and the regression gate read what TestProtocol measured before them),
// and a -run that is no pattern would stop go test after the run began.
func testFlagsError() error {
	var errs []error
	if s := flagValue("test.shuffle"); s != "" && s != "off" {
		errs = append(errs, fmt.Errorf("go test -shuffle %s: this package's tests run in the protocol's order (TestOutputs and the regression gate read what TestProtocol measured before them), which -shuffle would change: run without -shuffle", s))
	}
	if r := flagValue("test.run"); r != "" {
		if err := config.CheckRunPattern(r); err != nil {
			errs = append(errs, fmt.Errorf("go test -run %q: %w (a go test -run pattern: regexps separated by / for subtests)", r, err))
		}
	}
	return errors.Join(errs...)
}

// selectsNothing says why go test would run nothing here: a -run that
// selects none of the package's tests, with no -bench, -fuzz or -list
// beside it (-run '^$' -bench . runs the benchmarks alone); "" when it
// runs something, or no -run was given.
func selectsNothing(cfg config.Config) string {
	return runsNothing(flagValue("test.run"), flagValue("test.bench")+flagValue("test.fuzz")+flagValue("test.list") != "", cfg)
}

// servingSelected reports whether -run pattern runs a phase that serves
// at protocol.concurrency with cfg (phases.Serving: baseline, the
// after-wake phases, an opted-in wake-burst).
func servingSelected(pattern string, cfg config.Config) bool {
	return slices.ContainsFunc(phases.Serving(cfg), func(p string) bool { return selected(pattern, "TestProtocol", p) })
}

// runsNothing is selectsNothing's reason for -run pattern with cfg, other
// true where -bench, -fuzz or -list is given.
func runsNothing(pattern string, other bool, cfg config.Config) string {
	if pattern == "" || other || config.CheckRunPattern(pattern) != nil {
		return ""
	}
	runs := slices.DeleteFunc(slices.Clone(testsOf(config.GPUTag)), func(n string) bool { return !selected(pattern, n) })
	// TestProtocol alone, its pattern's phase part naming none of the
	// phases the config runs (-run 'TestProtocol/swich', or an opt-in
	// phase the config does not name): it runs and measures nothing.
	on := phases.Running(cfg)
	if slices.Equal(runs, []string{"TestProtocol"}) && !slices.ContainsFunc(on, func(p string) bool { return selected(pattern, "TestProtocol", p) }) {
		return fmt.Sprintf("go test -run %q selects TestProtocol but none of the phases this config runs (%s; a phase the config turns off, or an opt-in phase protocol.opt_in does not name, does not run), so nothing would be measured: name a phase (-run 'TestProtocol/switch')",
			pattern, strings.Join(on, ", "))
	}
	if len(runs) > 0 {
		return ""
	}
	why := fmt.Sprintf("go test -run %q selects none of this package's tests, so nothing ran: name a test (-run '^TestProtocol$'; a phase: -run 'TestProtocol/switch'; go test -list . lists them)", pattern)
	if gpu := slices.DeleteFunc(slices.Clone(gpuTests), func(n string) bool { return !selected(pattern, n) }); !config.GPUTag && len(gpu) > 0 {
		why += fmt.Sprintf("; %s is built with -tags gpu only", strings.Join(gpu, ", "))
	}
	return why
}

// goTestTimeout is go test's -timeout (0: none).
func goTestTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	d, _ := f.Value.(flag.Getter).Get().(time.Duration)
	return max(d, 0)
}

// begin marks t as the test of phase (a protocol phase, or another name
// such as "outputs"): if it fails and the phase recorded no failure of its
// own, the report says the test failed; a phase that recorded its failure
// is not recorded twice.
func begin(t *testing.T, phase string) (*harness.Run, context.Context) {
	t.Helper()
	skipShort(t)
	h := suite.h
	t.Cleanup(func() {
		if t.Failed() && !h.Failed(phase) {
			suite.mu.Lock()
			suite.failed = append(suite.failed, record.Failure{Phase: phase, Error: "test " + t.Name() + " failed (see the go test output)"})
			suite.mu.Unlock()
		}
	})
	return h, suite.ctx
}

// progress writes a phase's progress lines to the test's output (shown by
// go test -v), without source locations.
func progress(t testing.TB) protocol.Logf {
	return func(format string, args ...any) { fmt.Fprintf(t.Output(), format+"\n", args...) }
}

// passes asserts that no threshold check fails the run: each check that
// does is one line of go test's output, "check NAME (model X) = V, limit
// OP L: FAIL" (not testify's block per check). The checks are in
// report.json's checks either way, and summary.md lists each after the
// failure it follows from.
func passes(t testing.TB, checks []record.Check) {
	t.Helper()
	for _, c := range checks {
		// A threshold left at its default whose figure is absent (no
		// memory source) is reported, not failed.
		if c.Fails() {
			t.Errorf("check %s", c)
		}
	}
}

// TestTheTestListIsComplete: packageTests and gpuTests, which TestMain
// matches -run against, are the package's Test and Fuzz functions as its
// files declare them, with the gpu tag and without.
func TestTheTestListIsComplete(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, gpu := range []bool{false, true} {
		var got []string
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
			require.NoError(t, err)
			if !builtWith(t, f, gpu) {
				continue
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name != "TestMain" && isTestName(fd.Name.Name) {
					got = append(got, fd.Name.Name)
				}
			}
		}
		assert.ElementsMatch(t, got, testsOf(gpu), "gpu tag %v: the package's top-level tests; list a new one in packageTests (gpuTests for one built with -tags gpu only)", gpu)
	}
}

// builtWith reports whether f's //go:build line (if any) holds with or
// without the gpu tag on this machine's OS and architecture.
func builtWith(t *testing.T, f *ast.File, gpu bool) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			require.NoError(t, err)
			return expr.Eval(func(tag string) bool {
				return tag == "gpu" && gpu || tag == runtime.GOOS || tag == runtime.GOARCH || tag == "unix" || strings.HasPrefix(tag, "go1.")
			})
		}
	}
	return true
}

// isTestName reports whether name is a test go test runs: Test or Fuzz,
// then nothing or a character that is not lower case (go test's rule).
func isTestName(name string) bool {
	for _, prefix := range []string{"Test", "Fuzz"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			r, _ := utf8.DecodeRuneInString(rest)
			return rest == "" || !unicode.IsLower(r)
		}
	}
	return false
}

// TestFlagsThatCannotRunTheProtocol (issue 48): -shuffle reordered
// TestOutputs and the gate after TestProtocol, and a -run that matched no
// test (a typo) ran nothing and exited 0. Each child run below ends before
// any server: -shuffle is refused as a config error (exit 2, a FAIL
// report naming it), a -run that selects nothing exits 1 with a NOT RUN
// report naming the pattern.
func TestFlagsThatCannotRunTheProtocol(t *testing.T) {
	if os.Getenv("WAKEBENCH_CHILD") != "" {
		t.Skip("this is a child run")
	}
	// What the package's child runs, its Makefile, scripts and image ask
	// for still runs; a pattern that names no test does not.
	for _, p := range []string{protocolTests, "^TestProtocol$", "^Test(Protocol|Outputs)$", "^TestExitAndStatusAgree$", "TestProtocol/switch",
		"^TestSoak$", "^TestKubernetes$", "^TestFleet$", "^TestEveryFigureMeansItsName$", "^Test(GPUFacts|Protocol|Outputs)$", "^TestNoSuch$|^TestSelected$"} {
		assert.Empty(t, runsNothing(p, false, config.Default()), p)
	}
	assert.Empty(t, runsNothing("^$", true, config.Default()), "-run '^$' -bench .")
	for _, p := range []string{"^TestNoSuch$", "TestProtocl", "^$", "^TestProtocol$x|^Nothing$/switch"} {
		assert.Contains(t, runsNothing(p, false, config.Default()), fmt.Sprintf("go test -run %q selects none of this package's tests", p))
	}
	// A phase part that names no phase: TestProtocol would run and measure nothing.
	for _, p := range []string{"TestProtocol/swich", "^TestProtocol$/^sleep-level3$"} {
		assert.Contains(t, runsNothing(p, false, config.Default()), fmt.Sprintf("go test -run %q selects TestProtocol but none of the phases this config runs (restart, baseline,", p))
	}
	// An opt-in phase runs only where the config names it.
	assert.Contains(t, runsNothing("TestProtocol/wake-burst$", false, config.Default()), "an opt-in phase protocol.opt_in does not name")
	opted := config.Default()
	opted.Protocol.OptIn = []string{phases.WakeBurst}
	assert.Empty(t, runsNothing("TestProtocol/wake-burst$", false, opted))
	for _, p := range []string{"^TestProtocol$/^sleep-level1$", "TestProtocol/sleep", "TestProtocol/after-wake$", "Test(Protocol|Outputs)/swich"} {
		assert.Empty(t, runsNothing(p, false, config.Default()), p)
	}
	if !config.GPUTag {
		assert.Contains(t, runsNothing("^TestGPUFacts$", false, config.Default()), "; TestGPUFacts is built with -tags gpu only")
	}
	for _, tc := range []struct {
		args   []string
		code   int
		status string
		reason string
	}{
		{[]string{"-test.run=^TestProtocol$", "-test.shuffle=on"}, 2, "FAIL",
			"go test -shuffle on: this package's tests run in the protocol's order (TestOutputs and the regression gate read what TestProtocol measured before them), which -shuffle would change: run without -shuffle"},
		{[]string{"-test.run=^TestNoSuch$"}, 1, report.StatusNotRun,
			`go test -run "^TestNoSuch$" selects none of this package's tests, so nothing ran: name a test`},
	} {
		t.Run(tc.args[len(tc.args)-1], func(t *testing.T) {
			out := t.TempDir()
			b, err := runChild(t, out, nil, tc.args...)
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, string(b))
			assert.Equal(t, tc.code, ee.ExitCode(), string(b))
			assert.Contains(t, string(b), tc.reason)
			rep := readChildReport(t, out)
			assert.Equal(t, tc.status, rep.Status)
			if tc.status == "FAIL" {
				require.Len(t, rep.Failures, 1)
				assert.Equal(t, "config", rep.Failures[0].Phase)
				assert.Contains(t, rep.Failures[0].Error, tc.reason)
			} else {
				assert.Contains(t, rep.NotRunReason, tc.reason)
			}
			assert.Contains(t, rep.GPU, "the run did not start", "no server, no backend")
		})
	}
}
