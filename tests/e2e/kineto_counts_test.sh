#!/bin/sh
# kineto_counts_test.sh DRIVER COUNTER DIR: every *.json.gz under DIR read by
# the reader (DRIVER, tests/e2e/kineto_counts.c) and counted by COUNTER
# (kineto_counts.py); their lines must be the same. 77 (skip) without DIR.
set -eu
driver=$1 counter=$2 dir=$3
[ -d "$dir" ] || { echo "kineto_counts: $dir is absent: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for f in "$dir"/*/*.json.gz "$dir"/*/*.json; do
  [ -f "$f" ] || continue
  "$driver" "$f" >"$tmp/reader"
  python3 "$counter" "$f" >"$tmp/python"
  if ! diff -u "$tmp/python" "$tmp/reader"; then
    echo "kineto_counts: $f: the reader and the independent count differ (above)"
    exit 1
  fi
  echo "kineto_counts: $f: $(grep '^kept ' "$tmp/reader") of $(grep '^events ' "$tmp/reader"), the same"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "kineto_counts: no trace in $dir"; exit 1; }
# the smallest of them again in reads of 7 bytes (compressed, and inflated 7
# bytes at a time): every token boundary of a real trace crossed, the same lines
small=$(ls -S "$dir"/*/*.json.gz | tail -1)
"$driver" "$small" >"$tmp/default"
"$driver" -c 7 "$small" >"$tmp/seven"
diff -u "$tmp/default" "$tmp/seven" || { echo "kineto_counts: $small read 7 bytes at a time differs (above)"; exit 1; }
echo "kineto_counts: $small in 7-byte reads: the same"
