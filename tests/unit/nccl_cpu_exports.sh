#!/bin/sh
# nccl_cpu_exports: check the dynamic symbol table of the CPU stand-in
# (libnccl.so.2): only nccl* / pnccl* functions are defined, every ncclX is a
# weak symbol at the same address as a strong pncclX, and the soname is
# libnccl.so.2. Usage: nccl_cpu_exports.sh path/to/libnccl.so.2
set -eu
lib=$1
fail=0
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ "$soname" = "libnccl.so.2" ] || { echo "soname is '$soname', want libnccl.so.2"; fail=1; }
syms=$(nm -D --defined-only "$lib")
# Anything defined that is not nccl*/pnccl* leaks an internal symbol.
extra=$(printf '%s\n' "$syms" | awk '$3 !~ /^p?nccl[A-Z]/' || true)
[ -z "$extra" ] || { echo "unexpected exports:"; printf '%s\n' "$extra"; fail=1; }
count=0
for name in $(printf '%s\n' "$syms" | awk '$3 ~ /^nccl[A-Z]/ {print $3}'); do
	count=$((count + 1))
	weak=$(printf '%s\n' "$syms" | awk -v n="$name" '$3 == n {print $1 " " $2}')
	strong=$(printf '%s\n' "$syms" | awk -v n="p$name" '$3 == n {print $1 " " $2}')
	addr_w=${weak% *}; type_w=${weak#* }
	addr_s=${strong% *}; type_s=${strong#* }
	[ "$type_w" = "W" ] || { echo "$name: type '$type_w', want W (weak)"; fail=1; }
	[ "$type_s" = "T" ] || { echo "p$name: type '$type_s', want T"; fail=1; }
	[ "$addr_w" = "$addr_s" ] || { echo "$name is not an alias of p$name"; fail=1; }
done
[ "$count" -ge 25 ] || { echo "only $count ncclX symbols, want at least 25"; fail=1; }
[ $fail -eq 0 ] && echo "ok: $count functions exported as ncclX (weak) + pncclX"
exit $fail
