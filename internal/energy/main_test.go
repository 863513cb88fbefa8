package energy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them (a
// Trace reads in the background until it is stopped).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
