package wakebench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	b, err := runChild(t, out, []string{typo + "=" + t.TempDir()}, "-test.run=^TestProtocol$")
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, string(b))
	assert.Equal(t, 2, ee.ExitCode())
	rep := readChildReport(t, out)
	assert.Equal(t, "FAIL", rep.Status)
	require.Len(t, rep.Failures, 1)
	assert.Equal(t, "config", rep.Failures[0].Phase)
	assert.Contains(t, rep.Failures[0].Error, "config: environment: "+typo+" names no wakebench setting (did you mean WAKEBENCH_BASELINE?)")
	assert.NoFileExists(t, filepath.Join(out, "A.log"), "no server was started")
}
