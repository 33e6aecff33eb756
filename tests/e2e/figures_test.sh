#!/usr/bin/env bash
# figures_test.sh - the per_rank HTA figures of fsdp_ref runs recorded by
# `fsdpscope run`, against the trace's own records and fsdp_ref's log
# (tests/e2e/figures_check.py says what is checked).
#
# usage: figures_test.sh FSDPSCOPE AGENT FSDP_REF
set -uo pipefail
fss=$1 agent=$2 ref=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/fsdpscope-figures.XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=0

# one JOB NAME STEPS FSDP_REF_ARGS...: record it, check its figures
one() {
	local name=$1 steps=$2
	shift 2
	local out="$work/$name"
	if ! FSDPSCOPE_AGENT="$agent" "$fss" run --out "$out" -- "$ref" --layers 2 --steps "$steps" \
		--log "$out.jsonl" "$@" >"$out.run" 2>&1; then
		echo "FAIL: $name: fsdpscope run exited non-zero:"; cat "$out.run"
		failed=1
		return
	fi
	echo "== $name ($*)"
	if ! python3 "$here/figures_check.py" --fsdpscope "$fss" --trace "$out/trace.fss" \
		--log "$out.jsonl" --steps "$steps"; then
		failed=1
	fi
}

one block 4 --nranks 2
one linear_tp 3 --nranks 4 --tp 2 --wrap linear
one accum 3 --nranks 2 --grad-accum 2
one hsdp 3 --nranks 4 --shard-group 2
one zero3 3 --nranks 2 --style zero3
one zero3_coalesced 3 --nranks 2 --style zero3 --zero3-gather coalesced
one no_nvtx 6 --nranks 2 --no-nvtx
exit $failed
