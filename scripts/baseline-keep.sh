#!/usr/bin/env bash
# baseline-keep.sh — the regression gate's baseline kept between CI jobs
# (docs/ci.md; both recipes in deploy/ci/ call it):
#
#   scripts/baseline-keep.sh env DIR        the environment the run needs, one NAME=value a line:
#                                           WAKEBENCH_BASELINE=<DIR's absolute path> when DIR holds a
#                                           run, and WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED=0 while
#                                           it holds fewer than $BASELINE_FILL; nothing when it holds none
#   scripts/baseline-keep.sh use DIR        DIR's absolute path when it holds a run, for
#                                           WAKEBENCH_BASELINE; nothing when it holds none (what env's
#                                           first line says; kept for recipes copied before env)
#   scripts/baseline-keep.sh add DIR [OUT]  OUT's run (default out/) as DIR/<UTC time>-<id>/bench.txt
#                                           when OUT/summary.md's title says PASS, then the newest
#                                           $BASELINE_KEEP runs kept and older ones removed
#
# DIR is this script's own: every */bench.txt in it is a run the gate reads.
# A run that did not PASS is never added, so a regression never becomes the
# baseline it is judged against. <id> is $BASELINE_RUN_ID, else the CI's run
# or pipeline id; the time (GNU date, to the nanosecond) orders the runs.
#
# How many runs (BASELINE_KEEP, default below): from the gate's own numbers
# (internal/gate). The runs rule gates a metric from 2 runs, but a metric of
# one or two events a run (a start, a level-2 cycle, a state's power) only
# from gate.FewMinRuns = 10 runs since the last confirmed change point;
# change points are searched from gate.HistoryMinRuns = 4 runs; the gate
# reads at most gate.HistoryMaxRuns = 100. 20 = 2 × FewMinRuns: a change
# point confirmed in the older half of the history still leaves 10 runs
# after it, so every metric stays gated; beyond that more runs add little
# but cache size (a bench.txt is a few hundred KiB).
#
# While the baseline fills (BASELINE_FILL, default gate.FewMinRuns = 10):
# with fewer runs the gate may judge no metric at all (a config whose
# metrics are all one or two events a run), and a run whose gate judged
# fewer than thresholds.regression_min_judged metrics FAILs, so is never
# added: the baseline would never grow past its first run. env accepts a
# gate that judged nothing (regression_min_judged 0, which the gate's
# summary still states) until DIR holds BASELINE_FILL runs; from then on
# the config's regression_min_judged (default 1) applies.
set -euo pipefail

default_keep=20
default_fill=10

die() {
	echo "baseline-keep: $*" >&2
	exit 1
}

# runs DIR: DIR's runs as this script names them, oldest first.
runs() {
	local d
	for d in "$1"/*/; do
		d=${d%/}
		[[ -f $d/bench.txt && ${d##*/} =~ ^[0-9]{8}T[0-9]{6}\.[0-9]{9}Z- ]] && printf '%s\n' "${d##*/}"
	done | LC_ALL=C sort
}

# held DIR: how many runs DIR holds as the gate reads a directory
# (config.BaselineGlobs, Go's filepath.Glob, whose * matches a leading
# dot too): its bench.txt, */bench.txt and *.bench.txt.
held() (
	shopt -s nullglob dotglob
	n=0
	for f in "$1"/bench.txt "$1"/*/bench.txt "$1"/*.bench.txt; do
		[[ -e $f || -L $f ]] && n=$((n + 1))
	done
	echo "$n"
)

# baseline DIR: DIR's absolute path when it holds a run, else nothing (and
# a note on stderr).
baseline() {
	local abs
	if (($(held "$1") == 0)); then
		echo "baseline-keep: $1 holds no run yet: this run is judged on its thresholds alone" >&2
		return
	fi
	abs=$(realpath "$1")
	[[ $abs != *$'\n'* ]] || die "$1: a path with a newline cannot be an environment line"
	printf '%s\n' "$abs"
}

case ${1:-} in
env)
	(($# == 2)) || die "usage: $0 env DIR"
	dir=$2
	fill=${BASELINE_FILL:-$default_fill}
	[[ $fill =~ ^(0|[1-9][0-9]*)$ ]] || die "BASELINE_FILL=$fill: want a whole number of runs, 0 or more"
	base=$(baseline "$dir")
	[[ -n $base ]] || exit 0
	echo "WAKEBENCH_BASELINE=$base"
	n=$(held "$dir")
	if ((n < fill)); then
		echo "WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED=0"
		echo "baseline-keep: the baseline is filling ($n of $fill runs): until it holds $fill, a gate that judges nothing is accepted (WAKEBENCH_THRESHOLDS_REGRESSION_MIN_JUDGED=0; the summary still says what it judged)" >&2
	else
		echo "baseline-keep: $dir holds $n run(s), $fill or more: the gate must judge thresholds.regression_min_judged metrics (default 1)" >&2
	fi
	;;
use)
	(($# == 2)) || die "usage: $0 use DIR"
	baseline "$2"
	;;
add)
	(($# == 2 || $# == 3)) || die "usage: $0 add DIR [OUT]"
	dir=$2 out=${3:-out}
	keep=${BASELINE_KEEP:-$default_keep}
	[[ $keep =~ ^[1-9][0-9]*$ ]] || die "BASELINE_KEEP=$keep: want a whole number of runs, 1 or more"
	[[ -f $out/summary.md ]] || die "$out/summary.md: none (did the run start?)"
	title=$(head -n 1 "$out/summary.md")
	if ! [[ $title =~ ^#\ wakebench:\ PASS($|\ ) ]]; then
		echo "baseline-keep: not added: $out/summary.md says \"$title\" (only a PASS joins the baseline)"
		exit 0
	fi
	grep -q '^Benchmark' "$out/bench.txt" 2>/dev/null || die "$out/bench.txt: missing or without a benchmark line, though the run passed"
	stamp=$(date -u +%Y%m%dT%H%M%S.%NZ)
	[[ $stamp =~ ^[0-9]{8}T[0-9]{6}\.[0-9]{9}Z$ ]] || die "date gave $stamp: GNU date (nanoseconds) is needed to order the runs"
	id=${BASELINE_RUN_ID:-${GITHUB_RUN_ID:-${CI_PIPELINE_ID:-local}}}
	id=${id//[^A-Za-z0-9._-]/-}
	mkdir -p "$dir"
	# Copied then renamed: a job killed part-way leaves no half bench.txt for the gate.
	tmp=$(mktemp -d "$dir/.adding.XXXXXX")
	cp "$out/bench.txt" "$tmp/bench.txt"
	mv "$tmp" "$dir/$stamp-$id"
	echo "baseline-keep: added $dir/$stamp-$id/bench.txt ($title)"
	mapfile -t all < <(runs "$dir")
	removed=0
	for ((i = 0; i < ${#all[@]} - keep; i++)); do
		rm -rf -- "${dir:?}/${all[i]}"
		echo "baseline-keep: removed ${all[i]} (older than the newest $keep)"
		removed=$((removed + 1))
	done
	echo "baseline-keep: $dir keeps $((${#all[@]} - removed)) runs (at most $keep), oldest first:"
	printf '  %s\n' "${all[@]:removed}"
	;;
*)
	die "usage: $0 env DIR | use DIR | add DIR [OUT] (BASELINE_FILL runs until a gate must judge, default $default_fill; BASELINE_KEEP runs kept, default $default_keep)"
	;;
esac
