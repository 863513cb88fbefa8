#!/usr/bin/env bash
# perf.sh — `make perf`: the harness overhead benchmarks (internal/perf and
# the client's parse benchmark), the request-rate comparison with wrk and
# vegeta (scripts/peers.sh), then one table: figure, goal, measured, ratio.
# Files land in $PERF_OUT (default out/perf). Exit 1 when a goal is missed,
# or with PERF_REPORT_MISSES=1 (CI's short run) only when a benchmark broke:
# a missed goal is then a MISS row in the table, a figure not measured fails.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${PERF_OUT:-out/perf}
mkdir -p "$out"
out=$(realpath "$out")
benchtime=${PERF_BENCHTIME:-2s}
count=${PERF_COUNT:-1} # runs of each benchmark: the table shows medians; benchstat wants 6+

tags=${PERF_TAGS:-} # "gpu" on a GPU runner adds the NVML sampler
go test -tags "$tags" -c -o "$out/perf.test" ./internal/perf
# vllmsim is pinned to CPU 0 by the benchmarks; the harness runs on CPU 1.
pin=() machine="not pinned (one CPU or no taskset)"
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
	pin=(taskset -c 1) machine="vllmsim on CPU 0, harness on CPU 1"
fi
(cd internal/perf && "${pin[@]}" "$out/perf.test" -test.run '^$' -test.benchtime "$benchtime" -test.count "$count" \
	-test.bench '^Benchmark(StreamOverhead|LoopbackFloor|StreamCapacity|Sampler|SamplerNVML|ReadyResolution|WakeResolution|PhysicalLimits|OpenLoopSchedule)$') | tee "$out/bench.txt"
"${pin[@]}" go test -run '^$' -bench '^BenchmarkStreamRead$' -benchtime "$benchtime" -count "$count" ./internal/vllm | tee "$out/client.txt"
# Without the peers (no root for apt, no network) the table still prints; their row says "not measured".
scripts/peers.sh "$out/perf.test" "$out/peers.txt" || echo "perf: scripts/peers.sh failed (above); the request-rate goal is not measured" >&2
echo
misses=()
[ "${PERF_REPORT_MISSES:-}" = 1 ] && misses=(-report-misses)
go run ./cmd/perftable -machine "$machine" "${misses[@]}" "$out/bench.txt" "$out/client.txt" "$out/peers.txt" | tee "$out/table.txt"
