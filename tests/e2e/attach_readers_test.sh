#!/usr/bin/env bash
# attach_readers_test.sh FSDPSCOPE WRITER SCHEMA CHECKER - what report, lint
# and dump print of a trace fsdpscope attach wrote (sources of path uprobe,
# observed communicators; written by tests/unit/attach_readers_test.c
# --write): the attach section (text and JSON, valid against the schema),
# exposure not measured in attach mode, steps from the period, guessed ranks
# marked as guesses, detached ends, and a rank killed while attached.
set -u
FSS=$1
WRITE=$2
SCHEMA=$3
CHECK=$4
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/expect.sh"

"$WRITE" --write "$T/a.fss" || fail "write the detached trace"
"$WRITE" --write "$T/k.fss" --kill || fail "write the trace with a killed rank"

# --- report, text ------------------------------------------------------------
expect_rc 0 "report of an attached job" "$FSS" report "$T/a.fss"
expect_out "$T/out" "found by period (NVTX is not visible to uprobes)" "steps: from the period, and why"
expect_out "$T/out" "exposure    exposure is not measured in attach mode (uprobes see host calls only); run the job under \`fsdpscope run\` (the agent and CUPTI) to measure it" \
	"exposure: not measured, and how to measure it"
expect_out "$T/out" "Attach (4 of 4 processes observed by fsdpscope attach" "the attach section"
expect_out "$T/out" "8 of 8: identity matched across ranks by their calls" "attach: identity inferred"
expect_out "$T/out" "2 of 8: rank from in-place AllGathers" "attach: ranks from in-place gathers"
expect_out "$T/out" "rank 2? (rank guessed from pid order), pid 1002: detached (still running)" "a guessed rank reads as a guess"
expect_out "$T/out" "    2?    1002" "the processes table marks the guess"
expect_out "$T/out" "info exposed-gather" "exposed-gather: said, as info"
expect_no "$T/out" "cut off" "detached: never cut off"
expect_no "$T/out" "died" "detached: never died"
expect_no "$T/out" "from host timing" "no host-timing exposure"

expect_rc 0 "lint of an attached job that was let go: nothing incomplete" "$FSS" lint "$T/a.fss"
expect_no "$T/err" "did not end cleanly" "lint: detached processes are not troubles"
expect_rc 0 "report of the job with a rank killed" "$FSS" report "$T/k.fss"
expect_out "$T/out" "rank 2?, pid 1002: killed by signal 9 (SIGKILL)" "the killed rank: killed"
expect_out "$T/out" "1 process died while attached" "the killed rank: its step left out"

# --- report and lint, JSON ----------------------------------------------------
expect_rc 0 "report --json" "$FSS" report --json "$T/a.fss"
cp "$T/out" "$T/report-a.json"
expect_rc 4 "lint --json, a rank killed: the verdict is drawn from an incomplete trace" "$FSS" lint --json "$T/k.fss"
cp "$T/out" "$T/lint-k.json"
expect_out "$T/err" "2 detached (still running) when it let go" "lint: the attach line"
expect_out "$T/err" "exposed-gather was not checked" "lint: exposed-gather not checked"
if python3 "$CHECK" "$SCHEMA" "$T/report-a.json" "$T/lint-k.json" >"$T/schema.out" 2>&1; then
	pass "the JSON of attached jobs is valid against the schema"
else
	fail "schema"; sed 's/^/    | /' "$T/schema.out"
fi
[ "$(json_get "$T/report-a.json" 'd["attach"]["detached"]')" = 4 ] && pass "json: 4 detached" || fail "json: detached"
[ "$(json_get "$T/report-a.json" 'sum(s["communicators"] for s in d["attach"]["per_source"]) == d["attach"]["communicators"]')" = True ] &&
	pass "json: per-source communicators add up" || fail "json: communicators do not add up"
[ "$(json_get "$T/report-a.json" 'all(i["communicators"] <= d["attach"]["communicators_observed"] for i in d["attach"]["inferred"])')" = True ] &&
	pass "json: each inferred count within the observed" || fail "json: inferred counts"
[ "$(json_get "$T/report-a.json" '[s["rank_from"] for s in d["sources"]][2]')" = "guessed:pid-order" ] &&
	pass "json: rank 2 guessed" || fail "json: rank_from of rank 2"
[ "$(json_get "$T/report-a.json" 'd["exposure"]["source"]')" = none ] && pass "json: exposure source none" || fail "json: exposure"
[ "$(json_get "$T/lint-k.json" '[s["end"] for s in d["sources"]]')" = "['detached', 'detached', 'signaled', 'clean']" ] &&
	pass "json: the killed rank signaled, the one that exited 0 clean, the others detached" || fail "json: ends of the killed trace"

# --- dump ------------------------------------------------------------------------
expect_rc 0 "dump --sources" "$FSS" dump --sources --type process_exit "$T/k.fss"
expect_out "$T/out" '"rank_from":"guessed:pid-order"' "dump: the guess named"
expect_out "$T/out" '"end":"detached"' "dump: detached"
expect_out "$T/out" '"end":"signaled"' "dump: killed"

[ "$fails" -eq 0 ]
