package testmain

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSelection: only a gpu-tag build narrows a package's tests, and never
// where the user chose tests or asked for all of them.
func TestSelection(t *testing.T) {
	for name, tc := range map[string]struct {
		gpu                  bool
		userRun, unit, hw    string
		wantRun, wantWhyPart string
	}{
		"no tag":                {false, "", "", "^TestReal", "", ""},
		"tag, no hardware":      {true, "", "", "", "^$", "no hardware test here"},
		"tag, hardware":         {true, "", "", "^TestReal", "^TestReal", "only its hardware tests run (^TestReal)"},
		"tag, the user's -run":  {true, "TestX", "", "^TestReal", "", ""},
		"tag, unit tests asked": {true, "", "1", "^TestReal", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			run, why := Selection(tc.gpu, tc.userRun, tc.unit, tc.hw)
			assert.Equal(t, tc.wantRun, run)
			if tc.wantWhyPart == "" {
				assert.Empty(t, why)
				return
			}
			assert.Contains(t, why, tc.wantWhyPart)
			assert.Contains(t, why, "make test runs them")
		})
	}
}
