package wakebench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/fleetjob"
	"github.com/wakebench/wakebench/internal/gate"
	"github.com/wakebench/wakebench/internal/harness"
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
	if err == nil { // a misspelt WAKEBENCH_ variable would leave its setting off without a word
		if err = config.CheckEnv(os.Environ()); err != nil {
			err = fmt.Errorf("config: %w", err)
		}
	}
	var plan traffic.Plan
	if err == nil { // the trace and the dataset, read and checked once, before any server starts
		budget := guardAfter(cfg, goTestTimeout())
		if f := flag.Lookup("test.run"); f != nil && !selected(f.Value.String(), "TestProtocol", protocol.PhaseTraffic) {
			budget = 0 // the traffic phase will not run: its inputs are checked, not its time
		}
		plan, err = traffic.NewPlan(cfg, budget)
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
	// A run go test's -timeout cannot hold is refused before it starts, not
	// cut short by -timeout's panic part-way.
	if err := cfg.CheckTimeout(goTestTimeout()); err != nil {
		fmt.Fprintf(os.Stderr, "wakebench: %v\n", err)
		if werr := harness.WriteAborted(cfg, "config", err); werr != nil {
			fmt.Fprintf(os.Stderr, "wakebench: %v\n", werr)
		}
		return 2
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
	// server and writes the report.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	stop := func() { signal.Stop(sigs); close(sigs) }
	go func() {
		if sig, ok := <-sigs; ok {
			fmt.Fprintf(os.Stderr, "wakebench: %v: stopping the run\n", sig)
			cancel(record.Stopped{Reason: fmt.Sprintf("interrupted by %v", sig)})
		}
	}()
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
	stop()

	suite.mu.Lock()
	failed := suite.failed
	suite.mu.Unlock()
	if code != 0 && len(failed) == 0 && report.Build(h.Raw()).Status != "FAIL" {
		// A failed test outside the phases (a child run, TestOutputs) has
		// recorded nothing itself: the report must not say PASS.
		failed = append(failed, record.Failure{Phase: "go test", Error: fmt.Sprintf("go test exits %d: a test failed (see its output)", code)})
	}
	h.Stop()
	if err := goleak.Find(); err != nil {
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
	_ = report.WriteSummary(os.Stdout, rep)
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

// selected reports whether go test's -run pattern selects test's subtest
// sub: each /-separated part of the pattern matches its level, as go test
// matches them (a pattern without a second part runs every subtest).
func selected(pattern, test, sub string) bool {
	if pattern == "" {
		return true
	}
	parts := strings.Split(pattern, "/")
	for i, name := range []string{test, sub} {
		if i >= len(parts) {
			return true
		}
		re, err := regexp.Compile(parts[i])
		if err != nil || !re.MatchString(name) {
			return false
		}
	}
	return true
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
