#!/usr/bin/env bash
# corpus_update.sh - remake the committed fuzz corpus (tests/fuzz/corpus/<target>/).
#
# usage: tests/fuzz/corpus_update.sh BUILD_SAN [SECONDS]
#
# BUILD_SAN is a configured and built sanitizer tree (-DFSS_SANITIZE=ON
# -DFSS_FUZZ=ON, clang). For each target its seeds, from the generators the
# targets' comments name; for sources_fuzz, which has none, SECONDS (default
# 120) of fuzzing from the corpus committed now, merged by libFuzzer into the
# smallest set of inputs that keeps its coverage. The result replaces the
# committed folders.
#
# The smoke tests (tests/fuzz/*.cmake) replay that corpus and then make a fixed
# number of mutations of it from a fixed seed: the same work at every run. Run
# this after a change to a decoder or a record type, and commit the result.
set -euo pipefail

build=${1:?usage: $0 BUILD_SAN [SECONDS]}
seconds=${2:-120}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Seeds of trace_fuzz: sample traces behind the target's control byte (bit 0:
# fix checksums; bit 1: salvage; the rest: feed piece size), and each with a
# bit of its file header flipped (byte 20, the flags) for the salvage read.
trace_seeds() {
	local dir=$1 f
	"$build/tests/fss_gen_sample_trace" "$tmp/a.raw" 1 1 256 >/dev/null
	"$build/tests/fss_gen_sample_trace" "$tmp/b.raw" 3 2 1024 >/dev/null
	for f in a b; do
		{ printf '\000'; cat "$tmp/$f.raw"; } >"$dir/$f"
		{ printf '\377'; cat "$tmp/$f.raw"; } >"$dir/$f.x"
		{ printf '\006'; head -c 20 "$tmp/$f.raw"; printf '\377'; tail -c +22 "$tmp/$f.raw"; } >"$dir/$f.s"
	done
}

ingest_seeds() { "$build/tests/fss_ingest_fuzz_seed" "$1"; }

# Seeds of kineto_fuzz: small Kineto documents behind the target's control byte
# (bit 0: gzip the rest; bits 1-7: the read size), one of them gzip'd here, and a
# one-step trace of bench/kineto_gen (2 layers); never the shared traces.
kineto_seeds() {
	local dir=$1
	"$build/bench/kineto_gen" -n 4 -l 1 "$tmp/gen.json" 2>/dev/null
	{ printf '\000'; cat "$tmp/gen.json"; } >"$dir/gen"
	{ printf '\016'; head -c 6000 "$tmp/gen.json"; } >"$dir/gen_cut_7"
	printf '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "tid": 20, "ts": 1.5, "dur": 2.0005, "args": {"stream": 20, "correlation": 3, "External id": 2, "Collective name": "_allgather_base", "In msg nelems": 4, "Out msg nelems": 8, "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": [0, 1], "Seq": 1, "Rank": 0}}, {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 3}}, {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 9}], "distributedInfo": {"rank": 0, "world_size": 2, "pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": "[0, 1]"}]}, "baseTimeNanoseconds": 1, "deviceProperties": [{"name": "x", "numSms": 1, "totalGlobalMem": 2}]}' >"$tmp/small.json"
	{ printf '\000'; cat "$tmp/small.json"; } >"$dir/small"
	{ printf '\003'; cat "$tmp/small.json"; } >"$dir/small_gz_1"
	{ printf '\000'; gzip -c -n "$tmp/small.json"; } >"$dir/small_raw_gz"
	printf '\000\357\273\277 {"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 10, "dur": 1, "args": {"Collective name": "allreduce", "grid": [1, [2, {"a": null}]], "x": "\\u00e9\\ud83d\\ude00\\n"}}, {"ph": "i", "s": "g", "pid": "", "tid": "", "ts": 3}, 7, {"ph": "X", "ts": "bad"}], "traceName": "t"}' >"$dir/escapes"
}

# Seeds of viewer_fuzz: the golden snapshots, one line each, as a session sends them.
viewer_seeds() {
	local dir=$1 f
	for f in "$here/../fixtures/golden/expected"/*.live.txt; do
		head -1 "$f" | tr -d '\n' >"$dir/$(basename "$f" .live.txt)"
	done
}

# Seeds of options_fuzz: argv words split at NUL behind the parser byte (below
# 0xf0: a command's table, by index in options_fuzz.c; 0xf0-0xf7: thresholds;
# 0xf8 and up: fsdp_ref), as the help's EXAMPLES give them.
options_seeds() {
	local dir=$1
	printf '\005--threshold\000exposed_fraction=20%%\000--brief\000--fail-on\000warning\000t.fss' >"$dir/lint"
	printf '\006--json\000--flops-per-step\0001e15\000--peak-flops\000989e12\000--html\000r.html\000t.fss' >"$dir/report"
	printf '\007--out\000runs/a\000--json-summary\000s.json\000--\000job\000--x' >"$dir/run"
	printf '\010--once\000-r\0003\000--step\0002\000--cols\000120\000t.fss' >"$dir/top"
	printf '\001--listen\000tcp:127.0.0.1:0\000--until-idle\00030\000--key-timeout\0005\000--out\000d' >"$dir/collect"
	printf '\000--duration\0005\000--out\000d\0001234' >"$dir/attach"
	printf '\360exposed_fraction=200%%\000fine_gathers_per_unit=2.5\00080GB\000small_gather_bytes=1Mi' >"$dir/thresholds"
	printf '\370--nranks\0004\000--wrap\000linear\000--steps\00010\000--lr\0000.01\000--stall-at\0002:3' >"$dir/fsdp_ref"
}

# sources_fuzz reads records straight from its bytes: it starts from nothing.
sources_seeds() { :; }

# update TARGET MAX_LEN SECONDS FLAG...: the seeds, and with SECONDS > 0 what that
# long a run finds from them and the committed inputs (none longer than MAX_LEN),
# merged into the smallest set that keeps their coverage.
update() {
	local target=$1 len=$2 secs=$3 corpus="$here/corpus/$1"
	local seeds="$tmp/$target.seeds" found="$tmp/$target.found" merged="$tmp/$target.merged"
	shift 3

	mkdir -p "$seeds" "$found" "$merged" "$corpus"
	"${target%_fuzz}_seeds" "$seeds"
	if [ "$secs" -gt 0 ]; then
		"$build/tests/$target" -max_total_time="$secs" -max_len="$len" -timeout=10 -rss_limit_mb=2048 "$@" \
			"$found" "$seeds" "$corpus" >"$tmp/$target.log" 2>&1 || { cat "$tmp/$target.log"; exit 1; }
		"$build/tests/$target" -merge=1 -max_len="$len" -timeout=10 -rss_limit_mb=2048 "$@" \
			"$merged" "$seeds" "$corpus" "$found" >>"$tmp/$target.log" 2>&1 || { cat "$tmp/$target.log"; exit 1; }
	else
		cp "$seeds"/* "$merged"/
	fi
	rm -rf "$corpus"
	mv "$merged" "$corpus"
	echo "$target: $(find "$corpus" -type f | wc -l) inputs, $(du -sk "$corpus" | cut -f1) KiB"
}

# The decoders' seeds are whole traces and streams, found by hand to cover them:
# they are the corpus. sources_fuzz starts from nothing: a run of SECONDS makes
# its corpus, of short record runs.
update trace_fuzz 65536 0
update ingest_fuzz 65536 0
update kineto_fuzz 65536 0
update sources_fuzz 256 "$seconds"
update viewer_fuzz 262144 0
update options_fuzz 4096 0
