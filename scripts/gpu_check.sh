#!/usr/bin/env bash
# gpu_check.sh - the GPU check of fsdp_ref's CUDA backend, in one run.
#
# Run from anywhere in the repository, on a machine with an NVIDIA GPU (one
# call of the device tool: `bash scripts/gpu_check.sh`). In order:
#   1. the environment: nvidia-smi, nvcc, NCCL (header, library, runtime);
#   2. configure and build (cmake -S . -B build-gpu && cmake --build -j16);
#   3. fsdp_ref_cuda_selftest: every op on the GPU against the CPU backend,
#      then again under compute-sanitizer memcheck and racecheck;
#   4. N = 1 training runs, each wrap (block, linear, model, group:2, and block
#      with fp32 params), on the CUDA backend and on the CPU backend with the
#      same flags and seed; the losses are compared;
#   5. fsdpscope attach on a 1-rank CUDA fsdp_ref job on the real NCCL (root
#      only: eBPF): the job stopped at step 5, attached, let go; the attach
#      trace's AllGathers per step and steps are compared with the job's log;
#   6. logs to $OUT/ and to tests/fixtures/gpu/<date>-<gpu>/ (see the README
#      there); $OUT/gpu-fixtures.tar.gz holds that folder for the way back.
# Where no GPU is usable it stops after the build, says so, and exits 77.
#
# Loss checks (rank 0's loss per step, CUDA run vs CPU run, same flags):
#   - first step: |cuda - cpu| <= 1e-4 x |cpu|. Both start from the same
#     weights (initialised on the host), so only summation order differs;
#   - every step: |cuda - cpu| <= 1e-2 x |cpu|. Adam's first steps move each
#     weight by about lr x sign(grad), so a gradient element near zero that
#     rounds differently moves a weight the other way, and bf16 weights can
#     round to the neighbouring value: trajectories drift apart slowly;
#   - the CUDA loss falls (last step < first step);
#   - CUDA losses are bit-identical across wraps, and so are CPU losses (both
#     backends promise results independent of the wrap policy).
#
# Environment: OUT (default out/gpu_check), BUILD_DIR (build-gpu), JOBS (16),
# STEPS (8), NCCL_HOME (found automatically when unset: toolkit, system, or
# the nvidia-nccl Python wheel).
# Exit status: 0 every check passed, 1 a check failed, 2 the build failed,
# 77 no usable GPU (built, nothing run).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/out/gpu_check}
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-16}
STEPS=${STEPS:-8}
FIRST_TOL=1e-4
RUN_TOL=1e-2

FAILED=()
say() { printf '\n== %s\n' "$*"; }
fail() { FAILED+=("$*"); printf 'FAIL: %s\n' "$*"; }

# NCCL_HOME for cmake when nccl.h and libnccl.so.2 are not where
# cmake/deps.cmake looks by default (the toolkit, /usr).
find_nccl() {
  local d
  if [ -n "${NCCL_HOME:-}" ]; then return; fi
  for d in /usr/local/cuda /usr /usr/local/nccl /opt/nccl; do
    if [ -f "$d/include/nccl.h" ] && ls "$d"/lib*/libnccl.so.2 "$d"/lib/*/libnccl.so.2 >/dev/null 2>&1; then
      return
    fi
  done
  d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  if [ -n "$d" ] && [ -f "$d/include/nccl.h" ] && [ -f "$d/lib/libnccl.so.2" ]; then
    export NCCL_HOME=$d
    echo "NCCL from the Python wheel: NCCL_HOME=$NCCL_HOME"
  fi
}

environment() {
  say environment
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  uname -srm
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'none (uncommitted tree)')"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi || true
  else
    echo "nvidia-smi: not found"
  fi
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ -x "$nvcc" ]; then "$nvcc" --version; else echo "nvcc: not found"; fi
  find_nccl
  local h
  for h in "${NCCL_HOME:-/nonexistent}/include/nccl.h" /usr/local/cuda/include/nccl.h /usr/include/nccl.h; do
    if [ -f "$h" ]; then
      echo "nccl.h: $h: $(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{printf "%s%s", sep, $3; sep="."}' "$h")"
      break
    fi
  done
}

build() {
  say build
  cmake -S "$ROOT" -B "$ROOT/$BUILD_DIR" ${NCCL_HOME:+-DNCCL_HOME="$NCCL_HOME"} || {
    fail "cmake configure"
    return 1
  }
  if ! cmake --build "$ROOT/$BUILD_DIR" -j "$JOBS"; then
    # Something outside fsdp_ref may be broken: the check needs only these.
    echo "gpu_check: the full build failed; building the three targets the check needs"
    cmake --build "$ROOT/$BUILD_DIR" -j "$JOBS" --target fsdp_ref fsdp_ref_cuda fsdp_ref_cuda_selftest || {
      fail "build of fsdp_ref, fsdp_ref_cuda, fsdp_ref_cuda_selftest"
      return 1
    }
  fi
  # fsdp_ref --backend cuda execs fsdp_ref_cuda from its own directory (or
  # its cuda/ subdirectory): the CUDA runs go through that documented path.
  CPU_BIN=$ROOT/$BUILD_DIR/fsdp_ref/fsdp_ref
  CUDA_BIN=$ROOT/$BUILD_DIR/fsdp_ref/fsdp_ref_cuda
  [ -x "$CUDA_BIN" ] || CUDA_BIN=$ROOT/$BUILD_DIR/fsdp_ref/cuda/fsdp_ref_cuda
  SELFTEST_BIN=$ROOT/$BUILD_DIR/fsdp_ref/cuda/fsdp_ref_cuda_selftest
  local b
  for b in "$CPU_BIN" "$CUDA_BIN" "$SELFTEST_BIN"; do
    if [ ! -x "$b" ]; then
      fail "not built: $b (the configure output above says which dependency was missing)"
      return 1
    fi
  done
  echo "built: $CPU_BIN $CUDA_BIN $SELFTEST_BIN"
}

# "step loss" of rank 0, one line per step, from a JSON-lines log.
losses() {
  awk 'function val(key,   r) {
         if (!match($0, "\"" key "\": *[^,}]+")) return ""
         r = substr($0, RSTART, RLENGTH); sub(/^[^:]*: */, "", r); gsub(/"/, "", r); return r
       }
       val("rank") == "0" { print val("step"), val("loss") }' "$1" | sort -n
}

# One training run: run NAME BINARY ARGS... -> $RUNS/NAME.jsonl and NAME.out
run() {
  local name=$1
  shift
  echo "run $name: $* --log $RUNS/$name.jsonl"
  local rc=0
  if [ -n "${HUNG:-}" ]; then
    fail "run $name skipped: an earlier run ($HUNG) timed out"
    return 1
  fi
  NCCL_DEBUG=${NCCL_DEBUG:-VERSION} timeout 90 "$@" --log "$RUNS/$name.jsonl" \
    >"$RUNS/$name.out" 2>&1 || rc=$?
  [ $rc -ne 124 ] || HUNG=$name # a hang would eat the whole time budget: stop running
  if [ $rc -ne 0 ]; then
    fail "run $name exited with status $rc$( [ $rc -eq 124 ] && echo ' (timed out)') (last lines below)"
    tail -n 20 "$RUNS/$name.out"
    return 1
  fi
  if [ ! -s "$RUNS/$name.jsonl" ]; then
    fail "run $name wrote no log"
    return 1
  fi
}

# Compare two runs' losses; append the table to compare.txt.
compare_runs() {
  local cuda=$1 cpu=$2 table
  table=$(awk -v first_tol="$FIRST_TOL" -v run_tol="$RUN_TOL" '
    NR == FNR { ref[$1] = $2; next }
    ($1 in ref) {
      d = $2 - ref[$1]; if (d < 0) d = -d
      r = ref[$1] < 0 ? -ref[$1] : ref[$1]
      rel = r > 0 ? d / r : d
      if (n == 0) { first_rel = rel; first_loss = $2 }
      last_loss = $2
      if (d > max_abs) max_abs = d
      if (rel > max_rel) max_rel = rel
      printf "  step %3d  cuda %-22s cpu %-22s |diff| %.3g\n", $1, $2, ref[$1], d
      n++
    }
    END {
      printf "  steps %d  max|diff| %.3g  max rel %.3g  first-step rel %.3g  loss %s -> %s\n",
        n, max_abs, max_rel, first_rel, first_loss, last_loss
      status = 0
      if (n == 0) { print "  VERDICT no common steps"; exit 1 }
      if (first_rel > first_tol) { printf "  VERDICT first step differs by %.3g > %s relative\n", first_rel, first_tol; status = 1 }
      if (max_rel > run_tol) { printf "  VERDICT a step differs by %.3g > %s relative\n", max_rel, run_tol; status = 1 }
      if (!(last_loss + 0 < first_loss + 0)) { print "  VERDICT the CUDA loss did not fall"; status = 1 }
      if (status == 0) print "  VERDICT ok"
      exit status
    }' <(losses "$RUNS/$cpu.jsonl") <(losses "$RUNS/$cuda.jsonl"))
  local rc=$?
  printf '%s vs %s\n%s\n' "$cuda" "$cpu" "$table" | tee -a "$RUNS/compare.txt"
  [ $rc -eq 0 ] || fail "losses of $cuda vs $cpu (see the table)"
}

# Bit-identical losses across runs (the printed losses round-trip exactly).
same_losses() {
  local a=$1 b=$2
  if cmp -s <(losses "$RUNS/$a.jsonl") <(losses "$RUNS/$b.jsonl"); then
    echo "  $a == $b: identical losses" | tee -a "$RUNS/compare.txt"
  else
    echo "  $a != $b: losses differ" | tee -a "$RUNS/compare.txt"
    fail "losses of $a and $b are not bit-identical"
  fi
}

# fsdpscope attach on a CUDA job: the probes on the real libnccl the job maps.
attach_check() {
  local fss=$ROOT/$BUILD_DIR/cli/fsdpscope out=$RUNS/attach log=$RUNS/attach-job.jsonl pid apid i
  if [ "$(id -u)" -ne 0 ]; then
    echo "attach: not root: the eBPF check is skipped"
    return 0
  fi
  [ -x "$fss" ] || { fail "attach: $fss not built"; return 1; }
  rm -rf "$out" "$log"
  "$CPU_BIN" --backend cuda --nranks 1 --wrap linear --steps 300 --quiet --log "$log" >"$RUNS/attach-job.out" 2>&1 &
  pid=$!
  for i in $(seq 600); do [ "$(wc -l <"$log" 2>/dev/null || echo 0)" -ge 5 ] && break; sleep 0.1; done
  kill -STOP "$pid"
  "$fss" attach --out "$out" "$pid" 2>"$RUNS/attach.err" &
  apid=$!
  for i in $(seq 600); do grep -q "attached pid $pid " "$RUNS/attach.err" 2>/dev/null && break; sleep 0.1; done
  kill -CONT "$pid"
  wait "$pid" || fail "attach: the CUDA job failed while attached"
  wait "$apid" || fail "attach: fsdpscope attach failed ($(tail -n 3 "$RUNS/attach.err"))"
  cat "$RUNS/attach.err"
  "$fss" lint --json "$out/attach.fss" >"$RUNS/attach-lint.json" 2>"$RUNS/attach-lint.err"
  python3 - "$RUNS/attach-lint.json" "$log" <<'PY' || fail "attach: the trace disagrees with the job's log"
import json, sys
doc = json.load(open(sys.argv[1]))
log = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l]
want = {d["allgathers"] for d in log}
got = doc["per_step"]["allgathers"]
print(f"attach on CUDA: verdict {doc['verdict']}, {got} AllGathers per step (log {sorted(want)}), "
      f"{doc['steps_analyzed']} steps analysed of {len(log)}, exposure {doc['exposure']['source']}")
sys.exit(0 if doc["verdict"] == "diagnosed" and want == {got} else 1)
PY
}

main() {
  mkdir -p "$OUT"
  environment
  build || return 2

  say "self-test (fsdp_ref_cuda_selftest)"
  "$SELFTEST_BIN" 2>&1 | tee "$OUT/selftest.log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 77 ]; then
    echo
    echo "gpu_check: no usable CUDA device here ($(head -n 1 "$OUT/selftest.log"))."
    echo "gpu_check: the project built; the GPU checks (self-test, CUDA training runs) need a GPU machine."
    return 77
  fi
  [ "$rc" -eq 0 ] || fail "self-test (exit status $rc)"

  # The kernels under compute-sanitizer: out-of-bounds and misaligned
  # accesses (memcheck), shared-memory hazards (racecheck). Some machines
  # refuse the tool ("Device not supported"): that is reported, not failed.
  if command -v compute-sanitizer >/dev/null; then
    local tool
    for tool in memcheck racecheck; do
      say "self-test under compute-sanitizer --tool $tool"
      rc=0
      timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$SELFTEST_BIN" \
        >"$OUT/sanitizer-$tool.log" 2>&1 || rc=$?
      grep -E '^=========|checks passed' "$OUT/sanitizer-$tool.log" | tail -n 15
      case $rc in
      0) echo "compute-sanitizer $tool: clean" ;;
      3) fail "compute-sanitizer $tool found errors (sanitizer-$tool.log)" ;;
      *) echo "compute-sanitizer $tool: inconclusive (exit status $rc): the tool may not run on this machine" ;;
      esac
    done
  else
    echo "compute-sanitizer: not found: kernels not checked for out-of-bounds accesses"
  fi

  local gpu id
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  id="$(date -u +%Y%m%d)-$(echo "${gpu:-gpu}" | tr '[:upper:]' '[:lower:]' | tr -cs '[:lower:][:digit:]' '-' | sed 's/^-*//; s/-*$//')"
  FIXTURE="$ROOT/tests/fixtures/gpu/$id"
  RUNS=$FIXTURE
  mkdir -p "$RUNS"
  : >"$RUNS/compare.txt"

  say "training runs: N = 1, CUDA backend vs CPU backend"
  local flags=(--nranks 1 --layers 4 --d-model 64 --ffn 192 --heads 4 --kv-heads 2 --seq 32
    --batch 4 --steps "$STEPS" --seed 1 --quiet)
  local wrap tag names=()
  for wrap in block linear model group:2; do
    tag=${wrap/:/}
    run "cuda-$tag" "$CPU_BIN" --backend cuda --wrap "$wrap" "${flags[@]}" &&
      run "cpu-$tag" "$CPU_BIN" --backend cpu --wrap "$wrap" "${flags[@]}" &&
      names+=("$tag")
  done
  run cuda-block-fp32 "$CPU_BIN" --backend cuda --wrap block --param-dtype fp32 "${flags[@]}" &&
    run cpu-block-fp32 "$CPU_BIN" --backend cpu --wrap block --param-dtype fp32 "${flags[@]}" &&
    names+=(block-fp32)
  grep -h -m 1 'NCCL version' "$RUNS"/cuda-*.out 2>/dev/null | head -n 1 | sed 's/^/runtime: /'

  say "fsdpscope attach on a CUDA job (real NCCL)"
  attach_check

  say "loss comparison (tolerances: first step $FIRST_TOL, every step $RUN_TOL, relative)"
  local t
  for t in "${names[@]}"; do
    compare_runs "cuda-$t" "cpu-$t"
  done
  say "losses across wraps (bit for bit)"
  for t in linear model group2; do
    if [[ " ${names[*]} " == *" $t "* && " ${names[*]} " == *" block "* ]]; then
      same_losses cuda-block "cuda-$t"
      same_losses cpu-block "cpu-$t"
    fi
  done

  # The fixture folder: environment, self-test, runs, comparison.
  {
    environment 2>&1
  } >"$RUNS/env.txt"
  cp "$OUT/selftest.log" "$RUNS/selftest.log"
  cp "$OUT"/sanitizer-*.log "$RUNS/" 2>/dev/null || true
  cp "$RUNS/compare.txt" "$OUT/compare.txt"
  tar -C "$ROOT" -czf "$OUT/gpu-fixtures.tar.gz" "tests/fixtures/gpu/$id"
  echo "fixtures: tests/fixtures/gpu/$id (and $OUT/gpu-fixtures.tar.gz: tar -xzf it in the repository root)"

  say summary
  if ((${#FAILED[@]})); then
    printf 'gpu_check: FAIL (%d)\n' "${#FAILED[@]}"
    printf '  - %s\n' "${FAILED[@]}"
    return 1
  fi
  echo "gpu_check: PASS"
  return 0
}

mkdir -p "$OUT"
main "$@" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
