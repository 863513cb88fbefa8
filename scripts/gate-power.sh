#!/usr/bin/env bash
# make gate-power: the regression gate's false-alarm rate and power, measured.
# On vllmsim's tiny profile with a short protocol (testdata/gate-power.json,
# ~20 s a run): BASE runs of the code as it is make the baseline; then RERUNS
# runs each of the same code, of a 1.5x slower run (sim time scale 1.5) and of
# a 10 % slower wake alone (vllmsim fault slow-wake=1.1), each judged against
# a baseline of 1 run and of BASE runs at the default thresholds (and at
# PERCENT2 % tolerance). Prints one table; the runs stay in $OUT. Exits 1
# when a run wrote no bench.txt (the suite is broken, not the gate judged)
# or wakegate failed (exit 2: it judged nothing), or the in-suite gate
# (README: WAKEBENCH_BASELINE=runs/ go test) judged nothing; a run whose
# protocol FAILs a threshold still counts (slower runs may).
set -euo pipefail
RERUNS=${RERUNS:-10}
BASE=${BASE:-5}
PERCENT2=${PERCENT2:-5}
OUT=${OUT:-out/gate-power}
GO=${GO:-go}
rm -rf "$OUT" && mkdir -p "$OUT/bin" "$OUT/base"
OUT=$(cd "$OUT" && pwd)
$GO test -c -o "$OUT/bin/wakebench.test" .
$GO build -o "$OUT/bin/wakegate" ./cmd/wakegate
root=$(pwd)
one() { # one DIR CONFIG [ENV=VALUE…]: one protocol run into DIR
	local dir=$1 cfg=$2; shift 2
	mkdir -p "$dir"
	if ! env WAKEBENCH_CONFIG="$root/$cfg" WAKEBENCH_OUT_DIR="$dir" "$@" "$OUT/bin/wakebench.test" \
		-test.run '^TestProtocol$' -test.count=1 >"$dir/test.log" 2>&1; then
		echo "run $dir failed (the protocol, not the gate): see $dir/test.log" >&2
	fi
}
for i in $(seq 1 "$BASE"); do one "$OUT/base/$i" testdata/gate-power.json; done
for i in $(seq 1 "$RERUNS"); do
	one "$OUT/same/$i" testdata/gate-power.json
	one "$OUT/slow1.5/$i" testdata/gate-power.json WAKEBENCH_SIM_TIME_SCALE=1.5
	one "$OUT/slowwake1.1/$i" testdata/gate-power-slow-wake.json
done
broken=0
printf '%-12s %-9s %-11s %s\n' scenario baseline tolerance "flagged (runs with a regression)"
for sc in same slow1.5 slowwake1.1; do
	for b in 1 "$BASE"; do
		spec="$OUT/base"
		[ "$b" = 1 ] && spec="$OUT/base/1/bench.txt"
		for pct in default "$PERCENT2"; do
			flags=()
			[ "$pct" = default ] || flags=(-percent "$pct")
			n=0
			for i in $(seq 1 "$RERUNS"); do
				f="$OUT/$sc/$i/bench.txt"
				[ -f "$f" ] || continue
				rc=0
				"$OUT/bin/wakegate" -q "${flags[@]}" "$spec" "$f" >"$OUT/$sc/$i/gate-$b-$pct.txt" 2>&1 || rc=$?
				case $rc in
				0) ;;
				1) n=$((n + 1)) ;; # a regression flagged
				*) echo "gate-power: wakegate failed (exit $rc) on $f: $(tail -1 "$OUT/$sc/$i/gate-$b-$pct.txt")" >&2; broken=1 ;;
				esac
			done
			printf '%-12s %-9s %-11s %d of %d\n' "$sc" "$b run(s)" "$pct" "$n" "$RERUNS"
		done
	done
done
# The README's in-suite gate: one more run with WAKEBENCH_BASELINE naming the
# baseline directory, judged by TestRegressionGate as a user's go test is.
# Whatever it finds (a same-code run may be flagged: the table above says how
# often), it must have judged: compare.txt is written only then.
mkdir -p "$OUT/insuite"
env WAKEBENCH_CONFIG="$root/testdata/gate-power.json" WAKEBENCH_OUT_DIR="$OUT/insuite" WAKEBENCH_BASELINE="$OUT/base" \
	"$OUT/bin/wakebench.test" -test.run '^Test(Protocol|RegressionGate)$' -test.count=1 -test.v >"$OUT/insuite/test.log" 2>&1 || true
if [ -s "$OUT/insuite/compare.txt" ] && grep -Eq -- '--- (PASS|FAIL): TestRegressionGate' "$OUT/insuite/test.log"; then
	echo "in-suite gate (WAKEBENCH_BASELINE=$OUT/base): judged ($(grep -Eo -- '--- (PASS|FAIL): TestRegressionGate' "$OUT/insuite/test.log")); see $OUT/insuite/compare.txt"
else
	echo "gate-power: the in-suite gate (WAKEBENCH_BASELINE) judged nothing: see $OUT/insuite/test.log" >&2
	broken=1
fi
echo "machine: $(nproc) cores, $(uname -m), load $(cut -d' ' -f1-3 /proc/loadavg)"
for d in "$OUT"/base/* "$OUT"/same/* "$OUT"/slow1.5/* "$OUT"/slowwake1.1/*; do
	[ -f "$d/bench.txt" ] || { echo "gate-power: $d wrote no bench.txt: see $d/test.log" >&2; broken=1; }
done
exit "$broken"
