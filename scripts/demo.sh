#!/usr/bin/env bash
# demo.sh - the main job: the bundled reference trainer under fsdpscope,
# wrapped per Linear (the too-fine bug), then per block (right).
# Called by `make demo` after set-up and build.
# usage: scripts/demo.sh BUILD_DIR
set -euo pipefail
BUILD=${1:-build}
FSS=$BUILD/cli/fsdpscope
REF=$BUILD/fsdp_ref/fsdp_ref
out=$(mktemp -d /tmp/fsdpscope-demo.XXXXXX)

echo "== $("$FSS" version)"
for bin in "$FSS" "$REF" "$BUILD/agent/libfsdpscope-agent.so"; do
  if [ ! -e "$bin" ]; then
    echo "demo: $bin was not built (see the configure messages above)" >&2
    exit 1
  fi
done

# The same model trained twice on 4 CPU ranks: the losses match bit for bit,
# the AllGathers per step do not.
common=(--backend cpu --nranks 4 --layers 8 --steps 5)
for wrap in linear block; do
  echo
  echo "== fsdpscope run --out $out/$wrap -- fsdp_ref ${common[*]} --wrap $wrap"
  "$FSS" run --out "$out/$wrap" -- "$REF" "${common[@]}" --wrap "$wrap" --log "$out/$wrap.jsonl" \
    >"$out/$wrap.out" 2>"$out/$wrap.err" || { cat "$out/$wrap.err" >&2; exit 1; }
  cat "$out/$wrap.out" "$out/$wrap.err"
  python3 - "$out/$wrap.jsonl" "$out/$wrap/trace.fss" "$FSS" <<'PY'
import json, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = [r for r in rows if r["rank"] == 0][-1]
rep = json.loads(subprocess.run([sys.argv[3], "report", "--json", sys.argv[2]],
                                capture_output=True, text=True, check=True).stdout)
print("   ground truth (fsdp_ref's own log, rank 0): %d AllGathers per step, %d forward;"
      " fsdpscope counted %d, %d forward, %d repeating units x %d gathers"
      % (last["allgathers"], last["forward_allgathers"], rep["per_step"]["allgathers"],
         rep["per_step"]["forward_allgathers"], rep["units"]["repeating_units"],
         rep["units"]["gathers_per_unit"]))
PY
  "$FSS" report --html "$out/$wrap.html" "$out/$wrap/trace.fss" 2>/dev/null ||
    { echo "demo: report --html $out/$wrap.html failed" >&2; exit 1; }
  echo "   the HTML report (one self-contained page): $out/$wrap.html"
done
echo
if cmp -s <(grep loss "$out/linear.out") <(grep loss "$out/block.out"); then
  echo "== the two wraps' losses match bit for bit; traces and logs are in $out"
else
  echo "== the two wraps' losses DIFFER"; exit 1
fi
