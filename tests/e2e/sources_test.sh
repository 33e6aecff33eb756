#!/usr/bin/env bash
# sources_test.sh FSDPSCOPE GEN_TRACE SCHEMA CHECKER SUMMARY - how each
# process of a trace ended, as lint, report, the JSON report, the summary
# `fsdpscope run` prints, and dump tell it. The trace (lint_gen_trace): 4
# ranks whose hellos carry no RANK (ranks come from the communicator); rank 1
# killed by SIGKILL half way (a process_exit, no process_end), rank 2 cut off
# there (no end at all), rank 3 ending cleanly with 6 collectives missing
# from its sequence numbers.
set -u
FSS=$1
GEN=$2
SCHEMA=$3
CHECK=$4
SUMMARY=$5
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/expect.sh"

"$GEN" --out "$T/ends.fss" --ranks 4 --layers 4 --k 1 --steps 8 --no-rank-hint --kill 1 --cut 2 --lose 3:6 ||
	fail "gen ends"
"$GEN" --out "$T/clean.fss" --ranks 2 --layers 4 --k 1 --steps 6 || fail "gen clean"

# --- lint: one line per process that did not end cleanly; exit 4 (incomplete)
expect_rc 4 "lint: killed and cut-off ranks make the trace incomplete" "$FSS" lint "$T/ends.fss"
expect_out "$T/out" "rank 1, pid 1001: killed by signal 9 (SIGKILL), last record at " "lint: the SIGKILLed rank"
expect_out "$T/out" "rank 2, pid 1002: cut off: no process_end, last record at " "lint: the cut-off rank"
expect_out "$T/out" "rank 3, pid 1003: ended cleanly; 6 of its collectives missing" "lint: the missing collectives"
expect_no "$T/out" "rank 0, pid 1000" "lint: the clean rank is not listed"
expect_out "$T/err" "3 of 4 processes did not end cleanly or lost collectives" "lint: said on stderr"
expect_rc 0 "lint of a clean trace" "$FSS" lint "$T/clean.fss"
expect_no "$T/out" "did not end cleanly" "lint clean: no process listed"

# --- report: every process in a table, the troubled ones in words
expect_rc 0 "report" "$FSS" report "$T/ends.fss"
expect_out "$T/out" "Processes (4)" "report: the processes table"
expect_out "$T/out" "signal 9" "report: the killed rank's end"
expect_out "$T/out" "killed by signal 9 (SIGKILL)" "report: the killed rank in words"
expect_out "$T/out" "cut off: no process_end" "report: the cut-off rank in words"

# --- JSON: a per-source list, strict and valid against the schema
"$FSS" lint --json "$T/ends.fss" >"$T/lint-ends.json" 2>/dev/null
"$FSS" report --json "$T/ends.fss" >"$T/report-ends.json"
"$FSS" report --json "$T/clean.fss" >"$T/report-clean.json"
if python3 "$CHECK" "$SCHEMA" "$T/lint-ends.json" "$T/report-ends.json" "$T/report-clean.json" >"$T/schema.out" 2>&1; then
	pass "JSON with sources valid against the schema"
else
	fail "JSON with sources against the schema"; cat "$T/schema.out"
fi
v=$(json_get "$T/lint-ends.json" '[(s["rank"], s["rank_from"], s["end"], s["exit_code"], s["signal"], s["process_end"],
	s["collectives_missing"]) for s in d["sources"]]')
want="[(0, 'communicator', 'clean', 0, None, True, 0), (1, 'communicator', 'signaled', None, 9, False, 0), \
(2, 'communicator', 'cut-off', None, None, False, 0), (3, 'communicator', 'clean', 0, None, True, 6)]"
[ "$v" = "$want" ] && pass "JSON sources: rank, end, exit code, signal, missing" || fail "JSON sources: $v"
v=$(json_get "$T/report-clean.json" '[s["end"] for s in d["sources"]]')
[ "$v" = "['clean', 'clean']" ] && pass "JSON sources of a clean trace" || fail "JSON sources of a clean trace: $v"

# --- the summary `fsdpscope run` prints after the job
expect_rc 0 "summary" "$SUMMARY" "$T/ends.fss"
expect_out "$T/out" "rank 1, pid 1001: killed by signal 9 (SIGKILL)" "summary: the SIGKILLed rank"

# --- dump: the rank from the communicator on every line, the hello's too
expect_rc 0 "dump --sources" "$FSS" dump --sources "$T/ends.fss"
v=$(python3 -c 'import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
print(sorted({(r["source"], r["rank"]) for r in recs}), sum(r["rank"] == -1 for r in recs),
      [(r["rank"], r["end"]) for r in recs if r["type"] == "source"])' "$T/out")
want="[(0, 0), (1, 1), (2, 2), (3, 3)] 0 [(0, 'clean'), (1, 'signaled'), (2, 'cut-off'), (3, 'clean')]"
[ "$v" = "$want" ] && pass "dump: ranks from the communicator, no -1, the ends" || fail "dump: $v"

echo "sources_test: $fails failure(s)"
[ "$fails" -eq 0 ]
