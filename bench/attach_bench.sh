#!/bin/bash
# attach_bench.sh - what `fsdpscope attach` adds to an NCCL call: attach_bench
# (bench/attach_bench.c) on the CPU stand-in, bare against attached in the same
# run, with the probes placed both ways attach.c knows (uprobe_multi links, the
# default on Linux >= 6.6, and one perf event per probe, the older kernels' way),
# written to bench/results/attach.txt with the command that reproduces it.
# Needs root (or CAP_BPF + CAP_PERFMON). Run by hand from the repository root
# after building:
#
#   bench/attach_bench.sh [ROUNDS [CALLS]]        (defaults 7 rounds, 200000 calls)
#
# BUILD (default build) names the build folder; OUT (default
# bench/results/attach.txt) the results file.
set -u
BUILD=${BUILD:-build}
ROUNDS=${1:-7}
CALLS=${2:-200000}
OUT=${OUT:-bench/results/attach.txt}
bench=$BUILD/bench/attach_bench
lib=$BUILD/fsdp_ref/nccl_cpu/libnccl.so.2
for f in "$bench" "$lib"; do
	[ -e "$f" ] || { echo "attach_bench: $f is not built" >&2; exit 2; }
done
tmp=$(mktemp "${TMPDIR:-/tmp}/attach_bench.XXXXXX")
trap 'rm -f "$tmp"' EXIT

{
	echo "# bench/results/attach.txt: what the uprobes of fsdpscope attach add to an NCCL call (stand-in)"
	echo "# command: bench/attach_bench.sh $ROUNDS $CALLS"
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
	echo "# loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$tmp"
rc=$?
[ $rc -eq 0 ] || { cat "$tmp"; exit $rc; }
mkdir -p "$(dirname "$OUT")"
mv "$tmp" "$OUT"
trap - EXIT
cat "$OUT"
