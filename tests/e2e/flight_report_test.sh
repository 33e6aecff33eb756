#!/usr/bin/env bash
# flight_report_test.sh FSDPSCOPE GEN_TRACE FLIGHT_REPORT SCHEMA CHECKER - the
# report of calls in flight (hangs and mismatches, docs/report-schema.md
# "flight") and --hang-timeout:
#  - hand-built results (flight_report.c): the JSON valid against the
#    schema, each list as long as the count beside it (the checker's
#    x-count), a document that breaks that rejected; the text's "Calls in
#    flight" block, and the note that a trace without enter records or GPU
#    intervals rules no hang out;
#  - traces of lint_gen_trace with a hang (--stall) and a desync
#    (--mismatch): lint --json valid against the schema; once the analysis
#    of calls in flight reads them (flight.sources_enter > 0), the
#    collective-hang finding names the stalled rank and lint exits 1, and a
#    live session fed the hung stream (hang_live_check.py) says so on stderr,
#    /metrics and the viewer while the "job" is still connected;
#  - --hang-timeout: refused unless a finite number of seconds above 0, in
#    lint, report, run and collect; in every one's help.
set -u
FSS=$1
GEN=$2
FLIGHT=$3
SCHEMA=$4
CHECK=$5
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/expect.sh"

# --- hand-built results -------------------------------------------------------
for m in hang mismatch both blind; do
	"$FLIGHT" json $m >"$T/flight-$m.json" || fail "flight_report json $m"
	"$FLIGHT" text $m >"$T/flight-$m.txt" || fail "flight_report text $m"
done
if python3 "$CHECK" "$SCHEMA" "$T"/flight-*.json >"$T/schema.out" 2>&1; then
	pass "hand-built flight reports valid against the schema"
else
	fail "flight JSON against the schema"; cat "$T/schema.out"
fi
v=$(json_get "$T/flight-both.json" '(d["flight"]["hangs_total"], len(d["flight"]["hangs"]), d["flight"]["hangs"][0]["comm"], d["flight"]["hangs"][0]["comm_role"], d["flight"]["hangs"][0]["comm_seq"], [r["rank"] for r in d["flight"]["hangs"][0]["missing"]], d["flight"]["hangs"][0]["missing"][0]["host"], d["flight"]["hangs"][0]["missing"][0]["last_seq"], [r["rank"] for r in d["flight"]["hangs"][0]["waiting"]], d["flight"]["hangs"][0]["waiting"][0]["evidence"], d["flight"]["mismatches"][0]["a"]["count"], d["flight"]["mismatches"][0]["a"]["ranks"], d["flight"]["mismatches"][0]["b"]["count"], d["flight"]["mismatches"][0]["b"]["ranks"], [f["rule"] for f in d["findings"]], d["options"]["hang_timeout_ns"])')
[ "$v" = "(1, 1, '00c0ffee12345678', 'fsdp', 17, [2], 'node-b', 16, [0, 1, 3], 'host', 1000, [0, 1, 3], 999, [2], ['collective-hang', 'collective-mismatch'], 60000000000)" ] &&
	pass "flight JSON: the hang (missing rank 2 on node-b, last #16; waiting 0, 1, 3) and both signatures" ||
	fail "flight JSON: $v"
# the count beside each list is checked: a list cut short is refused
python3 - "$T/flight-both.json" "$T" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
h = json.loads(json.dumps(d)); h["flight"]["hangs"][0]["waiting"].pop()
json.dump(h, open(sys.argv[2] + "/cut-waiting.json", "w"))
m = json.loads(json.dumps(d)); m["flight"]["mismatches"][0]["b"]["ranks"] = []
json.dump(m, open(sys.argv[2] + "/cut-ranks.json", "w"))
PY
for f in cut-waiting cut-ranks; do
	if python3 "$CHECK" "$SCHEMA" "$T/$f.json" >"$T/schema.out" 2>&1; then
		fail "schema check accepted $f"
	else
		expect_out "$T/schema.out" "expected" "schema check refuses $f (a list shorter than its count)"
	fi
done
expect_out "$T/flight-both.txt" "Calls in flight (--hang-timeout 60.0 s" "text: the Calls in flight block"
expect_out "$T/flight-both.txt" "hang: missing rank 2 (host node-b, pid 1002); collective #17 (AllGather)" "text: the hang"
expect_out "$T/flight-both.txt" "mismatch: communicator 00c0ffee12345678 (fsdp, \"dp_shard\", 4 ranks), collective #5: ranks 0, 1, 3 issued AllGather count 1000" \
	"text: the mismatch"
expect_out "$T/flight-both.txt" "error collective-hang" "text: the finding"
expect_out "$T/flight-blind.txt" "Calls in flight: not recorded (no enter records, no GPU intervals): a hang cannot be seen" \
	"text: a trace that cannot show waits is not called hang-free"
expect_no "$T/flight-blind.txt" "collective-hang" "text: no hang finding without evidence"

# --- traces with a hang and a desync ------------------------------------------
"$GEN" --out "$T/hang.fss" --ranks 3 --layers 4 --steps 6 --stall 1:4 --stall-for 5 || fail "gen hang"
"$GEN" --out "$T/desync.fss" --ranks 3 --layers 4 --steps 6 --mismatch 0:3 || fail "gen desync"
"$FSS" lint --json --hang-timeout 1 "$T/hang.fss" >"$T/lint-hang.json" 2>"$T/lint-hang.err"
hang_rc=$?
"$FSS" report --json "$T/desync.fss" >"$T/report-desync.json" 2>/dev/null
if python3 "$CHECK" "$SCHEMA" "$T/lint-hang.json" "$T/report-desync.json" >"$T/schema.out" 2>&1; then
	pass "lint --json of a hung trace and report --json of a desynced one valid against the schema"
else
	fail "hung / desynced JSON"; cat "$T/schema.out"
fi
v=$(json_get "$T/lint-hang.json" '(d["options"]["hang_timeout_ns"], d["flight"]["timeout_ns"])')
[ "$v" = "(1000000000, 1000000000)" ] && pass "--hang-timeout 1 reaches the analysis" || fail "--hang-timeout: $v"
if [ "$(json_get "$T/lint-hang.json" 'd["flight"]["sources_enter"]')" != 0 ]; then
	# The analysis of calls in flight read the enter records: the hang is named.
	v=$(json_get "$T/lint-hang.json" '[(f["rule"], int(f["metrics"]["first_missing_rank"]), int(f["metrics"]["comm_seq"])) for f in d["findings"] if f["rule"] == "collective-hang"]')
	[ "$v" = "[('collective-hang', 1, 57)]" ] && pass "hung trace: collective-hang names rank 1 and collective #57" ||
		fail "hung trace: $v"
	[ "$hang_rc" -eq 1 ] && pass "lint of a hung trace exits 1" || fail "lint of a hung trace exits $hang_rc"
	# rank 0's first gather of step 3: the root's 262144 / 3 ranks elements, one fewer
	v=$(json_get "$T/report-desync.json" '[(int(f["metrics"]["a_count"]), int(f["metrics"]["b_count"]), int(f["metrics"]["first_b_rank"])) for f in d["findings"] if f["rule"] == "collective-mismatch"]')
	[ "$v" = "[(87381, 87380, 0)]" ] && pass "desynced trace: collective-mismatch names rank 0 and both counts" ||
		fail "desynced trace: $v"
	v=$(json_get "$T/lint-hang.json" '(d["flight"]["hangs"][0]["missing"][0]["rank"], d["flight"]["hangs"][0]["missing"][0]["last_seq"], [r["rank"] for r in d["flight"]["hangs"][0]["waiting"]], d["flight"]["hangs"][0]["waiting"][0]["evidence"])')
	[ "$v" = "(1, 56, [0, 2], 'host')" ] && pass "hung trace: the flight section names missing rank 1 (last #56) and waiting 0, 2" ||
		fail "hung trace flight: $v"
	# live: a session fed the hung stream says it while the "job" is connected
	if python3 "$(dirname "$0")/hang_live_check.py" "$FSS" "$T/hang.fss" "$T/live" >"$T/live.out" 2>&1; then
		pass "live: the stderr line, /metrics and the viewer name the hang while the job hangs"
		sed -n 's/^line: /    /p' "$T/live.out"
	else
		fail "live hang"; sed 's/^/    | /' "$T/live.out" | head -60
	fi
	"$FSS" report --hang-timeout 1 "$T/hang.fss" >"$T/report-hang.txt" 2>&1
	expect_out "$T/report-hang.txt" "hang: missing rank 1 (pid 1001); collective #57 (AllGather) of communicator" \
		"report text of a hung trace: the Calls in flight block"
else
	echo "note: the analysis of calls in flight is not on this build (flight.sources_enter 0): the hung trace's" \
		"findings are not checked, only its JSON"
	expect_out "$T/lint-hang.err" "a hang cannot be seen in this trace, so none is ruled out" \
		"lint says a trace without calls in flight rules no hang out"
fi

# --- --hang-timeout -------------------------------------------------------------
for bad in 0 -1 inf nan abc 1e30 ""; do
	expect_rc 2 "lint --hang-timeout '$bad' refused" "$FSS" lint --hang-timeout "$bad" "$T/hang.fss"
	expect_out "$T/err" "--hang-timeout $bad: expected seconds above 0" "lint --hang-timeout '$bad': the message"
done
expect_rc 2 "report --hang-timeout 0 refused" "$FSS" report --hang-timeout 0 "$T/hang.fss"
expect_rc 2 "run --hang-timeout 0 refused" "$FSS" run --hang-timeout 0 -- true
expect_out "$T/err" "fsdpscope run: --hang-timeout 0: expected seconds above 0" "run: the message"
expect_rc 2 "collect --hang-timeout x refused" "$FSS" collect --hang-timeout x --out "$T/c"
expect_rc 0 "lint --hang-timeout 0.5 accepted" "$FSS" lint --json --hang-timeout 0.5 "$T/desync.fss" --fail-on error \
	--disable collective-mismatch
for cmd in lint report run collect; do
	"$FSS" $cmd --help >"$T/help" 2>&1
	expect_out "$T/help" "--hang-timeout SEC" "$cmd --help names --hang-timeout"
done
[ "$fails" -eq 0 ]
