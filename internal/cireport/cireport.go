package cireport

import (
	"math"
	"strconv"

	"github.com/wakebench/wakebench/internal/record"
)

// Names shared by the formats: the run's suite, each model's, and the
// suite of the run's failures.
const (
	toolName     = "wakebench"
	failureSuite = toolName + ".failures"
)

// Verdicts a check can carry besides record.NotEvaluated.
const (
	verdictPass = "PASS"
	verdictFail = "FAIL"
)

// suiteName is the suite a check with model label model belongs to:
// "wakebench.<model>", or "wakebench" for a run-level check.
func suiteName(model string) string {
	if model == "" {
		return toolName
	}
	return toolName + "." + model
}

// failureWhere names where a failure happened: its phase, model and step,
// the empty ones left out, e.g. "sleep/A/wake"; "run" when it names none.
func failureWhere(f record.Failure) string {
	if w := f.Where("/"); w != "" {
		return w
	}
	return "run"
}

// formatFloat writes v in the shortest form that reads back as v ("NaN",
// "+Inf" and "-Inf" for the non-finite).
func formatFloat(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }
