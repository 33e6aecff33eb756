#!/usr/bin/env bash
# whatif_bench.sh - how close report's what-if predictions (collector/whatif.h)
# come to the job when the predicted configuration is run for real.
#
# For each baseline (fsdp_ref on the CPU backend, with the stand-in NCCL's
# link model FSDP_REF_LINK_LATENCY_US / FSDP_REF_LINK_GBPS), record it under
# `fsdpscope run` with --log, read `report --json`'s whatif list, then run
# each predicted change for real (the same flags, one changed) and compare:
#  - step: predicted_step_ns against rank 0's median step_ns over steps >= 2
#    of the variant's --log (goal: within 10%);
#  - exposure: predicted_exposed_allgather_ns against the variant's own
#    report --json exposure.exposed_allgather_ns_per_step, the error as a
#    share of the measured step (goal: within 10% of the step);
#  - memory: predicted_peak_bytes against the variant's log
#    peak_persistent_bytes + peak_transient_bytes (goal: within 10%).
# Changes left out are printed with the model's reason. Also the weak
# setups: tensor parallel, gradient accumulation, ZeRO-3.
#
# Usage: bench/whatif_bench.sh [STEPS]   (from the repository root, after make build)
set -u
BUILD=${BUILD:-build}
STEPS=${1:-10}
fsdpscope=$BUILD/cli/fsdpscope
fsdp_ref=$BUILD/fsdp_ref/fsdp_ref
export FSDPSCOPE_AGENT=${FSDPSCOPE_AGENT:-$PWD/$BUILD/agent/libfsdpscope-agent.so}
for f in "$fsdpscope" "$fsdp_ref" "$FSDPSCOPE_AGENT"; do
	[ -e "$f" ] || { echo "whatif_bench: $f is not built" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/whatif_bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
n=0

# run NAME LAT_US GBPS FLAGS...: record one configuration; prints its folder
run() {
	local name=$1 lat=$2 gbps=$3
	shift 3
	n=$((n + 1))
	local d=$work/$n-$name
	mkdir -p "$d"
	FSDP_REF_LINK_LATENCY_US=$lat FSDP_REF_LINK_GBPS=$gbps "$fsdpscope" run --out "$d" -- "$fsdp_ref" --backend cpu \
		--steps "$STEPS" --quiet --log "$d/log.jsonl" "$@" >/dev/null 2>"$d/err" || { echo "run $name failed" >&2; }
	"$fsdpscope" report --json "$d/trace.fss" >"$d/report.json" 2>>"$d/err"
	echo "$d"
}

# variant FLAGS... CHANGE: the flags with the one the change names replaced
variant_flags() {
	local change=$1
	shift
	python3 - "$change" "$@" <<'PY'
import sys
change, flags = sys.argv[1], sys.argv[2:]
key, val = change.split("=")
opt = {"wrap": "--wrap", "reshard_after_forward": "--reshard-after-forward", "prefetch": "--prefetch"}[key]
out, i = [], 0
while i < len(flags):
    if flags[i] == opt:
        i += 2
        continue
    out.append(flags[i]); i += 1
out += [opt, val]
print(" ".join(out))
PY
}

# compare BASE_DIR CHANGE VARIANT_DIR: one line of the table
compare() {
	python3 - "$@" <<'PY'
import json, statistics, sys
base, change, var = sys.argv[1:4]
rep = json.load(open(base + "/report.json"))
p = [w for w in rep["whatif"] if w["change"] == change][0]
log = [json.loads(l) for l in open(var + "/log.jsonl") if l.strip()]
log = [s for s in log if s.get("rank") == 0 and "step_ns" in s and s["step"] >= 2]
step = statistics.median(s["step_ns"] for s in log)
peak = max(s["peak_persistent_bytes"] + s["peak_transient_bytes"] for s in log)
vrep = json.load(open(var + "/report.json"))
exp = vrep["exposure"]["exposed_allgather_ns_per_step"]
es = (p["predicted_step_ns"] - step) / step * 100
ee = (p["predicted_exposed_allgather_ns"] - exp) / step * 100
pk = p["predicted_peak_bytes"]
em = "  n/a" if pk is None else "%+6.1f%%" % ((pk - peak) / peak * 100)
ok = lambda e: "ok" if abs(e) <= 10 else "MISS"
print("  %-28s step %8.2f / %8.2f ms %+6.1f%% %-4s | exposed %7.2f / %7.2f ms %+6.1f%% of step %-4s | peak %s %s"
      % (change, p["predicted_step_ns"] / 1e6, step / 1e6, es, ok(es), p["predicted_exposed_allgather_ns"] / 1e6,
         exp / 1e6, ee, ok(ee), em, "" if pk is None else ok((pk - peak) / peak * 100)))
PY
}

# baseline NAME LAT GBPS FLAGS...: record, then every predicted change for real
baseline() {
	local name=$1 lat=$2 gbps=$3
	shift 3
	local b
	b=$(run "$name" "$lat" "$gbps" "$@")
	python3 - "$b" "$name" "$lat" "$gbps" "$*" <<'PY'
import json, statistics, sys
d, name, lat, gbps, flags = sys.argv[1:6]
rep = json.load(open(d + "/report.json"))
log = [json.loads(l) for l in open(d + "/log.jsonl") if l.strip()]
log = [s for s in log if s.get("rank") == 0 and "step_ns" in s and s["step"] >= 2]
step = statistics.median(s["step_ns"] for s in log) if log else 0
m = rep["whatif_model"]
def fit_words(f):
    if not f["fitted"]:
        return "not fitted: " + f["why"]
    if f["bytes_per_ns"] is None:
        return "%.1f us, latency only (residual %.1f us)" % (f["latency_ns"] / 1e3, f["residual_ns"] / 1e3)
    return "%.1f us + bytes / %.3f GB/s (residual %.1f us)" % (f["latency_ns"] / 1e3, f["bytes_per_ns"], f["residual_ns"] / 1e3)
print("%s: link %s us, %s GB/s; %s" % (name, lat, gbps, flags))
print("  recorded: step %.2f ms (log median), exposed AllGather %.2f ms, prefetch seen %s, fits %s"
      % (step / 1e6, rep["exposure"]["exposed_allgather_ns_per_step"] / 1e6, m["prefetch_seen"],
         ", ".join("%d ranks %s" % (f["nranks"], fit_words(f)) for f in m["fits"])))
if m["note"]:
    print("  nothing predicted: " + m["note"])
for l in m["left_out"]:
    print("  %-28s left out: %s" % (l["change"], l["why"]))
PY
	# the same flags once more: how far two identical runs differ on this machine
	local again
	again=$(run "$name-again" "$lat" "$gbps" "$@")
	python3 - "$b" "$again" <<'PY'
import json, statistics, sys
def med(d):
    log = [json.loads(l) for l in open(d + "/log.jsonl") if l.strip()]
    return statistics.median(s["step_ns"] for s in log if s.get("rank") == 0 and "step_ns" in s and s["step"] >= 2)
a, b = med(sys.argv[1]), med(sys.argv[2])
print("  the same job again: step %.2f ms (%+.1f%%): the machine's own noise" % (b / 1e6, (b - a) / a * 100))
PY
	local change
	for change in $(python3 -c 'import json,sys; print(" ".join(w["change"] for w in json.load(open(sys.argv[1]))["whatif"]))' "$b/report.json"); do
		local v
		# shellcheck disable=SC2046
		v=$(run "$name-$change" "$lat" "$gbps" $(variant_flags "$change" "$@"))
		compare "$b" "$change" "$v"
	done
	echo
}

model=(--layers 6 --d-model 64 --ffn 160 --seq 32 --batch 8 --reduce-dtype bf16)
echo "whatif_bench: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, steps $STEPS"
echo "(predicted / measured; errors: step and peak against the measured figure, exposure as a share of the measured step)"
echo
baseline issue-baseline 300 8 --nranks 2 "${model[@]}" --wrap linear --reshard-after-forward true --prefetch 0
baseline four-ranks 300 8 --nranks 4 "${model[@]}" --wrap linear --reshard-after-forward true --prefetch 0
baseline per-block 300 8 --nranks 2 "${model[@]}" --wrap block --reshard-after-forward true --prefetch 0
baseline fast-link 50 2 --nranks 2 "${model[@]}" --wrap linear --reshard-after-forward false --prefetch 1
echo "== where the model is weakest"
baseline tensor-parallel 300 8 --nranks 4 --tp 2 "${model[@]}" --wrap linear --reshard-after-forward true --prefetch 0
baseline accumulation 300 8 --nranks 2 --grad-accum 2 "${model[@]}" --wrap linear --reshard-after-forward true --prefetch 0
baseline zero3 300 8 --nranks 2 --style zero3 --bucket 3000 "${model[@]}"
