// Package testmain is the TestMain of wakebench's internal packages: it checks that a package's
// tests leave no goroutine behind (goleak) and, in a build with the gpu tag, runs only the
// package's hardware tests, so that the design card's `go test -tags gpu ./...` on a GPU runner
// spends its time on the GPU: the harness's own tests run on vllmsim, the same with or without
// the tag, and make test runs them (WAKEBENCH_UNIT_TESTS=1 runs them under the tag too).
package testmain

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/wakebench/wakebench/internal/config"
)

// EnvUnitTests set to 1 runs every test of a package under the gpu tag.
const EnvUnitTests = "WAKEBENCH_UNIT_TESTS"

// Main runs m's tests, then fails the package if any goroutine is left
// behind; first, Narrow(hardware).
func Main(m *testing.M, hardware string) {
	Narrow(hardware)
	goleak.VerifyTestMain(m)
}

// Narrow, in a build with the gpu tag and unless the user chose tests with
// -run or set EnvUnitTests, has the package run only the tests that
// hardware matches (a -run pattern; "" for none), saying why on standard
// output. A TestMain of its own calls it before m.Run.
func Narrow(hardware string) {
	flag.Parse()
	run, why := Selection(config.GPUTag, flag.Lookup("test.run").Value.String(), os.Getenv(EnvUnitTests), hardware)
	if why == "" {
		return
	}
	if err := flag.Set("test.run", run); err != nil {
		fmt.Fprintf(os.Stderr, "testmain: -run %q: %v\n", run, err)
		os.Exit(2)
	}
	fmt.Println(why)
}

// Selection is the -run pattern Main sets, and why ("" where it sets none:
// a build without the gpu tag, a -run the user gave, EnvUnitTests=1).
func Selection(gpuTag bool, userRun, unitTests, hardware string) (run, why string) {
	if !gpuTag || userRun != "" || unitTests == "1" {
		return "", ""
	}
	why = "testmain: -tags gpu: this package's own tests run on vllmsim, the same with or without the tag (make test runs them; " + EnvUnitTests + "=1 runs them here)"
	if hardware == "" {
		return "^$", why + ": no hardware test here"
	}
	return hardware, why + ": only its hardware tests run (" + hardware + ")"
}

// Long marks t as a long test: many simulated seconds end to end (a child
// run of the whole protocol, a soak, every phase against a fault, a run
// of several servers through each phase). go test -short, make test's
// quick loop, skips it and says where it runs: go test without -short runs
// every test, and CI's make stress runs every test of its packages once,
// without -short, with every core busy (docs/testing.md's table lists each
// check and where it runs). A package that calls Long must be one of make
// stress's packages: internal/docs checks that.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip(LongSkip)
	}
}

// LongSkip is what a long test says when -short skips it.
const LongSkip = "long (simulated seconds end to end): skipped by -short (make test); make stress runs it, once, under load (docs/testing.md)"
