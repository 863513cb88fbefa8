package cirecipes

import (
	"testing"

	"github.com/wakebench/wakebench/internal/testmain"
)

// No hardware test here: under -tags gpu (a user's GPU job, where CI is
// set and shellcheck may be missing) the package runs none.
func TestMain(m *testing.M) { testmain.Main(m, "") }
