#!/usr/bin/env bash
# golden_test.sh - the golden traces' outputs, byte for byte.
#
# usage: golden_test.sh [--bless] FSDPSCOPE GOLDEN_LIVE
#
# For every line "NAME [LINT FLAGS] -- TRACE..." of tests/fixtures/golden/
# MANIFEST, runs in that folder (so paths in the outputs are relative):
#   report --json, lint --json (with its exit code), lint (text), top --once
#   (a replay's last view), dump (every record, as its sha256), and golden_live (the viewer
#   snapshot and the /metrics text of the replay's last view)
# and compares each with expected/NAME.<what>. --bless writes them instead.
set -uo pipefail
bless=0
if [ "${1:-}" = "--bless" ]; then bless=1; shift; fi
fss=$(realpath "$1")
live=$(realpath "$2")
here=$(cd "$(dirname "$0")/../fixtures/golden" && pwd)
cd "$here" || exit 1
work=$(mktemp -d /tmp/fsdpscope-golden.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p expected
failed=0 checked=0

# check NAME WHAT CMD... - CMD's stdout and exit code against expected/NAME.WHAT
check() {
	local name=$1 what=$2
	shift 2
	"$@" >"$work/out" 2>"$work/err"
	local rc=$?
	echo "exit $rc" >>"$work/out"
	if ((bless)); then
		cp "$work/out" "expected/$name.$what"
	elif ! cmp -s "$work/out" "expected/$name.$what"; then
		echo "golden: $name.$what differs from expected/$name.$what ($*):"
		diff "expected/$name.$what" "$work/out" | head -20
		sed -n 1,5p "$work/err"
		failed=$((failed + 1))
	fi
	checked=$((checked + 1))
}

while read -r name rest; do
	case "$name" in '' | '#'*) continue ;; esac
	# the flags before " -- " (themselves options: "--hang-timeout 1"), none when it comes first
	case "$rest" in
	'-- '*) flags= ;;
	*) flags=${rest%% -- *} ;;
	esac
	traces=${rest#*-- }
	# shellcheck disable=SC2086 # flags and traces are word lists
	{
		check "$name" report.json "$fss" report --json $flags $traces
		check "$name" lint.json "$fss" lint --json $flags $traces
		check "$name" lint.txt "$fss" lint $flags $traces
		check "$name" top.txt "$fss" top --once --speed 0 --cols 120 --rows 60 $traces
		check "$name" live.txt "$live" $traces
		for t in $traces; do
			check "$name" "$(basename "$t" .fss).dump.sha256" bash -c 'set -o pipefail; "$1" dump "$2" | sha256sum' _ "$fss" "$t"
		done
	}
done <MANIFEST

if ((bless)); then
	echo "golden: blessed $checked outputs in $here/expected"
	exit 0
fi
echo "golden: $checked outputs checked, $failed differ"
((failed == 0))
