#!/usr/bin/env bash
# kineto_bench.sh - the Kineto reader against HTA on the generated 1 M-event,
# one-rank FSDP-like trace (bench/kineto_gen.c, about 380 MB of JSON), in one
# run, rounds interleaved: `cat FILE`, the reader alone (kineto_parse_bench),
# `fsdpscope report --json FILE`, and HTA's parse + get_comm_comp_overlap
# (bench/kineto_hta.py, HTA from the mirror). Wall time, CPU time (user +
# sys: the steadier figure on a shared machine) and peak RSS (/usr/bin/time
# -f %M) of each; the median of the rounds.
#
# usage: bench/kineto_bench.sh [ROUNDS] [EVENTS]    (defaults 3, 1000000)
# env:   BUILD (build), HTA_MIRROR (the bare git dir of HolisticTraceAnalysis),
#        PYTHON (/usr/bin/python3: Debian's, with pandas), WORK (a scratch folder)
set -euo pipefail

rounds=${1:-3}
events=${2:-1000000}
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
mirror=${HTA_MIRROR:-/work/.mirror/facebookresearch+HolisticTraceAnalysis/repo}
python=${PYTHON:-/usr/bin/python3}
work=${WORK:-$(mktemp -d)}
[ -n "${WORK:-}" ] || trap 'rm -rf "$work"' EXIT

for tool in "$build/bench/kineto_gen" "$build/bench/kineto_parse_bench"; do
  [ -x "$tool" ] || { echo "kineto_bench: $tool is not built (cmake --build $build --target ${tool##*/})" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "kineto_bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }

mkdir -p "$work/trace"
file=$work/trace/rank0.json
[ -s "$file" ] || "$build/bench/kineto_gen" -n "$events" "$file"
size=$(stat -c %s "$file")

hta=""
if [ -d "$mirror" ]; then
  mkdir -p "$work/hta"
  # only hta/: the snapshot may lack its largest files (notebooks), which git
  # archive complains of even when they are not asked for
  [ -d "$work/hta/hta" ] || { git -C "$mirror" archive HEAD hta 2>/dev/null | tar -x -C "$work/hta"; } || true
  [ -f "$work/hta/hta/trace_analysis.py" ] || { echo "kineto_bench: cannot extract HTA from $mirror" >&2; exit 1; }
  hta="HTA @ $(git -C "$mirror" rev-parse --short HEAD)"
fi

# The report reads Kineto files once the reader is an input of the session:
# until then it refuses the file, and the script says so.
fsdpscope=$build/cli/fsdpscope
report=0
if [ -x "$fsdpscope" ] && "$fsdpscope" report --json "$file" >/dev/null 2>"$work/report.err"; then
  report=1
fi

# run NAME CMD...: one timed run, "NAME seconds kB" appended to $work/times
run() {
  local name=$1
  shift
  /usr/bin/time -f "%e %M %U %S" -o "$work/one" "$@" >"$work/$name.out" 2>"$work/$name.err" ||
    { echo "kineto_bench: $name failed:" >&2; cat "$work/$name.err" >&2; exit 1; }
  echo "$name $(cat "$work/one")" >>"$work/times"
}

: >"$work/times"
for ((r = 1; r <= rounds; r++)); do
  run cat cat "$file"
  run parse "$build/bench/kineto_parse_bench" "$file"
  [ "$report" = 0 ] || run report "$fsdpscope" report --json "$file"
  [ -z "$hta" ] || run hta env PYTHONPATH="$work/hta" "$python" "$here/bench/kineto_hta.py" "$work/trace"
done

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "kineto_bench: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $rounds rounds interleaved, medians"
echo "trace: bench/kineto_gen -n $events: $size bytes, $(grep -o 'events [0-9]* kept [0-9]*' "$work/parse.out")"
printf '%-40s %9s %9s %10s %10s\n' "" "wall s" "cpu s" "MB/s cpu" "peak MB"
for name in cat parse report hta; do
  grep -q "^$name " "$work/times" || continue
  s=$(awk -v n="$name" '$1 == n {print $2}' "$work/times" | median)
  kb=$(awk -v n="$name" '$1 == n {print $3}' "$work/times" | median)
  cpu=$(awk -v n="$name" '$1 == n {print $4 + $5}' "$work/times" | median)
  case $name in
    cat) label="cat FILE >/dev/null" ;;
    parse) label="the reader alone (kineto_file_read)" ;;
    report) label="fsdpscope report --json FILE" ;;
    hta) label="$hta parse + comm_comp_overlap" ;;
  esac
  awk -v l="$label" -v s="$s" -v c="$cpu" -v kb="$kb" -v size="$size" \
    'BEGIN {printf "%-40s %9.2f %9.2f %10.0f %10.1f\n", l, s, c, size / 1e6 / (c > 0 ? c : 1e-9), kb / 1024}'
done
echo "rounds (name wall_s peak_kB user_s sys_s):"
sed 's/^/  /' "$work/times"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$report" = 1 ] || echo "fsdpscope report --json FILE: reader not built ($(head -1 "$work/report.err" 2>/dev/null))"
if [ -n "$hta" ]; then
  echo "HTA: $(tail -1 "$work/hta.out")"
  for col in 2 cpu; do
    for name in parse report; do
      grep -q "^$name " "$work/times" || continue
      pick() { awk -v n="$1" -v c="$col" '$1 == n {print (c == "cpu" ? $4 + $5 : $2)}' "$work/times" | median; }
      awk -v n="$name" -v s="$(pick "$name")" -v h="$(pick hta)" -v c="$col" \
        'BEGIN {printf "HTA / %s (%s): %.1fx\n", n, c == "cpu" ? "cpu" : "wall", h / (s > 0 ? s : 1e-9)}'
    done
  done
fi
