#!/usr/bin/env bash
# make runner: the design card's command exactly as README.md gives it,
#   go test -tags gpu -timeout 0 ./...
# run here as on a user's GPU runner whose vLLM is on PATH, but with no GPU:
# the `vllm` on PATH is a stand-in (vllmsim, which takes `vllm serve`'s command
# line, installed as bin/standin/vllm as a virtual environment installs vllm)
# and the config (RUNNER_CONFIG, testdata/runner.json) says "memory": "none"
# (no NVML). It must be green: the protocol PASSes and writes its report
# (labelled simulated: the server says it is vllmsim), the NVML and CUDA
# hardware tests skip naming the config, and every internal package runs
# only its hardware tests under the tag (package testmain) or none.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
cfg=${RUNNER_CONFIG:-testdata/runner.json}
standin=$PWD/bin/standin
mkdir -p "$standin"
$GO build -o "$standin/vllmsim" ./cmd/vllmsim
# The stand-in's profile and scales: what a real vllm would take from the GPU.
cat >"$standin/vllm" <<EOF
#!/bin/sh
# A stand-in for a virtual environment's vllm: vllmsim behind vllm serve's command line.
export VLLMSIM_PROFILE="\${VLLMSIM_PROFILE:-tiny}" VLLMSIM_HOST_SCALE="\${VLLMSIM_HOST_SCALE:-0.05}"
exec "$standin/vllmsim" "\$@"
EOF
chmod +x "$standin/vllm"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "runner: FAIL: $*" >&2; exit 1; }
dir=$(sed -n 's/.*"out_dir": *"\([^"]*\)".*/\1/p' "$cfg")
[ -n "$dir" ] || fail "$cfg names no out_dir"
rm -rf "$dir" # a report left by an earlier run must not pass for this one's
echo "runner: WAKEBENCH_CONFIG=$cfg, vllm = $standin/vllm"
export WAKEBENCH_CONFIG=$cfg PATH="$standin:$PATH"
# The card's command, as README.md gives it: plain go, as a user types it.
set +e
go test -tags gpu -timeout 0 ./... 2>&1 | grep -v -e '^cgo-gcc-prolog' -e 'deprecated' -e '^In file included' -e '^ *|' -e '^[0-9]* |' -e 'note: declared here' | tee "$out/log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || fail "the card's command failed (exit $rc, above)"
grep -Eq '"status": *"PASS"' "$dir/report.json" || fail "$dir/report.json is not PASS"
grep -Eq '"source": *"none"' "$dir/report.json" || fail "$dir/report.json: memory source is not none"
grep -q '"simulated"' "$dir/report.json" || fail "$dir/report.json is not labelled simulated"
head -1 "$dir/summary.md"
echo "runner: the card's command is green with a stand-in vllm on PATH and no NVML; report in $dir"
