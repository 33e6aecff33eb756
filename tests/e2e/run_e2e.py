#!/usr/bin/env python3
"""End-to-end tests of `fsdpscope run` with the real agent (tests/e2e/run.cmake).

usage: run_e2e.py SCENARIO --fsdpscope F --agent A --work DIR
                  [--gen fss_gen_sample_trace] [--fsdp-ref fsdp_ref] [--job run_job] [--sanitized]

Scenarios:
  exit      exit codes and output pass through: true, exit 3, killed by a
            signal, a missing command, stdout untouched, no agent, --help
  signal    SIGTERM / SIGINT sent to fsdpscope reach the job's process group
  fallback  a per-process trace file the job leaves in $FSDPSCOPE_OUT is merged
  descendants  processes that outlive CMD (orphans before their first NCCL
            call, ranks that go on after the launcher exits) are waited for,
            merged, and their exits recorded (needs --job, run_job)
  shared_dir two runs into one DIR: each trace holds its own job's processes
            only, no trace is replaced (a new name, said)
  killed    fsdpscope run killed with SIGKILL: the job survives; lint and the
            next run name what was left, which the next run merges
  security  umask 000 still gives a 0700 folder and a 0600 socket; a long DIR
            gets a private socket folder; user nobody is refused (root only)
  fsdp_ref:N:LAYERS:WRAP:STEPS
            fsdp_ref (CPU backend) under fsdpscope run: every collective its
            --log reports is in the trace with matching op, bytes, order and
            rank; NVTX step / phase / module ranges present; no duplicates
            (--sanitized: a small model).
  drops     fsdp_ref --wrap linear with a 16-slot ring: lint never calls the
            trace clean, names the drops, counts the collectives lost as the
            trace's seq gaps show them, and either finds wrap-too-fine in the
            steps that lost none or says it could not diagnose (exit 3)
  cut       a multi-chunk fsdp_ref --wrap linear trace cut at every chunk
            boundary (and at byte 65600), and the .partial of a run killed
            with SIGKILL: lint gives the whole trace's verdict or none, never
            another, says that records stop without a process_end, never exits 0

Exit status: 0 pass, 1 fail (with the reason), 77 skip (with the reason).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

SKIP = 77


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def run(cmd, env=None, timeout=60, **kw):
    return subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True, **kw)


def log_lines(path):
    """Lines in the file at path so far, 0 before it is there."""
    try:
        with open(path) as f:
            return f.read().count("\n")
    except FileNotFoundError:
        return 0


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def dump(args, trace):
    r = run([args.fsdpscope, "dump", trace])
    check(r.returncode == 0, f"fsdpscope dump {trace} exited {r.returncode}: {r.stderr}")
    return [json.loads(line) for line in r.stdout.splitlines()]


def by_type(records, t):
    return [r for r in records if r["type"] == t]


def run_folders(out):
    return [f for f in os.listdir(out) if f.startswith(".fsdpscope-run.")]


def trace_written(stderr):
    """The trace a run says it wrote."""
    lines = [l for l in stderr.splitlines() if l.startswith("fsdpscope run: trace written to ")]
    check(len(lines) == 1, f"not one 'trace written to' line: {stderr}")
    return lines[0][len("fsdpscope run: trace written to "):]


def need_job(args):
    if not args.job:
        print("SKIP: run_job is not built (needs the NCCL stand-in, fss_nccl_cpu)")
        sys.exit(SKIP)
    skip_if_agent_cannot_load(args, [args.job, "ranks", "0", "0"])


def collectives_by_pid(recs):
    """pid -> sorted list of collective seq numbers, over all its sources."""
    pid_of = {h["source"]: h["pid"] for h in by_type(recs, "process_hello")}
    out = {}
    for c in by_type(recs, "collective"):
        out.setdefault(pid_of[c["source"]], []).append(c["seq"])
    return {p: sorted(v) for p, v in out.items()}


def wait_lines(path, n, seconds=60):
    """Until `path` holds n lines (pids a job wrote); returns them."""
    deadline = time.monotonic() + seconds
    while True:
        if os.path.exists(path):
            lines = open(path).read().split()
            if len(lines) >= n:
                return [int(x) for x in lines]
        if time.monotonic() > deadline:
            raise Fail(f"{path} did not reach {n} lines in {seconds} s")
        time.sleep(0.02)


def agent_loads(args, program):
    """Whether LD_PRELOAD of the agent works in `program` (an ASan-built agent
    cannot load into a program without the ASan runtime). Returns (ok, why)."""
    env = dict(os.environ, LD_PRELOAD=args.agent, FSDPSCOPE_DISABLE="1")
    r = run(program, env=env, timeout=30)
    if r.returncode == 0:
        return True, ""
    return False, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"


def skip_if_agent_cannot_load(args, program):
    ok, why = agent_loads(args, program)
    if not ok and args.sanitized:
        print(f"SKIP: the sanitizer-built agent cannot be preloaded into {program[0]} "
              f"(not built with ASan: its runtime must come first): {why}")
        sys.exit(SKIP)
    check(ok, f"LD_PRELOAD of the agent into {program} fails: {why}")


# ---------------------------------------------------------------- exit codes

def scenario_exit(args):
    skip_if_agent_cannot_load(args, ["true"])
    fs = args.fsdpscope
    work = fresh(os.path.join(args.work, "exit"))
    out = os.path.join(work, "out")
    trace = os.path.join(out, "trace.fss")

    # true: exit 0, a valid trace. The agent reports a process from its
    # first NCCL call on, so a program without NCCL leaves no source.
    r = run([fs, "run", "--out", out, "--", "true"])
    check(r.returncode == 0, f"run -- true exited {r.returncode}: {r.stderr}")
    check(r.stdout == "", f"run -- true wrote to stdout: {r.stdout!r}")
    check(f"trace written to {trace}" in r.stderr, f"no 'trace written to {trace}' line: {r.stderr}")
    check("0 processes, 0 collectives" in r.stderr, f"summary of run -- true: {r.stderr}")
    check("no NCCL call" in r.stderr, f"no hint for a job without NCCL: {r.stderr}")
    check(dump(args, trace) == [], "run -- true: records in the trace of a program without NCCL")

    # Exit status and output pass through, fsdpscope's lines on stderr only.
    r = run([fs, "run", "--out", out, "--", "sh", "-c", "echo out-line; echo err-line >&2; exit 3"])
    check(r.returncode == 3, f"exit 3 came back as {r.returncode}")
    check(r.stdout == "out-line\n", f"job stdout changed: {r.stdout!r}")
    check(r.stderr.startswith("err-line\n") or "\nerr-line\n" in r.stderr, f"job stderr lost: {r.stderr!r}")

    # Killed by a signal: 128 + N.
    r = run([fs, "run", "--out", out, "--", "sh", "-c", "kill -TERM $$"])
    check(r.returncode == 128 + signal.SIGTERM, f"job killed by SIGTERM came back as {r.returncode}")
    check(os.path.exists(trace), "no trace after a job killed by a signal")

    # A missing command: 127 like a shell, a clear message, no new trace.
    before = os.stat(trace).st_mtime_ns
    r = run([fs, "run", "--out", out, "--", "fsdpscope-no-such-command", "x"])
    check(r.returncode == 127, f"missing command exited {r.returncode}, want 127")
    check("fsdpscope-no-such-command: command not found" in r.stderr, f"no clear message: {r.stderr}")
    check(os.stat(trace).st_mtime_ns == before, "a failed exec replaced the previous trace")
    check(not run_folders(out), f"work files left behind: {os.listdir(out)}")
    # Not executable: 126.
    noexec = os.path.join(work, "noexec.sh")
    with open(noexec, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(noexec, 0o644)
    r = run([fs, "run", "--out", out, "--", noexec])
    check(r.returncode == 126, f"non-executable command exited {r.returncode}, want 126")

    # No agent: a message naming what was searched, exit 2, nothing run.
    env = dict(os.environ, FSDPSCOPE_AGENT=os.path.join(work, "missing-agent.so"))
    r = run([fs, "run", "--out", out, "--", "sh", "-c", "echo ran"], env=env)
    check(r.returncode == 2 and r.stdout == "", f"missing agent: exit {r.returncode}, stdout {r.stdout!r}")
    check("missing-agent.so" in r.stderr, f"missing agent not named: {r.stderr}")

    # Usage errors.
    r = run([fs, "run"])
    check(r.returncode == 2 and "no command" in r.stderr, f"run without CMD: {r.returncode} {r.stderr}")
    r = run([fs, "run", "--bogus", "--", "true"])
    check(r.returncode == 2, f"unknown option: exit {r.returncode}")

    # A directory path too long for a socket file: the socket in a private folder of its own, still
    # recorded (needs a job that calls NCCL: fsdp_ref, one rank, one step).
    if args.fsdp_ref:
        deep = os.path.join(work, "d" * 60, "e" * 60)
        r = run([fs, "run", "--out", deep, "--name", "long", "--", args.fsdp_ref, "--nranks", "1",
                 "--layers", "1", "--steps", "1", "--quiet"])
        check(r.returncode == 0, f"long --out: exit {r.returncode}: {r.stderr}")
        check(len(by_type(dump(args, os.path.join(deep, "long.fss")), "process_hello")) == 1,
              "long --out (socket outside DIR): the process is not in the trace")
    else:
        print("note: fsdp_ref not built: the long-DIR case (long --out) is not checked")

    # The job's environment: the agent first in LD_PRELOAD (what was there
    # kept), the socket, DIR, the flags; a user's NVTX injection is kept.
    env = dict(os.environ, LD_PRELOAD="libc.so.6", NVTX_INJECTION64_PATH="/elsewhere/inject.so")
    show = 'printf "%s|%s|%s|%s|%s|%s\\n" "$LD_PRELOAD" "$NVTX_INJECTION64_PATH" "$FSDPSCOPE_SINK" ' \
           '"$FSDPSCOPE_OUT" "$FSDPSCOPE_DORMANT" "$FSDPSCOPE_CUPTI"'
    r = run([fs, "run", "--out", out, "--dormant", "--no-cupti", "--", "sh", "-c", show], env=env)
    check(r.returncode == 0, f"environment check: exit {r.returncode}: {r.stderr}")
    got = r.stdout.strip().split("|")
    real_out = os.path.realpath(out)
    check(got[0] == f"{os.path.realpath(args.agent)}:libc.so.6", f"LD_PRELOAD {got[0]!r}")
    check(got[1] == "/elsewhere/inject.so", f"NVTX_INJECTION64_PATH {got[1]!r}: the user's was not kept")
    check("NVTX_INJECTION64_PATH is already set" in r.stderr, f"no warning about NVTX injection: {r.stderr}")
    check(got[3].startswith(f"{real_out}/.fsdpscope-run."), f"FSDPSCOPE_OUT {got[3]!r}: not a private folder in DIR")
    check(got[2] == f"unix:{got[3]}/sock", f"FSDPSCOPE_SINK {got[2]!r}: not in the run's folder {got[3]}")
    check(got[4:] == ["1", "0"], f"FSDPSCOPE_DORMANT / CUPTI: {got[4:]}")
    check(not os.path.exists(got[3]), "the run's private folder was left in DIR")
    r = run([fs, "run", "--out", out, "--", "sh", "-c", 'printf "%s\\n" "$NVTX_INJECTION64_PATH"'])
    check(r.stdout.strip() == os.path.realpath(args.agent), f"NVTX_INJECTION64_PATH {r.stdout!r}")

    # Help: the same text both ways, with EXAMPLES and OVERHEAD.
    h1 = run([fs, "help", "run"])
    h2 = run([fs, "run", "--help"])
    check(h1.returncode == 0 and h1.stdout == h2.stdout, "help run and run --help differ")
    for section in ("SYNOPSIS", "EXAMPLES", "OVERHEAD", "EXIT STATUS"):
        check(section in h1.stdout, f"help run has no {section}")
    h3 = run([fs, "run", "--out", out, "--help", "--", "true"])
    check(h3.returncode == 0 and h3.stdout == h1.stdout, "run --out DIR --help is not the help")
    # Once CMD begins, --help and -h are the job's, with or without '--'.
    r = run([fs, "run", "--out", out, "echo", "hi", "--help"])
    check(r.returncode == 0 and r.stdout == "hi --help\n", f"run echo hi --help: {r.returncode} {r.stdout!r}")
    r = run([fs, "run", "--out", out, "--", "sh", "-c", 'echo "$@"', "sh", "-h", "--help"])
    check(r.returncode == 0 and r.stdout == "-h --help\n", f"run -- sh -c ... -h --help: {r.stdout!r}")


# ------------------------------------------------------------------- signals

def wait_for(path, seconds):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise Fail(f"{path} did not appear in {seconds} s")
        time.sleep(0.02)


def scenario_signal(args):
    skip_if_agent_cannot_load(args, ["sh", "-c", "true"])
    work = fresh(os.path.join(args.work, "signal"))
    for sig in (signal.SIGTERM, signal.SIGINT):
        out = os.path.join(work, f"out{int(sig)}")
        marker = os.path.join(work, f"started{int(sig)}")
        # The job: a shell waiting for a child; both are in the job's process
        # group. If the signal reached only the shell, the orphaned child would
        # hold its connection open and fsdpscope would say "still connected".
        # The child writes the marker once its own signal dispositions are
        # set, so the signal cannot land in a fork/exec window of the shell.
        child = (f"import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                 f"open({marker!r}, 'w').close(); time.sleep(30)")
        job = f"{sys.executable} -c \"{child}\"; exit 0"
        p = subprocess.Popen([args.fsdpscope, "run", "--out", out, "--flush-timeout", "15", "--",
                              "sh", "-c", job],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            wait_for(marker, 20)
            p.send_signal(sig)
            _, err = p.communicate(timeout=30)
        except Exception:
            p.kill()
            raise
        check(p.returncode == 128 + sig, f"{sig.name}: exit {p.returncode}, want {128 + sig}: {err}")
        check("still connected" not in err, f"{sig.name}: the job's child did not get the signal: {err}")
        check("trace written to" in err, f"{sig.name}: no trace line: {err}")
        dump(args, os.path.join(out, "trace.fss"))
    # A stop the user asked for ends ranks between chunks: one line says so,
    # not a warning per rank, and their records are in the trace.
    if not args.fsdp_ref:
        print("note: fsdp_ref not built: the stop of a recording job is not checked")
        return
    out = os.path.join(work, "stopped")
    log = os.path.join(work, "stopped.log")
    p = subprocess.Popen([args.fsdpscope, "run", "--out", out, "--", args.fsdp_ref, "--nranks", "4",
                          "--steps", "100000", "--quiet", "--log", log],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and log_lines(log) < 8:  # two steps of each rank logged
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    except Exception:
        p.kill()
        raise
    check(p.returncode == 128 + signal.SIGTERM, f"stopped job: exit {p.returncode}: {err}")
    check("without its trace_end" not in err, f"a stop asked for warned per process: {err}")
    check("the stop asked for ended 4 processes before they closed their streams" in err,
          f"the stop's line is missing: {err}")
    doc = json.loads(run([args.fsdpscope, "lint", "--json", os.path.join(out, "trace.fss")]).stdout)
    check(doc["ranks"] == 4, f"stopped job: {doc['ranks']} ranks in the trace, want 4")


# ------------------------------------------------------------------ fallback

def scenario_fallback(args):
    skip_if_agent_cannot_load(args, ["sh", "-c", "true"])
    work = fresh(os.path.join(args.work, "fallback"))
    out = os.path.join(work, "out")
    os.makedirs(out)
    # A trace file that was there before the run: left alone.
    old = os.path.join(out, "old-rank.fss")
    check(run([args.gen, old, "1", "1"]).returncode == 0, "fss_gen_sample_trace failed")
    job = f'{args.gen} "$FSDPSCOPE_OUT/rank7.fss" 2 3 >/dev/null; exit 0'
    r = run([args.fsdpscope, "run", "--out", out, "--", "sh", "-c", job])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    check("merged 1 per-process file" in r.stderr, f"no merge line: {r.stderr}")
    check(not os.path.exists(os.path.join(out, "rank7.fss")), "the merged file was not removed")
    check(os.path.exists(old), "a file from before the run was touched")
    recs = dump(args, os.path.join(out, "trace.fss"))
    hellos = by_type(recs, "process_hello")
    sources = [h["source"] for h in hellos]
    # The job (sh and the generator) makes no NCCL call: its processes do
    # not report; the file's two sources are the trace.
    check(sorted(sources) == [0, 1], f"sources {sources}, want the file's two renumbered 0 and 1")
    from_file = {r["source"] for r in by_type(recs, "string") if r["text"] == "layers.3.mlp.up"}
    check(from_file == {0, 1}, f"the file's strings are under sources {from_file}, want 0 and 1")

    # The agent's own file sink: ranks that have no socket to talk to write
    # $FSDPSCOPE_OUT/fsdpscope-HOST-PID.fss; run merges them into the trace.
    if not args.fsdp_ref:
        print("note: fsdp_ref not built: the agent's own fallback files are not checked")
        return
    out = os.path.join(work, "agent-files")
    log = os.path.join(work, "log.jsonl")
    job = f'unset FSDPSCOPE_SINK; exec "{args.fsdp_ref}" --nranks 2 --layers 2 --steps 2 --quiet --log "{log}"'
    r = run([args.fsdpscope, "run", "--out", out, "--", "sh", "-c", job])
    check(r.returncode == 0, f"fsdp_ref without a sink: exit {r.returncode}: {r.stderr}")
    check("merged 2 per-process file" in r.stderr, f"the ranks' files were not merged: {r.stderr}")
    check(os.listdir(out) == ["trace.fss"], f"files left in DIR: {os.listdir(out)}")
    recs = dump(args, os.path.join(out, "trace.fss"))
    check(len(by_type(recs, "process_hello")) == 2, "fsdp_ref without a sink: not 2 processes")
    logged = sum(l[k] for l in map(json.loads, open(log)) for k in ("allgathers", "reduce_scatters", "allreduces"))
    traced = len(by_type(recs, "collective"))
    check(traced == logged, f"fsdp_ref without a sink: {traced} collectives in the trace, the log says {logged}")


# --------------------------------------------------------------- descendants

def check_exits(recs, pids, what):
    """One process_exit per pid, exit status 0, after the source's other records."""
    exits = by_type(recs, "process_exit")
    got = sorted(e["pid"] for e in exits)
    check(got == sorted(pids), f"{what}: process_exit for pids {got}, want {sorted(pids)}")
    for e in exits:
        check(e["wait_status"] == 0, f"{what}: pid {e['pid']} ended with wait status {e['wait_status']}, want 0")
        mine = [r for r in recs if r["source"] == e["source"]]
        check(mine[-1] == e, f"{what}: pid {e['pid']}'s process_exit is not its source's last record")


def scenario_descendants(args):
    need_job(args)
    work = fresh(os.path.join(args.work, "descendants"))

    # The parent exits before its children's first NCCL call: the run waits
    # for the children, its subreaper's own.
    out = os.path.join(work, "orphans")
    r = run([args.fsdpscope, "run", "--out", out, "--", args.job, "orphans", "3", "20"])
    check(r.returncode == 0, f"orphans: exit {r.returncode}: {r.stderr}")
    check("no process reported" not in r.stderr, f"orphans: the children were lost: {r.stderr}")
    check("3 processes outlived" in r.stderr and "3 of them reported to the trace" in r.stderr,
          f"orphans: no line about the processes that outlived CMD: {r.stderr}")
    check(os.listdir(out) == ["trace.fss"], f"orphans: files left in DIR: {os.listdir(out)}")
    recs = dump(args, os.path.join(out, "trace.fss"))
    seqs = collectives_by_pid(recs)
    check(len(seqs) == 3 and all(v == list(range(1, 21)) for v in seqs.values()),
          f"orphans: collectives per process {seqs}, want 3 processes with seq 1..20")
    check_exits(recs, list(seqs), "orphans")

    # Ranks that go on after the launcher exited: collectives 54-80 of every
    # rank are in the trace, merged, nothing left in DIR.
    out = os.path.join(work, "early-exit")
    r = run([args.fsdpscope, "run", "--out", out, "--", args.job, "early-exit", "2", "53", "27"])
    check(r.returncode == 0, f"early-exit: exit {r.returncode}: {r.stderr}")
    check("still connected" not in r.stderr, f"early-exit: the trace was closed on live ranks: {r.stderr}")
    check(os.listdir(out) == ["trace.fss"], f"early-exit: files left in DIR: {os.listdir(out)}")
    recs = dump(args, os.path.join(out, "trace.fss"))
    seqs = collectives_by_pid(recs)
    check(len(seqs) == 2 and all(v == list(range(1, 81)) for v in seqs.values()),
          f"early-exit: collective seqs per rank {{pid: [...]}} = { {p: (v[:2], v[-2:], len(v)) for p, v in seqs.items()} }, "
          f"want 1..80 on 2 ranks")
    check_exits(recs, list(seqs), "early-exit")

    # While the run waits for what CMD left, a signal still reaches the job's
    # group, and how each process ended is said and recorded.
    out = os.path.join(work, "signalled")
    pids = os.path.join(work, "pids-signalled")
    env = dict(os.environ, RUN_JOB_PIDS=pids, RUN_JOB_GATE=os.path.join(work, "never"))
    p = subprocess.Popen([args.fsdpscope, "run", "--out", out, "--", args.job, "orphans", "1", "5"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        (orphan,) = wait_lines(pids, 1)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    check(p.returncode == 0, f"signalled: exit {p.returncode} (CMD's own status is 0): {err}")
    check(f"pid {orphan} (killed by signal {int(signal.SIGTERM)} (SIGTERM))" in err, f"signalled: how the orphan ended: {err}")
    for e in by_type(dump(args, trace_written(err)), "process_exit"):
        check(e["pid"] == orphan and e["wait_status"] == int(signal.SIGTERM),
              f"signalled: process_exit {e}, want pid {orphan} killed by SIGTERM")

    # An orphan that survives the forwarded signal: a second one stops the
    # wait, and the orphan is named as left running.
    out = os.path.join(work, "stubborn")
    pids = os.path.join(work, "pids-stubborn")
    terms = os.path.join(work, "terms-stubborn")
    env = dict(os.environ, RUN_JOB_PIDS=pids, RUN_JOB_GATE=os.path.join(work, "never"), RUN_JOB_ON_TERM=terms)
    errfile = open(os.path.join(work, "stubborn.err"), "w+")  # the orphan outlives the run: no pipe
    p = subprocess.Popen([args.fsdpscope, "run", "--out", out, "--flush-timeout", "0", "--", args.job, "orphans", "1",
                          "5"], env=env, stdout=subprocess.DEVNULL, stderr=errfile)
    orphan = None
    try:
        (orphan,) = wait_lines(pids, 1)
        p.send_signal(signal.SIGTERM)
        wait_for(terms, 60)  # the file exists once the orphan got the forwarded signal
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
        if orphan:
            os.kill(orphan, signal.SIGKILL)
    errfile.seek(0)
    err = errfile.read()
    check(p.returncode == 0, f"stubborn: exit {p.returncode}: {err}")
    check("1 process still running" in err and f"({orphan})" in err, f"stubborn: the orphan is not named: {err}")


# ---------------------------------------------------------------- shared DIR

def scenario_shared_dir(args):
    need_job(args)
    work = fresh(os.path.join(args.work, "shared_dir"))
    out = os.path.join(work, "out")
    jobs = {"a": (2, 7), "b": (3, 11)}
    procs = {}
    for name, (n, k) in jobs.items():
        env = dict(os.environ, RUN_JOB_PIDS=os.path.join(work, f"pids-{name}"))
        procs[name] = subprocess.Popen(
            [args.fsdpscope, "run", "--out", out, "--", args.job, "gated", str(n), str(k),
             os.path.join(work, f"gate-{name}")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = {name: wait_lines(os.path.join(work, f"pids-{name}"), n) for name, (n, _) in jobs.items()}
        # a's job ends and its run finishes while b's is still running.
        open(os.path.join(work, "gate-a"), "w").close()
        _, err_a = procs["a"].communicate(timeout=60)
        check(procs["a"].returncode == 0, f"run a: exit {procs['a'].returncode}: {err_a}")
        check(procs["b"].poll() is None, "run b ended before its gate was opened")
        open(os.path.join(work, "gate-b"), "w").close()
        _, err_b = procs["b"].communicate(timeout=60)
        check(procs["b"].returncode == 0, f"run b: exit {procs['b'].returncode}: {err_b}")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    traces = {"a": trace_written(err_a), "b": trace_written(err_b)}
    check(traces["a"] != traces["b"], f"both runs wrote {traces['a']}")
    check(sorted(os.path.basename(t) for t in traces.values()) == ["trace-2.fss", "trace.fss"],
          f"trace names {traces}")
    renamed = "b" if traces["b"].endswith("trace-2.fss") else "a"
    check("already exists" in (err_b if renamed == "b" else err_a), "the renamed run did not say why")
    for name, (n, k) in jobs.items():
        seqs = collectives_by_pid(dump(args, traces[name]))
        check(sorted(seqs) == sorted(pids[name]), f"run {name}: processes {sorted(seqs)}, its job's are {pids[name]}")
        check(all(v == list(range(1, 2 * k + 1)) for v in seqs.values()),
              f"run {name}: collectives per process {seqs}, want 1..{2 * k}")
    check(not run_folders(out), f"run folders left: {os.listdir(out)}")

    # A later run never replaces a trace: a new name, said on stderr.
    before = {t: open(t, "rb").read() for t in traces.values()}
    r = run([args.fsdpscope, "run", "--out", out, "--", "true"])
    check(r.returncode == 0, f"third run: exit {r.returncode}: {r.stderr}")
    check(trace_written(r.stderr) == os.path.join(os.path.realpath(out), "trace-3.fss"),
          f"third run: {r.stderr}")
    check("trace.fss already exists" in r.stderr, f"third run did not say the name was taken: {r.stderr}")
    check(all(open(t, "rb").read() == b for t, b in before.items()), "a trace was changed by a later run")


# -------------------------------------------------------------------- killed

def become_subreaper():
    """Orphans of the killed run become this process's children, so that the
    test can wait for the job with waitpid rather than by polling."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def job_pgid_of(out):
    """The job's process group, from the run.info of the run folder under out (None when not written yet)."""
    for folder, _, names in os.walk(out):
        if "run.info" in names:
            for line in open(os.path.join(folder, "run.info")):
                if line.startswith("job=") and int(line[4:]) > 0:
                    return int(line[4:])
    return None


def scenario_killed(args):
    need_job(args)
    if not become_subreaper():
        print("SKIP: prctl(PR_SET_CHILD_SUBREAPER) failed: the orphaned job cannot be waited for")
        sys.exit(SKIP)
    work = fresh(os.path.join(args.work, "killed"))
    out = os.path.join(work, "out")
    gate = os.path.join(work, "gate")
    env = dict(os.environ, RUN_JOB_PIDS=os.path.join(work, "pids"))
    # No pipes: the job, which outlives fsdpscope, would hold them open.
    p = subprocess.Popen([args.fsdpscope, "run", "--out", out, "--", args.job, "gated", "1", "10", gate],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        (rank,) = wait_lines(os.path.join(work, "pids"), 1)
        folders = run_folders(out)
        check(len(folders) == 1, f"run folders while running: {folders}")
        folder = os.path.join(out, folders[0])
    finally:
        p.kill()
    p.wait(timeout=30)
    check(p.returncode == -signal.SIGKILL, f"fsdpscope run was not killed: {p.returncode}")
    # The job outlives its observer, and its agent goes on in a file of its own.
    os.kill(rank, 0)
    deadline = time.monotonic() + 30
    while not [f for f in os.listdir(folder) if f.startswith("fsdpscope-")]:
        check(time.monotonic() < deadline, f"the rank's agent did not fail over to a file: {os.listdir(folder)}")
        time.sleep(0.02)
    open(gate, "w").close()
    statuses = {}
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        statuses[pid] = status
    # The job's parent waits for its rank and exits 0 only when it ended well.
    check(len(statuses) == 1 and all(os.waitstatus_to_exitcode(s) == 0 for s in statuses.values()),
          f"the job did not finish cleanly after fsdpscope was killed: {statuses}")
    check(os.path.exists(os.path.join(folder, "sock")), "no stale socket left by the killed run")
    check(os.path.exists(os.path.join(folder, "run-output.fss.partial")), "no unfinished trace left")

    # lint names what it found: on DIR, and on the unfinished trace.
    r = run([args.fsdpscope, "lint", out])
    for what in ("which did not finish", "stale socket", "unfinished trace", "1 unmerged per-process file",
                 f"fsdpscope run --out {out}"):
        check(what in r.stderr, f"lint DIR: no '{what}': {r.stderr}")
    for reader in ("lint", "report"):
        r = run([args.fsdpscope, reader, os.path.join(folder, "run-output.fss.partial")])
        check("is from an unfinished run" in r.stderr, f"{reader} on the .partial: {r.stderr}")

    # The next run names it and merges it into a trace of its own.
    r = run([args.fsdpscope, "run", "--out", out, "--", "true"])
    check(r.returncode == 0, f"next run: exit {r.returncode}: {r.stderr}")
    run_id = folders[0][len(".fsdpscope-run."):]
    check(f"left by run {run_id}" in r.stderr and "stale socket" in r.stderr, f"next run: {r.stderr}")
    recovered = os.path.join(os.path.realpath(out), f"recovered-{run_id}.fss")
    check(f"merged what run {run_id} left into {recovered}" in r.stderr, f"next run: {r.stderr}")
    check(not run_folders(out), f"the killed run's folder is still there: {os.listdir(out)}")
    recs = dump(args, recovered)
    seqs = collectives_by_pid(recs).get(rank, [])
    check(len(seqs) == len(set(seqs)), f"recovered: a collective twice: {seqs}")
    check(set(range(11, 21)) <= set(seqs) <= set(range(1, 21)),
          f"recovered: the rank's collectives {seqs}, want 11..20 (recorded after the kill) and no others than 1..20")
    # And the next run after that finds nothing left.
    r = run([args.fsdpscope, "run", "--out", out, "--", "true"])
    check("left by run" not in r.stderr, f"a leftover reported twice: {r.stderr}")

    # The bound on waiting for descendants: with --wait-descendants 0 the
    # orphan is named and left running, the folder stays; the next run leaves
    # it in place while the orphan's job runs, the one after merges it.
    out = os.path.join(work, "bound")
    gate = os.path.join(work, "gate-bound")
    pids = os.path.join(work, "pids-bound")
    env = dict(os.environ, RUN_JOB_PIDS=pids, RUN_JOB_GATE=gate)
    # stderr to a file: the orphan, which outlives fsdpscope, would hold a pipe open.
    with open(os.path.join(work, "bound.err"), "w+") as err:
        rc = subprocess.run([args.fsdpscope, "run", "--out", out, "--wait-descendants", "0", "--", args.job,
                             "orphans", "1", "5"], env=env, stdout=subprocess.DEVNULL, stderr=err,
                            timeout=60).returncode
        err.seek(0)
        stderr = err.read()
    check(rc == 0, f"--wait-descendants 0: exit {rc}: {stderr}")
    check("1 process still running 0 s after" in stderr, f"--wait-descendants 0: the orphan is not named: {stderr}")
    kept = run_folders(out)
    check(len(kept) == 1, f"--wait-descendants 0: the folder was not kept: {os.listdir(out)}")
    (orphan,) = wait_lines(pids, 1)
    r = run([args.fsdpscope, "run", "--out", out, "--", "true"])
    check("is still running" in r.stderr and "left it in place" in r.stderr,
          f"a leftover whose job runs: {r.stderr}")
    check(run_folders(out) == kept, f"the running job's folder was touched: {os.listdir(out)}")
    open(gate, "w").close()
    pid, status = os.waitpid(orphan, 0)
    check(os.waitstatus_to_exitcode(status) == 0, f"the orphan ended with {status}")
    r = run([args.fsdpscope, "run", "--out", out, "--", "true"])
    check(r.stderr.count("merged what run") == 1, f"once the job ended, its folder was not merged: {r.stderr}")
    check(len(run_folders(out)) == 0, f"folders left: {os.listdir(out)}")


# ------------------------------------------------------------------ security

INJECT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(f"connect: {e.__class__.__name__}")
    sys.exit(0)
try:
    s.sendall(sys.stdin.buffer.read())
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    print("sent")
except OSError as e:
    print(f"send: {e.__class__.__name__}")
"""


def scenario_security(args):
    skip_if_agent_cannot_load(args, ["sh", "-c", "true"])
    work = fresh(os.path.join(args.work, "security"))
    modes = 'o="$FSDPSCOPE_OUT"; s="${FSDPSCOPE_SINK#unix:}"; ' \
            'stat -c %a "$o"; stat -c %a "$s"; stat -c %a "$(dirname "$s")"; echo "$s"'
    # Whatever the umask: the folder 0700, the socket 0600; and with a DIR
    # too long for a socket path, a private folder elsewhere, not an
    # abstract name anyone can connect to.
    for name, out in (("short", os.path.join(work, "out")),
                      ("long", os.path.join(work, "d" * 60, "e" * 60))):
        r = subprocess.run([args.fsdpscope, "run", "--out", out, "--", "sh", "-c", modes], capture_output=True,
                           text=True, timeout=60, preexec_fn=lambda: os.umask(0))
        check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr}")
        folder_mode, sock_mode, sock_dir_mode, sock = r.stdout.split()
        check((folder_mode, sock_mode, sock_dir_mode) == ("700", "600", "700"),
              f"{name} DIR, umask 000: folder {folder_mode}, socket {sock_mode}, socket's folder {sock_dir_mode}")
        check(sock.startswith("/"), f"{name}: the socket is not a file: {sock}")
        check(not os.path.exists(os.path.dirname(sock)), f"{name}: the socket's folder was left: {sock}")
        if name == "long":
            check(not sock.startswith(os.path.realpath(out)), f"long DIR: socket {sock} does not fit")

    if os.geteuid() != 0:
        print("SKIP: injecting as another user needs root (to become nobody): the modes were checked, "
              "the peer check was not")
        sys.exit(SKIP)
    setpriv = shutil.which("setpriv")
    if not setpriv:
        print("SKIP: setpriv (util-linux) is missing: the peer check as another user was not run")
        sys.exit(SKIP)
    sample = os.path.join(work, "fake.fss")
    check(run([args.gen, sample, "1", "500"]).returncode == 0, "fss_gen_sample_trace failed")
    fake = len(by_type(dump(args, sample), "collective"))
    check(fake > 0, "the fake trace holds no collective")
    inject = os.path.join(work, "inject.py")
    with open(inject, "w") as f:
        f.write(INJECT)
    os.chmod(work, 0o755)
    os.chmod(inject, 0o644)
    as_nobody = f'{setpriv} --reuid=65534 --regid=65534 --clear-groups {sys.executable} {inject}'
    # As the modes are: nobody cannot even reach the socket.
    out = os.path.join(work, "inject")
    job = f's="${{FSDPSCOPE_SINK#unix:}}"; {as_nobody} "$s" < {sample}'
    r = run([args.fsdpscope, "run", "--out", out, "--", "sh", "-c", job])
    check(r.returncode == 0 and r.stdout.strip() == "connect: PermissionError",
          f"nobody reached the socket: {r.stdout!r} {r.stderr}")
    # With the modes loosened (by the job itself), the uid check refuses it.
    job = f'o="$FSDPSCOPE_OUT"; s="${{FSDPSCOPE_SINK#unix:}}"; chmod 0777 "$o"; chmod 0666 "$s"; ' \
          f'{as_nobody} "$s" < {sample}'
    r = run([args.fsdpscope, "run", "--out", out, "--", "sh", "-c", job])
    check(r.returncode == 0, f"loosened modes: exit {r.returncode}: {r.stderr}")
    check(r.stdout.strip() != "connect: PermissionError", f"nobody could not connect: {r.stdout!r}")
    recs = dump(args, trace_written(r.stderr))
    check(not by_type(recs, "process_hello") and not by_type(recs, "collective"),
          f"records of nobody's connection are in the trace: {len(by_type(recs, 'collective'))} collectives "
          f"(it sent {fake})")
    check("refused 1 connection from other users (uid 65534, pid " in r.stderr,
          f"the refused connection is not reported: {r.stderr}")


# ------------------------------------------------------------------ fsdp_ref

OPS = {"AllGather": "allgathers", "ReduceScatter": "reduce_scatters", "AllReduce": "allreduces"}
LINEARS = ["attn.q", "attn.k", "attn.v", "attn.o", "mlp.gate", "mlp.up", "mlp.down"]


# Leaf ranges around every op and the FSDP hooks' own work (docs/fsdp_ref.md,
# "NVTX ranges"): present whatever the wrap.
BLOCK_OPS = ["attn_norm", "attn.core", "attn.residual", "mlp_norm", "mlp.act", "mlp.residual"] + \
    [f"{l}.matmul" for l in LINEARS]
ROOT_OPS = ["input", "embedding", "final_norm", "head", "loss", "loss_sum",
            "fsdp.unshard", "fsdp.grad_alloc", "fsdp.reshard", "fsdp.reduce_scatter"]


def op_names(layers):
    return set(ROOT_OPS) | {f"layers.{i}.{o}" for i in range(layers) for o in BLOCK_OPS}


def unit_names(layers, wrap):
    names = ["root"] + [f"layers.{i}" for i in range(layers)]
    if wrap == "linear":
        names += [f"layers.{i}.{l}" for i in range(layers) for l in LINEARS]
    elif wrap != "block":
        raise Fail(f"the test knows the unit names of block and linear only, not {wrap}")
    return names


# The fsdp_ref scenarios' model in a sanitizer build (the default batch, which 1, 2 and 4 divide).
SANITIZED_MODEL = ["--d-model", "32", "--ffn", "64", "--seq", "8"]


def scenario_fsdp_ref(args, spec):
    _, n, layers, wrap, steps = spec.split(":")
    n, layers, steps = int(n), int(layers), int(steps)
    skip_if_agent_cannot_load(args, [args.fsdp_ref, "--help"])
    work = fresh(os.path.join(args.work, f"fsdp_ref_n{n}"))
    out = os.path.join(work, "out")
    log = os.path.join(work, "log.jsonl")
    cmd = [args.fsdpscope, "run", "--out", out, "--", args.fsdp_ref, "--backend", "cpu",
           "--nranks", str(n), "--layers", str(layers), "--wrap", wrap, "--steps", str(steps),
           "--log", log]
    if args.sanitized:
        # every check is the log against the trace, at any width: a sanitized rank computes slowly
        cmd += SANITIZED_MODEL
    r = run(cmd, timeout=120)
    check(r.returncode == 0, f"fsdp_ref under fsdpscope run exited {r.returncode}: {r.stderr}")
    # rank 0's "step N loss X" lines pass through on stdout
    check(r.stdout.count("loss") == steps, f"job stdout changed: {r.stdout!r}")
    # fsdpscope's own warnings (damage, drops); the lint summary that follows
    # may name "warning" findings about the job, which is not a run problem.
    check("fsdpscope run: warning" not in r.stderr, f"fsdpscope warned: {r.stderr}")
    check("fsdpscope lint:" in r.stderr, f"no lint summary after the run: {r.stderr}")
    lines = [json.loads(l) for l in open(log)]
    check(len(lines) == n * steps, f"log has {len(lines)} lines, want {n * steps}")
    logged = {(l["rank"], l["step"]): l for l in lines}

    recs = dump(args, os.path.join(out, "trace.fss"))
    hellos = by_type(recs, "process_hello")
    # fsdp_ref forks N ranks under a supervisor when N > 1; the supervisor
    # makes no NCCL call, so the agent does not report it.
    want_procs = n
    check(len(hellos) == want_procs, f"{len(hellos)} processes in the trace, want {want_procs}")
    check(len({h["source"] for h in hellos}) == len(hellos), "two hellos share a source")
    ends = {r["source"] for r in by_type(recs, "process_end")}
    check(ends == {h["source"] for h in hellos}, f"processes without process_end: {hellos} vs {ends}")
    for d in by_type(recs, "drops"):
        check(d["ring_dropped"] == 0 and d["sink_dropped"] == 0,
              f"source {d['source']} dropped records: {d}")

    # Ranks: from each source's communicator (forked ranks have no RANK hint).
    comms = {}   # (source, handle) -> nranks
    rank_of = {}  # source -> rank
    for c in by_type(recs, "comm"):
        check(c["result"] == 0, f"comm call failed: {c}")
        if c["event"] in ("init", "split"):
            comms[(c["source"], c["comm"])] = c["nranks"]
        if c["event"] == "init" and c["nranks"] == n:
            check(c["source"] not in rank_of, f"source {c['source']} initialised two world communicators")
            rank_of[c["source"]] = c["rank"]
    check(sorted(rank_of.values()) == list(range(n)), f"ranks in the trace: {sorted(rank_of.values())}")

    colls = {}
    for c in by_type(recs, "collective"):
        check(c["source"] in rank_of, f"collective from a source with no world communicator: {c}")
        colls.setdefault(c["source"], []).append(c)
    total_logged = sum(l[k] for l in lines for k in OPS.values())
    total_traced = sum(len(v) for v in colls.values())
    check(total_traced == total_logged, f"{total_traced} collectives in the trace, fsdp_ref logged {total_logged}")

    want_names = unit_names(layers, wrap)
    sequences = {}  # rank -> per step [(op, bytes)]
    for source, rank in rank_of.items():
        cs = colls.get(source, [])
        seqs = [c["seq"] for c in cs]
        check(seqs == list(range(1, len(cs) + 1)),
              f"rank {rank}: collective seq numbers are not 1..{len(cs)} in order (duplicates or gaps)")
        for c in cs:
            check(c["op"] in OPS, f"rank {rank}: unexpected collective {c['op']}")
            check(c["result"] == 0, f"rank {rank}: a collective failed: {c}")
            check((source, c["comm"]) in comms, f"rank {rank}: collective on an unknown communicator")
            check(c["path"] == "interpose", f"rank {rank}: collective seen through {c['path']}")

        # NVTX: the documented ranges, in domain fsdp_ref.
        ranges = [r for r in by_type(recs, "nvtx_range") if r["source"] == source]
        mine = [r for r in ranges if r["domain"] == "fsdp_ref"]
        count = {}
        for r in mine:
            count[r["name"]] = count.get(r["name"], 0) + 1
        for s in range(steps):
            check(count.get(f"step {s}") == 1, f"rank {rank}: 'step {s}' range seen {count.get(f'step {s}')} times")
        for phase in ("forward", "backward", "optimizer"):
            check(count.get(phase) == steps, f"rank {rank}: '{phase}' seen {count.get(phase)} times, want {steps}")
        for name in want_names:
            check(count.get(name) == 2 * steps,
                  f"rank {rank}: module range '{name}' seen {count.get(name)} times, want {2 * steps}")
        ops = op_names(layers)
        for name in ops - {"fsdp.reshard"}:  # no reshard with --reshard-after-forward false
            check(count.get(name, 0) >= steps, f"rank {rank}: op range '{name}' seen {count.get(name)} times")
        extra = set(count) - set(want_names) - ops - {"forward", "backward", "optimizer"} - \
            {f"step {s}" for s in range(steps)}
        check(not extra, f"rank {rank}: unexpected NVTX names {sorted(extra)[:5]}")

        # Per step: the collectives issued inside the step's range match the log.
        step_range = {int(r["name"].split()[1]): r for r in mine if r["name"].startswith("step ")}
        placed = 0
        sequences[rank] = []
        for s in range(steps):
            lo, hi = step_range[s]["start_ns"], step_range[s]["end_ns"]
            inside = [c for c in cs if lo <= c["enter_ns"] <= hi]
            placed += len(inside)
            want = logged[(rank, s)]
            for op, key in OPS.items():
                got = sum(1 for c in inside if c["op"] == op)
                check(got == want[key], f"rank {rank} step {s}: {got} {op} in the trace, log says {want[key]}")
            gathered = sum(c["bytes"] * comms[(source, c["comm"])] for c in inside if c["op"] == "AllGather")
            check(gathered == want["gathered_bytes"],
                  f"rank {rank} step {s}: gathered {gathered} bytes in the trace, log says {want['gathered_bytes']}")
            sequences[rank].append([(c["op"], c["bytes"]) for c in inside])
        check(placed == len(cs), f"rank {rank}: {len(cs) - placed} collectives outside every step range")

    # Order: every rank issued the same collectives in the same order.
    for rank in range(1, n):
        for s in range(steps):
            check(sequences[rank][s] == sequences[0][s],
                  f"step {s}: rank {rank}'s (op, bytes) sequence differs from rank 0's")
    print(f"fsdp_ref N={n} L={layers} wrap={wrap} steps={steps}: {total_traced} collectives, "
          f"{len(by_type(recs, 'nvtx_range'))} NVTX ranges, {len(hellos)} processes: all match the log")


def lint_json(args, trace, *extra):
    """`fsdpscope lint --json` of trace: (exit status, document, stderr)."""
    r = run([args.fsdpscope, "lint", "--json", *extra, trace], timeout=120)
    check(r.returncode != 2, f"lint {trace} exited 2: {r.stderr}")
    return r.returncode, json.loads(r.stdout, object_pairs_hook=strict_object), r.stderr


def strict_object(pairs):
    keys = [k for k, _ in pairs]
    check(len(keys) == len(set(keys)), f"duplicate keys in lint --json: {keys}")
    return dict(pairs)


def rules_at(doc, *severities):
    return {f["rule"] for f in doc["findings"] if f["severity"] in severities}


# A small model: the stream of collectives and ranges is what matters, and
# sanitized builds on a busy machine compute slowly.
SMALL_MODEL = ["--d-model", "32", "--ffn", "64", "--seq", "8", "--batch", "2"]


def run_fsdp_ref(args, out, n, layers, steps, env=None):
    cmd = [args.fsdpscope, "run", "--out", out, "--", args.fsdp_ref, "--backend", "cpu",
           "--nranks", str(n), "--layers", str(layers), "--wrap", "linear", "--steps", str(steps), *SMALL_MODEL]
    r = run(cmd, env=env, timeout=120)
    check(r.returncode == 0, f"fsdp_ref under fsdpscope run exited {r.returncode}: {r.stderr}")
    return os.path.join(out, "trace.fss")


def seq_lost(recs):
    """Collectives each source lost: seq numbers its collective records and
    its process_end account for, less the records it has."""
    top, have = {}, {}
    for c in by_type(recs, "collective"):
        top[c["source"]] = max(top.get(c["source"], 0), c["seq"])
        have[c["source"]] = have.get(c["source"], 0) + 1
    for e in by_type(recs, "process_end"):
        top[e["source"]] = max(top.get(e["source"], 0), e["collectives"])
    return {s: top[s] - have.get(s, 0) for s in top}


def scenario_drops(args):
    skip_if_agent_cannot_load(args, [args.fsdp_ref, "--help"])
    work = fresh(os.path.join(args.work, "drops"))
    env = dict(os.environ, FSDPSCOPE_RING_SLOTS="16")
    trace = run_fsdp_ref(args, os.path.join(work, "out"), 2, 4, 6, env=env)
    recs = dump(args, trace)
    latest = {}
    for d in by_type(recs, "drops"):
        latest[d["source"]] = d
    dropped = sum(d["ring_dropped"] + d["sink_dropped"] + d["cupti_dropped"] for d in latest.values())
    lost = seq_lost(recs)
    rc, doc, err = lint_json(args, trace)
    ex = doc["excluded"]
    # The decision given the drops this run recorded (how many a 16-slot
    # ring loses depends on scheduling).
    check(rc != 0, f"lint exited 0 on a trace with {dropped} records dropped")
    check(doc["trace"]["dropped_records"] >= dropped, f"dropped {doc['trace']['dropped_records']}, dump says {dropped}")
    dropped = doc["trace"]["dropped_records"]  # NVTX ranges included
    check(ex["collectives_lost"] == sum(lost.values()),
          f"collectives lost {ex['collectives_lost']}, the seq gaps show {lost}")
    for p in doc["per_rank"]:
        check(p["collectives_lost"] == lost.get(p["source"], 0), f"rank {p['rank']}: {p} vs {lost}")
    check(ex["steps_lost_all_ranks"] == sum(p["steps_lost"] for p in doc["per_rank"]), f"excluded {ex}")
    if dropped:
        check(f"dropped {dropped} records" in err, f"lint does not name the drops: {err}")
    if ex["collectives_lost"]:
        check(ex["steps_lost_all_ranks"] > 0, f"collectives lost, no step left out: {ex}")
        check("left out of the verdict" in err, f"lint does not say steps were left out: {err}")
        check(any("lost" in n for n in doc["notes"]), f"no note of the lost collectives: {doc['notes']}")
    if doc["verdict"] == "diagnosed":
        check(doc["steps_analyzed"] > 0, "diagnosed from no step")
        check("wrap-too-fine" in rules_at(doc, "error"), f"diagnosed, no wrap-too-fine: {rules_at(doc, 'error')}")
        check(doc["units"]["gathers_per_unit"] == 8, f"gathers per unit {doc['units']['gathers_per_unit']}")
        check(rc == 1, f"wrap-too-fine found, exit {rc}")
    else:
        check(rc == 3, f"not diagnosed, exit {rc}")
        check(doc["undecided"]["reason"] in ("incomplete", "no-step"), f"undecided: {doc['undecided']}")
        check(sum(p["steps_analyzed"] for p in doc["per_rank"]) == 0 or doc["undecided"]["reason"] != "incomplete",
              f"incomplete, yet steps were analysed: {doc['per_rank']}")
    print(f"drops: {dropped} records dropped, {ex['collectives_lost']} collectives lost, "
          f"{ex['steps_lost_all_ranks']} steps left out: {doc['verdict']}, exit {rc}")


def chunk_ends(data):
    """Byte offsets where each chunk of a trace ends (docs/format.md)."""
    ends, off = [], 64
    while off + 24 <= len(data):
        off += 24 + int.from_bytes(data[off + 4:off + 8], "little")
        ends.append(off)
    return ends


def check_cut_verdict(full, rc, doc, err, what):
    """The verdict of a cut trace: the whole trace's, or none; never 0."""
    check(rc != 0, f"{what}: lint exited 0")
    if doc["verdict"] == "undecided":
        check(rc == 3, f"{what}: not diagnosed, exit {rc}")
        return "undecided"
    check(doc["verdict"] == full["verdict"], f"{what}: verdict {doc['verdict']}")
    for key in ("reshard_after_forward",):
        check(doc[key] == full[key], f"{what}: {key} {doc[key]}, the whole trace's {full[key]}")
    check(doc["units"]["gathers_per_unit"] == full["units"]["gathers_per_unit"],
          f"{what}: gathers per unit {doc['units']['gathers_per_unit']}")
    check(doc["per_step"]["allgathers"] == full["per_step"]["allgathers"],
          f"{what}: {doc['per_step']['allgathers']} gathers per step")
    check("wrap-too-fine" in rules_at(doc, "error"), f"{what}: no wrap-too-fine")
    check(rc == 1, f"{what}: wrap-too-fine, exit {rc}")
    return "diagnosed"


def scenario_cut(args):
    skip_if_agent_cannot_load(args, [args.fsdp_ref, "--help"])
    work = fresh(os.path.join(args.work, "cut"))
    trace = run_fsdp_ref(args, os.path.join(work, "out"), 2, 4, 6)
    rc, full, _ = lint_json(args, trace)
    check(full["verdict"] == "diagnosed" and rc == 1, f"the whole trace: {full['verdict']}, exit {rc}")
    check(full["trace"]["sources_cut"] == 0, f"the whole trace has sources cut: {full['trace']}")
    data = open(trace, "rb").read()
    ends = chunk_ends(data)
    check(len(ends) >= 4, f"{len(ends)} chunks: not a multi-chunk trace")
    seen = {"diagnosed": 0, "undecided": 0}
    cut = os.path.join(work, "cut.fss")
    for at in sorted(set(ends[:-1] + [65600])):
        with open(cut, "wb") as f:
            f.write(data[:at])
        r = run([args.fsdpscope, "lint", cut], timeout=120)
        if r.returncode == 2 and "a trace with no records" in r.stderr:
            continue  # cut inside the first chunk: nothing to analyse, and lint says so
        rc, doc, err = lint_json(args, cut)
        seen[check_cut_verdict(full, rc, doc, err, f"cut at {at}")] += 1
        # every process's records stop early, or (a cut just before the
        # writer's trace_end) the file is not closed: lint says which
        check(doc["trace"]["truncated"], f"cut at {at}: not truncated: {doc['trace']}")
        if doc["trace"]["sources_cut"]:
            check("without a process_end" in err, f"cut at {at}: lint does not say the records stop: {err}")
        else:
            check("without its trace_end" in err, f"cut at {at}: lint does not say the file is not closed: {err}")
    check(seen["diagnosed"] > 0, f"no cut point left enough to diagnose: {seen}")

    # The .partial of a run killed with SIGKILL, job and all.
    out = os.path.join(work, "killed")
    os.makedirs(out)
    cmd = [args.fsdpscope, "run", "--out", out, "--", args.fsdp_ref, "--backend", "cpu",
           "--nranks", "2", "--layers", "4", "--wrap", "linear", "--steps", "100000", *SMALL_MODEL]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    partial = None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and partial is None:
            for folder, _, names in os.walk(out):  # in the run's private folder
                for name in names:
                    path = os.path.join(folder, name)
                    if name.endswith(".partial") and os.path.getsize(path) > 3 * 65536:
                        partial = path
            time.sleep(0.05)
    finally:
        # run's own group first, then the job's: the job lives in a group of its own (it must outlive a
        # killed observer), named in the run folder's run.info; a job left running would run its
        # 100000 steps on after the test.
        job = job_pgid_of(out)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        if job is None:
            job = job_pgid_of(out)
        if job:
            try:
                os.killpg(job, signal.SIGKILL)
            except ProcessLookupError:
                pass
    check(partial is not None, f"no .partial grew past {3 * 65536} bytes: {list(os.walk(out))}")
    check(job is not None, f"the killed run named no job group in its run.info: {list(os.walk(out))}")
    rc, doc, err = lint_json(args, partial)
    check_cut_verdict(full, rc, doc, err, "the .partial of a killed run")
    check(doc["trace"]["sources_cut"] == doc["trace"]["sources"] > 0,
          f"the killed run's processes are not all cut: {doc['trace']}")
    print(f"cut: {len(ends) - 1} chunk boundaries: {seen}; killed run: {doc['verdict']}, exit {rc}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--gen")
    ap.add_argument("--fsdp-ref")
    ap.add_argument("--job")
    ap.add_argument("--sanitized", action="store_true")
    args = ap.parse_args()
    # The agent run uses is the one under test, whatever the caller's environment says.
    os.environ["FSDPSCOPE_AGENT"] = args.agent
    for var in ("FSDPSCOPE_SINK", "FSDPSCOPE_OUT", "FSDPSCOPE_DISABLE", "FSDPSCOPE_DORMANT", "LD_PRELOAD",
                "NVTX_INJECTION64_PATH"):
        os.environ.pop(var, None)
    try:
        plain = {"exit": scenario_exit, "signal": scenario_signal, "fallback": scenario_fallback,
                 "descendants": scenario_descendants, "shared_dir": scenario_shared_dir,
                 "killed": scenario_killed, "security": scenario_security}
        needs_fsdp_ref = {"drops": scenario_drops, "cut": scenario_cut}
        if args.scenario in plain:
            plain[args.scenario](args)
        elif args.scenario in needs_fsdp_ref:
            if not args.fsdp_ref:
                print(f"SKIP: {args.scenario}: fsdp_ref is not built")
                return SKIP
            needs_fsdp_ref[args.scenario](args)
        elif args.scenario.startswith("fsdp_ref:"):
            scenario_fsdp_ref(args, args.scenario)
        else:
            raise Fail(f"unknown scenario {args.scenario}")
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
