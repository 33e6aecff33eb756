#!/usr/bin/env bash
# trace_salvage_test.sh - a trace whose 64-byte file header lost a bit
# (docs/format.md, "Salvage"): plain lint and dump refuse it and name
# --salvage; with --salvage, lint gives the undamaged trace's findings and
# exits 4 at best (the trace was damaged), dump prints every record, and a
# chunk damaged as well is skipped and counted.
# usage: trace_salvage_test.sh FSDPSCOPE LINT_GEN_TRACE
set -u
FSS=$1 GEN=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $name"; fi
}
flip() { # flip FILE OFFSET: one bit of the byte at OFFSET
  local b
  b=$(od -An -tu1 -j"$2" -N1 "$1" | tr -d ' ')
  printf "\\$(printf '%03o' $((b ^ 0x10)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
findings() { jq -c '[.findings[] | {rule, severity}]' "$1"; }

# --k 8: a job wrapped per Linear (an error: exit 1 either way); --k 1: a
# well-wrapped one (exit 0 whole, 4 salvaged).
for k in 8 1; do
  t=$tmp/t$k.fss d=$tmp/d$k.fss
  "$GEN" --out "$t" --ranks 2 --layers 8 --k "$k" --steps 6 >/dev/null 2>&1
  cp "$t" "$d"
  flip "$d" 20 # the header's flags
  "$FSS" lint --json "$t" >"$tmp/whole.json" 2>/dev/null; whole_rc=$?
  "$FSS" lint "$d" >/dev/null 2>"$tmp/e"; rc=$?
  check "k=$k: plain lint of a damaged header exits 2" test $rc -eq 2
  check "k=$k: plain lint names --salvage" \
    grep -q "^fsdpscope lint: $d: the file header is damaged (CRC mismatch.*: 'fsdpscope lint --salvage $d' recovers the intact chunks$" "$tmp/e"
  "$FSS" lint --salvage --json "$d" >"$tmp/salvaged.json" 2>"$tmp/e"; rc=$?
  check "k=$k: lint --salvage: the whole trace's findings" test "$(findings "$tmp/salvaged.json")" = "$(findings "$tmp/whole.json")"
  check "k=$k: lint --salvage: the whole trace's verdict" \
    test "$(jq -r .verdict "$tmp/salvaged.json")" = "$(jq -r .verdict "$tmp/whole.json")"
  if [ "$whole_rc" -eq 0 ]; then
    check "k=$k: lint --salvage exits 4 (whole: 0)" test $rc -eq 4
  else
    check "k=$k: lint --salvage exits as the whole trace ($whole_rc)" test $rc -eq "$whole_rc"
  fi
  chunks=$(( $("$FSS" dump --header --type trace_end "$t" | jq -s '.[1].chunks') + 1 ))
  check "k=$k: lint --salvage says what it assumed and recovered" \
    grep -q "^fsdpscope lint: $d: damaged or cut short, analysed what could be read: the file header is damaged (CRC mismatch: stored 0x[0-9a-f]*, computed 0x[0-9a-f]*): read with --salvage, assuming format 1\.5, .*; recovered $chunks of $chunks chunks (0 bytes skipped)$" "$tmp/e"
  check "k=$k: lint --salvage --json: the trace is incomplete" jq -e '.trace.truncated and (.trace.damage | test("recovered"))' "$tmp/salvaged.json" >/dev/null
  "$FSS" report --salvage --json "$d" >"$tmp/report.json" 2>/dev/null
  check "k=$k: report --salvage: the whole trace's findings" test "$(findings "$tmp/report.json")" = "$(findings "$tmp/whole.json")"

  # dump: the same records
  "$FSS" dump "$t" >"$tmp/whole.jsonl" 2>/dev/null
  "$FSS" dump "$d" >"$tmp/plain.jsonl" 2>"$tmp/e"; rc=$?
  check "k=$k: plain dump exits 2, prints nothing" test $rc -eq 2 -a ! -s "$tmp/plain.jsonl"
  check "k=$k: plain dump names --salvage" grep -q "'fsdpscope dump --salvage $d' recovers the intact chunks$" "$tmp/e"
  "$FSS" dump --salvage "$d" >"$tmp/salvaged.jsonl" 2>"$tmp/e"; rc=$?
  check "k=$k: dump --salvage exits 2 (damaged)" test $rc -eq 2
  check "k=$k: dump --salvage: as many records as the whole trace" \
    test "$(wc -l <"$tmp/salvaged.jsonl")" -eq "$(wc -l <"$tmp/whole.jsonl")"
  check "k=$k: dump --salvage: the same records" cmp -s "$tmp/salvaged.jsonl" "$tmp/whole.jsonl"
  "$FSS" dump --salvage --header --type process_hello "$d" 2>/dev/null | head -n 1 >"$tmp/h.json"
  check "k=$k: dump --salvage --header: the assumed header, said so" jq -e '.assumed and .version == "1.5"' "$tmp/h.json" >/dev/null

  # and a chunk damaged in the middle: skipped and counted, the rest
  # recovered (a trace of one chunk has nothing left: said so)
  size=$(stat -c %s "$d")
  flip "$d" $((size / 2))
  "$FSS" dump --salvage "$d" >"$tmp/salvaged.jsonl" 2>"$tmp/e"; rc=$?
  if [ "$chunks" -ge 3 ]; then
    check "k=$k: a damaged chunk as well: said" grep -q "recovered $((chunks - 1)) of $chunks chunks ([0-9]* bytes skipped); 1 damaged stretch skipped" "$tmp/e"
    check "k=$k: a damaged chunk as well: fewer records, not none" \
      test "$(wc -l <"$tmp/salvaged.jsonl")" -lt "$(wc -l <"$tmp/whole.jsonl")" -a -s "$tmp/salvaged.jsonl"
  else
    check "k=$k: its one chunk damaged as well: nothing to read, exit 2" test $rc -eq 2 -a ! -s "$tmp/salvaged.jsonl"
    check "k=$k: its one chunk damaged as well: said" grep -q "and no intact chunk follows it: nothing to read$" "$tmp/e"
  fi
done

# a bit of the magic: a damaged trace, not another kind of file
m=$tmp/m.fss
cp "$tmp/t8.fss" "$m"
flip "$m" 3
"$FSS" lint "$m" >/dev/null 2>"$tmp/e"; rc=$?
check "magic: plain lint exits 2, names --salvage" test $rc -eq 2 -a -n "$(grep "the file header is damaged (bad magic: 1 of its 8 bytes.*'fsdpscope lint --salvage $m' recovers the intact chunks$" "$tmp/e")"
"$FSS" lint --json "$tmp/t8.fss" >"$tmp/whole.json" 2>/dev/null
"$FSS" lint --salvage --json "$m" >"$tmp/salvaged.json" 2>/dev/null
check "magic: lint --salvage: the whole trace's findings" test "$(findings "$tmp/salvaged.json")" = "$(findings "$tmp/whole.json")"
printf 'not a trace at all, but long enough to hold a header of sixty-four bytes\n' >"$tmp/text.fss"
"$FSS" dump --salvage "$tmp/text.fss" >/dev/null 2>"$tmp/e"; rc=$?
check "another kind of file: dump --salvage says it is not a trace" test $rc -eq 2 -a -n "$(grep "not an fsdpscope trace.*no intact chunk" "$tmp/e")"

# help
# export reads as lint does
"$FSS" export "$tmp/d1.fss" --perfetto "$tmp/p.json" >/dev/null 2>"$tmp/e"; rc=$?
check "plain export names --salvage" test $rc -eq 2 -a -n "$(grep "'fsdpscope export --salvage $tmp/d1.fss' recovers" "$tmp/e")"
cp "$tmp/t8.fss" "$tmp/x.fss"; flip "$tmp/x.fss" 40
"$FSS" export --salvage "$tmp/x.fss" --perfetto "$tmp/p.json" >/dev/null 2>"$tmp/e"; rc=$?
check "export --salvage writes the timeline" test $rc -eq 0 -a -s "$tmp/p.json"
check "export --salvage says what it assumed" grep -q "read with --salvage, assuming format" "$tmp/e"

for c in dump lint report export; do
  check "$c --help names --salvage" sh -c "'$FSS' help $c | grep -q -- '--salvage'"
done
"$FSS" help dump | grep -q "^    fsdpscope dump --salvage"; check "dump --help: an EXAMPLES line" test $? -eq 0
"$FSS" help lint | grep -q "^    fsdpscope lint --salvage"; check "lint --help: an EXAMPLES line" test $? -eq 0

echo "trace_salvage_test: $pass passed, $fail failed"
test "$fail" -eq 0
