#!/usr/bin/env bash
# option_ranges_test.sh - values outside an option's range are refused with
# the range named: lint's --threshold by the threshold's unit, top's -r and
# --step against the trace they read, fsdp_ref's numbers by their bounds.
#
# usage: option_ranges_test.sh FSDPSCOPE AGENT FSDP_REF
set -uo pipefail
fss=$1 agent=$2 ref=$3
export FSDPSCOPE_AGENT=$agent
here=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/fsdpscope-ranges.XXXXXX)
trap 'rm -rf "$T"' EXIT
CHECK="$here/lint_schema_check.py"
. "$here/expect.sh"

"$fss" run --out "$T/job" -- "$ref" --nranks 4 --steps 5 --quiet >/dev/null 2>&1 || fail "the job's run"
trace=$T/job/trace.fss

expect_rc 2 "lint --threshold exposed_fraction=200%" "$fss" lint --threshold exposed_fraction=200% "$trace"
expect_out "$T/err" "exposed_fraction is a fraction from 0 to 1 (0% to 100%)" "the fraction's range named"
expect_rc 2 "lint -t fine_gathers_per_unit=2.5" "$fss" lint -t fine_gathers_per_unit=2.5 "$trace"
expect_out "$T/err" "a whole number of at least 1" "a count's range named"
expect_rc 0 "lint -t exposed_fraction=100%" "$fss" lint -t exposed_fraction=100% "$trace"

expect_rc 2 "top --once -r 9 of 4 ranks" "$fss" top --once -r 9 "$trace"
expect_out "$T/err" "-r 9: the view has ranks 0 to 3" "top names the ranks there are"
expect_rc 0 "top --once -r 3" "$fss" top --once -r 3 "$trace"
expect_rc 2 "top --once --step 999 of a short trace" "$fss" top --once --step 999 "$trace"
expect_out "$T/err" "--step 999: the trace has steps 1 to " "top names the steps there are"

expect_rc 2 "fsdp_ref --nranks 0" "$ref" --nranks 0
expect_out "$T/err" "bad value '0' for --nranks: a whole number from 1 to 1024" "fsdp_ref names the range"
expect_rc 2 "fsdp_ref --lr 20" "$ref" --lr 20
expect_out "$T/err" "a number above 0 and below 10" "fsdp_ref names --lr's range"
[ "$fails" -eq 0 ]
