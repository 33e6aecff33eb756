#!/usr/bin/env bash
# report_html_test.sh - `fsdpscope report --html` end to end: fsdp_ref jobs
# recorded by `fsdpscope run` with hostile names in their NVTX unit ranges
# and ncclConfig_t.commName (markup, attribute breakers, javascript:, a
# 10 kB name, invalid UTF-8), and a generated 256-rank trace, each page
# opened in headless Chromium; report_html_check.py says what is asserted.
# Also: exactly one file is written, the text report stays off stdout with
# --html alone, a page that cannot be written fails with the reason.
#
# usage: report_html_test.sh FSDPSCOPE AGENT FSDP_REF LINT_GEN_TRACE
set -uo pipefail
fss=$1 agent=$2 ref=$3 gen=$4
here=$(cd "$(dirname "$0")" && pwd)
check="$here/report_html_check.py"
work=$(mktemp -d /tmp/fsdpscope-html.XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=0
browser=$(command -v chromium || command -v chromium-browser || true)

fail() { echo "FAIL: $*"; failed=1; }

# record NAME FSDP_REF_ARGS...: a 2-rank per-Linear job under fsdpscope run
record() {
	local name=$1
	shift
	if ! FSDPSCOPE_AGENT="$agent" "$fss" run --out "$work/$name" -- "$ref" --nranks 2 --layers 2 --steps 4 \
		--wrap linear --quiet "$@" >"$work/$name.run" 2>&1; then
		fail "$name: fsdpscope run exited non-zero:"; cat "$work/$name.run"
	fi
}

# page NAME TRACE... : report --html and --json of the traces, then the browser's view of it
page() {
	local name=$1
	shift
	mkdir -p "$work/out-$name"
	if ! "$fss" report --html "$work/out-$name/report.html" "$@" >"$work/$name.stdout" 2>"$work/$name.stderr"; then
		fail "$name: report --html exited non-zero:"; cat "$work/$name.stderr"
		return 1
	fi
	[ -s "$work/$name.stdout" ] && fail "$name: --html alone printed the text report on stdout"
	# exactly one file: the page (no temporary file left beside it)
	[ "$(ls -A "$work/out-$name")" = report.html ] || fail "$name: files written: $(ls -A "$work/out-$name")"
	"$fss" report --json "$@" >"$work/$name.json" || fail "$name: report --json"
	if [ -n "$browser" ]; then
		timeout 60 "$browser" --headless=new --no-sandbox --disable-gpu --dump-dom \
			"file://$work/out-$name/report.html" >"$work/$name.dom" 2>"$work/$name.browser" ||
			fail "$name: chromium --dump-dom: $(tail -3 "$work/$name.browser")"
	fi
}

hostile_a='</title><script>alert(1)</script>'
hostile_b='"><img src=x onerror=alert(1)>'
long=$(printf 'N%.0s' $(seq 1 10240))
record hostile1 --name-prefix "$hostile_a" --comm-name-prefix "$hostile_b"
record hostile2 --name-prefix $'javascript:alert(1)\xff\xfe\xc3(' --comm-name-prefix "$long"$'\xc0\xaf'
# the GPU's name is the job's too (a device record): it reaches the page in MFU's words
hostile_gpu='</p><img src=x onerror=alert(2)>'
"$gen" --out "$work/r256.fss" --ranks 256 --layers 4 --k 1 --steps 4 --device "$hostile_gpu" >/dev/null ||
	fail "lint_gen_trace"

page hostile1 "$work/hostile1/trace.fss"
page hostile2 "$work/hostile2/trace.fss"
page r256 "$work/r256.fss"

dom() { [ -n "$browser" ] && echo --dom "$work/$1.dom"; }
echo "== hostile1: markup in NVTX unit ranges and commName"
png=()
if [ -n "$browser" ]; then
	timeout 60 "$browser" --headless=new --no-sandbox --disable-gpu --window-size=1000,1400 \
		--screenshot="$work/hostile1.png" "file://$work/out-hostile1/report.html" >/dev/null 2>&1 ||
		fail "chromium --screenshot"
	png=(--png "$work/hostile1.png")
fi
python3 "$check" --page "$work/out-hostile1/report.html" --json "$work/hostile1.json" $(dom hostile1) "${png[@]}" \
	--expect-text "${hostile_a}layers.0" --expect-text "${hostile_b}world" || failed=1
echo "== hostile2: javascript:, a 10 kB name, invalid UTF-8"
python3 "$check" --page "$work/out-hostile2/report.html" --json "$work/hostile2.json" $(dom hostile2) \
	--expect-text $'javascript:alert(1)\uFFFD\uFFFD\uFFFD(layers.0' --expect-text "NNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN" || failed=1
echo "== r256: 256 ranks, a heat strip; markup in the GPU's name"
python3 "$check" --page "$work/out-r256/report.html" --json "$work/r256.json" $(dom r256) \
	--expect-text "$hostile_gpu" || failed=1

# a page that cannot be written: the reason, exit 2, nothing left
if "$fss" report --html "$work/none/report.html" "$work/r256.fss" >/dev/null 2>"$work/bad.stderr"; then
	fail "report --html into a missing folder exited 0"
fi
grep -q "fsdpscope report: --html: $work/none/report.html" "$work/bad.stderr" ||
	fail "no reason for the page not written: $(cat "$work/bad.stderr")"

if [ -z "$browser" ]; then
	echo "SKIP: the browser checks: chromium not found (scripts/setup.sh installs it); the file checks ran"
	[ $failed -eq 0 ] && exit 77
fi
exit $failed
