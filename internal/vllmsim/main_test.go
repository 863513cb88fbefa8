package vllmsim

import (
	"os"
	"testing"

	"github.com/wakebench/wakebench/internal/testmain"
)

// TestMain fails the package's tests if any goroutine outlives them. Run
// as a rank process of a tensor-parallel server the tests start in
// process, it is that rank (rank.go starts this program again).
func TestMain(m *testing.M) {
	if os.Getenv(EnvWorkerRank) != "" {
		os.Exit(Worker(os.Getenv, os.Stdin, os.Stdout))
	}
	testmain.Main(m, "")
}
