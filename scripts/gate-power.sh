#!/usr/bin/env bash
# make gate-power: the regression gate's false-alarm rate and power, measured
# (issue 35; docs/compare.md shows the table). On vllmsim's tiny profile with
# a short protocol (testdata/gate-power.json, ~55 s a run on 2 cores) it makes
# these runs, each a TestProtocol of the code as it is, into
# $OUT/<scenario>/<i>:
#   base          BASE runs on the quiet machine (the baseline)
#   same          RERUNS runs of the same code, quiet
#   slow1.5       RERUNS runs 1.5x slower (vllmsim time scale 1.5), quiet
#                 (LOAD=0 only)
#   slowwake1.1   RERUNS runs whose every wake is 10 % slower (vllmsim fault
#                 slow-wake=1.1), quiet
# and with LOAD=1 first, under a CPU hog on every core (cmd/cpuhog):
#   base-load     BASE runs
#   same-load     RERUNS runs of the same code
#   slow1.5-load  RERUNS runs 1.5x slower
# Then cmd/gatepower judges every run with wakegate's rules at the defaults
# (against the first five baseline runs, all BASE of them, and each alone),
# injects into the same-code runs the changes users fear (every request but
# the fastest twice as slow; the p95 of the requests after the first wave
# doubled; the first wave twice as slow) and every metric's stated power and
# half of it, and prints one table with the machine and its load,
# each row beside its goal. Exits 1 when a goal is missed (GOALS=0: report
# only, CI's short run), a run wrote no bench.txt (the suite is broken, not
# the gate judged), or the in-suite gate (README: WAKEBENCH_BASELINE=runs/
# go test) judged nothing; a run whose protocol FAILs a threshold still counts
# (slower runs may). STAGES picks what runs: "load quiet judge" (the
# default; load only with LOAD=1); STAGES=judge judges the runs in $OUT again.
# VARIANTS=1 adds the variant runs (docs/variants.md; STAGES "variants"):
# RERUNS of testdata/variants-gate-power.json (two variants of the same
# code) into variants-same and RERUNS of
# testdata/variants-gate-power-slow-wake.json (the second variant's every
# wake 10 % slower) into variants-slowwake1.1, each a run of 4 blocks
# judged in itself (no baseline); with LOAD=1 first the same two under the
# CPU hog, into variants-same-load and variants-slowwake1.1-load
# (VARIANT_BLOCKS_LOAD=N: those with N blocks, not the configs' 4);
# STAGES=variants runs only them.
# RERUNS=20 BASE=10 take about 70 minutes on 2 cores, LOAD=1 about 115; a
# variant run about 3 minutes quiet, 7 under the hog (two at a time).
# JOBS=N runs up to N quiet runs, and N variant runs, at once (default 1):
# for CI's smoke, which checks the pipeline, not the rates (GOALS=0); runs
# side by side share the cores, so the gate's measurement keeps JOBS=1. A
# variant run is judged within itself (its variants share whatever else
# runs), so its rows were measured two at a time (JOBS=2).
set -euo pipefail
RERUNS=${RERUNS:-20}
BASE=${BASE:-10}
LOAD=${LOAD:-0}
GOALS=${GOALS:-1}
OUT=${OUT:-out/gate-power}
GO=${GO:-go}
VARIANTS=${VARIANTS:-0}
VARIANT_BLOCKS_LOAD=${VARIANT_BLOCKS_LOAD:-}
[[ -z $VARIANT_BLOCKS_LOAD || ($VARIANT_BLOCKS_LOAD =~ ^[1-9][0-9]*$ && $VARIANT_BLOCKS_LOAD -ge 2 && $VARIANT_BLOCKS_LOAD -le 100) ]] ||
	{ echo "gate-power: VARIANT_BLOCKS_LOAD=$VARIANT_BLOCKS_LOAD: a count of blocks, 2 to 100 (protocol.variant_blocks)" >&2; exit 2; }
STAGES=${STAGES:-load quiet judge}
[ "$VARIANTS" = 0 ] || [[ " $STAGES " == *" variants "* ]] || STAGES="$STAGES variants"
JOBS=${JOBS:-1}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "gate-power: JOBS=$JOBS: a count of runs at once, 1 or more" >&2; exit 2; }
root=$(pwd)
mkdir -p "$OUT/bin"
OUT=$(cd "$OUT" && pwd)
has() { [[ " $STAGES " == *" $1 "* ]]; }
one() { # one DIR CONFIG [ENV=VALUE…]: one protocol run into DIR
	local dir=$1 cfg=$2; shift 2
	rm -rf "$dir" && mkdir -p "$dir"
	if ! env WAKEBENCH_CONFIG="$root/$cfg" WAKEBENCH_OUT_DIR="$dir" "$@" "$OUT/bin/wakebench.test" \
		-test.run '^TestProtocol$' -test.count=1 >"$dir/test.log" 2>&1; then
		if [ -s "$dir/comparison.json" ]; then # a variant run exits 1 on its verdict: judged, not broken
			echo "run $dir: its variants judged different (the verdict gatepower counts): see $dir/summary.md" >&2
		else
			echo "run $dir failed (the protocol, not the gate): see $dir/test.log" >&2
		fi
	fi
}
hog=
going=0
count_runs() { # sets going: the runs going (the hog, a job too, is none)
	local p
	going=0
	for p in $(jobs -rp); do [ "$p" = "$hog" ] || going=$((going + 1)); done
}
quiet() { # quiet DIR CONFIG [ENV=VALUE…]: one, with up to JOBS at once (settle waits for them)
	count_runs
	while ((going >= JOBS)); do
		wait -n || true
		count_runs
	done
	one "$@" &
}
settle() { # waits for the runs, not the hog
	local p
	for p in $(jobs -rp); do [ "$p" = "$hog" ] || wait "$p" || true; done
}
stophog() { [ -z "$hog" ] || { kill "$hog" 2>/dev/null || true; wait "$hog" 2>/dev/null || true; hog=; }; }
# Runs still going when the script ends (JOBS > 1) end with it: each run's
# test binary is signalled (a job is the subshell around it) and stops its
# own servers.
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
	local p
	stophog
	for p in $(jobs -rp); do
		pkill -TERM -P "$p" 2>/dev/null || true
		kill "$p" 2>/dev/null || true
	done
	wait
}
trap cleanup EXIT
if has load || has quiet || has variants; then
	$GO test -c -o "$OUT/bin/wakebench.test" .
	$GO build -o "$OUT/bin/cpuhog" ./cmd/cpuhog
	echo "$LOAD" >"$OUT/load"
fi
if has load && [ "$LOAD" = 1 ]; then
	rm -rf "$OUT"/{base-load,same-load,slow1.5-load}
	"$OUT/bin/cpuhog" -for 24h &
	hog=$!
	for i in $(seq 1 "$BASE"); do one "$OUT/base-load/$i" testdata/gate-power.json; done
	for i in $(seq 1 "$RERUNS"); do
		one "$OUT/same-load/$i" testdata/gate-power.json
		one "$OUT/slow1.5-load/$i" testdata/gate-power.json WAKEBENCH_SIM_TIME_SCALE=1.5
	done
	stophog
fi
if has quiet; then
	rm -rf "$OUT"/{base,same,slow1.5,slowwake1.1,insuite}
	for i in $(seq 1 "$BASE"); do quiet "$OUT/base/$i" testdata/gate-power.json; done
	for i in $(seq 1 "$RERUNS"); do
		quiet "$OUT/same/$i" testdata/gate-power.json
		[ "$LOAD" = 1 ] || quiet "$OUT/slow1.5/$i" testdata/gate-power.json WAKEBENCH_SIM_TIME_SCALE=1.5
		quiet "$OUT/slowwake1.1/$i" testdata/gate-power-slow-wake.json
	done
	settle # the in-suite gate reads every baseline run
	# The README's in-suite gate: one more run with WAKEBENCH_BASELINE
	# naming the baseline directory, judged by TestRegressionGate as a
	# user's go test is. Whatever it finds, it must have judged:
	# compare.txt is written only then.
	mkdir -p "$OUT/insuite"
	env WAKEBENCH_CONFIG="$root/testdata/gate-power.json" WAKEBENCH_OUT_DIR="$OUT/insuite" WAKEBENCH_BASELINE="$OUT/base" \
		"$OUT/bin/wakebench.test" -test.run '^Test(Protocol|RegressionGate)$' -test.count=1 -test.v >"$OUT/insuite/test.log" 2>&1 || true
fi
if has variants; then
	rm -rf "$OUT"/{variants-same,variants-slowwake1.1,variants-same-load,variants-slowwake1.1-load}
	if [ "$LOAD" = 1 ]; then
		"$OUT/bin/cpuhog" -for 24h &
		hog=$!
		blocks=()
		[ -z "$VARIANT_BLOCKS_LOAD" ] || blocks=(WAKEBENCH_PROTOCOL_VARIANT_BLOCKS="$VARIANT_BLOCKS_LOAD")
		for i in $(seq 1 "$RERUNS"); do
			quiet "$OUT/variants-same-load/$i" testdata/variants-gate-power.json "${blocks[@]}"
			quiet "$OUT/variants-slowwake1.1-load/$i" testdata/variants-gate-power-slow-wake.json "${blocks[@]}"
		done
		settle
		stophog
	fi
	for i in $(seq 1 "$RERUNS"); do
		quiet "$OUT/variants-same/$i" testdata/variants-gate-power.json
		quiet "$OUT/variants-slowwake1.1/$i" testdata/variants-gate-power-slow-wake.json
	done
	settle
fi
broken=0
if has judge || [ "$STAGES" = variants ]; then
	$GO build -o "$OUT/bin/gatepower" ./cmd/gatepower
	rc=0
	"$OUT/bin/gatepower" -load "$(cat "$OUT/load" 2>/dev/null || echo "$LOAD")" "$OUT" || rc=$?
	case $rc in
	0) ;;
	1) [ "$GOALS" = 0 ] || broken=1 ;; # a goal missed
	*) broken=1 ;;                      # nothing judged
	esac
	if [ "$STAGES" = variants ]; then
		: # the variant runs alone: no in-suite gate ran
	elif [ -s "$OUT/insuite/compare.txt" ] && grep -Eq -- '--- (PASS|FAIL): TestRegressionGate' "$OUT/insuite/test.log" &&
		grep -Eq 'judged [1-9][0-9]* of' "$OUT/insuite/compare.txt"; then
		echo "in-suite gate (WAKEBENCH_BASELINE=$OUT/base): $(grep -Eo -m1 'judged [0-9]+ of [0-9]+ metrics' "$OUT/insuite/compare.txt") ($(grep -Eo -- '--- (PASS|FAIL): TestRegressionGate' "$OUT/insuite/test.log")); see $OUT/insuite/compare.txt"
	else
		echo "gate-power: the in-suite gate (WAKEBENCH_BASELINE) judged nothing: see $OUT/insuite/test.log" >&2
		broken=1
	fi
fi
exit "$broken"
