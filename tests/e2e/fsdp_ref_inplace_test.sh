#!/usr/bin/env bash
# fsdp_ref_inplace_test.sh FSDPSCOPE FSDP_REF AGENT - fsdp_ref --style fsdp2
# gathers in place as FSDP2's foreach_all_gather does (every AllGather's
# sendbuff = recvbuff + rank x bytes, which `fsdpscope attach` reads ranks
# from), --style fsdp1 from the shard's own buffer (none in place); the
# losses are the same either way. Two ranks (rank in the shard group = the
# source's rank), two steps, under `fsdpscope run` on the stand-in.
set -u
FSS=$1
REF=$2
AGENT=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok:   $*"; }

inplace() { # inplace TRACE - "gathers in-place" of its AllGathers
	"$FSS" dump --type collective "$1" | python3 -c '
import json, sys
n = k = 0
for line in sys.stdin:
    d = json.loads(line)
    if d.get("op") != "AllGather":
        continue
    n += 1
    k += int(d["sendbuff"], 16) == int(d["recvbuff"], 16) + d["rank"] * d["bytes"]
print(n, k)'
}
for style in fsdp2 fsdp1; do
	FSDPSCOPE_AGENT=$AGENT "$FSS" run --out "$T" --name "$style" -- "$REF" --nranks 2 --steps 2 --style "$style" \
		--quiet --log "$T/$style.jsonl" >"$T/$style.out" 2>&1 || { fail "$style: fsdpscope run"; sed 's/^/    | /' "$T/$style.out"; }
done
set -- $(inplace "$T/fsdp2.fss")
[ "${1:-0}" -gt 0 ] && [ "$1" = "$2" ] && pass "fsdp2: all $1 AllGathers in place" || fail "fsdp2: ${2:-?} of ${1:-?} AllGathers in place"
set -- $(inplace "$T/fsdp1.fss")
[ "${1:-0}" -gt 0 ] && [ "$2" = 0 ] && pass "fsdp1: none of $1 AllGathers in place" || fail "fsdp1: ${2:-?} of ${1:-?} in place"
loss() { python3 -c 'import json, sys; print([json.loads(l)["loss"] for l in open(sys.argv[1]) if json.loads(l)["rank"] == 0])' "$1"; }
[ "$(loss "$T/fsdp2.jsonl")" = "$(loss "$T/fsdp1.jsonl")" ] && pass "the same losses either way" ||
	fail "losses differ: fsdp2 $(loss "$T/fsdp2.jsonl"), fsdp1 $(loss "$T/fsdp1.jsonl")"
[ "$fails" -eq 0 ]
