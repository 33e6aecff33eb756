#!/bin/bash
# hang_bench.sh - how long after a rank hangs fsdpscope says so, beyond the
# threshold (bench/README.md; results in bench/results/hang.txt). Run by hand
# from the repository root after building (cmake --build build):
#
#   bench/hang_bench.sh [RUNS [HANG_TIMEOUT [MODE]]]
#
# Each run: a 3-rank fsdp_ref job (CPU backend, the NCCL stand-in, its
# dead-peer timeout at 600 s) in which rank 1 stops before the first
# collective of step 3 (--stall-at 1:3), under `fsdpscope run --hang-timeout
# HANG_TIMEOUT` (MODE run, the default) or sending to `fsdpscope collect
# --hang-timeout HANG_TIMEOUT` (MODE collect, the ranks started by the
# launcher fork). The latency of one run is
#
#     (when fsdpscope's stderr line 'fsdpscope: collective-hang:' was read)
#   - (realtime_ns of fsdp_ref's fault line: just before the stalled collective)
#   - HANG_TIMEOUT
#
# both on CLOCK_REALTIME of this machine (the line is stamped with bash's
# $EPOCHREALTIME as it arrives on the pipe). It is how late the detector is:
# its evaluation period, the agents' flush interval, the scheduling of a busy
# machine. Prints one line per run and the min / median / max.
#
# BUILD (default build) names the build folder, WORK (a fresh mktemp -d) where
# traces go (removed at the end).
set -u
RUNS=${1:-5}
TIMEOUT=${2:-1}
MODE=${3:-run}
BUILD=${BUILD:-build}
fsdpscope=$BUILD/cli/fsdpscope
fsdp_ref=$BUILD/fsdp_ref/fsdp_ref
agent=$BUILD/agent/libfsdpscope-agent.so
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hang_bench.XXXXXX")}
pid=
job=
trap '[ -n "$job" ] && kill -KILL "$job" 2>/dev/null; [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT

for f in "$fsdpscope" "$fsdp_ref" "$agent"; do
	[ -x "$f" ] || [ -f "$f" ] || { echo "hang_bench: $f is not built" >&2; exit 2; }
done
case $MODE in run | collect) ;; *) echo "hang_bench: MODE is run or collect" >&2; exit 2 ;; esac
export FSDPSCOPE_AGENT=$PWD/$agent FSDP_REF_NCCL_TIMEOUT_S=600
model=(--d-model 32 --ffn 64 --seq 16 --layers 2 --batch 6 --steps 6 --quiet --nranks 3 --stall-at 1:3)

# Stamp every line of stdin with the time it was read: "SECONDS.MICROS LINE".
stamp() {
	local line
	while IFS= read -r line; do
		printf '%s %s\n' "$EPOCHREALTIME" "$line"
	done
}

# Wait until FILE holds PATTERN (at most 300 s); 1 if PID ended first.
wait_line() { # FILE PATTERN PID
	local i=0
	until grep -q -- "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 6000 ] || ! kill -0 "$3" 2>/dev/null; then
			return 1
		fi
		sleep 0.05
	done
}

echo "hang_bench: $RUNS runs, --hang-timeout $TIMEOUT, mode $MODE, $(nproc) cores, $(uname -srm)"
lat=()
for r in $(seq 1 "$RUNS"); do
	d=$work/$r
	mkdir -p "$d/xdg"
	chmod 700 "$d/xdg"
	export XDG_RUNTIME_DIR=$d/xdg
	# fsdpscope's stderr through a FIFO into stamp, so that $! is fsdpscope itself
	mkfifo "$d/stderr.fifo"
	stamp <"$d/stderr.fifo" >"$d/stderr" &
	spid=$!
	if [ "$MODE" = run ]; then
		"$fsdpscope" run --hang-timeout "$TIMEOUT" --out "$d/out" -- "$fsdp_ref" "${model[@]}" --log "$d/log.jsonl" \
			2>"$d/stderr.fifo" >/dev/null &
		pid=$!
	else
		"$fsdpscope" collect --hang-timeout "$TIMEOUT" --out "$d/out" 2>"$d/stderr.fifo" >/dev/null &
		pid=$!
		wait_line "$d/stderr" "FSDPSCOPE_OUT=" "$pid" || { echo "hang_bench: collect did not start" >&2; cat "$d/stderr" >&2; exit 1; }
		(
			eval "$(sed -n 's/^[0-9.]* *export /export /p' "$d/stderr")"
			exec "$fsdp_ref" "${model[@]}" --log "$d/log.jsonl"
		) 2>/dev/null >/dev/null &
		job=$!
	fi
	if ! wait_line "$d/stderr" "fsdpscope: collective-hang:" "$pid"; then
		echo "hang_bench: run $r: no hang line" >&2
		cat "$d/stderr" >&2
		exit 1
	fi
	said=$(grep -m1 -- "fsdpscope: collective-hang:" "$d/stderr" | cut -d' ' -f1)
	stalled=$(grep -m1 '"fault":"stall"' "$d/log.jsonl" | sed 's/.*"realtime_ns":\([0-9]*\).*/\1/')
	[ -n "$stalled" ] || { echo "hang_bench: run $r: no fault line in $d/log.jsonl" >&2; exit 1; }
	ms=$(awk -v s="$said" -v f="$stalled" -v t="$TIMEOUT" 'BEGIN { printf "%.1f", (s - f / 1e9 - t) * 1000 }')
	echo "run $r: said $ms ms after the threshold"
	lat+=("$ms")
	[ -n "$job" ] && kill -KILL "$job" 2>/dev/null && wait "$job" 2>/dev/null
	job=
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=
	wait "$spid"
	rm -rf "$d"
done
printf '%s\n' "${lat[@]}" | sort -n | awk '{ v[NR] = $1 } END {
	printf "latency beyond --hang-timeout (ms): min %.1f median %.1f max %.1f over %d runs\n", v[1], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[NR], NR }'
