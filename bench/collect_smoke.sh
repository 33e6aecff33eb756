#!/bin/sh
# collect_smoke.sh HARNESS LOAD - a small collect_load run against
# collect_harness, asserting by counts only: every collective each simulated
# rank issued is in the trace, under one source per rank, and the trace is
# whole. Twice: unpaced (--rate 0) and paced (the timer path), each a fixed
# number of steps, so nothing depends on how fast the machine is.
set -u
harness=$1
load=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/collect_smoke.XXXXXX") || exit 1
hpid=
cleanup() {
	[ -n "$hpid" ] && kill "$hpid" 2>/dev/null && wait "$hpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	for f in "$dir"/*.log; do echo "--- $f"; cat "$f"; done
	exit 1
}

# one_run NAME LOAD_ARGS...: start a harness, wait until it listens, send,
# stop it once every connection was closed by it, check the trace.
one_run() {
	name=$1
	shift
	sock="$dir/$name.sock"
	trace="$dir/$name.fss"
	"$harness" --listen "unix:$sock" --out "$trace" --analyze >"$dir/$name.harness.log" 2>&1 &
	hpid=$!
	i=0
	until grep -q "listening on" "$dir/$name.harness.log" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 600 ] && fail "$name: the harness did not start listening in 60 s"
		kill -0 "$hpid" 2>/dev/null || fail "$name: the harness exited"
		sleep 0.1
	done
	# collect_load returns once the harness closed every connection: all was read.
	"$load" --address "unix:$sock" --counts "$dir/$name.counts" "$@" >"$dir/$name.load.log" 2>&1 ||
		fail "$name: collect_load failed"
	kill -TERM "$hpid"
	wait "$hpid" || fail "$name: the harness failed"
	hpid=
	grep -q "0 damaged, 0 collectives missing" "$dir/$name.harness.log" || fail "$name: the ingest saw damage or gaps"
	# the analysis was fed every record the trace got, and saw the 4 ranks
	written=$(sed -n 's/^ingest: \([0-9]*\) records.*/\1/p' "$dir/$name.harness.log")
	fed=$(sed -n 's/^analysis: \([0-9]*\) records fed.*/\1/p' "$dir/$name.harness.log")
	[ -n "$written" ] && [ "$written" = "$fed" ] || fail "$name: the analysis was fed $fed records, the trace got $written"
	grep -q "^analysis: .*, 4 ranks, 10 steps seen" "$dir/$name.harness.log" || fail "$name: the analysis did not see 4 ranks, 10 steps"
	"$load" --check "$trace" --counts "$dir/$name.counts" >"$dir/$name.check.log" 2>&1 ||
		fail "$name: the trace does not hold what was sent"
	grep -q "^loss: none" "$dir/$name.check.log" || fail "$name: loss"
	grep -q "^check: 4 ranks, 280 collectives issued, 280 sent, 0 dropped by the senders, 280 in the trace" \
		"$dir/$name.check.log" || fail "$name: unexpected counts"
}

# 4 ranks, 2 layers (7 collectives a step), 10 steps: 70 collectives a rank.
one_run unpaced --ranks 4 --layers 2 --steps 10 --rate 0 --threads 2
one_run paced --ranks 4 --layers 2 --steps 10 --rate 20000 --threads 2
echo PASS
