#!/bin/bash
# attach_bench.sh - what `fsdpscope attach` adds to an NCCL call: attach_bench
# (bench/attach_bench.c) on the CPU stand-in, bare against attached in the same
# run, with the probes placed both ways attach.c knows (uprobe_multi links, the
# default on Linux >= 6.6, and one perf event per probe, the older kernels' way),
# and per step of fsdp_ref (2 ranks, per-Linear: ~100 collectives a step) held
# before its first step (--hold-at 1:FIFO), every rank attached, released: the
# median step_ns of its own log (steps >= 2) attached against bare, rounds
# alternating; written to bench/results/attach.txt with the command that
# reproduces it.
# Needs root (or CAP_BPF + CAP_PERFMON). Run by hand from the repository root
# after building:
#
#   bench/attach_bench.sh [ROUNDS [CALLS [STEPS]]]   (defaults 7 rounds, 200000 calls, 40 steps)
#
# BUILD (default build) names the build folder; OUT (default
# bench/results/attach.txt) the results file.
set -u
BUILD=${BUILD:-build}
ROUNDS=${1:-7}
CALLS=${2:-200000}
STEPS=${3:-40}
OUT=${OUT:-bench/results/attach.txt}
bench=$BUILD/bench/attach_bench
lib=$BUILD/fsdp_ref/nccl_cpu/libnccl.so.2
fsdp_ref=$BUILD/fsdp_ref/fsdp_ref
for f in "$bench" "$lib" "$fsdp_ref"; do
	[ -e "$f" ] || { echo "attach_bench: $f is not built" >&2; exit 2; }
done
tmp=$(mktemp "${TMPDIR:-/tmp}/attach_bench.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/attach_bench.XXXXXX")
trap 'rm -rf "$tmp" "$work"' EXIT

# The median step_ns of a log, its first 2 steps left out.
median_step() { # LOG
	python3 - "$1" <<'PY'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [s for s in steps if "step_ns" in s and s.get("step", 99) >= 2]
print(int(statistics.median(s["step_ns"] for s in steps)))
PY
}

# One fsdp_ref run, attached or bare: its median step_ns; the attached run's
# probed calls per rank go to $work/calls.
step_run() { # MODE ROUND
	local log=$work/$1-$2.jsonl fifo=$work/fifo job rc
	rm -f "$fifo"
	mkfifo "$fifo"
	FSDP_REF_LINK_LATENCY_US=0 "$fsdp_ref" --backend cpu --nranks 2 --layers 4 --wrap linear \
		--steps "$STEPS" --quiet --hold-at "1:$fifo" --log "$log" >/dev/null 2>"$work/err" &
	job=$!
	if [ "$1" = attached ]; then
		"$bench" --job "$job" --ranks 2 --release "$fifo" >"$work/calls" || { kill "$job"; return 1; }
	else
		"$bench" --job "$job" --ranks 2 --release "$fifo" --bare || { kill "$job"; return 1; }
	fi
	wait "$job"
	rc=$?
	[ $rc -eq 0 ] || { echo "attach_bench: fsdp_ref exited $rc" >&2; cat "$work/err" >&2; return 1; }
	median_step "$log"
}

step_bench() {
	local r b a ratios=()
	echo "fsdp_ref --backend cpu --nranks 2 --layers 4 --wrap linear --steps $STEPS (latency model 0),"
	echo "held before step 1, both ranks attached (or not), released; median step_ns of steps >= 2"
	printf '  %-6s %14s %14s %8s\n' round bare_ns attached_ns ratio
	for ((r = 0; r < ROUNDS; r++)); do
		if ((r % 2)); then
			a=$(step_run attached "$r") || return 1
			b=$(step_run bare "$r") || return 1
		else
			b=$(step_run bare "$r") || return 1
			a=$(step_run attached "$r") || return 1
		fi
		ratios+=("$(python3 -c "print('%.4f' % ($a / $b))")")
		printf '  %-6s %14s %14s %8s\n' "$r" "$b" "$a" "${ratios[-1]}"
	done
	echo "  attached / bare per round, median: $(printf '%s\n' "${ratios[@]}" | sort -n | python3 -c "import statistics,sys; print('%.4f' % statistics.median(float(l) for l in sys.stdin))")"
	echo "  probed calls of the last attached run: $(tr '\n' ';' <"$work/calls")"
}

{
	echo "# bench/results/attach.txt: what the uprobes of fsdpscope attach add to an NCCL call (stand-in)"
	echo "# command: bench/attach_bench.sh $ROUNDS $CALLS $STEPS"
	echo "#   (runs $bench --lib $lib --calls $CALLS --rounds $ROUNDS, then again with FSDPSCOPE_UPROBE_MULTI=0)"
	echo "# build: $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null), $(${CC:-cc} --version | head -1)"
	echo "# machine: $(uname -sr), nproc=$(nproc), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "## uprobe_multi links (the default)"
	"$bench" --lib "$lib" --calls "$CALLS" --rounds "$ROUNDS" || exit $?
	echo
	echo "## one perf event per probe (FSDPSCOPE_UPROBE_MULTI=0)"
	FSDPSCOPE_UPROBE_MULTI=0 "$bench" --lib "$lib" --calls "$CALLS" --rounds "$ROUNDS" || exit $?
	echo
	echo "## per step of fsdp_ref"
	step_bench || exit 1
	echo
	echo "# loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$tmp"
rc=$?
[ $rc -eq 0 ] || { cat "$tmp"; exit $rc; }
mkdir -p "$(dirname "$OUT")"
mv "$tmp" "$OUT"
trap - EXIT
cat "$OUT"
