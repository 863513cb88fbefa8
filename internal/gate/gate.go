// Package gate is the regression gate: it judges a run's benchmark
// results against baseline runs' (their per-run medians, a history's
// change points, or one run's noise floor) and says which metrics moved
// beyond their noise, as one check (Comparison). Each phase's threshold
// checks are its own package's, beside it. The gate records nothing
// itself and reads the one benchfmt reader (ReadBench) that the
// regression gate and make perf share.
package gate
