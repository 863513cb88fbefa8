package energy

import (
	"testing"

	"github.com/wakebench/wakebench/internal/testmain"
)

// TestMain fails the package's tests if any goroutine outlives them (a
// Trace reads in the background until it is stopped).
func TestMain(m *testing.M) { testmain.Main(m, "") }
