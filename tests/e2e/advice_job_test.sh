#!/usr/bin/env bash
# advice_job_test.sh FSDPSCOPE FSDP_REF - the new user's job of issue 23: a
# 4-rank, one-node fsdp_ref run with its defaults (per block, prefetch 1),
# under `fsdpscope run`. Checks decisions only (which rules fire, which
# fixes they list), never a time: a live run's timing is the machine's.
#  - no node-level fix (HSDP, an integer reshard_after_forward, HYBRID_SHARD,
#    ZeRO++'s hpz) on one node;
#  - no no-prefetch cause and no prefetch advice for a job that prefetches
#    (fsdp_ref's log counts its prefetched gathers);
#  - a gather is latency- or bandwidth-bound in one rule's words as in
#    another's: small-collectives says latency-bound only where
#    exposed-gather names no gather bandwidth-bound.
set -u
FSS=$1
REF=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/expect.sh"

expect_rc 0 "run the 4-rank job" "$FSS" run --out "$T" --name job -- "$REF" --nranks 4 --log "$T/job.log"
python3 - "$T/job.log" <<'PY' && pass "the trainer prefetched (its log)" || fail "the trainer's log: no prefetched gathers"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"step"')]
assert lines and all(l["prefetch"] == 1 and l["prefetched_allgathers"] > 0 for l in lines)
PY
"$FSS" lint --json "$T/job.fss" >"$T/lint.json" 2>"$T/err"
"$FSS" lint "$T/job.fss" >"$T/lint.txt" 2>>"$T/err"
for text in init_device_mesh "ShardingStrategy.HYBRID_SHARD" zero_hpz_partition_size "reshard_after_forward=4" \
	"reshard_after_forward=8" set_modules_to_forward_prefetch "forward_prefetch=True" "mostly no-prefetch" \
	"cause no-prefetch" "no-prefetch 1" "no-prefetch 2" "no-prefetch 3" "no-prefetch 4"; do
	expect_no "$T/lint.txt" "$text" "one node, prefetch 1: no '$text'"
done
python3 - "$T/lint.json" <<'PY' && pass "one judgement per gather: no contradiction" || fail "latency / bandwidth contradict"
import json, sys
d = json.load(open(sys.argv[1]))
by = {f["rule"]: f for f in d["findings"]}
eg, sc = by.get("exposed-gather"), by.get("small-collectives")
if eg and sc and "latency-bound" in sc["message"]:
    # the median gather is latency-bound for both: exposed-gather's costliest
    # cause is not that same size called bandwidth-bound
    assert "mostly bandwidth-bound" not in eg["message"], eg["message"]
PY
echo "advice_job_test: $fails failure(s)"
[ "$fails" -eq 0 ]
