#!/usr/bin/env bash
# make device-check's run: on a machine with an NVIDIA GPU and its driver (vLLM not needed), the
# binaries make device-check-build put in bin/device-check: NVML and CUDA hardware tests, the
# link probe, then the protocol with vllmsim in real-device mode (testdata/device.json); it
# prints the report's summary and the figures to compare with the floors. Exits non-zero when
# any part fails, after running the others. DEVICE_OUT overrides the output directory.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=bin/device-check
out=${DEVICE_OUT:-out/device-check}
for f in wakebench.test backend.test cuda.test vllmsim; do
	[ -x "$bin/$f" ] || { echo "device-check: $bin/$f missing: run make device-check-build (on a machine with Go) first" >&2; exit 2; }
done
status=0
step() { echo; echo "=== device-check: $*"; }
step "the GPU"
nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1 || echo "(nvidia-smi not available)"
step "CUDA driver: memory and copies (internal/cuda, -tags gpu)"
(cd internal/cuda && "../../$bin/cuda.test" -test.v -test.count=1 -test.timeout 2m) || status=1
step "NVML hardware tests and the link probe (internal/backend, -tags gpu)"
(cd internal/backend && "../../$bin/backend.test" -test.v -test.count=1 -test.timeout 3m -test.run '^Test(Real|NVMLSees|SamplerRate)') || status=1
step "the protocol, vllmsim in real-device mode (testdata/device.json)"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
WAKEBENCH_CONFIG=testdata/device.json WAKEBENCH_OUT_DIR="$out" WAKEBENCH_VLLMSIM="$bin/vllmsim" \
	"$bin/wakebench.test" -test.v -test.count=1 -test.timeout 8m -test.run '^Test(GPUFacts|Protocol|Outputs)$' 2>&1 | tee "$out.log" | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|link probe|Error|error' | grep -v '^=== RUN.*/' 
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
step "summary ($out/summary.md)"
cat "$out/summary.md" 2>/dev/null || { echo "no summary: see $out.log"; status=1; }
step "against the floors ($out/report.json)"
python3 - "$out/report.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
print("status:", r.get("status"), "| gpu:", r.get("gpu"), "| runtime:", r.get("runtime"))
for l in r.get("link_probe") or []:
    print("link: %s: host→device %.2f GB/s, device→host %.2f GB/s, nominal %.2f GB/s (%.2f of it)" % (l["gpu"], l["h2d_gbps"], l["d2h_gbps"], l["nominal_gbps"], l["h2d_fraction_of_nominal"]))
if r.get("link_note"):
    print("link note:", r["link_note"])
print("attribution:", (r.get("memory") or {}).get("attribution"))
for label, m in sorted((r.get("models") or {}).items()):
    lim = m.get("physical_limits") or {}
    s1, s2 = (m.get("sleep") or {}).get("1") or {}, (m.get("sleep") or {}).get("2") or {}
    med = lambda s, k: (s.get(k) or {}).get("median")
    print("%s %s: weights %s GiB; L1 sleep %s s, wake %s s vs floor %s s at %s GB/s %s (fraction %s); L2 sleep %s s, wake %s s; residual %s GiB; TPOT c=1 %s s vs floor %s s" % (
        label, m.get("name"), lim.get("weight_gib"), med(s1, "sleep_s"), med(s1, "wake_api_s"), lim.get("l1_wake_floor_s"), lim.get("pcie_gbps"), lim.get("pcie_basis"),
        lim.get("l1_wake_fraction_of_floor"), med(s2, "sleep_s"), med(s2, "wake_api_s"), med(s1, "residual_gib"), lim.get("tpot_c1_s"), lim.get("tpot_floor_s")))
for c in r.get("checks") or []:
    if c.get("verdict") != "PASS":
        print("check %s %s: %s %s %s %s %s" % (c.get("verdict"), c.get("name"), c.get("model", ""), c.get("value"), c.get("op"), c.get("limit"), c.get("reason", "")))
for f in r.get("failures") or []:
    print("failure:", f)
PY
echo
if [ $status -eq 0 ]; then echo "device-check: PASS (report: $out/report.json)"; else echo "device-check: FAIL (see above; the protocol's log: $out.log)"; fi
exit $status
