#!/usr/bin/env bash
# lint_test.sh FSDPSCOPE GEN_TRACE SCHEMA CHECKER SUMMARY - end-to-end tests of
# `fsdpscope lint | report | ledger` on synthetic traces written by
# lint_gen_trace: exit codes, the wrap-too-fine evidence, no false error on a
# well-wrapped job, bad input, help texts, the JSON schema, and the ledger's
# worked example (7B on 8 GPUs).
set -u
FSS=$1
GEN=$2
SCHEMA=$3
CHECK=$4
SUMMARY=$5
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/expect.sh"

# --- traces ---------------------------------------------------------------
"$GEN" --out "$T/block.fss" --ranks 2 --layers 8 --k 1 --steps 6 || fail "gen block"
"$GEN" --out "$T/linear.fss" --ranks 2 --layers 8 --k 8 --steps 6 || fail "gen linear"
"$GEN" --out "$T/model.fss" --ranks 2 --layers 0 --steps 6 || fail "gen model"
"$GEN" --out "$T/noprefetch.fss" --ranks 2 --layers 8 --k 1 --steps 6 --prefetch 0 || fail "gen noprefetch"
"$GEN" --out "$T/fp32.fss" --ranks 2 --layers 8 --k 1 --steps 6 --dtype fp32 || fail "gen fp32"

# --- well wrapped: no error, exit 0 ----------------------------------------
expect_rc 0 "lint per-block trace" "$FSS" lint "$T/block.fss"
expect_no "$T/out" "error " "per-block: no error finding"
expect_no "$T/out" "wrap-too-fine" "per-block: no wrap-too-fine"
expect_out "$T/out" "reshard-policy" "per-block: reshard-policy info"
expect_out "$T/out" "fsdpscope lint: 0 errors" "per-block: tally"

# --- per Linear: the error with its evidence and fix, exit 1 ----------------
expect_rc 1 "lint per-linear trace" "$FSS" lint "$T/linear.fss"
expect_out "$T/out" "error wrap-too-fine" "per-linear: wrap-too-fine error"
expect_out "$T/out" "8 gathers per repeating unit x 8 units = 64 + 1 root per step; per-block wrap would issue 9" \
	"per-linear: the evidence line"
expect_out "$T/out" "fully_shard(block, mp_policy=mp)" "per-linear: FSDP2 fix"
expect_out "$T/out" "ModuleWrapPolicy" "per-linear: FSDP1 fix"
expect_out "$T/out" "stage3_prefetch_bucket_size" "per-linear: DeepSpeed fix"
expect_rc 1 "lint --layers 8 per-linear" "$FSS" lint --layers 8 "$T/linear.fss"
expect_out "$T/out" "error gather-count-mismatch" "--layers 8: gather-count-mismatch"
expect_rc 0 "lint --layers 8 per-block" "$FSS" lint --layers 8 "$T/block.fss"
expect_no "$T/out" "gather-count-mismatch" "--layers 8 per-block: no mismatch"
expect_rc 0 "--fail-on never reached by warnings" "$FSS" lint --disable wrap-too-fine --disable gather-count-mismatch \
	"$T/linear.fss"
expect_rc 1 "--fail-on info" "$FSS" lint --fail-on info "$T/block.fss"
expect_rc 1 "--threshold moves a rule" "$FSS" lint --threshold fine_gathers_per_unit=1 "$T/block.fss"
expect_rc 0 "-t short form" "$FSS" lint -t fine_gathers_per_unit=9 "$T/linear.fss" --disable small-collectives
expect_rc 0 "--brief" "$FSS" lint --brief "$T/block.fss"
expect_no "$T/out" "fix (PyTorch FSDP1)" "--brief: FSDP2 fixes only"

# --- without NVTX step ranges: steps from the period of the collectives ------
"$GEN" --out "$T/period.fss" --ranks 2 --layers 6 --k 8 --steps 8 --no-nvtx-steps || fail "gen period"
"$FSS" lint --json "$T/period.fss" >"$T/period.json"
v=$(json_get "$T/period.json" '(d["step_detection"], d["per_step"]["allgathers"], d["units"]["repeating_units"], d["units"]["gathers_per_unit"], [f["rule"] for f in d["findings"] if f["severity"]=="error"])')
[ "$v" = "('period', 97, 6, 8, ['wrap-too-fine'])" ] && pass "period steps: wrap-too-fine on 6 x 8 gathers" ||
	fail "period steps: $v"

# --- without any NVTX range: exposure cannot be measured, and lint says so --
"$GEN" --out "$T/bare.fss" --ranks 2 --layers 6 --k 1 --steps 8 --no-nvtx || fail "gen bare"
expect_rc 0 "lint trace without ranges" "$FSS" lint "$T/bare.fss"
expect_out "$T/err" "exposure not measured (no GPU intervals and no compute ranges): exposed-gather was not checked" \
	"no ranges: lint says exposure was not checked"
expect_no "$T/out" "exposed-gather" "no ranges: no exposed-gather finding"
"$FSS" report "$T/bare.fss" >"$T/bare.txt" 2>&1
expect_out "$T/bare.txt" "compute, exposed communication and idle not measured" "no ranges: report's breakdown not claimed"
"$FSS" lint "$T/block.fss" >/dev/null 2>"$T/err"
expect_no "$T/err" "exposure not measured" "with ranges: no such line"

# --- whole model, no prefetch, fp32 -------------------------------------------
expect_rc 1 "lint whole-model trace" "$FSS" lint "$T/model.fss"
expect_out "$T/out" "error wrap-too-coarse" "model: wrap-too-coarse error"
expect_rc 0 "lint no-prefetch trace" "$FSS" lint "$T/noprefetch.fss"
expect_out "$T/out" "warning exposed-gather" "no-prefetch: exposed-gather warning"
expect_rc 1 "no-prefetch --fail-on warning" "$FSS" lint --fail-on warning "$T/noprefetch.fss"
expect_rc 0 "lint fp32 trace" "$FSS" lint "$T/fp32.fss"
expect_out "$T/out" "warning fp32-gather" "fp32: fp32-gather warning"
expect_rc 0 "fp32 with --param-dtype fp32" "$FSS" lint --param-dtype fp32 "$T/fp32.fss"
expect_no "$T/out" "fp32-gather" "fp32 declared: no fp32-gather"

# --- advice that fits the job: which fixes are listed, never times ------------
# (docs/patterns.md "Advice that fits the job"): prefetch advice only where
# gathers are issued on demand, node-level fixes only on more than one node
"$GEN" --out "$T/nodes2.fss" --ranks 4 --layers 8 --k 1 --steps 6 --hosts 2 || fail "gen two hosts"
"$GEN" --out "$T/nodes2p0.fss" --ranks 4 --layers 8 --k 1 --steps 6 --hosts 2 --prefetch 0 || fail "gen two hosts p0"
"$GEN" --out "$T/node1p0.fss" --ranks 4 --layers 8 --k 1 --steps 6 --hosts 1 --prefetch 0 || fail "gen one host p0"
expect_rc 0 "prefetched per-block job passes --fail-on warning" "$FSS" lint --fail-on warning "$T/block.fss"
expect_no "$T/out" "set_modules_to_forward_prefetch" "prefetch 1: no prefetch advice"
expect_rc 0 "lint no-prefetch trace" "$FSS" lint "$T/noprefetch.fss"
expect_out "$T/out" "set_modules_to_forward_prefetch" "prefetch 0: prefetch advice"
expect_out "$T/out" "mostly no-prefetch" "prefetch 0: the cause"
for tr in block noprefetch node1p0; do
	expect_rc 0 "lint $tr (one node)" "$FSS" lint "$T/$tr.fss"
	expect_no "$T/out" "init_device_mesh" "$tr: no HSDP mesh on one node"
	expect_no "$T/out" "ShardingStrategy.HYBRID_SHARD" "$tr: no HYBRID_SHARD on one node"
	expect_no "$T/out" "reshard_after_forward=8" "$tr: no integer reshard on one node"
	expect_no "$T/out" "zero_hpz_partition_size" "$tr: no hpz on one node"
done
expect_rc 0 "lint two hosts" "$FSS" lint "$T/nodes2.fss"
expect_out "$T/out" "reshard_after_forward=2)" "two nodes: integer reshard of the ranks per node"
expect_out "$T/out" "ShardingStrategy.HYBRID_SHARD" "two nodes: HYBRID_SHARD"
expect_no "$T/out" "set_modules_to_forward_prefetch" "two nodes, prefetch 1: no prefetch advice"
expect_rc 0 "lint two hosts, prefetch 0" "$FSS" lint "$T/nodes2p0.fss"
expect_out "$T/out" "set_modules_to_forward_prefetch" "two nodes, prefetch 0: prefetch advice"

# --- JSON against the schema --------------------------------------------------
n=0
for tr in block linear model noprefetch fp32; do
	"$FSS" lint --json "$T/$tr.fss" >"$T/lint-$tr.json"
	"$FSS" report --json --layers 8 "$T/$tr.fss" >"$T/report-$tr.json" || fail "report --json $tr"
	n=$((n + 2))
done
"$FSS" ledger --params 7e9 --ranks 8 --units 32 --gpu-mem 80G --json >"$T/ledger.json" || fail "ledger --json"
if python3 "$CHECK" "$SCHEMA" "$T"/lint-*.json "$T"/report-*.json "$T/ledger.json" >"$T/schema.out" 2>&1; then
	pass "$((n + 1)) JSON documents valid against docs/report-schema.json"
	head -1 "$T/schema.out" | sed 's/^/    /'
else
	fail "JSON schema validation"; cat "$T/schema.out"
fi
# the validator rejects what the schema forbids (so "valid" above means something)
python3 - "$T/lint-linear.json" "$T/bad" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [dict(d, ranks="two"), dict(d, schema="fsdpscope.report/1"), {k: v for k, v in d.items() if k != "per_step"},
       dict(d, findings=[dict(d["findings"][0], severity="fatal")]), dict(d, undocumented_key=1),
       dict(d, reshard_after_forward="sometimes")]
for i, b in enumerate(bad):
    json.dump(b, open("%s%d.json" % (sys.argv[2], i), "w"))
PY
# not strict JSON: a key twice in one object, NaN
sed 's/^{/{"ranks": 2, /' "$T/lint-linear.json" >"$T/bad6.json"
sed 's/"ranks": *2/"ranks": NaN/' "$T/lint-linear.json" >"$T/bad7.json"
for i in 0 1 2 3 4 5 6 7; do
	if python3 "$CHECK" "$SCHEMA" "$T/bad$i.json" >"$T/schema.out" 2>&1; then
		fail "schema check accepted broken document $i"
	else
		why=$(grep -m1 "not strict JSON" "$T/schema.out" || sed -n 3p "$T/schema.out")
		pass "schema check rejects broken document $i ($(echo "$why" | cut -c3-80))"
	fi
done
# the issue's keys, with values that could be wrong
v=$(json_get "$T/lint-linear.json" '(d["schema"], d["ranks"], d["step_detection"], d["per_step"]["forward_allgathers"], d["units"]["repeating_units"], d["units"]["gathers_per_unit"], d["units"]["root_gathers"], d["reshard_after_forward"], [f["rule"] for f in d["findings"] if f["severity"]=="error"])')
want="('fsdpscope.report/2', 2, 'nvtx', 65, 8, 8, 1, 'true', ['wrap-too-fine'])"
[ "$v" = "$want" ] && pass "lint --json linear: keys and values" || fail "lint --json linear: $v, want $want"
v=$(json_get "$T/report-block.json" '(d["per_step"]["allgathers"], d["per_step"]["backward_allgathers"], d["per_step"]["reduce_scatters"], d["units"]["layers_given"], d["findings_count"]["error"], len(d["per_rank"]))')
[ "$v" = "(17, 8, 9, True, 0, 2)" ] && pass "report --json block: counts" || fail "report --json block: $v"

# --- report text ----------------------------------------------------------------
expect_rc 0 "report text" "$FSS" report "$T/linear.fss"
for s in "per step    AllGather 129 (65 forward + 64 backward" "units       8 repeating units x 8 gathers" \
	"reshard     reshard_after_forward=true" "Memory ledger" "AllGathers of step" "Ranks (2" \
	"Findings (1 error"; do
	expect_out "$T/out" "$s" "report text: $s"
done

# --- bad input: exit 2 with what and where ----------------------------------------
expect_rc 2 "missing trace" "$FSS" lint "$T/nope.fss"
expect_out "$T/err" "nope.fss" "missing trace: named"
printf 'this is not a trace at all, just some text long enough\n' >"$T/garbage.fss"
expect_rc 2 "not a trace" "$FSS" lint "$T/garbage.fss"
size=$(stat -c %s "$T/linear.fss")
head -c $((size * 2 / 3)) "$T/linear.fss" >"$T/cut.fss"
# a finding in what was read still fails the gate (1); without one, exit 4:
# diagnosed, but from an incomplete trace
expect_rc 1 "truncated trace with a finding" "$FSS" lint "$T/cut.fss"
expect_out "$T/err" "damaged or cut short" "truncated: says damaged"
expect_out "$T/err" "offset" "truncated: says where"
"$GEN" --out "$T/block40.fss" --ranks 2 --layers 8 --k 1 --steps 40 || fail "gen block40"
size=$(stat -c %s "$T/block40.fss")
head -c $((size * 2 / 3)) "$T/block40.fss" >"$T/cut-block.fss"
expect_rc 4 "truncated trace without a finding" "$FSS" lint "$T/cut-block.fss"
expect_out "$T/err" "damaged or cut short" "truncated per-block: says damaged"
expect_rc 2 "report truncated trace" "$FSS" report "$T/cut.fss"

# --- files that are not (readable) traces, and traces cut on a chunk boundary ---
# chunk_end FILE N - the byte offset just past chunk N (header 64 bytes, chunk
# header 24 with the payload size at +4)
chunk_end() {
	python3 -c 'import struct,sys
d=open(sys.argv[1],"rb").read(); off=64
for _ in range(int(sys.argv[2]) + 1): off += 24 + struct.unpack_from("<I", d, off + 4)[0]
print(off)' "$1" "$2"
}
: >"$T/empty.fss"
head -c 10 "$T/block40.fss" >"$T/ten.fss"
head -c 64 "$T/block40.fss" >"$T/header-only.fss"
for o in 9 12; do
	cp "$T/block40.fss" "$T/flip$o.fss"
	printf '\x41' | dd of="$T/flip$o.fss" bs=1 seek=$o conv=notrunc status=none
done
for cmd in lint report dump; do
	expect_rc 2 "$cmd empty file" "$FSS" $cmd "$T/empty.fss"
	expect_out "$T/err" "an empty file (0 bytes), not a trace" "$cmd empty file: says so"
	expect_no "$T/err" "fsdpscope run" "$cmd empty file: no advice about the run"
	expect_no "$T/err" "dumped above" "$cmd empty file: nothing claimed dumped"
	expect_no "$T/out" "headline" "$cmd empty file: no report"
	expect_rc 2 "$cmd 10-byte file" "$FSS" $cmd "$T/ten.fss"
	expect_out "$T/err" "cut short inside its file header: 10 of 64 bytes" "$cmd 10-byte file: says so"
	expect_rc 2 "$cmd not a trace" "$FSS" $cmd "$T/garbage.fss"
	expect_out "$T/err" "not an fsdpscope trace" "$cmd not a trace: says so"
	expect_rc 2 "$cmd header only" "$FSS" $cmd "$T/header-only.fss"
	expect_out "$T/err" "a trace with no records" "$cmd header only: says so"
	for o in 9 12; do
		expect_rc 2 "$cmd header flipped at $o" "$FSS" $cmd "$T/flip$o.fss"
		expect_out "$T/err" "file header is damaged (CRC mismatch" "$cmd header flipped at $o: damaged"
		expect_no "$T/err" "version" "$cmd header flipped at $o: no version advice"
		expect_no "$T/err" "byte order" "$cmd header flipped at $o: no byte-order advice"
	done
done
# A whole trace: closed by its writer, whose trace_end is no process.
"$FSS" lint --json "$T/block40.fss" >"$T/lint-whole.json" 2>/dev/null
v=$(json_get "$T/lint-whole.json" '(d["trace"]["truncated"], d["trace"]["end"], d["trace"]["gaps"], d["trace"]["sources"], d["ranks"])')
[ "$v" = "(False, 'clean', [], 2, 2)" ] && pass "lint --json whole trace: clean end, 2 sources" ||
	fail "lint --json whole trace: $v"
# Cut exactly after a chunk: it reads back whole, but without the writer's
# trace_end it is not complete, and every command says so.
head -c "$(chunk_end "$T/block40.fss" 1)" "$T/block40.fss" >"$T/cut-boundary.fss"
expect_rc 4 "lint cut on a chunk boundary: incomplete" "$FSS" lint "$T/cut-boundary.fss"
expect_out "$T/err" "without its trace_end record" "lint cut on a chunk boundary: says so"
"$FSS" lint --json "$T/cut-boundary.fss" >"$T/lint-boundary.json" 2>/dev/null
v=$(json_get "$T/lint-boundary.json" '(d["trace"]["truncated"], d["trace"]["end"], d["trace"]["gaps_total"])')
[ "$v" = "(True, 'not-closed', 0)" ] && pass "lint --json cut on a chunk boundary: truncated, not closed" ||
	fail "lint --json cut on a chunk boundary: $v"
expect_rc 2 "report cut on a chunk boundary" "$FSS" report "$T/cut-boundary.fss"
expect_out "$T/err" "without its trace_end record" "report cut on a chunk boundary: says so"
expect_rc 2 "dump cut on a chunk boundary" "$FSS" dump "$T/cut-boundary.fss"
expect_out "$T/err" "without its trace_end record" "dump cut on a chunk boundary: says so"
# A damaged chunk in the middle: skipped, every other chunk analysed, the gap said.
cp "$T/block40.fss" "$T/gap.fss"
printf '\x41' | dd of="$T/gap.fss" bs=1 seek=$(($(chunk_end "$T/block40.fss" 1) + 100)) conv=notrunc status=none
expect_rc 4 "lint with a damaged chunk: incomplete" "$FSS" lint "$T/gap.fss"
expect_out "$T/err" "1 damaged stretch skipped" "lint with a damaged chunk: the gap said"
expect_out "$T/err" "(chunk 2 lost)" "lint with a damaged chunk: which chunk"
"$FSS" lint --json "$T/gap.fss" >"$T/lint-gap.json" 2>/dev/null
v=$(json_get "$T/lint-gap.json" '(d["trace"]["truncated"], d["trace"]["end"], d["trace"]["gaps_total"], [(g["offset"], g["first_missing_chunk"], g["chunks_missing"], g["to_end"]) for g in d["trace"]["gaps"]])')
want="(True, 'clean', 1, [($(chunk_end "$T/block40.fss" 1), 2, 1, False)])"
[ "$v" = "$want" ] && pass "lint --json with a damaged chunk: the gap" || fail "lint --json with a damaged chunk: $v, want $want"
if python3 "$CHECK" "$SCHEMA" "$T/lint-gap.json" "$T/lint-boundary.json" >"$T/schema.out" 2>&1; then
	pass "gap and chunk-boundary JSON valid against the schema"
else
	fail "gap / chunk-boundary JSON"; cat "$T/schema.out"
fi

# cut at a chunk boundary: the processes' records stop without their
# process_end: the step each was in is left out, and the verdict of the rest
# is from an incomplete trace (4), never clean (0)
chunk_ends() { # chunk_ends FILE - the byte offsets where its chunks end, one a line
	python3 -c 'import sys
d = open(sys.argv[1], "rb").read(); o = 64
while o + 24 <= len(d):
    o += 24 + int.from_bytes(d[o + 4:o + 8], "little"); print(o)' "$1"
}
mid=$(chunk_ends "$T/block40.fss" | awk '{ v[NR] = $1 } END { print v[int(NR / 2)] }')
head -c "$mid" "$T/block40.fss" >"$T/cut-chunk.fss"
expect_rc 4 "cut at a chunk boundary, no finding" "$FSS" lint "$T/cut-chunk.fss"
expect_out "$T/err" "stop without a process_end" "cut at a chunk boundary: says the records stop"
expect_out "$T/err" "left out of the verdict" "cut at a chunk boundary: says what is left out"
"$FSS" lint --json "$T/cut-chunk.fss" >"$T/lint-cut-chunk.json" 2>/dev/null
v=$(json_get "$T/lint-cut-chunk.json" '(d["verdict"], d["trace"]["truncated"], d["trace"]["sources_cut"], d["excluded"]["ranks_cut"], [p["cut"] for p in d["per_rank"]])')
[ "$v" = "('diagnosed', True, 2, 2, [True, True])" ] && pass "cut at a chunk boundary: JSON says who is cut" ||
	fail "cut at a chunk boundary: $v"
"$FSS" report "$T/cut-chunk.fss" >"$T/report-cut" 2>&1
expect_out "$T/report-cut" "without a process_end" "report of a cut trace: says the records stop"
# the per-Linear trace cut at every chunk boundary: its verdict (wrap-too-fine,
# exit 1) or none (exit 3), never another
bad=0
for at in $(chunk_ends "$T/linear.fss" | sed '$d'); do
	head -c "$at" "$T/linear.fss" >"$T/cut-at.fss"
	"$FSS" lint --json "$T/cut-at.fss" >"$T/cut-at.json" 2>/dev/null
	rc=$?
	v=$(json_get "$T/cut-at.json" '(d["verdict"], d["units"]["gathers_per_unit"] if d["verdict"] == "diagnosed" else 8, "wrap-too-fine" in [f["rule"] for f in d["findings"]] or d["verdict"] != "diagnosed")')
	case "$rc $v" in
	"1 ('diagnosed', 8, True)" | "3 ('undecided', 8, True)") ;;
	*) bad=1; fail "per-linear cut at $at: exit $rc, $v" ;;
	esac
done
[ "$bad" = 0 ] && pass "per-linear cut at every chunk boundary: its verdict or none"
# no verdict is never clean: exit 3, whatever --fail-on says
"$GEN" --out "$T/onestep.fss" --ranks 2 --layers 4 --k 1 --steps 1 --no-nvtx-steps || fail "gen onestep"
expect_rc 3 "one step, no NVTX: not diagnosed" "$FSS" lint "$T/onestep.fss"
expect_out "$T/out" "error not-diagnosed" "not diagnosed: the finding"
expect_out "$T/err" "not diagnosed: no repeating training step" "not diagnosed: said on stderr"
expect_rc 3 "not diagnosed, --fail-on error" "$FSS" lint --fail-on error "$T/onestep.fss"
"$FSS" lint --json "$T/onestep.fss" >"$T/lint-onestep.json"
v=$(json_get "$T/lint-onestep.json" '(d["verdict"], d["undecided"]["reason"], [f["rule"] for f in d["findings"]])')
[ "$v" = "('undecided', 'no-step', ['not-diagnosed'])" ] && pass "lint --json one step: undecided" ||
	fail "lint --json one step: $v"
# the JSON of an undecided, a truncated and an unmeasured run, against the schema
"$FSS" lint --json "$T/cut-block.fss" >"$T/lint-cut.json" 2>/dev/null
"$FSS" report --json "$T/bare.fss" >"$T/report-bare.json"
if python3 "$CHECK" "$SCHEMA" "$T/lint-onestep.json" "$T/lint-cut.json" "$T/report-bare.json" "$T/lint-cut-chunk.json" \
	>"$T/schema.out" 2>&1; then
	pass "undecided, truncated and unmeasured JSON valid against the schema"
else
	fail "undecided / truncated / unmeasured JSON"; cat "$T/schema.out"
fi
expect_rc 2 "unknown flag" "$FSS" lint --bogus "$T/block.fss"
expect_rc 2 "unknown threshold" "$FSS" lint --threshold nope=1 "$T/block.fss"
expect_out "$T/err" "no such threshold" "unknown threshold: said"
expect_rc 2 "bad threshold value" "$FSS" lint --threshold exposed_fraction=x "$T/block.fss"
expect_rc 2 "bad --fail-on" "$FSS" lint --fail-on fatal "$T/block.fss"
expect_rc 2 "no trace" "$FSS" lint
expect_rc 2 "two traces" "$FSS" lint "$T/block.fss" "$T/block.fss"
expect_rc 2 "unknown rule" "$FSS" lint --disable nope "$T/block.fss"
expect_rc 2 "report bad layers" "$FSS" report --layers 0 "$T/block.fss"

# --- an option that cannot apply to this trace: exit 2, why, the valid range ------
"$GEN" --out "$T/five.fss" --ranks 4 --layers 8 --k 8 --steps 5 || fail "gen five"
for cmd in lint report; do
	for n in 100 5; do
		expect_rc 2 "$cmd --warmup-steps $n on 5 steps" "$FSS" $cmd --warmup-steps $n "$T/five.fss"
		expect_out "$T/err" "--warmup-steps $n: the trace has 5 steps; --warmup-steps must be 0..4" \
			"$cmd --warmup-steps $n: the range"
	done
	want=0
	[ $cmd = lint ] && want=1 # the per-Linear wrap's error
	expect_rc $want "$cmd --warmup-steps 4 on 5 steps: one step left" "$FSS" $cmd --warmup-steps 4 "$T/five.fss"
	expect_rc 2 "$cmd --rank 7 on 4 ranks" "$FSS" $cmd --rank 7 "$T/five.fss"
	expect_out "$T/err" "--rank 7: the trace has no rank 7; its ranks are 0..3" "$cmd --rank 7: the ranks present"
	expect_rc 2 "$cmd --layers 1000000" "$FSS" $cmd --layers 1000000 "$T/five.fss"
	expect_out "$T/err" "--layers 1000000: the forward of a micro-batch holds 65 AllGathers; more layers than gathers means units that hold several, but no model has more than 1024 layers: --layers must be 1..1024" \
		"$cmd --layers 1000000: why and the range"
	expect_rc 2 "$cmd --layers 1025" "$FSS" $cmd --layers 1025 "$T/five.fss"
done
expect_rc 1 "lint --rank 3 on 4 ranks" "$FSS" lint --rank 3 "$T/five.fss"
expect_rc 1 "lint --layers 1024: units holding several layers" "$FSS" lint --layers 1024 "$T/five.fss"
# a layer count the gathers do not repeat: the evidence stays what the trace shows
expect_rc 1 "lint --layers 100 per-linear" "$FSS" lint --layers 100 "$T/five.fss"
expect_out "$T/out" "8 gathers per repeating unit x 8 units = 64 + 1 root per step; per-block wrap would issue 9" \
	"--layers 100: wrap-too-fine evidence from the trace"
expect_no "$T/out" "x 100 units" "--layers 100: no product of the user's count with the motif"
# a rank that recorded too little to show a step: not a headline rank
"$GEN" --out "$T/short.fss" --ranks 2 --layers 4 --k 1 --steps 6 --no-nvtx-steps --last-rank-steps 1 ||
	fail "gen short"
for cmd in lint report; do
	expect_rc 2 "$cmd --rank 1, a rank without a step" "$FSS" $cmd --rank 1 "$T/short.fss"
	expect_out "$T/err" "--rank 1: rank 1 has no analysed step (no step found); ranks with analysed steps: 0" \
		"$cmd --rank 1 without a step: says which ranks have one"
done
expect_rc 0 "lint --rank 0 beside a rank without a step" "$FSS" lint --rank 0 "$T/short.fss"
expect_rc 0 "lint --warmup-steps 5: the rank without steps does not bound it" "$FSS" lint --warmup-steps 5 "$T/short.fss"
# ranks that found different numbers of steps (cut short mid-step): the
# warm-up must leave every rank a step
size=$(stat -c %s "$T/block40.fss")
head -c $((size * 70 / 100)) "$T/block40.fss" >"$T/cut70.fss"
"$FSS" report --json "$T/cut70.fss" >"$T/cut70.json" 2>/dev/null
v=$(json_get "$T/cut70.json" '" ".join("%d:%d" % (r["rank"], r["steps_analyzed"]) for r in d["per_rank"])')
if [ "$v" = "0:24 1:23" ]; then
	expect_rc 2 "--warmup-steps 23, ranks with 24 and 23 steps" "$FSS" lint --warmup-steps 23 "$T/cut70.fss"
	expect_out "$T/err" "--warmup-steps 23: rank 1 has 23 steps (the ranks have 23 to 24); --warmup-steps must be 0..22 to leave every rank a step" \
		"--warmup-steps per rank: the fewest steps bound it"
	expect_rc 4 "--warmup-steps 22, ranks with 24 and 23 steps" "$FSS" lint --warmup-steps 22 "$T/cut70.fss"
else
	fail "cut70: steps per rank $v, want 0:24 1:23 (the per-rank warm-up check needs ranks that differ)"
fi

# --- help: every rule and threshold with its default ----------------------------
expect_rc 0 "lint --help" "$FSS" lint --help
for r in wrap-too-fine wrap-too-coarse gather-count-mismatch exposed-gather reshard-policy small-collectives \
	fp32-gather rank-skew EXAMPLES "fine_gathers_per_unit [2 gathers]" "exposed_fraction [0.2 fraction]" \
	"small_gather_bytes [1048576 bytes]" "skew_slowest_share [0.5 fraction]"; do
	expect_out "$T/out" "$r" "lint --help lists $r"
done
"$FSS" help lint >"$T/help2" && cmp -s "$T/out" "$T/help2" && pass "help lint = lint --help" ||
	fail "help lint differs from lint --help"
expect_rc 0 "report --help" "$FSS" report --help
expect_out "$T/out" "EXAMPLES" "report --help has EXAMPLES"
expect_rc 0 "ledger --help" "$FSS" ledger --help
expect_out "$T/out" "EXAMPLES" "ledger --help has EXAMPLES"

# --- ledger: the 7B-on-8-GPU worked example, exactly ------------------------------
v=$(json_get "$T/ledger.json" '[d["ledger"][k] for k in ("persistent_bytes_per_rank","largest_unit_params","transient_bytes_per_rank","peak_state_bytes_per_rank","headroom_bytes","wire_bytes_per_step","ddp_wire_bytes_per_step","ddp_persistent_bytes_per_rank","whole_model_transient_bytes")]')
want="[14000000000, 218750000, 875000000, 14875000000, 65125000000, 42000000000, 28000000000, 112000000000, 14000000000]"
[ "$v" = "$want" ] && pass "ledger 7B/8/32/80G: 14 GB + 0.875 GB = 14.875 GB, 65.125 GB headroom, 42 vs 28 GB" ||
	fail "ledger numbers: $v, want $want"
expect_rc 0 "ledger text" "$FSS" ledger --params 7e9 --ranks 8 --units 32 --gpu-mem 80G
for s in "persistent                   16 B x P / N                    14.000 GB" \
	"gathered units               2 B x U x (1 + 1)                0.875 GB" \
	"peak state per rank          persistent + transient          14.875 GB" \
	"headroom of 80.0 GB          activations, buffers            65.125 GB" \
	"3 x P x 2 B                     42.000 GB" "2 x P x 2 B                     28.000 GB" \
	"16 B x P                       112.000 GB"; do
	expect_out "$T/out" "$s" "ledger text: $s"
done
expect_rc 0 "ledger whole model" "$FSS" ledger --params 7B --ranks 8 --units 1 --prefetch 0 --gpu-mem 80GB --json
v=$(json_get "$T/out" 'd["ledger"]["transient_bytes_per_rank"]')
[ "$v" = "14000000000" ] && pass "ledger whole model: transient 14 GB" || fail "ledger whole model transient $v"
expect_rc 0 "ledger sgd no master" "$FSS" ledger --params 1e9 --ranks 4 --unit-params 1e8 --optimizer sgd \
	--master-dtype none --param-dtype fp32 --grad-dtype fp32 --json
v=$(json_get "$T/out" '(d["ledger"]["persistent_bytes_per_rank"], d["ledger"]["transient_bytes_per_rank"])')
[ "$v" = "(2000000000, 800000000)" ] && pass "ledger fp32 sgd: 8 B x P / N, 4 B x U x 2" || fail "ledger fp32 sgd: $v"
expect_rc 2 "ledger without --ranks" "$FSS" ledger --params 7e9 --units 32
expect_rc 2 "ledger bad --params" "$FSS" ledger --params seven --ranks 8 --units 32
expect_rc 2 "ledger bad dtype" "$FSS" ledger --params 7e9 --ranks 8 --units 32 --param-dtype int4
expect_rc 2 "ledger stray argument" "$FSS" ledger --params 7e9 --ranks 8 --units 32 extra
# the extremes: each a clear refusal naming the range, or an exact figure (under
# UBSan a float-to-integer cast out of range would abort instead)
for p in 1e30 inf nan -1 0 0.5 1.0001e15; do
	expect_rc 2 "ledger --params $p refused" "$FSS" ledger --params $p --ranks 8 --units 1
	expect_out "$T/err" "fsdpscope ledger: --params $p: expected a parameter count from 1 to 1e15" \
		"ledger --params $p: says the range"
done
for o in 1e30 inf nan -8 65; do
	expect_rc 2 "ledger --optimizer $o refused" "$FSS" ledger --params 7e9 --ranks 8 --units 32 --optimizer $o
	expect_out "$T/err" "--optimizer $o: expected adam, sgd-momentum, sgd, or bytes of state per parameter from 0 to 64" \
		"ledger --optimizer $o: says the range"
done
for a in "--ranks 1e30" "--ranks 0" "--units 1e30" "--prefetch 1e30" "--gpu-mem 1e30" "--gpu-mem inf" \
	"--unit-params 1e30" "--param-dtype fp128"; do
	expect_rc 2 "ledger $a refused" "$FSS" ledger --params 7e9 --ranks 8 --units 32 $a
	expect_out "$T/err" "${a% *} ${a#* }: expected " "ledger $a: says what it expects"
done
expect_rc 2 "ledger --units above --params" "$FSS" ledger --params 100 --ranks 8 --units 101
expect_out "$T/err" "--units 101: expected a whole number of units from 1 to 10000000, and at most --params" \
	"ledger --units above --params: says so"
expect_rc 2 "ledger --unit-params above --params" "$FSS" ledger --params 1e9 --ranks 8 --unit-params 2e9
expect_out "$T/err" "--unit-params 2e9: expected a parameter count from 1 to --params" \
	"ledger --unit-params above --params: says so"
expect_rc 0 "ledger, the largest valid input" "$FSS" ledger --params 1e15 --ranks 1 --units 1 --prefetch 64 \
	--param-dtype fp64 --grad-dtype fp64 --master-dtype fp64 --optimizer 64 --gpu-mem 1e18 --json
v=$(json_get "$T/out" '[d["ledger"][k] for k in ("params","persistent_bytes_per_rank","transient_bytes_per_rank","peak_state_bytes_per_rank","headroom_bytes","ddp_persistent_bytes_per_rank")]')
want="[1000000000000000, 88000000000000000, 520000000000000000, 608000000000000000, 392000000000000000, 88000000000000000]"
[ "$v" = "$want" ] && pass "ledger largest valid: 88 B x 1e15, 8 B x 1e15 x 65, exact" || fail "ledger largest valid: $v, want $want"
expect_rc 0 "ledger, the smallest valid input" "$FSS" ledger --params 1 --ranks 10000000 --units 1 --json
v=$(json_get "$T/out" '(d["ledger"]["params"], d["ledger"]["persistent_bytes_per_rank"], d["ledger"]["transient_bytes_per_rank"])')
[ "$v" = "(1, 0, 4)" ] && pass "ledger smallest valid: 1 parameter" || fail "ledger smallest valid: $v"
# the same ledger inputs in report and lint
for a in "--gpu-mem 1e30" "--optimizer 1e30" "--exposed-min-ns 1e30" "--peak-flops 1e300" \
	"--tokens-per-step 1e300" "--flops-per-step 1e300"; do
	expect_rc 2 "report $a refused" "$FSS" report $a "$T/block.fss"
	expect_out "$T/err" "fsdpscope report: ${a% *} ${a#* }: expected " "report $a: says what it expects"
done
expect_rc 2 "lint --gpu-mem 1e30 refused" "$FSS" lint --gpu-mem 1e30 "$T/block.fss"
expect_out "$T/err" "fsdpscope lint: --gpu-mem 1e30: expected a size from 1 byte to 1e18 bytes" "lint --gpu-mem 1e30: the range"

# --- the summary `fsdpscope run` prints (lint_print_summary) --------------------
expect_rc 0 "summary of the per-linear trace" "$SUMMARY" "$T/linear.fss"
expect_out "$T/out" "fsdpscope lint: 1 error" "summary: tally"
expect_out "$T/out" "8 gathers per repeating unit x 8 units = 64 + 1 root per step; per-block wrap would issue 9" \
	"summary: wrap-too-fine evidence"
expect_out "$T/out" "fully_shard(block, mp_policy=mp)" "summary: FSDP2 fix"
expect_no "$T/out" "fix (PyTorch FSDP1)" "summary: FSDP2 fix only"
expect_out "$T/out" "summary: 2" "summary returns the highest severity (error)"
expect_rc 0 "summary of the per-block trace" "$SUMMARY" "$T/block.fss"
expect_out "$T/out" "fsdpscope lint: 0 errors" "summary per-block: no error"
expect_out "$T/out" "summary: 0" "summary per-block: info at most"
expect_out "$T/out" "info reshard-policy: reshard_after_forward: the policy in use" "summary: an info finding's block"
# Each finding reads as lint --brief writes it: the blocks between the tally
# line and the notes are lint --brief's, line for line; the notes after them
# (what the verdict rests on) are the lines lint prints on stderr.
for t in linear block noprefetch; do
	"$FSS" lint --brief "$T/$t.fss" >"$T/brief.txt" 2>"$T/brief.err"
	"$SUMMARY" "$T/$t.fss" >"$T/summary.txt" 2>/dev/null
	sed -n '1,/^fsdpscope lint: /p' "$T/brief.txt" | head -n -2 >"$T/brief.blocks"
	sed -n '3,/^Fixes for FSDP1/p' "$T/summary.txt" | grep -v '^fsdpscope lint: ' | head -n -3 >"$T/summary.blocks"
	if [ -s "$T/brief.blocks" ] && cmp -s "$T/brief.blocks" "$T/summary.blocks"; then
		pass "summary of $t: the findings as lint --brief lays them out"
	else
		fail "summary of $t: the findings differ from lint --brief's"
		diff "$T/brief.blocks" "$T/summary.blocks" | head -20
	fi
	sort "$T/brief.err" >"$T/brief.notes"
	sed -n '2,$p' "$T/summary.txt" | grep '^fsdpscope lint: ' | sort >"$T/summary.notes"
	if [ -s "$T/brief.notes" ] && cmp -s "$T/brief.notes" "$T/summary.notes"; then
		pass "summary of $t: the notes lint says on stderr"
	else
		fail "summary of $t: the notes differ from lint's"
		diff "$T/brief.notes" "$T/summary.notes" | head -20
	fi
done
# The report's Processes table reads by rank, whatever order the ranks'
# streams arrived in (the golden linear trace's rank 3 is its source 0).
LINEAR="$(dirname "$0")/../fixtures/golden/linear.fss"
"$FSS" report "$LINEAR" 2>/dev/null | sed -n '/^Processes/,/^$/p' | awk 'NR > 2 && NF { print $1 }' >"$T/ranks.txt"
if [ "$(tr '\n' ' ' <"$T/ranks.txt")" = "0 1 2 3 " ]; then pass "report: the Processes table by rank"; else
	fail "report: the Processes table's ranks: $(tr '\n' ' ' <"$T/ranks.txt")"; fi
# A trace of some of the job's ranks is said to be one, as lint says it.
NODE_A="$(dirname "$0")/../fixtures/golden/node-a.fss"
expect_rc 0 "summary of one node's trace" "$SUMMARY" "$NODE_A"
expect_out "$T/out" "a partial job: 2 of the 4 ranks of its largest communicator" "summary: a partial job said"
expect_rc 0 "summary of a missing trace" "$SUMMARY" "$T/nope.fss"
expect_out "$T/out" "nope.fss" "summary of a missing trace: names it"
if grep -qE "summary: -([2-9]|[0-9]{2,})$" "$T/out"; then pass "summary of a missing trace: negative error"; else
	fail "summary of a missing trace: $(tail -1 "$T/out")"; fi

echo "lint_test: $fails failure(s)"
[ "$fails" -eq 0 ]
