#!/usr/bin/env bash
# cli_test.sh - the fsdpscope executable as a user meets it: help, version,
# unknown commands, dump on whole, truncated and damaged traces, and output
# that cannot be written (/dev/full, a full file system).
# usage: cli_test.sh FSDPSCOPE GEN_SAMPLE_TRACE
set -u
FSS=$1 GEN=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $name"; fi
}

# help and version
"$FSS" help >"$tmp/help" 2>&1; check "help exits 0" test $? -eq 0
check "help lists dump" grep -q "^  dump " "$tmp/help"
"$FSS" help dump >"$tmp/h1"; "$FSS" dump --help >"$tmp/h2"
check "help CMD == CMD --help" cmp -s "$tmp/h1" "$tmp/h2"
check "dump help has EXAMPLES" grep -q "^EXAMPLES" "$tmp/h1"
for c in $("$FSS" help | awk '/^Commands:/{on=1;next} on&&/^  [a-z]/{print $1}'); do
  check "$c --help has EXAMPLES" sh -c "'$FSS' help $c | grep -q '^EXAMPLES'"
done
"$FSS" version >"$tmp/v"; check "version" grep -Eq "^fsdpscope [0-9]+\.[0-9]+\.[0-9]+ \(trace format 1\.5\)$" "$tmp/v"
"$FSS" frobnicate >"$tmp/o" 2>"$tmp/e"; rc=$?
check "unknown command exits 2" test $rc -eq 2
check "unknown command says so" grep -q "'frobnicate' is not a command" "$tmp/e"
check "unknown command lists commands" grep -q "^  dump " "$tmp/e"
"$FSS" dump --bogus x >/dev/null 2>"$tmp/e"; check "unknown flag exits 2" test $? -eq 2
"$FSS" dump --type nonsense x >/dev/null 2>"$tmp/e"; check "bad --type exits 2" test $? -eq 2
check "bad --type named" grep -q "'nonsense' is not a record type" "$tmp/e"
"$FSS" dump "$tmp/missing.fss" >/dev/null 2>"$tmp/e"; check "missing file exits 2" test $? -eq 2
check "missing file named" grep -q "cannot open $tmp/missing.fss" "$tmp/e"

# dump of a whole trace: one valid JSON object per record, every type.
n=$("$GEN" "$tmp/t.fss" 3 4 512)
"$FSS" dump "$tmp/t.fss" >"$tmp/d.jsonl" 2>"$tmp/e"; rc=$?
check "dump exits 0" test $rc -eq 0
check "dump: one line per record ($n)" test "$(wc -l <"$tmp/d.jsonl")" -eq "$n"
check "dump: every line is JSON" jq -e . "$tmp/d.jsonl" >/dev/null
"$FSS" dump --header "$tmp/t.fss" >"$tmp/dh.jsonl"
check "dump --header: the header, the records, the writer's trace_end last" test "$(wc -l <"$tmp/dh.jsonl")" -eq $((n + 2))
check "dump --header: trace_end last, of no process" jq -e '.type == "trace_end" and .source == 4294967295' \
  <(tail -n 1 "$tmp/dh.jsonl") >/dev/null
# options after the operand too (the option tables parse them anywhere)
"$FSS" dump --type collective "$tmp/t.fss" >"$tmp/tc1.jsonl"
"$FSS" dump "$tmp/t.fss" --type collective >"$tmp/tc2.jsonl" 2>"$tmp/e"
check "dump TRACE --type: the same lines as --type before TRACE" cmp -s "$tmp/tc1.jsonl" "$tmp/tc2.jsonl"
check "dump TRACE --type: only collectives" jq -e '.type == "collective"' "$tmp/tc2.jsonl" >/dev/null
"$FSS" dump --bogus "$tmp/t.fss" >/dev/null 2>"$tmp/e"
check "unknown option: one wording" grep -q "^fsdpscope dump: unknown option '--bogus' (see 'fsdpscope help dump')$" "$tmp/e"
"$FSS" lint "$tmp/t.fss" --fail-on >/dev/null 2>"$tmp/e"
check "missing value: said" grep -q "^fsdpscope lint: option '--fail-on' needs a value" "$tmp/e"
for t in process_hello string comm collective group gpu_interval nvtx_range clock_anchor drops process_end correlation; do
  check "dump has $t" grep -q "\"type\":\"$t\"" "$tmp/d.jsonl"
done
check "dump: ranks from hello" test "$(jq -r 'select(.type=="collective") | .rank' "$tmp/d.jsonl" | sort -u | tr '\n' ' ')" = "0 1 2 "
check "dump: strings resolved" test "$(jq -r 'select(.type=="nvtx_range") | .name' "$tmp/d.jsonl" | grep -c -E '^(layers\.3\.mlp\.up|fsdp_ref|[a-z]{300})$')" -eq \
  "$(jq -r 'select(.type=="nvtx_range") | .name' "$tmp/d.jsonl" | wc -l)"
check "dump: enums by name" test "$(jq -r 'select(.type=="collective") | .op' "$tmp/d.jsonl" | grep -vc -E '^(AllGather|ReduceScatter)$')" -eq 0
# Strictly: no key twice in a line (the envelope's "rank" and a record's own
# rank field once clashed), no NaN; the parser the schema check uses.
strict_lines() { # strict_lines FILE - every line one strict JSON document
  python3 - "$1" "$(dirname "${BASH_SOURCE[0]}")" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from lint_schema_check import strict_loads
for i, line in enumerate(open(sys.argv[1]), 1):
    try:
        strict_loads(line)
    except ValueError as e:
        sys.exit("line %d: %s: %s" % (i, e, line[:200]))
PY
}
check "dump: every line is strict JSON" strict_lines "$tmp/d.jsonl"
# The hello names its host and command before their strings are defined.
check "dump: hello host resolved" test "$(jq -r 'select(.type=="process_hello") | .host' "$tmp/d.jsonl" | grep -c '^null$')" -eq 0
check "dump: hello command resolved" test "$(jq -r 'select(.type=="process_hello") | .command' "$tmp/d.jsonl" | grep -c '^null$')" -eq 0
check "dump: the hello's RANK as env_rank" test "$(jq -r 'select(.type=="process_hello") | .env_rank' "$tmp/d.jsonl" | tr '\n' ' ')" = "0 1 2 "
check "dump: a comm's own rank as comm_rank" test "$(jq -r 'select(.type=="comm") | has("comm_rank")' "$tmp/d.jsonl" | sort -u)" = "true"
# --sources: one line per process after the records, strict too.
"$FSS" dump --sources "$tmp/t.fss" >"$tmp/s.jsonl"; rc=$?
check "dump --sources exits 0" test $rc -eq 0
check "dump --sources: the records, then one line per process" test "$(wc -l <"$tmp/s.jsonl")" -eq $((n + 3))
check "dump --sources: strict JSON" strict_lines "$tmp/s.jsonl"
check "dump --sources: ranks and ends" test "$(tail -3 "$tmp/s.jsonl" | jq -r '"\(.type) \(.source) \(.rank) \(.rank_from)"' | tr '\n' ' ')" = \
  "source 0 0 RANK source 1 1 RANK source 2 2 RANK "
# From a pipe: read once, every record still printed, strict.
cat "$tmp/t.fss" | "$FSS" dump /dev/stdin >"$tmp/p.jsonl"
check "dump from a pipe: one line per record" test "$(wc -l <"$tmp/p.jsonl")" -eq "$n"
check "dump from a pipe: strict JSON" strict_lines "$tmp/p.jsonl"
"$FSS" dump --type collective,group "$tmp/t.fss" >"$tmp/f.jsonl"
check "--type filters" test "$(jq -r .type "$tmp/f.jsonl" | sort -u | tr '\n' ' ')" = "collective group "
"$FSS" dump --header "$tmp/t.fss" | head -1 >"$tmp/hd"
check "--header first" jq -e '.type == "file_header" and .version == "1.5"' "$tmp/hd" >/dev/null

# A truncated trace: every complete chunk dumped, then where and why.
size=$(stat -c %s "$tmp/t.fss")
head -c $((size - 100)) "$tmp/t.fss" >"$tmp/cut.fss"
"$FSS" dump "$tmp/cut.fss" >"$tmp/c.jsonl" 2>"$tmp/e"; rc=$?
check "truncated exits 2" test $rc -eq 2
check "truncated says where" grep -Eq "offset [0-9]+: chunk [0-9]+ truncated" "$tmp/e"
got=$(wc -l <"$tmp/c.jsonl")
check "truncated dumps the complete chunks ($got of $n)" test "$got" -gt 0 -a "$got" -lt "$n"
check "truncated output is a prefix" cmp -s "$tmp/c.jsonl" <(head -n "$got" "$tmp/d.jsonl")

# A damaged byte: the damaged chunk refused, every chunk before and after it
# dumped, the skipped byte range said.
cp "$tmp/t.fss" "$tmp/bad.fss"
printf '\xff' | dd of="$tmp/bad.fss" bs=1 seek=$((size / 2)) conv=notrunc status=none
"$FSS" dump "$tmp/bad.fss" >"$tmp/b.jsonl" 2>"$tmp/e"; rc=$?
check "damaged exits 2" test $rc -eq 2
check "damaged says checksum" grep -q "checksum" "$tmp/e"
check "damaged says the bytes skipped" grep -Eq "1 damaged stretch skipped .*bytes [0-9]+\.\.[0-9]+ \(chunk [0-9]+ lost\)" "$tmp/e"
got=$(wc -l <"$tmp/b.jsonl")
check "damaged dumps the rest ($got of $n)" test "$got" -gt $((n / 2)) -a "$got" -lt "$n"
check "damaged dumps every line but the lost chunk's, in order" test \
  "$(diff "$tmp/d.jsonl" "$tmp/b.jsonl" | grep -c '^>')" -eq 0
check "damaged dumps past the damage" cmp -s <(tail -n 1 "$tmp/b.jsonl") <(tail -n 1 "$tmp/d.jsonl")

# Cut on a chunk boundary: every record read, but not closed by its writer.
head -c $(python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(); print(64 + 24 + struct.unpack_from("<I", d, 68)[0])' "$tmp/t.fss") \
  "$tmp/t.fss" >"$tmp/boundary.fss"
"$FSS" dump "$tmp/boundary.fss" >"$tmp/c.jsonl" 2>"$tmp/e"; rc=$?
check "cut on a chunk boundary exits 2" test $rc -eq 2
check "cut on a chunk boundary says so" grep -q "without its trace_end record" "$tmp/e"
check "cut on a chunk boundary: its chunk dumped" test "$(wc -l <"$tmp/c.jsonl")" -gt 0


# Not a trace at all.
echo "hello" >"$tmp/text"
"$FSS" dump "$tmp/text" >/dev/null 2>"$tmp/e"; check "not a trace exits 2" test $? -eq 2
check "not a trace says so" grep -q "not an fsdpscope trace" "$tmp/e"

# Standard output that cannot be written: every command says so and fails,
# whatever it would have exited with (lint on this trace: 3).
write_fails() { # write_fails NAME CMD... - CMD's stdout into /dev/full
  local name=$1 rc; shift
  "$@" >/dev/full 2>"$tmp/e"; rc=$?
  check "$name into /dev/full exits 2 (got $rc)" test $rc -eq 2
  check "$name into /dev/full says why" grep -q "^fsdpscope: writing standard output: No space left on device$" "$tmp/e"
}
if [ -w /dev/full ]; then
  write_fails "dump" "$FSS" dump "$tmp/t.fss"
  write_fails "dump --header" "$FSS" dump --header --type drops "$tmp/t.fss"
  write_fails "report" "$FSS" report "$tmp/t.fss"
  write_fails "report --json" "$FSS" report --json "$tmp/t.fss"
  write_fails "lint" "$FSS" lint "$tmp/t.fss"
  write_fails "lint --json" "$FSS" lint --json "$tmp/t.fss"
  write_fails "ledger" "$FSS" ledger --params 7e9 --ranks 8 --units 32
  write_fails "ledger --json" "$FSS" ledger --params 7e9 --ranks 8 --units 32 --json
  write_fails "help" "$FSS" help
  write_fails "CMD --help" "$FSS" dump --help
  # More than stdio's buffer (4 KiB): the write fails inside a printf, not at the final flush.
  check "help lint is longer than 4 KiB" test "$("$FSS" help lint | wc -c)" -gt 4096
  write_fails "help lint (past the buffer)" "$FSS" help lint
  write_fails "version" "$FSS" version
else
  echo "SKIP: /dev/full is not writable here: the write-error checks did not run"
fi
"$FSS" version >&- 2>"$tmp/e"; rc=$?
check "version into a closed stdout exits 2 (got $rc)" test $rc -eq 2
check "closed stdout says why" grep -q "^fsdpscope: writing standard output: Bad file descriptor$" "$tmp/e"
# A file system that fills up part way: the dump stops at its size, and the
# command says so instead of exiting 0 on a cut file. Needs root (mount).
mkdir "$tmp/full"
big=$("$GEN" "$tmp/big.fss" 3 40 512)
if mount -t tmpfs -o size=64k fss-cli-test "$tmp/full" 2>"$tmp/e"; then
  "$FSS" dump "$tmp/big.fss" >"$tmp/full/d.jsonl" 2>"$tmp/e"; rc=$?
  got=$(stat -c %s "$tmp/full/d.jsonl")
  umount "$tmp/full"
  check "dump of $big records into a full 64 KiB tmpfs exits 2 (got $rc, $got bytes written)" test $rc -eq 2
  check "full tmpfs says why" grep -q "^fsdpscope: writing standard output: No space left on device$" "$tmp/e"
else
  echo "SKIP: cannot mount a 64 KiB tmpfs (needs root): $(head -1 "$tmp/e")"
fi

echo "cli_test: $pass passed, $fail failed"
test $fail -eq 0
