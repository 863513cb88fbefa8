package variants

import (
	"testing"

	"github.com/wakebench/wakebench/internal/testmain"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { testmain.Main(m, "") }
