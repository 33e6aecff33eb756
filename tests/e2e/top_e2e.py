#!/usr/bin/env python3
"""`fsdpscope top` in a real terminal (tests/e2e/top.cmake).

usage: top_e2e.py SCENARIO --fsdpscope F --agent A --fsdp-ref R --work DIR [--tmux T] [--sanitized]

Each scenario runs `fsdpscope top` in a pane of its own tmux server (a
private socket under DIR, `-f` a config of its own: no status line, the
pane dead but kept when its command ends), drives it with `send-keys`,
reads what a person would see with `capture-pane -p` (`-e` where escapes
matter), and kills the server at the end. The pane runs a small shell
script: `stty -g` before, the command (its stderr to a file), its exit
status, `stty -g` after. Traces are made in the test with `fsdpscope run
-- fsdp_ref` (CPU backend, a small model).

Nothing waits on the clock: replays step on the key `n` (--step-keys), a
live job is held before a step by fsdp_ref --hold-at (a FIFO the test
writes), and every wait is for a condition on the screen or on disk, with
a generous limit. Keys are handled in order, so the effect of a later key
seen on screen means the earlier ones were handled.

Scenarios:
  replay_linear  a per-Linear 4-rank trace replayed: a row for every rank
                 (its rank and pid); stepped to its end; the findings name
                 wrap-too-fine; the units view (u) says "8 gathers per
                 repeating unit"; f, f opens the fix box of the first
                 finding (" fix: RULE"), which reads as lint prints it
  replay_block   the same job wrapped per block: a row for every rank; the
                 units view shows its units, and neither wrap-too-fine nor
                 "8 gathers per repeating unit" is on any screen
  pause          p: PAUSED, and while n steps the feed twice the rank rows,
                 the header's steps seen and its replay counter (step k)
                 stay; p again: the counter shows those two steps
  sort           s / > move the sort column: for each column the header
                 marks, the rows read back are in that column's order
  restore_quit   stty -g in the pane is the same before top and after q
                 (and differs while top runs: top did change it)
  restore_sigterm  the same after SIGTERM to top
  restore_crash  the same after a crash of the dashboard
                 (FSDPSCOPE_TOP_CRASH_KEY=1, key C: abort, status 134)
  layout         a 12-rank replay in 80x24: the header, >= 10 rank rows and
                 the findings summary; resized to 60x15 (SIGWINCH) the
                 screen says what it hides; back at 80x24 it shows all again
  no_color       capture-pane -e: colour escapes without NO_COLOR (the
                 control), none with NO_COLOR=1 nor with --no-color (bold
                 and reverse video stay)
  once           --once prints plain text (no ESC byte) within --cols x
                 --rows with a row for every rank, in 80x24 and 100x40
  live           top --exit-with-job -- fsdp_ref (held before a step): a row
                 for every rank and the log path on screen while it runs;
                 released, the pane's command exits on its own with the
                 job's status; the log file holds the job's output; the
                 trace has every collective of fsdp_ref's log and lints as
                 the same job's `fsdpscope run` trace does
  leave          run mode, job held: q asks (stop / leave), l leaves: the
                 screen ends and the terminal is restored while the job
                 still runs; released, the job ends and the trace is
                 complete (every rank's collectives and process_end)

Exit status: 0 pass, 1 fail (with the reason), 77 skip (with the reason).
"""
import argparse
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support as support  # noqa: E402  (the shared check / run / wait_for)

SKIP = 77
WAIT_S = 120

# A small model: what the dashboard shows does not depend on its width.
MODEL = ["--d-model", "32", "--ffn", "64", "--seq", "8", "--quiet"]
# The 12-rank job of the layout test: as cheap as fsdp_ref allows.
TINY = ["--d-model", "16", "--ffn", "32", "--heads", "2", "--kv-heads", "1", "--seq", "4", "--quiet"]

# What the screen says, as tui/ words it (docs/top.md, "Views").
STEP_RE = re.compile(r"\bstep (\d+)(?:/(\d+))?(?=\s|$)")  # replay: step k/n (k while n is not known)
PAUSED_RE = re.compile(r"\bPAUSED\b")
SUMMARY_RE = re.compile(r"\b(?:\d+|no) findings?\b", re.I)
# what a small terminal hides ("terminal 60x15: rank table cut to 5 rows; strip
# hidden"), not the strip legend's "hidden comm"
HIDES_RE = re.compile(r"\bterminal \d+x\d+\b.*\b(?:hid(?:e|es|den)|cut)\b|\bhides\b", re.I)
ASK_RE = re.compile(r"stop.*leave|leave.*stop", re.I)
EIGHT = "8 gathers per repeating unit"
PER_UNIT_RE = re.compile(r"\b\d+ gathers? per repeating unit\b")
# SGR parameters that set a colour (3x/4x/9x/10x, 38/48 extended); 39 and 49
# only reset to the default colour (tmux writes them after every reset).
SGR_RE = re.compile(r"\x1b\[([0-9;:]*)m")


Fail, check, fresh, read_text = support.Fail, support.check, support.fresh, support.read_text
sanitizer_clean = support.sanitizer_clean


class Skip(Exception):
    pass


def run(cmd, env=None, timeout=300):
    return support.run(cmd, env=env, timeout=timeout)


def wait_for(cond, what, limit=WAIT_S):
    return support.wait_for(cond, what, limit)


# ------------------------------------------------------------------ traces

def lint_json(args, trace):
    r = run([args.fsdpscope, "lint", "--json", trace])
    check(r.returncode in (0, 1, 3, 4), f"lint --json {trace} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def dump(args, trace):
    r = run([args.fsdpscope, "dump", trace])
    check(r.returncode == 0, f"fsdpscope dump {trace} exited {r.returncode}: {r.stderr}")
    return [json.loads(line) for line in r.stdout.splitlines()]


def fsdp_ref_cmd(args, nranks, wrap, steps, model=MODEL, extra=()):
    return [args.fsdp_ref, "--backend", "cpu", "--nranks", str(nranks), "--layers", "2", "--wrap", wrap,
            "--steps", str(steps), "--batch", str(nranks), *model, *extra]


def make_trace(args, work, name, nranks, wrap, steps, model=MODEL):
    """A trace of fsdp_ref under `fsdpscope run`: (path, {rank: pid}, lint document)."""
    skip_if_agent_cannot_load(args)
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)
    r = run([args.fsdpscope, "run", "--out", out, "--", *fsdp_ref_cmd(args, nranks, wrap, steps, model)])
    check(r.returncode == 0, f"fsdpscope run -- fsdp_ref ({name}) exited {r.returncode}: {r.stderr}")
    trace = os.path.join(out, "trace.fss")
    doc = lint_json(args, trace)
    pids = {s["rank"]: s["pid"] for s in doc["sources"]}
    check(sorted(pids) == list(range(nranks)), f"{name}: ranks in the trace {sorted(pids)}, want 0..{nranks - 1}")
    return trace, pids, doc


# ------------------------------------------------------------------ tmux

class Pane:
    """One private tmux server with one pane running `fsdpscope top ...`
    through a script that records stty -g before and after, and the status."""

    def __init__(self, args, work, top_args, cols=80, rows=24, env=None, name="t", command="top"):
        self.args, self.work = args, work
        self.sock_dir = fresh(os.path.join(work, "tmux"))
        os.chmod(self.sock_dir, 0o700)
        self.sock = f"fss-top-{os.getpid()}"
        conf = os.path.join(work, "tmux.conf")
        with open(conf, "w") as f:
            f.write("set -g status off\n"            # the pane is the whole window: 80x24 is 80x24
                    "set -g remain-on-exit on\n"     # the last screen stays readable after the command ends
                    "set -g default-terminal tmux-256color\n"
                    "set -g history-limit 0\n")
        self.before = os.path.join(work, "before.stty")
        self.after = os.path.join(work, "after.stty")
        self.rc_file = os.path.join(work, "rc")
        self.err = os.path.join(work, "top.stderr")
        for p in (self.before, self.after, self.rc_file, self.err):
            if os.path.exists(p):
                os.unlink(p)
        sets = {"LC_ALL": "C.UTF-8", "FSDPSCOPE_AGENT": args.agent}
        sets.update(env or {})
        unsets = [k for k, v in sets.items() if v is None]
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sets.items() if v is not None)
        script = os.path.join(work, "pane.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n"
                    f"cd {shlex.quote(work)} || exit 1\n"
                    + "".join(f"unset {k}\n" for k in unsets) + exports +
                    f"stty -g > {shlex.quote(self.before)}\n"
                    f"{shlex.join([args.fsdpscope, command, *top_args])} 2> {shlex.quote(self.err)}\n"
                    f"echo $? > {shlex.quote(self.rc_file)}.tmp\n"
                    f"stty -g > {shlex.quote(self.after)}\n"
                    f"mv {shlex.quote(self.rc_file)}.tmp {shlex.quote(self.rc_file)}\n"
                    "echo 'pane: top exited'\n")
        os.chmod(script, 0o755)
        self.tmux("-f", conf, "new-session", "-d", "-x", str(cols), "-y", str(rows), "-s", name, script)
        self.target = name

    def tmux(self, *a, check_rc=True):
        env = dict(os.environ, TMUX_TMPDIR=self.sock_dir)
        env.pop("TMUX", None)
        r = subprocess.run([self.args.tmux, "-L", self.sock, *a], env=env, capture_output=True, text=True,
                           timeout=60)
        if check_rc:
            check(r.returncode == 0, f"tmux {' '.join(a)} exited {r.returncode}: {r.stderr}")
        return r.stdout

    def kill(self):
        """The server and everything in the pane: top, and a job it launched
        (in a process group of its own, which the pane's hangup does not reach)."""
        procs = self.descendants()
        self.tmux("kill-server", check_rc=False)
        for pid in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def screen(self, escapes=False):
        """What the pane shows: its lines, trailing blanks cut."""
        a = ["capture-pane", "-p", "-t", self.target]
        if escapes:
            a.insert(1, "-e")
        return self.tmux(*a)

    def keys(self, *keys, literal=True):
        for k in keys:
            if literal:
                self.tmux("send-keys", "-t", self.target, "-l", k)
            else:
                self.tmux("send-keys", "-t", self.target, k)

    def resize(self, cols, rows):
        self.tmux("resize-window", "-t", self.target, "-x", str(cols), "-y", str(rows))

    def tty(self):
        return self.tmux("display-message", "-p", "-t", self.target, "#{pane_tty}").strip()

    def shell_pid(self):
        out = self.tmux("display-message", "-p", "-t", self.target, "#{pane_pid}", check_rc=False).strip()
        return int(out) if out.isdigit() else None

    def processes(self):
        """pid -> (parent pid, runs fsdpscope top) of every process now."""
        procs = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            is_top = self.args.fsdpscope.encode() in argv and b"top" in argv
            procs[int(d)] = (int(stat[stat.rindex(")") + 2:].split()[1]), is_top)
        return procs

    def descendants(self):
        """Every process under the pane's shell, nearest first."""
        sh = self.shell_pid()
        if not sh:
            return []
        procs, out, level = self.processes(), [], [sh]
        while level:
            level = [p for p, (pp, _) in procs.items() if pp in level]
            out += level
        return out

    def top_pid(self):
        """fsdpscope top: the pane's outermost descendant running it, None when gone."""
        sh = self.shell_pid()
        if not sh:
            return None
        procs, level, found = self.processes(), [sh], []
        while level and not found:
            found = [p for p, (pp, top) in procs.items() if pp in level and top]
            level = [p for p, (pp, _) in procs.items() if pp in level]
        return found[0] if len(found) == 1 else None

    def rc(self):
        """top's exit status once the pane's script has recorded it, else None."""
        t = read_text(self.rc_file).strip()
        return int(t) if t else None

    def wait_exit(self, what, limit=WAIT_S):
        wait_for(lambda: self.rc() is not None, f"{what}: the pane's command to exit", limit)
        err = read_text(self.err)
        sanitizer_clean(err, "fsdpscope top")
        return self.rc()

    def wait_screen(self, pred, what, limit=WAIT_S, escapes=False):
        """Poll the pane until pred(screen) is true; the screen, or a failure
        with the last screen and top's stderr."""
        last = [""]

        def cond():
            s = self.screen(escapes)
            last[0] = s
            if pred(s):
                return s or " "
            if self.rc() is not None:
                raise Fail(f"top exited ({self.rc()}) before {what}; stderr: {read_text(self.err)}\n"
                           f"screen:\n{s}")
            return None
        try:
            return wait_for(cond, what, limit)
        except Fail as e:
            if "gave up waiting" in str(e):
                raise Fail(f"{e}; the screen:\n{last[0]}\nstderr: {read_text(self.err)}")
            raise

    def stty(self, which):
        return read_text(self.before if which == "before" else self.after).strip()

    def stty_now(self):
        r = run(["stty", "-F", self.tty(), "-g"], timeout=30)
        check(r.returncode == 0, f"stty -F {self.tty()} -g: {r.stderr}")
        return r.stdout.strip()


def top_session(args, work, top_args, **kw):
    return Pane(args, work, top_args, **kw)


# ------------------------------------------------------------------ screen reading

def rank_row(line, rank, pid):
    """line is rank `rank`'s row of the rank table: its rank first, its pid on it."""
    return re.match(rf"^\W*{rank}\b", line) is not None and re.search(rf"\b{pid}\b", line) is not None


def ranks_shown(screen, pids):
    lines = screen.splitlines()
    return {r for r, p in pids.items() if any(rank_row(l, r, p) for l in lines)}


def all_ranks_shown(pids):
    return lambda s: ranks_shown(s, pids) == set(pids)


def row_texts(screen, pids):
    """The rank rows, whatever their order, the selection mark dropped."""
    return sorted(re.sub(r"^\W+", "", l) for l in screen.splitlines()
                  if any(rank_row(l, r, p) for r, p in pids.items()))


def steps_seen(screen):
    """The header's steps seen (of the view shown), None when absent."""
    m = re.search(r"\bsteps (\d+)\b", screen)
    return int(m.group(1)) if m else None


def replay_step(screen):
    """The header's replay counter: (k, n), n 0 while the replay does not know it."""
    m = STEP_RE.search(screen)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def colour_codes(escaped):
    """The colour-setting SGR parameters in capture-pane -e output."""
    found = []
    for m in SGR_RE.finditer(escaped):
        ps = [p for p in re.split(r"[;:]", m.group(1)) if p != ""]
        i = 0
        while i < len(ps):
            p = int(ps[i])
            if p in (38, 48):            # extended: 38;5;N or 38;2;R;G;B
                found.append(m.group(0))
                i += 3 if i + 1 < len(ps) and ps[i + 1] == "5" else 5
                continue
            if 30 <= p <= 37 or 40 <= p <= 47 or 90 <= p <= 97 or 100 <= p <= 107:
                found.append(m.group(0))
            i += 1
    return found


def step_to_end(pane, what, steps):
    """Press n until the replay shows its last step (the trace has `steps`, as
    lint counts them); the screen then."""
    s = pane.wait_screen(replay_step, f"{what}: the replay's step counter (step k/n)")
    k, n = replay_step(s)
    check(n in (0, steps), f"{what}: the replay says {n} steps, lint {steps}")
    while k < steps:
        pane.keys("n")
        s = pane.wait_screen(lambda t, k=k: replay_step(t) and replay_step(t)[0] > k,
                             f"{what}: step {k + 1} of {steps} after n (from step {k})")
        k2, n2 = replay_step(s)
        check(k2 == k + 1 and n2 in (0, steps), f"{what}: n took the replay from step {k} to {k2}/{n2}")
        k = k2
    return s


# ------------------------------------------------------------------ scenarios

def scenario_replay(args, wrap):
    work = fresh(os.path.join(args.work, f"replay_{wrap}"))
    trace, pids, doc = make_trace(args, work, wrap, 4, wrap, 4)
    k = doc["units"]["gathers_per_unit"] if doc.get("units") else None
    if wrap == "linear":
        check(k == 8 and any(f["rule"] == "wrap-too-fine" for f in doc["findings"]),
              f"lint of the per-Linear trace: k = {k}, findings {[f['rule'] for f in doc['findings']]}")
    else:
        check(k == 1 and not any(f["rule"] == "wrap-too-fine" for f in doc["findings"]),
              f"lint of the per-block trace: k = {k}, findings {[f['rule'] for f in doc['findings']]}")
    pane = top_session(args, work, ["--step-keys", trace])
    try:
        first = pane.wait_screen(all_ranks_shown(pids), "a row for every rank")
        end = step_to_end(pane, wrap, doc["steps_seen"])
        check(ranks_shown(end, pids) == set(pids), f"not every rank's row at the last step:\n{end}")
        pane.keys("u")
        units = pane.wait_screen(lambda s: PER_UNIT_RE.search(s) or "per repeating unit" in s
                                 or re.search(r"\bunits?\b.*\b\d+\b", s) and s != end,
                                 "the units view (u)")
        if wrap == "linear":
            check("wrap-too-fine" in end or "wrap-too-fine" in units,
                  f"per-Linear replay: wrap-too-fine is on no screen:\n{end}\n{units}")
            units = pane.wait_screen(lambda s: EIGHT in s, f"the units view to say '{EIGHT}'")
            first_finding = doc["findings"][0]
            heading = f"{first_finding['severity']} {first_finding['rule']}: {first_finding['title']}"
            pane.keys("f", "f")  # the findings pane, then its selected finding's fix box
            box = pane.wait_screen(lambda s: f" fix: {first_finding['rule']}" in s,
                                   "the fix box of the first finding (f, f)")
            check(heading[:40] in box and "evidence:" in box,
                  f"the fix box does not read as lint prints the finding ({heading!r}, evidence:):\n{box}")
        else:
            for s in (first, end, units):
                check("wrap-too-fine" not in s, f"per-block replay: wrap-too-fine on screen:\n{s}")
                check(EIGHT not in s, f"per-block replay: '{EIGHT}' on screen:\n{s}")
            check(PER_UNIT_RE.search(units) or re.search(r"\bunit", units),
                  f"per-block replay: the units view shows no units:\n{units}")
        pane.keys("q")
        rc = pane.wait_exit("q")
        check(rc == 0, f"top exited {rc} after q: {read_text(pane.err)}")
    finally:
        pane.kill()
    print(f"replay {wrap}: {len(pids)} rank rows; units view:\n{units}")


def scenario_pause(args):
    work = fresh(os.path.join(args.work, "pause"))
    trace, pids, doc = make_trace(args, work, "linear", 4, "linear", 8)
    pane = top_session(args, work, ["--step-keys", trace])
    try:
        s = pane.wait_screen(lambda t: replay_step(t) and all_ranks_shown(pids)(t), "the first view")
        # Past the first views (the first steps come out together, once the
        # analysis has found the step), so that a view two steps on differs.
        while replay_step(s)[0] < 3 or steps_seen(s) < replay_step(s)[0]:
            k = replay_step(s)[0]
            check(k + 2 < doc["steps_seen"], f"no step to pause at before the end: step {k}:\n{s}")
            pane.keys("n")
            s = pane.wait_screen(lambda t, k=k: replay_step(t) and replay_step(t)[0] > k, f"step {k + 1} after n")
        k0, n = replay_step(s)
        rows_before, steps_before = row_texts(s, pids), steps_seen(s)
        pane.keys("p")
        s = pane.wait_screen(lambda t: PAUSED_RE.search(t), "PAUSED after p")
        header_before = table_header(s)
        # Two steps of the feed, then a sort key: its effect on screen means
        # both n were handled (keys are handled in order).
        pane.keys("n", "n", ">")
        s = pane.wait_screen(lambda t: table_header(t) != header_before, "the sort key's effect while paused")
        check(PAUSED_RE.search(s), f"not paused any more after n n >:\n{s}")
        check(row_texts(s, pids) == rows_before, f"paused, the rank rows changed:\n{s}")
        check(steps_seen(s) == steps_before, f"paused, the header's steps seen moved from {steps_before} to "
                                             f"{steps_seen(s)}:\n{s}")
        check(replay_step(s) == (k0, n), f"paused, the rank rows stayed (the view froze) but the header's step "
                                         f"counter moved from {k0}/{n} to {replay_step(s)}:\n{s}")
        pane.keys("p")
        s = pane.wait_screen(lambda t: not PAUSED_RE.search(t), "the pause to end after p again")
        s = pane.wait_screen(lambda t: replay_step(t) == (k0 + 2, n),
                             f"the step counter at {k0 + 2}/{n} (the two steps taken while paused)")
        check(ranks_shown(s, pids) == set(pids), f"unpaused: not every rank's row:\n{s}")
        s = pane.wait_screen(lambda t: steps_seen(t) == steps_before + 2,
                             f"the view's steps seen at {steps_before + 2} after p again")
        pane.keys("q")
        check(pane.wait_exit("q") == 0, f"top exited {pane.rc()} after q")
    finally:
        pane.kill()
    print(f"pause: {k0}/{n} held across two steps, {k0 + 2}/{n} after p")


def table_header(screen):
    """The rank table's header row: the line naming rank and pid."""
    for line in screen.splitlines():
        if re.search(r"\brank\b", line, re.I) and re.search(r"\bpid\b", line, re.I):
            return line
    return None


MARKS = "▲▼↑↓^v*"


def sort_column(header):
    """(column name, descending or None, span) of the column the header marks as the sort one."""
    for m in re.finditer(r"\S+", header):
        tok = m.group(0)
        core = tok.strip(MARKS + "[]<>")
        if core != tok and core:
            desc = None
            if any(c in tok for c in "▼↓v"):
                desc = True
            elif any(c in tok for c in "▲↑^"):
                desc = False
            return core, desc, m.span()
    return None


UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "h": 3600.0, "%": 1.0, "B": 1, "kB": 1e3,
         "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "k": 1e3, "M": 1e6}


def number(cell):
    """A cell's value for ordering: a number with its unit (a selection mark before it dropped), None for text."""
    cell = re.sub(r"^[^\w+-]+", "", cell.strip())
    m = re.match(r"^([-+]?\d+(?:\.\d+)?)([a-zA-Zµ%]*)(?:/\d+)?$", cell)
    if not m or (m.group(2) and m.group(2) not in UNITS):
        return None
    return float(m.group(1)) * UNITS.get(m.group(2), 1.0)


def header_spans(header):
    return [(m.group(0), m.span()) for m in re.finditer(r"\S+", header)]


def column_cells(screen, pids, col):
    """The cells of header column `col` (an index into header_spans), one per
    rank row, top to bottom: each token of a row belongs to the header label it
    overlaps most (the nearest when it overlaps none)."""
    lines = screen.splitlines()
    spans = header_spans(table_header(screen))
    rows = [l for l in lines if any(rank_row(l, r, p) for r, p in pids.items())]
    cells = []
    for l in rows:
        mine = []
        for m in re.finditer(r"\S+", l):
            a, b = m.span()
            best = max(range(len(spans)), key=lambda i: (min(b, spans[i][1][1]) - max(a, spans[i][1][0]),
                                                         -abs((a + b) / 2 - sum(spans[i][1]) / 2)))
            if best == col:
                mine.append(m.group(0))
        cells.append(" ".join(mine))
    return cells


def sorted_as(vals, desc):
    if desc is None:
        return vals == sorted(vals) or vals == sorted(vals, reverse=True)
    return vals == sorted(vals, reverse=desc)


def sorted_screen(pids, what, before):
    """A wait_screen predicate: the rank table's header differs from `before`
    and its rows are in the order it marks. A screen caught halfway through a
    redraw (the header new, the rows not yet) is waited past, not failed."""
    def pred(t):
        if not table_header(t) or table_header(t) == before:
            return False
        try:
            check_sorted(t, pids, what)
        except Fail:
            return False
        return True
    return pred


def check_sorted(screen, pids, what):
    """The rows read back are in the order of the column the header marks:
    (column, direction, cells), cells None when the column is not numeric."""
    header = table_header(screen)
    check(header, f"{what}: no rank table header on screen:\n{screen}")
    col = sort_column(header)
    check(col, f"{what}: the rank table's header marks no sort column: {header!r}")
    name, desc, span = col
    index = [sp for _, sp in header_spans(header)].index(span)
    cells = column_cells(screen, pids, index)
    check(len(cells) == len(pids), f"{what}: {len(cells)} rank rows, want {len(pids)}:\n{screen}")
    vals = [number(c) for c in cells]
    if any(v is None for v in vals):
        return name, desc, None
    check(sorted_as(vals, desc), f"{what}: sorted by {name!r} ({'descending' if desc else 'ascending'}) "
                                 f"but the column reads {cells}:\n{screen}")
    return name, desc, cells


def scenario_sort(args):
    work = fresh(os.path.join(args.work, "sort"))
    trace, pids, _ = make_trace(args, work, "linear", 4, "linear", 4)
    pane = top_session(args, work, ["--step-keys", trace], cols=120)
    checked, seen = [], []
    try:
        pane.wait_screen(lambda t: all_ranks_shown(pids)(t) and table_header(t), "the rank table")
        s = pane.wait_screen(lambda t: table_header(t) and all(number(c) is not None
                                                               for c in column_cells(t, pids, 3)),
                             "a step time in every row")
        ncols = len(header_spans(table_header(s)))
        # s, then > across the others: every column in turn.
        for press in range(ncols):
            name, desc, cells = check_sorted(s, pids, f"sort column {press}")
            seen.append(name)
            if cells:
                checked.append((name, desc, cells))
            if press == ncols - 1:
                break
            key = "s" if press == 0 else ">"
            header = table_header(s)
            pane.keys(key)
            s = pane.wait_screen(sorted_screen(pids, key, header), f"the sort column to move on {key}, "
                                 f"the rows in its order")
        check(len(set(seen)) == ncols, f"s / > did not visit every column: {seen}")
        check(len(checked) >= 4, f"fewer than 4 numeric columns read back sorted: {checked}")
        # < goes back; R reverses the order of the same column.
        header = table_header(s)
        pane.keys("<")
        s = pane.wait_screen(sorted_screen(pids, "<", header), "the sort column to move back on <, the rows "
                             "in its order")
        name, desc, _ = check_sorted(s, pids, "after <")
        check(name == seen[-2], f"< went to {name}, not {seen[-2]}")
        for name in ("STEP", "PID"):
            while sort_column(table_header(s))[0] != name:
                header = table_header(s)
                pane.keys("<")
                s = pane.wait_screen(sorted_screen(pids, "<", header), f"< towards {name}, the rows in order")
            _, desc, cells = check_sorted(s, pids, f"sorted by {name}")
            header = table_header(s)
            pane.keys("R")
            s = pane.wait_screen(sorted_screen(pids, "R", header), f"R to reverse the {name} order, the rows "
                                 f"in the new order")
            name2, desc2, cells2 = check_sorted(s, pids, f"sorted by {name} reversed")
            check(name2 == name and desc2 is not None and desc2 != desc, f"R: {name} {desc} became {name2} {desc2}")
            check(cells2 == cells[::-1] or len(set(cells)) < len(cells), f"R: {cells} reversed reads {cells2}")
            checked.append((name + " reversed", desc2, cells2))
        pane.keys("q")
        check(pane.wait_exit("q") == 0, f"top exited {pane.rc()} after q")
    finally:
        pane.kill()
    for name, desc, cells in checked:
        print(f"sort by {name} ({'descending' if desc else 'ascending'}): {cells}")


def scenario_restore(args, how):
    work = fresh(os.path.join(args.work, f"restore_{how}"))
    trace, pids, _ = make_trace(args, work, "block", 3, "block", 3)
    env = {"FSDPSCOPE_TOP_CRASH_KEY": "1"} if how == "crash" else {}
    pane = top_session(args, work, ["--step-keys", trace], env=env)
    try:
        pane.wait_screen(all_ranks_shown(pids), "the rank rows")
        before = pane.stty("before")
        check(before, "the pane's script did not record stty -g before top")
        during = pane.stty_now()
        check(during != before, f"the terminal's modes are the same while top runs ({during}): "
                                f"the restore check would prove nothing")
        if how == "quit":
            pane.keys("q")
        elif how == "sigterm":
            pid = pane.top_pid()
            check(pid, "no fsdpscope process under the pane's shell")
            os.kill(pid, signal.SIGTERM)
        else:
            pane.keys("C")
        rc = pane.wait_exit(how)
        after = pane.stty("after")
        check(after == before, f"after {how} (status {rc}) the terminal is not restored:\n"
                               f" before {before}\n after  {after}")
        if how == "quit":
            check(rc == 0, f"top exited {rc} after q")
        elif how == "crash":
            check(rc == 128 + signal.SIGABRT, f"the crash key gave status {rc}, not {128 + signal.SIGABRT} "
                                              f"(SIGABRT raised again after the restore)")
        else:
            check(rc not in (128 + signal.SIGABRT, 128 + signal.SIGSEGV), f"top crashed on SIGTERM: {rc}")
        final = pane.screen()
        check(not ranks_shown(final, pids), f"after {how} the dashboard is still on the screen:\n{final}")
    finally:
        pane.kill()
    print(f"restore {how}: status {rc}, stty -g the same before and after ({before[:40]}...)")


def scenario_layout(args):
    work = fresh(os.path.join(args.work, "layout"))
    trace, pids, _ = make_trace(args, work, "r12", 12, "linear", 3, model=TINY)
    pane = top_session(args, work, ["--step-keys", trace])
    try:
        s = pane.wait_screen(lambda t: len(ranks_shown(t, pids)) >= 10 and SUMMARY_RE.search(t),
                             "80x24: >= 10 rank rows and the findings summary")
        lines = s.splitlines()
        check(len(lines) <= 24 and all(len(l) <= 80 for l in lines), "the screen is not 80x24")
        shown = ranks_shown(s, pids)
        check(len(shown) >= 10, f"80x24: {len(shown)} rank rows:\n{s}")
        check(SUMMARY_RE.search(s), f"80x24: no findings summary:\n{s}")
        check(table_header(s), f"80x24: no rank table header:\n{s}")
        check(re.search(r"\b12\b", "\n".join(lines[:4])) and replay_step(s), f"80x24: the header (12 ranks, "
              f"step k/n) is not in the first lines:\n{s}")
        check(not HIDES_RE.search(s), f"80x24 says it hides something:\n{s}")
        full = s
        pane.resize(60, 15)
        small = pane.wait_screen(lambda t: HIDES_RE.search(t), "60x15: the screen to say what it hides")
        check(all(len(l) <= 60 for l in small.splitlines()), f"60x15: lines wider than 60:\n{small}")
        check(ranks_shown(small, pids), f"60x15: no rank row at all:\n{small}")
        pane.resize(80, 24)
        again = pane.wait_screen(lambda t: len(ranks_shown(t, pids)) >= 10 and not HIDES_RE.search(t),
                                 "back at 80x24: >= 10 rows, nothing hidden")
        pane.keys("q")
        check(pane.wait_exit("q") == 0, f"top exited {pane.rc()} after q")
    finally:
        pane.kill()
    print(f"layout 80x24 ({len(shown)} rows):\n{full}\n60x15:\n{small}")


def scenario_no_color(args):
    work = fresh(os.path.join(args.work, "no_color"))
    trace, pids, _ = make_trace(args, work, "linear", 4, "linear", 3)
    got = {}
    for what, env, extra in (("control", {"NO_COLOR": None}, []), ("NO_COLOR=1", {"NO_COLOR": "1"}, []),
                             ("--no-color", {"NO_COLOR": None}, ["--no-color"])):
        pane = top_session(args, fresh(os.path.join(work, what.strip("-").replace("=", ""))),
                           [*extra, "--step-keys", trace], env=env)
        try:
            pane.wait_screen(all_ranks_shown(pids), f"{what}: the rank rows")
            if what == "control":
                pane.wait_screen(colour_codes, "colour escapes without NO_COLOR (the slowest rank, severities)",
                                 escapes=True)
            s = pane.screen(escapes=True)
            got[what] = (colour_codes(s), s)
            pane.keys("q")
            check(pane.wait_exit(what) == 0, f"{what}: top exited {pane.rc()} after q")
        finally:
            pane.kill()
    check(got["control"][0], "without NO_COLOR the dashboard shows no colour at all (the slowest rank, "
                             "severities): the test could not see colour escapes")
    for what in ("NO_COLOR=1", "--no-color"):
        codes, s = got[what]
        check(not codes, f"{what}: colour escapes on screen: {sorted(set(codes))}")
        check(re.search(r"\x1b\[[0-9;]*[17][;m]", s), f"{what}: no bold or reverse video left:\n{s!r}")
    print(f"no_color: control {len(got['control'][0])} colour escapes "
          f"({sorted(set(got['control'][0]))[:6]}); NO_COLOR=1 and --no-color none")


def scenario_once(args):
    work = fresh(os.path.join(args.work, "once"))
    trace, pids, _ = make_trace(args, work, "linear", 4, "linear", 3)
    for cols, rows, extra in ((80, 24, []), (100, 40, ["--cols", "100", "--rows", "40"])):
        r = run([args.fsdpscope, "top", "--once", *extra, trace], env=dict(os.environ, FSDPSCOPE_AGENT=args.agent),
                timeout=120)
        check(r.returncode == 0, f"top --once {' '.join(extra)} exited {r.returncode}: {r.stderr}")
        check("\x1b" not in r.stdout, f"top --once: an ESC byte in its output: {r.stdout!r}")
        lines = r.stdout.splitlines()
        check(0 < len(lines) <= rows, f"top --once {cols}x{rows}: {len(lines)} lines")
        check(all(len(l) <= cols for l in lines), f"top --once {cols}x{rows}: a line wider than {cols}")
        check(ranks_shown(r.stdout, pids) == set(pids), f"top --once {cols}x{rows}: not every rank's row:\n{r.stdout}")
        check("wrap-too-fine" in r.stdout, f"top --once: the findings do not name wrap-too-fine:\n{r.stdout}")
    print(f"once:\n{r.stdout}")


def open_fifo_writer(fifo, limit=WAIT_S):
    """The FIFO's write end once its reader (fsdp_ref's rank 0, at the hold) has it open."""
    def attempt():
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno == 6:   # ENXIO: no reader yet
                return None
            raise
    return wait_for(attempt, f"fsdp_ref to open {fifo} (the hold)", limit)


def release(fifo):
    fd = open_fifo_writer(fifo)
    os.write(fd, b"x")
    os.close(fd)


def logged_collectives(log):
    lines = [json.loads(l) for l in read_text(log).splitlines() if l.strip()]
    return sum(l.get(k, 0) for l in lines for k in ("allgathers", "reduce_scatters", "allreduces")), lines


def check_trace_complete(args, trace, log, nranks, what):
    recs = dump(args, trace)
    hellos = [r for r in recs if r["type"] == "process_hello"]
    check(len(hellos) == nranks, f"{what}: {len(hellos)} processes in the trace, want {nranks}")
    ends = {r["source"] for r in recs if r["type"] == "process_end"}
    check(ends == {h["source"] for h in hellos}, f"{what}: a rank has no process_end")
    traced = sum(1 for r in recs if r["type"] == "collective")
    logged, _ = logged_collectives(log)
    check(traced == logged, f"{what}: {traced} collectives in the trace, fsdp_ref logged {logged}")
    return traced


def lint_shape(doc):
    """What lint says of a job that does not depend on its timing."""
    u = doc.get("units") or {}
    return {"verdict": doc["verdict"], "ranks": doc["ranks"], "steps_seen": doc["steps_seen"],
            "per_step": doc["per_step"], "repeating_units": u.get("repeating_units"),
            "gathers_per_unit": u.get("gathers_per_unit"),
            "errors": sorted(f["rule"] for f in doc["findings"] if f["severity"] == "error")}


def skip_if_agent_cannot_load(args):
    env = dict(os.environ, LD_PRELOAD=args.agent, FSDPSCOPE_DISABLE="1")
    r = subprocess.run([args.fsdp_ref, "--help"], env=env, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        why = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        if args.sanitized:
            raise Skip(f"the sanitizer-built agent cannot be preloaded into fsdp_ref: {why}")
        raise Fail(f"LD_PRELOAD of the agent into fsdp_ref fails: {why}")


HOLD = 2


def live_rows(screen):
    """Every rank of the live job has a row: its rank first, a pid-like number on it."""
    lines = screen.splitlines()
    return all(any(re.match(rf"^\W*{r}\s.*\b\d{{3,}}\b", l) for l in lines) for r in range(NRANKS_LIVE))


def trace_pids(args, trace):
    return {s["rank"]: s["pid"] for s in lint_json(args, trace)["sources"]}

NRANKS_LIVE = 3
STEPS_LIVE = 4


def scenario_live(args):
    skip_if_agent_cannot_load(args)
    work = fresh(os.path.join(args.work, "live"))
    out = os.path.join(work, "out")
    log = os.path.join(work, "fsdp_ref.jsonl")
    fifo = os.path.join(work, "hold")
    os.mkfifo(fifo, 0o600)
    job = fsdp_ref_cmd(args, NRANKS_LIVE, "linear", STEPS_LIVE, model=[m for m in MODEL if m != "--quiet"],
                       extra=["--log", log, "--hold-at", f"{HOLD}:{fifo}"])
    xdg = fresh(os.path.join(work, "xdg"))
    os.chmod(xdg, 0o700)
    pane = top_session(args, work, ["--exit-with-job", "--out", out, "--", *job], env={"XDG_RUNTIME_DIR": xdg})
    try:
        held = pane.wait_screen(lambda t: live_rows(t) and ".log" in t, "the held job's rank rows and the log path")
        logs = [p for p in glob.glob(os.path.join(out, "**", "*.log"), recursive=True)]
        check(len(logs) == 1, f"the job's log file under {out}: {logs}")
        check(os.path.basename(logs[0]) in held, f"the header does not show the log {logs[0]}:\n{held}")
        release(fifo)
        rc = pane.wait_exit("the job's end (--exit-with-job)", limit=300)
        check(rc == 0, f"top --exit-with-job exited {rc} for a job that exited 0: {read_text(pane.err)}")
        check(pane.stty("after") == pane.stty("before"), "the terminal is not restored after the job ended")
    finally:
        pane.kill()
    text = read_text(logs[0])
    losses = [l for l in text.splitlines() if re.match(r"^step \d+ loss ", l)]
    check(len(losses) == STEPS_LIVE, f"the log file holds {len(losses)} 'step N loss' lines, want {STEPS_LIVE}:\n{text}")
    traces = glob.glob(os.path.join(out, "*.fss"))
    check(len(traces) == 1, f"the trace under {out}: {traces}")
    traced = check_trace_complete(args, traces[0], log, NRANKS_LIVE, "top -- fsdp_ref")
    pids = trace_pids(args, traces[0])
    check(ranks_shown(held, pids) == set(pids), f"the held job's screen lacks a rank's row (pids {pids}):\n{held}")
    # The same job under `fsdpscope run`: lint says the same of both.
    ref_out = os.path.join(work, "run")
    r = run([args.fsdpscope, "run", "--out", ref_out, "--",
             *fsdp_ref_cmd(args, NRANKS_LIVE, "linear", STEPS_LIVE)], env=dict(os.environ, XDG_RUNTIME_DIR=xdg))
    check(r.returncode == 0, f"fsdpscope run of the same job exited {r.returncode}: {r.stderr}")
    mine, ref = lint_shape(lint_json(args, traces[0])), lint_shape(lint_json(args, os.path.join(ref_out, "trace.fss")))
    check(mine == ref, f"lint of top's trace differs from run's:\n top {mine}\n run {ref}")
    check("wrap-too-fine" in mine["errors"], f"lint of top's trace: no wrap-too-fine: {mine}")
    print(f"live: job held at step {HOLD} with every rank on screen, exited 0, {len(losses)} loss lines in "
          f"{logs[0]}, {traced} collectives, lint {mine}")


def scenario_leave(args):
    skip_if_agent_cannot_load(args)
    work = fresh(os.path.join(args.work, "leave"))
    out = os.path.join(work, "out")
    log = os.path.join(work, "fsdp_ref.jsonl")
    fifo = os.path.join(work, "hold")
    os.mkfifo(fifo, 0o600)
    job = fsdp_ref_cmd(args, NRANKS_LIVE, "block", STEPS_LIVE, extra=["--log", log, "--hold-at", f"{HOLD}:{fifo}"])
    xdg = fresh(os.path.join(work, "xdg"))
    os.chmod(xdg, 0o700)
    pane = top_session(args, work, ["--out", out, "--", *job], env={"XDG_RUNTIME_DIR": xdg})
    try:
        held = pane.wait_screen(live_rows, "the held job's rank rows")
        pane.keys("q")
        ask = pane.wait_screen(lambda t: ASK_RE.search(t), "q in run mode to ask: stop or leave")
        pane.keys("l")
        # The screen ends and the terminal is restored while the job is still held.
        pane.wait_screen(lambda t: not ASK_RE.search(t) and not re.search(r"\bpid\b", t, re.I),
                         "the dashboard to leave the screen after l")
        check(pane.rc() is None, "top ended after l although the job still runs")
        check(pane.stty_now() == pane.stty("before"), "after l the terminal is not restored (the job still runs)")
        said = wait_for(lambda: (lambda t: ".fss" in t and t)(read_text(pane.err) + pane.screen()),
                        "top to say where the trace will be (a .fss path on its stderr or the pane)")
        _, lines = logged_collectives(log)
        check(len(lines) == NRANKS_LIVE * HOLD, f"the held job logged {len(lines)} steps before the release, "
                                                f"want {NRANKS_LIVE * HOLD}")
        release(fifo)
        rc = pane.wait_exit("the job's end after leave", limit=300)
        check(rc == 0, f"top exited {rc} once the job it left ended: {read_text(pane.err)}")
    finally:
        pane.kill()
    traces = glob.glob(os.path.join(out, "*.fss"))
    check(len(traces) == 1, f"the trace under {out}: {traces}")
    traced = check_trace_complete(args, traces[0], log, NRANKS_LIVE, "after leave")
    pids = trace_pids(args, traces[0])
    check(ranks_shown(held, pids) == set(pids), f"the held job's screen lacks a rank's row (pids {pids}):\n{held}")
    print(f"leave: asked ({ASK_RE.search(ask).group(0)!r}), left; {traced} collectives, every rank ended; "
          f"stderr: {said.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--fsdp-ref", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tmux", default=shutil.which("tmux"))
    ap.add_argument("--sanitized", action="store_true")
    args = ap.parse_args()
    for a in ("fsdpscope", "agent", "fsdp_ref", "work", "tmux"):
        if getattr(args, a):
            setattr(args, a, os.path.abspath(getattr(args, a)))
    os.environ["FSDPSCOPE_AGENT"] = args.agent
    for var in ("FSDPSCOPE_SINK", "FSDPSCOPE_OUT", "FSDPSCOPE_DISABLE", "FSDPSCOPE_DORMANT", "LD_PRELOAD",
                "NVTX_INJECTION64_PATH", "TMUX"):
        os.environ.pop(var, None)
    scenarios = {
        "replay_linear": lambda: scenario_replay(args, "linear"),
        "replay_block": lambda: scenario_replay(args, "block"),
        "pause": lambda: scenario_pause(args),
        "sort": lambda: scenario_sort(args),
        "restore_quit": lambda: scenario_restore(args, "quit"),
        "restore_sigterm": lambda: scenario_restore(args, "sigterm"),
        "restore_crash": lambda: scenario_restore(args, "crash"),
        "layout": lambda: scenario_layout(args),
        "no_color": lambda: scenario_no_color(args),
        "once": lambda: scenario_once(args),
        "live": lambda: scenario_live(args),
        "leave": lambda: scenario_leave(args),
    }
    try:
        if args.scenario not in scenarios:
            raise Fail(f"unknown scenario {args.scenario}")
        if args.scenario != "once" and not args.tmux:
            raise Skip("tmux not found (scripts/setup.sh installs it)")
        r = subprocess.run([args.fsdpscope, "help", "top"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise Skip(f"fsdpscope has no top command (help top exited {r.returncode}: {r.stderr.strip()[:200]})")
        scenarios[args.scenario]()
    except Skip as e:
        print(f"SKIP: {args.scenario}: {e}")
        return SKIP
    except Fail as e:
        print(f"FAIL: {args.scenario}: {e}")
        return 1
    except subprocess.TimeoutExpired as e:
        print(f"FAIL: {args.scenario}: timed out: {e}")
        return 1
    print(f"PASS: {args.scenario}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
