#!/bin/bash
# top_bench.sh - does watching slow the job? fsdp_ref's step time under
# `fsdpscope run` with nobody watching, against the same job watched
# (bench/results/top.txt, `fsdpscope help top`, OVERHEAD):
#
#   viewer   a viewer connected to the session's viewer socket for the whole
#            job, reading and parsing every snapshot (what `top --connect`
#            does: it decodes each line; json.loads here costs more)
#   top      the job under `fsdpscope top --once -- CMD` instead of run: the
#            session on its own thread, the dashboard's board feed watching
#            the board (the drawing aside: --once draws once, at the end)
#
# Rounds alternate the modes so that the machine's drift falls on all of
# them alike; each run's figure is the median step_ns of fsdp_ref's own log
# (its first 2 steps left out), and the ratios are per round, watched over
# unwatched. Run by hand from the repository root after building:
#
#   bench/top_bench.sh [ROUNDS [STEPS]]        (defaults 5 rounds, 60 steps)
#
# BUILD (default build) names the build folder.
set -u
BUILD=${BUILD:-build}
ROUNDS=${1:-5}
STEPS=${2:-60}
fsdpscope=$BUILD/cli/fsdpscope
fsdp_ref=$BUILD/fsdp_ref/fsdp_ref
export FSDPSCOPE_AGENT=${FSDPSCOPE_AGENT:-$PWD/$BUILD/agent/libfsdpscope-agent.so}
work=$(mktemp -d "${TMPDIR:-/tmp}/top_bench.XXXXXX")
reader=
trap '[ -n "$reader" ] && kill "$reader" 2>/dev/null; rm -rf "$work"' EXIT

for f in "$fsdpscope" "$fsdp_ref" "$FSDPSCOPE_AGENT"; do
	[ -e "$f" ] || { echo "top_bench: $f is not built" >&2; exit 2; }
done
job=("$fsdp_ref" --backend cpu --nranks 2 --layers 4 --wrap linear --steps "$STEPS" --quiet)

# The median step_ns of a log, its first 2 steps left out.
median_step() { # LOG
	python3 - "$1" <<'EOF'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [s for s in steps if "step_ns" in s and s.get("step", 99) >= 2]
print(int(statistics.median(s["step_ns"] for s in steps)))
EOF
}

# A viewer reading every snapshot of the first session that appears in DIR.
start_reader() { # DIR COUNTFILE
	python3 - "$1" "$2" <<'EOF' &
import glob, json, socket, sys, time
d, out = sys.argv[1], sys.argv[2]
end = time.time() + 60
while time.time() < end:
    socks = glob.glob(d + "/.fsdpscope-run.*/viewer.sock")
    if socks:
        break
    time.sleep(0.01)
s = socket.socket(socket.AF_UNIX)
s.connect(socks[0])
f = s.makefile("rb")
n = 0
for line in f:
    json.loads(line)
    n += 1
    open(out, "w").write("%d\n" % n)
EOF
	reader=$!
}

run_one() { # MODE ROUND
	local d=$work/$1-$2 log
	mkdir -p "$d"
	log=$d/log.jsonl
	case $1 in
	none) "$fsdpscope" run --out "$d" -- "${job[@]}" --log "$log" >/dev/null 2>"$d/err" ;;
	viewer)
		start_reader "$d" "$d/snapshots"
		"$fsdpscope" run --out "$d" -- "${job[@]}" --log "$log" >/dev/null 2>"$d/err"
		wait "$reader" 2>/dev/null
		reader=
		;;
	top) "$fsdpscope" top --once --out "$d" -- "${job[@]}" --log "$log" >/dev/null 2>"$d/err" ;;
	esac
	[ -s "$log" ] || { echo "top_bench: $1 round $2: no log; stderr:" >&2; cat "$d/err" >&2; exit 1; }
	median_step "$log"
}

echo "top_bench  $(date -u '+%Y-%m-%d %H:%M:%S UTC')  $(uname -sm)  nproc=$(nproc)"
echo "job: ${job[*]##*/}"
echo "# loadavg before: $(cat /proc/loadavg)"
printf "%-6s %14s %14s %14s %10s %10s %10s\n" round none_ns viewer_ns top_ns viewer/none top/none snapshots
ratios_v=() ratios_t=()
for r in $(seq 1 "$ROUNDS"); do
	n=$(run_one none "$r")
	v=$(run_one viewer "$r")
	t=$(run_one top "$r")
	snaps=$(cat "$work/viewer-$r/snapshots" 2>/dev/null || echo 0)
	rv=$(python3 -c "print('%.3f' % ($v / $n))")
	rt=$(python3 -c "print('%.3f' % ($t / $n))")
	ratios_v+=("$rv")
	ratios_t+=("$rt")
	printf "%-6s %14s %14s %14s %10s %10s %10s\n" "$r" "$n" "$v" "$t" "$rv" "$rt" "$snaps"
done
echo "# loadavg after: $(cat /proc/loadavg)"
python3 - "${ratios_v[*]}" "${ratios_t[*]}" <<'EOF'
import statistics, sys
v = [float(x) for x in sys.argv[1].split()]
t = [float(x) for x in sys.argv[2].split()]
print("median ratio over %d rounds: viewer watching / none %.3f (min %.3f, max %.3f); "
      "top -- CMD / run %.3f (min %.3f, max %.3f)"
      % (len(v), statistics.median(v), min(v), max(v), statistics.median(t), min(t), max(t)))
EOF
