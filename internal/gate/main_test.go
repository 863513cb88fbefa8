package gate

import (
	"testing"

	"github.com/wakebench/wakebench/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m, "") }
