#!/usr/bin/env bash
# fuzz_campaign.sh - every decoder's libFuzzer target for RUNS executions
# (default 10^7) from its committed corpus, outside `make test`; the figures
# go to bench/results/fuzz.txt.
#
# usage: bench/fuzz_campaign.sh BUILD_SAN [RUNS] [TARGET[=RUNS]...]
#
# BUILD_SAN is the sanitizer tree of `make build-san` (clang, ASan + UBSan,
# -DFSS_FUZZ=ON). Each target runs from tests/fuzz/corpus/<target>/ with
# -seed=1 (the same inputs on every machine for the same RUNS); new inputs go
# to a scratch folder. A crash is kept in bench/results/fuzz-crashes/ and
# named in the results: copy it into the target's corpus once fixed, where
# the smoke test (tests/fuzz/*.cmake) replays it in every `make test`.
set -uo pipefail

build=${1:?usage: $0 BUILD_SAN [RUNS] [TARGET[=RUNS]...]}
runs=${2:-10000000}
shift $(($# >= 2 ? 2 : 1))
here=$(cd "$(dirname "$0")/.." && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(trace_fuzz ingest_fuzz kineto_fuzz kineto_map_fuzz sources_fuzz viewer_fuzz options_fuzz)
out=$here/bench/results/fuzz.txt
crashes=$here/bench/results/fuzz-crashes
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$crashes"

flags_of() {
	case $1 in
	kineto_fuzz | trace_fuzz | ingest_fuzz) echo "-max_len=65536" ;;
	sources_fuzz) echo "-max_len=256" ;;
	viewer_fuzz) echo "-max_len=262144" ;;
	options_fuzz) echo "-detect_leaks=0 -close_fd_mask=3" ;;
	*) echo "" ;;
	esac
}

{
	echo "# fuzz campaign: bench/fuzz_campaign.sh $build $runs ${targets[*]}"
	echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(clang --version | head -1)"
	echo "# target  executions  seconds  exec/s  cov  ft  corpus_inputs  crashes"
} >"$work/results"
for spec in "${targets[@]}"; do
	t=${spec%%=*}
	n=$runs
	[ "$spec" = "$t" ] || n=${spec#*=}
	bin=$build/tests/$t
	corpus=$here/tests/fuzz/corpus/$t
	if [ ! -x "$bin" ]; then
		echo "$t  not built in $build" >>"$work/results"
		continue
	fi
	mkdir -p "$work/$t" "$corpus"
	start=$(date +%s)
	ASAN_OPTIONS=abort_on_error=1 "$bin" -seed=1 -runs="$n" -timeout=10 -rss_limit_mb=2048 $(flags_of "$t") \
		-print_final_stats=1 -artifact_prefix="$crashes/$t-" "$work/$t" "$corpus" >"$work/$t.log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t.log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$work/$t.log" | tail -1 | cut -d' ' -f2)
	ft=$(grep -o 'ft: [0-9]*' "$work/$t.log" | tail -1 | cut -d' ' -f2)
	nin=$(find "$corpus" -type f | wc -l)
	ncrash=$(find "$crashes" -name "$t-*" -type f | wc -l)
	echo "$t  ${execs:-?}  $secs  ${rate:-?}  ${cov:-?}  ${ft:-?}  $nin  $ncrash$([ $rc -ne 0 ] && echo "  (exit $rc: $(grep -m1 -E 'ERROR|SUMMARY|deadly' "$work/$t.log"))")" >>"$work/results"
	echo "$(tail -1 "$work/results")"
done
cp "$work/results" "$out"
echo "results in $out"
