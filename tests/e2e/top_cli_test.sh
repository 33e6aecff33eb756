#!/bin/bash
# top_cli_test.sh FSDPSCOPE FSDP_REF AGENT - `fsdpscope top` without a terminal:
# its errors (a message, exit 2), run mode's --once (the job's output in
# DIR/NAME.log, its stdin closed, the view at the job's end), a replay's --once,
# and the help's EXAMPLES and OVERHEAD. stdin is /dev/null throughout: no
# terminal.
set -u
fs=$1 ref=$2
export FSDPSCOPE_AGENT=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/top_cli_test.XXXXXX")
cpid=
trap '[ -n "$cpid" ] && kill "$cpid" 2>/dev/null; rm -rf "$work"' EXIT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error WANT ARGS...: exit 2, WANT in stderr
expect_error() {
	local want=$1
	shift
	"$fs" top "$@" </dev/null >"$work/out" 2>"$work/err"
	local rc=$?
	[ $rc -eq 2 ] || fail "top $*: exit $rc, expected 2"
	grep -qF -- "$want" "$work/err" || fail "top $*: stderr lacks '$want': $(cat "$work/err")"
	no_sanitizer_report "$work/err"
}

# A sanitizer build's report goes to stderr: none may be there.
no_sanitizer_report() { # FILE...
	grep -lE "Sanitizer|runtime error:" "$@" 2>/dev/null && fail "a sanitizer report in $*"
	return 0
}

mkdir -p "$work/empty"
: >"$work/file"
expect_error "nothing to watch"
expect_error "use --once" "$work/file"
expect_error "not a trace" --once "$work/file"
expect_error "No such file" --once "$work/none.fss"
expect_error "no session in $work/empty" --connect --out "$work/empty" --once
expect_error "not a viewer socket" --connect "$work/file" --once
expect_error "no session there" --connect "$work/none.sock" --once
expect_error "--keep is an option of -- CMD" --keep full --once "$work/file"
expect_error "for a replay" --step 2 --once -- true
expect_error "no command after '--'" --once --
expect_error "unknown option" --bogus x.fss
expect_error "expected a number" -d zero x.fss
expect_error "expected full, summary" --once --out "$work/k" --keep bogus -- true
expect_error "is not a number of seconds" --once --out "$work/k" --wait-descendants x -- true
expect_error "must be a plain file name" --once --out "$work/k" --name a/b -- true
expect_error "command not found" --once --out "$work/nf" -- no-such-command-fsdpscope

# -- CMD --once: the job's output in the log, stdin closed, the view at its end
"$fs" top --once --out "$work/run" --name io -- sh -c 'echo out-$((40+2)); echo err-$((40+3)) >&2; if read x; then echo stdin-open; else echo closed-$((40+4)); fi' \
	</dev/null >"$work/run.out" 2>"$work/run.err"
rc=$?
[ $rc -eq 0 ] || fail "top --once -- sh: exit $rc: $(cat "$work/run.err")"
# (computed texts: the command line itself is in the view's header)
for w in out-42 err-43 closed-44; do
	grep -qx "$w" "$work/run/io.log" || fail "io.log lacks $w"
done
grep -q "stdin-open" "$work/run/io.log" && fail "the job's stdin was open"
grep -qE "out-42|err-43" "$work/run.out" "$work/run.err" && fail "the job's output reached top's stdout"
grep -q "job ended: exited 0" "$work/run.out" || fail "the last view does not say the job exited 0: $(head -3 "$work/run.out")"
[ -f "$work/run/io.fss" ] || fail "no trace io.fss"

# the job's exit status is top's, as run's
"$fs" top --once --out "$work/run" --name three -- sh -c 'exit 3' </dev/null >/dev/null 2>&1
rc=$?
[ $rc -eq 3 ] || fail "top --once -- sh -c 'exit 3': exit $rc"

# a replay's --once: one row per rank, the wrap-too-fine finding (a small model: neither
# depends on its width, as in top_e2e.py)
"$fs" run --out "$work/lin" -- "$ref" --backend cpu --nranks 2 --layers 4 --wrap linear --steps 4 --quiet \
	--d-model 32 --ffn 64 --seq 8 \
	</dev/null >/dev/null 2>&1 || fail "fsdp_ref under run"
"$fs" top --once --cols 100 --rows 30 "$work/lin/trace.fss" </dev/null >"$work/replay.out" 2>"$work/replay.err"
rc=$?
[ $rc -eq 0 ] || fail "top --once TRACE: exit $rc: $(cat "$work/replay.err")"
pids=$("$fs" dump --type process_hello "$work/lin/trace.fss" 2>/dev/null | grep -o '"pid":[0-9]*' | cut -d: -f2 | sort -u)
for p in $pids; do
	grep -qw "$p" "$work/replay.out" || fail "the replay's view has no row of pid $p"
done
[ -n "$pids" ] || fail "no hello in the trace"
grep -q "wrap-too-fine" "$work/replay.out" || fail "the replay's view lacks wrap-too-fine"
grep -q $'\e' "$work/replay.out" && fail "--once printed an escape sequence"

no_sanitizer_report "$work/run.err" "$work/replay.err" "$work/run/io.log"

# --connect without ADDR: the session collect runs in DIR, before any rank reached it
mkdir -p "$work/col"
"$fs" collect --listen "unix:$work/c.sock" --out "$work/col" </dev/null >/dev/null 2>"$work/col.err" &
cpid=$!
for _ in $(seq 600); do
	grep -q "live view" "$work/col.err" 2>/dev/null && break
	sleep 0.1
done
grep -q "live view" "$work/col.err" || fail "collect printed no viewer socket: $(cat "$work/col.err")"
"$fs" top --connect --out "$work/col" --once </dev/null >"$work/conn.out" 2>"$work/conn.err"
rc=$?
[ $rc -eq 0 ] || fail "top --connect --out DIR --once: exit $rc: $(cat "$work/conn.err")"
grep -q "connect" "$work/conn.out" || fail "the connected view does not say connect: $(head -2 "$work/conn.out")"
kill -TERM "$cpid"
wait "$cpid"
cpid=
no_sanitizer_report "$work/conn.err" "$work/col.err"

# help
"$fs" help top >"$work/help" || fail "help top"
for s in SYNOPSIS EXAMPLES OVERHEAD "--connect" "--step-keys"; do
	grep -q -- "$s" "$work/help" || fail "help top lacks $s"
done

[ $fails -eq 0 ] && echo "top_cli_test: all passed"
exit $((fails != 0))
