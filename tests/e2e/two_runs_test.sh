#!/usr/bin/env bash
# two_runs_test.sh FSDPSCOPE FSDP_REF AGENT - two `fsdpscope run`s into one
# --out folder leave trace.fss and trace-2.fss there, two jobs: every reader
# of the folder (lint, report, report --html, ledger, dump, export, top) refuses
# to read them as one job (exit 2), naming both files and how to pick one;
# each trace alone still reads. fsdp_ref's ranks draw their NCCL unique id at
# random (the stand-in, as NCCL), so the runs share no communicator, and the
# second starts after the first ended, so their times do not overlap.
set -u
FSS=$1
REF=$2
AGENT=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
CHECK=/dev/null
. "$(dirname "$0")/expect.sh"

J=$T/J
for i in 1 2; do
	FSDPSCOPE_AGENT=$AGENT "$FSS" run --out "$J" -- "$REF" --nranks 2 --steps 4 --quiet >"$T/run$i.out" 2>&1 ||
		{ fail "run $i: fsdpscope run"; sed 's/^/    | /' "$T/run$i.out"; }
done
[ -f "$J/trace.fss" ] && [ -f "$J/trace-2.fss" ] && pass "two runs: trace.fss and trace-2.fss" ||
	{ fail "two runs: not trace.fss and trace-2.fss"; ls -la "$J"; }

# Every reader of the folder, and of the two files named, refuses them as one job.
refused() { # refused DESC CMD... - exit 2, both files named, grouped, and the way out said
	local desc=$1
	shift
	expect_rc 2 "$desc: refused" "$@"
	set -- "$desc"
	expect_out "$T/err" "the traces are of 2 jobs, not one" "$1: two jobs said"
	expect_out "$T/err" "job 1 (ranks 0-1, " "$1: job 1 with its ranks"
	expect_out "$T/err" "): $J/trace.fss; job 2 (ranks 0-1, " "$1: trace.fss is job 1"
	expect_out "$T/err" "): $J/trace-2.fss; read one job at a time, giving only its traces, e.g. $J/trace.fss" "$1: trace-2.fss is job 2, how to pick one"
	expect_out "$T/err" "no communicator in common, their times do not overlap" "$1: why"
}
refused "lint J/" "$FSS" lint "$J/"
refused "lint J/trace.fss J/trace-2.fss" "$FSS" lint "$J/trace.fss" "$J/trace-2.fss"
refused "report J/" "$FSS" report "$J/"
refused "report --html J/" "$FSS" report --html "$T/r.html" "$J/"
refused "ledger J/" "$FSS" ledger "$J/"
refused "dump J/" "$FSS" dump "$J/"
refused "export J/" "$FSS" export "$J/" --perfetto "$T/p.json"
refused "top --once J/" "$FSS" top --once "$J/"
[ ! -s "$T/p.json" ] && pass "export J/: no timeline written" || fail "export J/: a timeline of two jobs was written"

# Each run alone still reads, as one job of its 2 ranks.
for f in trace.fss trace-2.fss; do
	"$FSS" lint "$J/$f" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" -ne 2 ] && pass "lint J/$f reads (exit $rc)" || { fail "lint J/$f: exit 2"; sed 's/^/    | /' "$T/err"; }
	expect_no "$T/err" "jobs, not one" "lint J/$f: one job"
	expect_rc 0 "report --json J/$f" "$FSS" report --json "$J/$f"
	python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["ranks"]
sys.exit(0 if r == 2 else "ranks %r" % r)' "$T/out" && pass "report J/$f: 2 ranks" || fail "report J/$f: not 2 ranks"
done
[ "$fails" -eq 0 ]
