#!/usr/bin/env bash
# export_hta_check.sh - HTA's comm/comp overlap on `fsdpscope export --kineto`
# of fsdp_ref runs, against fsdpscope's own comm_comp_overlap on the .fss
# (report --json's per_rank[]), rank by rank: they must agree within 1 point.
#
#   bench/export_hta_check.sh [BUILD] [STEPS]      (default build, 10 steps)
#
# Needs HTA's source (fetched: /work/.mirror/facebookresearch+HolisticTraceAnalysis/repo,
# or HTA_DIR=<unpacked tree>) and its Python dependencies (Debian's python3-pandas,
# -networkx, -plotly, -psutil, -yaml). Not part of make test. Prints one line per
# run and rank, and exits 1 when a rank differs by more than 1 point.
set -u
BUILD=${1:-build}
STEPS=${2:-10}
F=$BUILD/cli/fsdpscope
REF=$BUILD/fsdp_ref/fsdp_ref
PY=${PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d /tmp/export-hta.XXXXXX)
HTA_MIRROR=/work/.mirror/facebookresearch+HolisticTraceAnalysis/repo
if [ -z "${HTA_DIR:-}" ]; then
	HTA_DIR=$WORK/hta
	mkdir -p "$HTA_DIR"
	git -C "$HTA_MIRROR" archive HEAD hta | tar -x -C "$HTA_DIR" || { echo "no HTA source at $HTA_MIRROR"; exit 2; }
	echo "HTA: $(git -C "$HTA_MIRROR" rev-parse HEAD)"
fi
status=0
hta() { # NAME: HTA on WORK/NAME-kineto against report --json of WORK/NAME.fss
	local name=$1
	"$F" export "$WORK/$name.fss" --kineto "$WORK/$name-kineto" 2>/dev/null || { echo "$name: export failed"; status=1; return; }
	"$F" report --json "$WORK/$name.fss" >"$WORK/$name.report.json" 2>/dev/null
	PYTHONPATH=$HTA_DIR "$PY" - "$WORK/$name-kineto" "$WORK/$name.report.json" "$name${HTA_DISABLE_NS_ROUNDING:+ (HTA_DISABLE_NS_ROUNDING=1)}" <<'PYEOF' || status=1
import json, logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
folder, report, name = sys.argv[1:4]
hta = TraceAnalysis(trace_dir=folder).get_comm_comp_overlap()
ours = {r["rank"]: r.get("comm_comp_overlap") for r in json.load(open(report))["per_rank"]}
bad = 0
for _, row in hta.iterrows():
    rank, pct = int(row["rank"]), float(row["comp_comm_overlap_pctg"])
    mine = ours.get(rank)
    if mine is None:
        print(f"{name} rank {rank}: HTA {pct:6.2f}%   fsdpscope: no comm_comp_overlap in report --json")
        bad = 1
        continue
    diff = pct - 100 * mine
    print(f"{name} rank {rank}: HTA {pct:6.2f}%   fsdpscope {100 * mine:6.2f}%   difference {diff:+.2f} points")
    bad |= abs(diff) > 1
sys.exit(bad)
PYEOF
}
run() { # NAME fsdp_ref-args...
	local name=$1
	shift
	"$F" run --out "$WORK" --name "$name" -- "$REF" --steps "$STEPS" --quiet "$@" >/dev/null 2>&1
	hta "$name"
}
run block --nranks 2 --wrap block
run linear --nranks 2 --wrap linear
run tp --nranks 4 --tp 2 --wrap block
run accum --nranks 2 --grad-accum 2
run hsdp --nranks 4 --shard-group 2
# GPU intervals (a synthetic trace: tests/e2e/export_synth_trace.c, kernels of 1 us and more
# at ns times): HTA rounds each fractional event inward to whole us, which the shortest
# kernels do not survive; the same files with that rounding off are the exact comparison.
SYNTH=$BUILD/tests/export_synth_trace
if [ -x "$SYNTH" ]; then
	"$SYNTH" "$WORK/cupti.fss"
	saved=$status
	hta cupti
	status=$saved # informative: the rounding's effect, said in the results
	rm -rf "$WORK/cupti-kineto"
	HTA_DISABLE_NS_ROUNDING=1 hta cupti
fi
rm -rf "$WORK"
exit $status
