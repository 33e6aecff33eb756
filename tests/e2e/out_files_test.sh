#!/usr/bin/env bash
# out_files_test.sh - what fsdpscope writes, against another local user and
# full devices (issue: collect wrote through a planted collect.addr link).
#
#   - collect --out a folder another user made 0777, with collect.addr a
#     link to a root-owned file: refused, the owner named, the file intact;
#   - collect --out runs/exp1 with runs/ missing: made, parents too;
#   - report --html, run --json-summary and export --perfetto at a link
#     another user planted in a sticky world-writable folder: refused, its
#     target intact; at a link in our own folder: written to its target;
#   - the same outputs at a full device (a private node of /dev/full's
#     number): "No space left on device", a non-zero exit, still a device;
#     run exits 4 when its job succeeded but --json-summary was lost;
#   - top --once into a full device: the reason said once.
#
# usage: out_files_test.sh FSDPSCOPE AGENT FSDP_REF
set -uo pipefail
fss=$1 agent=$2 ref=$3
export FSDPSCOPE_AGENT=$agent
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ] || ! id nobody >/dev/null 2>&1; then
	echo "SKIP: needs root and the user nobody (another local user plants the links)"
	exit 77
fi
T=$(mktemp -d /tmp/fsdpscope-outfiles.XXXXXX)
chmod 0755 "$T"
trap 'umount "$T/small" 2>/dev/null; rm -rf "$T"' EXIT
CHECK="$here/lint_schema_check.py"
. "$here/expect.sh"

as_nobody() { su nobody -s /bin/sh -c "$1"; }

# one short job, its trace for the readers
"$fss" run --out "$T/job" -- "$ref" --nranks 2 --steps 3 --quiet >/dev/null 2>&1 || fail "the job's run"
trace=$T/job/trace.fss

# -- collect into a folder another user prepared
echo keep >"$T/victim"
mkdir -m 1777 "$T/pub"
as_nobody "mkdir -m 777 '$T/pub/planted' && ln -s '$T/victim' '$T/pub/planted/collect.addr'"
expect_rc 2 "collect --out another user's 0777 folder" timeout 20 "$fss" collect --out "$T/pub/planted" --until-idle 1
expect_out "$T/err" "belongs to nobody (uid" "collect names the folder's owner"
[ "$(cat "$T/victim")" = keep ] && pass "the planted link's target is intact" || fail "victim overwritten: $(cat "$T/victim")"
mkdir -m 777 "$T/open"
expect_rc 2 "collect --out a 0777 folder without the sticky bit" timeout 20 "$fss" collect --out "$T/open" --until-idle 1
expect_out "$T/err" "no sticky bit" "collect says why an open folder is refused"

# -- collect makes the parents of --out
"$fss" collect --out "$T/runs/exp1" >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 1 200); do [ -s "$T/runs/exp1/collect.addr" ] && break; sleep 0.05; done
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] && pass "collect --out runs/exp1 with runs/ missing (exit 0)" ||
	{ fail "collect --out runs/exp1: exit $rc"; cat "$T/err"; }
[ -f "$T/runs/exp1/collect.addr" ] && pass "collect.addr written in the new folder" || fail "no $T/runs/exp1/collect.addr"

# -- files the user names, at a link another user planted in a sticky shared folder
mkdir -m 1777 "$T/shared"
for out in page.html summary.json trace.json; do
	as_nobody "ln -s '$T/victim' '$T/shared/$out'"
done
expect_rc 2 "report --html at another user's link" "$fss" report --html "$T/shared/page.html" "$trace"
expect_out "$T/err" "is a symbolic link in $T/shared, which other users can write" "report --html says why"
expect_rc 4 "run --json-summary at another user's link" \
	"$fss" run --out "$T/job2" --json-summary "$T/shared/summary.json" -- "$ref" --nranks 2 --steps 3 --quiet
expect_out "$T/err" "is a symbolic link" "run says why its summary was not written"
expect_rc 2 "export --perfetto at another user's link" "$fss" export --perfetto "$T/shared/trace.json" "$trace"
expect_out "$T/err" "is a symbolic link" "export says why"
[ "$(cat "$T/victim")" = keep ] && pass "no link's target was written" || fail "victim overwritten"

# -- a link in our own folder is the user's: written to its target, the link kept
mkdir -m 700 "$T/mine"
echo old >"$T/mine/real.html"
ln -s "$T/mine/real.html" "$T/mine/link.html"
expect_rc 0 "report --html at our own link" "$fss" report --html "$T/mine/link.html" "$trace"
[ -L "$T/mine/link.html" ] && grep -q "<html" "$T/mine/real.html" && pass "the target holds the page, the link stays" ||
	fail "link.html / real.html after the write: $(ls -l "$T/mine")"

# -- a full device: written as it is, its error said
if mknod "$T/full" c 1 7 2>/dev/null; then
	chmod 666 "$T/full"
	expect_rc 2 "report --html to a full device" "$fss" report --html "$T/full" "$trace"
	expect_out "$T/err" "No space left on device" "report --html says the device is full"
	expect_rc 4 "run --json-summary to a full device, the job succeeding" \
		"$fss" run --out "$T/job3" --json-summary "$T/full" -- "$ref" --nranks 2 --steps 3 --quiet
	expect_out "$T/err" "--json-summary $T/full: No space left on device" "run says the summary was lost"
	expect_rc 2 "export --perfetto to a full device" "$fss" export --perfetto "$T/full" "$trace"
	expect_out "$T/err" "No space left on device" "export says the device is full"
	"$fss" top --once "$trace" >"$T/full" 2>"$T/err"
	rc=$?
	[ "$rc" -ne 0 ] && pass "top --once into a full device exits $rc" || fail "top --once into a full device exited 0"
	expect_out "$T/err" "No space left on device" "top --once says the device is full"
	[ "$(grep -c "No space left on device" "$T/err")" -eq 1 ] && pass "said once" || fail "said $(grep -c . "$T/err") times"
	[ -c "$T/full" ] && pass "the device is still a device" || fail "the device was replaced: $(ls -l "$T/full")"
else
	echo "note: no device node could be made in $T (nodev): the full-device checks did not run"
fi

# -- a full disk under --out: the run exits 4, and every byte is accounted for:
# what the session kept, and the files the agents wrote into their own folder
mkdir -p "$T/small" "$T/tmp"
if mount -t tmpfs -o size=2m tmpfs "$T/small" 2>/dev/null; then
	expect_rc 4 "run --out a full 2 MB file system" env -u XDG_RUNTIME_DIR TMPDIR="$T/tmp" \
		"$fss" run --out "$T/small/o" -- "$ref" --nranks 4 --steps 200 --quiet
	expect_out "$T/err" "No space left on device" "the full disk said"
	expect_out "$T/err" "what was recorded is left in $T/small/o/" "where the session's records are"
	expect_out "$T/err" "recorded into their own folder instead" "the agents' files said"
	n=$(ls "$T/tmp/fsdpscope-0"/fsdpscope-*.fss 2>/dev/null | wc -l)
	named=$(grep -c "^fsdpscope run:     $T/tmp/fsdpscope-0/fsdpscope-" "$T/err")
	[ "$n" -gt 0 ] && [ "$named" -eq "$n" ] && pass "each of the agents' $n files named" ||
		fail "agents' files: $n there, $named named"
else
	echo "note: no tmpfs could be mounted: the full-disk run did not run"
fi

[ "$fails" -eq 0 ]
