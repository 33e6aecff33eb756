#!/bin/sh
# collect_bench.sh - the collector's load and memory figures (bench/README.md,
# results in bench/results/collect.txt). Run by hand from the repository root
# after building (cmake --build build --target collect_load collect_harness):
#
#   bench/collect_bench.sh load RATE SECONDS [RANKS [RING_SLOTS]]
#       RANKS (256) simulated ranks at RATE collectives/s each for SECONDS
#       against collect_harness (with the analysis when the build has it);
#       prints the generator's, the harness' and the trace check's lines.
#   bench/collect_bench.sh ramp SECONDS RATE...
#       `load` at each rate in turn, the ring set to one second of the rate
#       (a rank may fall 1 s behind before it drops), until the first loss.
#   bench/collect_bench.sh memory RECORDS...
#       8 ranks, unpaced (as fast as the collector reads), RECORDS records in
#       all: the harness' peak RSS and the analysis' pending maximum; then
#       the analysis alone over the trace it wrote (its own peak RSS).
#   bench/collect_bench.sh collect-memory RECORDS...
#       `memory` against `fsdpscope collect --until-idle 1` (the whole session:
#       ingest, analysis, live state, keeper, viewer; the end's lint): its
#       peak RSS from /usr/bin/time -v.
#   bench/collect_bench.sh collect RATE SECONDS [RANKS [RING_SLOTS]]
#       `load` against `fsdpscope collect --until-idle 1` instead of the
#       harness: its CPU and peak RSS from /usr/bin/time -v (over its whole
#       life: start, the load, 1 s idle, the end's lint).
#
# BUILD (default build) names the build folder, WORK (a fresh mktemp -d) where
# sockets and traces go; traces are removed after each run.
set -u
BUILD=${BUILD:-build}
harness=$BUILD/bench/collect_harness
load=$BUILD/bench/collect_load
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/collect_bench.XXXXXX")}
hpid=
trap '[ -n "$hpid" ] && kill "$hpid" 2>/dev/null; rm -rf "$work"' EXIT

analyze=--analyze

# fsdpscope collect under /usr/bin/time -v on $work/NAME.sock, its --out
# $work/OUT, its stderr in $work/NAME.stderr; returns once it listens.
start_collect() { # NAME OUT
	mkdir -p "$work/$2"
	/usr/bin/time -v "$BUILD/cli/fsdpscope" collect --listen "unix:$work/$1.sock" --out "$work/$2" \
		--until-idle 1 >"$work/$1.stdout" 2>"$work/$1.stderr" &
	hpid=$!
	i=0
	until [ -S "$work/$1.sock" ]; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 "$hpid" 2>/dev/null; then
			echo "collect_bench: collect did not listen" >&2
			cat "$work/$1.stderr" >&2
			exit 1
		fi
		sleep 0.1
	done
}

wait_listening() { # LOG PID
	i=0
	until grep -q "listening on" "$1" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 "$2" 2>/dev/null; then
			echo "collect_bench: the collector did not start" >&2
			cat "$1" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# run_load RATE SECONDS RANKS RING [LOAD_ARGS...]: one load run; status 0 when no loss
run_load() {
	rate=$1 seconds=$2 ranks=$3 ring=$4
	shift 4
	rm -f "$work"/run.*
	"$harness" --listen "unix:$work/run.sock" --out "$work/run.fss" $analyze >"$work/run.harness" 2>&1 &
	hpid=$!
	wait_listening "$work/run.harness" "$hpid"
	"$load" --address "unix:$work/run.sock" --ranks "$ranks" --rate "$rate" --seconds "$seconds" \
		--ring-slots "$ring" --counts "$work/run.counts" "$@" >"$work/run.load" 2>&1
	lrc=$?
	kill -TERM "$hpid"
	wait "$hpid"
	hpid=
	"$load" --check "$work/run.fss" --counts "$work/run.counts" >"$work/run.check" 2>&1
	crc=$?
	echo "== load: $ranks ranks x $rate collectives/s for $seconds s, ring $ring, collect_harness"
	cat "$work/run.load"
	grep -v "listening on" "$work/run.harness"
	cat "$work/run.check"
	rm -f "$work/run.fss"
	[ $lrc -eq 0 ] && [ $crc -eq 0 ]
}

cmd=${1:-}
[ -n "$cmd" ] && shift
case "$cmd" in
load)
	run_load "$1" "$2" "${3:-256}" "${4:-65536}"
	;;
ramp)
	seconds=$1
	shift
	for rate in "$@"; do
		run_load "$rate" "$seconds" 256 "${rate%.*}" || {
			echo "== first loss at $rate collectives/s per rank"
			exit 0
		}
	done
	echo "== no loss up to the last rate"
	;;
memory)
	for records in "$@"; do
		rm -f "$work"/mem.*
		"$harness" --listen "unix:$work/mem.sock" --out "$work/mem.fss" $analyze >"$work/mem.harness" 2>&1 &
		hpid=$!
		wait_listening "$work/mem.harness" "$hpid"
		"$load" --address "unix:$work/mem.sock" --ranks 8 --rate 0 --records "$records" \
			--counts "$work/mem.counts" >"$work/mem.load" 2>&1
		kill -TERM "$hpid"
		wait "$hpid"
		hpid=
		"$load" --check "$work/mem.fss" --counts "$work/mem.counts" >"$work/mem.check" 2>&1
		echo "== memory: 8 ranks, $records records, unpaced, collect_harness"
		cat "$work/mem.load"
		grep -v "listening on" "$work/mem.harness"
		cat "$work/mem.check"
		echo "-- the analysis alone, fed from that trace file:"
		"$harness" --analyze-trace "$work/mem.fss"
		rm -f "$work/mem.fss"
	done
	;;
collect)
	rate=$1 seconds=$2 ranks=${3:-256} ring=${4:-65536}
	start_collect c out
	"$load" --address "unix:$work/c.sock" --ranks "$ranks" --rate "$rate" --seconds "$seconds" \
		--ring-slots "$ring" --counts "$work/c.counts" >"$work/c.load" 2>&1
	wait "$hpid"
	hpid=
	trace=$(ls "$work"/out/*.fss 2>/dev/null | head -1)
	echo "== collect: $ranks ranks x $rate collectives/s for $seconds s, ring $ring"
	cat "$work/c.load"
	grep -E "Elapsed|Maximum resident|User time|System time" "$work/c.stderr"
	if [ -n "$trace" ]; then
		"$load" --check "$trace" --counts "$work/c.counts"
	else
		echo "no trace in $work/out"
	fi
	;;
collect-memory)
	for records in "$@"; do
		rm -rf "$work"/cm.* "$work/cmout"
		start_collect cm cmout
		"$load" --address "unix:$work/cm.sock" --ranks 8 --rate 0 --records "$records" \
			--counts "$work/cm.counts" >"$work/cm.load" 2>&1
		wait "$hpid"
		hpid=
		trace=$(ls "$work"/cmout/*.fss 2>/dev/null | head -1)
		echo "== collect-memory: 8 ranks, $records records, unpaced, fsdpscope collect"
		cat "$work/cm.load"
		grep -E "Elapsed|Maximum resident|User time|System time" "$work/cm.stderr"
		[ -n "$trace" ] && "$load" --check "$trace" --counts "$work/cm.counts"
		rm -rf "$work/cmout"
	done
	;;
*)
	sed -n "2,27p" "$0"
	exit 2
	;;
esac
