# expect.sh - the checks the shell end-to-end tests share. Source it after
# setting T (a scratch folder) and CHECK (the path of lint_schema_check.py);
# end the test with `[ "$fails" -eq 0 ]`.
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok:   $*"; }
expect_rc() { # expect_rc WANT DESC CMD... - run CMD (stdout in $T/out, stderr in $T/err), compare its exit status
	local want=$1 desc=$2 rc
	shift 2
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
	if [ "$rc" -eq "$want" ]; then pass "$desc (exit $rc)"; else
		fail "$desc: exit $rc, want $want"; sed 's/^/    | /' "$T/out" "$T/err" | head -40
	fi
}
expect_out() { # expect_out FILE TEXT DESC
	if grep -qF -- "$2" "$1"; then pass "$3"; else fail "$3: '$2' not in $1"; sed 's/^/    | /' "$1" | head -60; fi
}
expect_no() { # expect_no FILE TEXT DESC
	if grep -qF -- "$2" "$1"; then fail "$3: '$2' found"; grep -F -- "$2" "$1" | head -5; else pass "$3"; fi
}
json_get() { # json_get FILE PY_EXPR - a value of the strictly parsed JSON document d
	python3 -c 'import sys; sys.path.insert(0, sys.argv[3]); from lint_schema_check import strict_loads
d = strict_loads(open(sys.argv[1]).read()); print(eval(sys.argv[2]))' "$1" "$2" "$(dirname "$CHECK")"
}
