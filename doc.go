// Package wakebench benchmarks and gates vLLM sleep mode: several models
// sharing one GPU, each put to sleep and woken instead of restarted.
//
// The suite is this package's tests: TestMain owns the servers, the GPU
// memory sampler and the report; each phase (restart, baseline, sleep
// levels 1 and 2, after-wake, switching, traffic) is a test whose thresholds are
// testify assertions. Run it with
//
//	go test ./...                                          # vllmsim, tiny profile
//	WAKEBENCH_CONFIG=testdata/demo.json go test -v .       # make bench
//	WAKEBENCH_CONFIG=gpu.json go test -tags gpu -timeout 0 .
//
// It writes out/report.json (the reference report's shape), out/bench.txt
// (benchfmt, for benchstat) and out/samples.csv. See README.md.
package wakebench
