#!/usr/bin/env bash
# make nogpu: what `go test -tags gpu ./...` does on a machine without an
# NVIDIA driver (a GPU runner whose driver failed to load): the root package
# FAILs, naming the driver to install, and leaves a NOT RUN report.json with
# that reason; with -short the hardware tests are skipped and it passes. On
# a machine with the driver there is nothing to check.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
if ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; then
	echo "nogpu: this machine has an NVIDIA driver (libnvidia-ml.so.1): nothing to check"
	exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "nogpu: FAIL: $*" >&2; cat "$out/test.log" >&2 || true; exit 1; }
if env -u WAKEBENCH_CONFIG WAKEBENCH_OUT_DIR="$out" $GO test -tags gpu -count=1 . >"$out/test.log" 2>&1; then
	fail "go test -tags gpu passed on a machine without a GPU: nothing was measured"
fi
grep -q 'install the NVIDIA driver' "$out/test.log" || fail "the failure does not say what to install"
grep -Eq '"status": *"NOT RUN"' "$out/report.json" || fail "report.json is not NOT RUN"
grep -q '"not_run_reason": *".*libnvidia-ml' "$out/report.json" || fail "report.json does not say why"
echo "nogpu: go test -tags gpu without a GPU FAILs with a NOT RUN report: $(grep -o 'has none: [^;]*' "$out/test.log" | head -1)"
env -u WAKEBENCH_CONFIG WAKEBENCH_OUT_DIR="$out" $GO test -short -tags gpu -count=1 . ./internal/backend ./internal/cuda
echo "nogpu: go test -short -tags gpu skips the hardware tests and passes"
# make device-check without a GPU: its binaries build (cgo, the gpu tag, the CUDA driver opened only
# at run time), and running them fails, naming the driver, with a report that says why.
make -s device-check-build GO="$GO" >/dev/null 2>"$out/build.log" || { cat "$out/build.log" >&2; fail "make device-check-build failed"; }
if DEVICE_OUT="$out/device-check" scripts/device-check.sh >"$out/device.log" 2>&1; then
	cat "$out/device.log" >&2; fail "scripts/device-check.sh passed on a machine without a GPU"
fi
grep -q 'libcuda.so.1 cannot be loaded: install the NVIDIA driver' "$out/device.log" || { cat "$out/device.log" >&2; fail "the device check does not say what to install"; }
grep -q '^device-check: FAIL' "$out/device.log" || { cat "$out/device.log" >&2; fail "the device check does not end with its verdict"; }
echo "nogpu: make device-check builds, and without a GPU FAILs naming the driver"
