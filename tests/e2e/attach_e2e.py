#!/usr/bin/env python3
"""End-to-end tests of `fsdpscope attach` (tests/e2e/attach.cmake).

usage: attach_e2e.py SCENARIO --fsdpscope F --fsdp-ref R --work DIR [--agent A] [--probe-job J]
                     [--real-nccl PATH] [--tmux T]

fsdp_ref (CPU backend, the NCCL stand-in) is started WITHOUT fsdpscope and
attached while it runs. Deterministically: its processes are stopped
(SIGSTOP), attach is started and says every process it placed probes on,
then they go on (SIGCONT); so every call from there on is recorded, and the
counts are compared with fsdp_ref's own log (its ground truth).

Scenarios:
  fsdp_3_linear, fsdp_4_block, fsdp_3_block, fsdp_4_linear
                N ranks, the wrap policy, 220 steps, attached after step 20
                (--sanitized: 40, after step 8):
                from the first step after the attach every step of every rank
                is in the attach trace: its AllGathers per step (report
                per_step, per rank) equal the log's, the steps analysed are
                the log's steps after the attach (less what the analysis takes
                as warm-up), the AllGather records of each rank are the log's
                AllGathers after the attach plus part of one step; the ranks
                come from in-place AllGathers (the sources say so); exposure
                is "not measured" and the wrap verdict (rule ids and
                severities of the wrap, reshard and size rules; units; the
                reshard policy) equals `fsdpscope run`'s on the same job
  detach        a job attached after step 10 and detached (SIGINT to attach)
                at step 60 of 400 (a margin a busy machine keeps: the job must
                outlive the detach): its exit code and every loss of its log
                equal those of the same job never attached; the trace holds
                the steps in between, its sources read "detached"
  detach_cut    4 ranks, per-Linear, attached while stopped and detached (SIGINT) while
                they run: the probes go one process after another, so without a cut
                the ranks let go last record calls the others were not seen to make;
                attach names the cut ("detached at collective #N of communicator X
                ..., the last every rank completed"), and in the trace every rank's
                last collective on it is call N (its first_call + its count - 1), so
                the ranks' counts end at the same call, and lint finds no desync
  in_flight     3 ranks, rank 0 held before step 3 (--hold-at: blocked opening a FIFO),
                the others blocked inside their first collective of step 3 (futex):
                attached there, then let go: attach says "2 calls were in flight at
                attach", 1 of rank 1 and 1 of rank 2 (entered before the probes: seen
                neither at entry nor at return), none of rank 0; the trace's first
                calls on the communicator agree (ranks 1 and 2 begin one call later),
                and lint says the same from the trace (a line and a note), and the
                report's Processes table counts them missing ("1*", with a footnote)
  launcher      attach to a launcher (a shell whose child waits on a FIFO)
                before fsdp_ref starts (20 steps; --sanitized: 6): attach waits for its ranks; fsdp_ref
                --hold-at 0:FIFO starts, attach picks up its processes at its
                next look at /proc, the job is let go once all are attached:
                every step is counted as the log counts it (less, on the ranks
                rank 0 held, the AllGather they may have been inside already:
                entered before the probes, so not recorded)
  twice         two attaches on one stopped job at once: both traces count the
                same collectives per rank as the log
  all           --all on a stopped job (40 steps; --sanitized: 16; stopped after step 2)
                (and whatever else maps libnccl here):
                the job's ranks are attached and counted as their log counts;
                --all outlives the job and ends on SIGTERM
  env_rank      two ranks exec'd as torchrun does (RANK in their environment),
                FSDP1 (no in-place gathers), attached by their pids: each
                rank is its RANK, from the environment, and says so
  killed        a rank SIGKILLed while attached: its source ends "signaled" (9),
                from the kernel's exit tracepoint; the others, which then fail,
                end "exited"
  duration      --duration 2 on a running job: attach detaches by itself, the
                job goes on, its sources read "detached"
  no_nccl       a process that maps no libnccl (sleep), and one whose only descendant
                never loads it (sh -c 'sleep; true', attached with --duration 2, attach
                waits for its ranks): exit 2, "pid N (CMD) maps no libnccl (checked
                /proc/N/maps)", no trace written, no word of LD_PRELOAD
  errors        exit 2 and the message for: no such pid, a thread id, a
                process without libnccl (names what is mapped and
                'fsdpscope run'), no PID, --all with a PID, a bad --duration,
                not root (as nobody: says CAP_BPF / CAP_PERFMON), a kernel
                without BTF or without uprobes (hidden in a mount namespace)
  real_nccl     the probe job linked with the toolkit's real libnccl.so.2 (no
                GPU: its calls fail) attached while stopped: the trace has its
                calls with their results (path uprobe), resolved on the real
                library's symbols
  top           `fsdpscope attach --top PID` in a tmux pane: the dashboard shows
                the job's ranks and "n/a" for exposure; q detaches, the trace is
                written and the job runs on to its end

No timing is asserted: every wait is for a condition, with a generous limit.
Exit status: 0 pass, 1 fail (with the reason), 77 skip (with the reason).
"""
import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support as support  # noqa: E402

SKIP = 77
WAIT_S = 300
Fail, check, fresh, run = support.Fail, support.check, support.fresh, support.run
read_text, wait_for = support.read_text, support.wait_for

# A small model: the collectives' pattern (units, gathers, sizes' ratios) is the same at any
# width, and the sanitized build's ranks are slow.
MODEL = ["--d-model", "32", "--ffn", "64", "--seq", "16"]
# The steps of a job attached while it runs: --sanitized (a build with ASan) runs fewer.
STEPS = {"fsdp": (220, 20), "detach": (400, 10, 60), "detach_cut": (100000, 3, 40), "launcher": 20, "all": 40}
# launcher and all count per rank against the log, which holds as well over a few steps
STEPS_SANITIZED = {"fsdp": (40, 8), "detach": (40, 5, 20), "detach_cut": (100000, 2, 10), "launcher": 6,
                   "all": 16}

# The wrap rules' and the structure's figures: what attach must agree on with run.
# Their decisions rest on counts, sizes and order. small-collectives is not
# among them: under its size threshold it reads the latency and bandwidth fitted
# on the gathers' durations, which two runs on a loaded machine measure apart.
VERDICT_RULES = ("wrap-too-fine", "wrap-too-coarse", "reshard-policy")


class Skip(Exception):
    pass


# ------------------------------------------------------------------ the job

def log_steps(path):
    """rank -> [step line, ...] of fsdp_ref's --log, in step order."""
    out = {}
    for line in read_text(path).splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        if "step" in d and "loss" in d:
            out.setdefault(d["rank"], []).append(d)
    for r in out:
        out[r].sort(key=lambda d: d["step"])
    return out


def children(pid):
    """Every process below pid, by /proc."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
                parent[int(d)] = int(s[s.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    out, level = [], [pid]
    while level:
        level = [p for p, pp in parent.items() if pp in level]
        out += level
    return sorted(out)


class Job:
    """fsdp_ref, started without fsdpscope."""

    def __init__(self, args, work, nranks, wrap, steps, extra=(), name="job", env=None):
        self.log = os.path.join(work, f"{name}.jsonl")
        self.err = open(os.path.join(work, f"{name}.stderr"), "w")
        self.nranks = nranks
        cmd = [args.fsdp_ref, "--nranks", str(nranks), "--wrap", wrap, "--steps", str(steps),
               "--batch", str(2 * nranks), "--log", self.log, "--quiet", *MODEL, *extra]
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.err, cwd=work,
                                  env=dict(os.environ, **(env or {})))

    def pids(self):
        return [self.p.pid] + children(self.p.pid)

    def wait_ranks(self):
        return wait_for(lambda: len(self.pids()) == self.nranks + 1 and self.pids(), "the job's ranks", WAIT_S)

    def wait_step(self, step):
        """Every rank has logged step `step`."""
        wait_for(lambda: all(len(v) > step for v in log_steps(self.log).values()) and
                 len(log_steps(self.log)) == self.nranks, f"step {step} in the log", WAIT_S)

    def signal_all(self, sig):
        for pid in self.pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def stop(self):
        """Stopped: every process, and then none of them runs (state T)."""
        pids = self.pids()
        self.signal_all(signal.SIGSTOP)

        def stopped():
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        s = f.read()
                except OSError:
                    continue
                if s[s.rindex(")") + 2] not in "Tt":
                    return False
            return True
        wait_for(stopped, "the job's processes stopped", WAIT_S)
        return pids

    def wait(self):
        rc = self.p.wait(timeout=WAIT_S * 2)
        self.err.close()
        return rc

    def kill(self):
        if self.p.poll() is None:
            self.signal_all(signal.SIGCONT)
            self.signal_all(signal.SIGKILL)
            self.p.wait()


class Attach:
    def __init__(self, args, out, targets, extra=(), name="attach"):
        os.makedirs(out, exist_ok=True)
        self.err_path = os.path.join(out, f"{name}.stderr")
        self.err = open(self.err_path, "w")
        self.out = out
        self.name = name
        cmd = [args.fsdpscope, "attach", "--out", out, "--name", name, *extra, *[str(t) for t in targets]]
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.err)

    def text(self):
        return read_text(self.err_path)

    def wait_attached(self, pids):
        def all_there():
            t = self.text()
            if self.p.poll() is not None:
                raise Fail(f"attach exited {self.p.returncode} before attaching: {t}")
            return all(f"attached pid {p} " in t for p in pids)
        wait_for(all_there, f"attach to say it attached {pids}", WAIT_S)

    def wait(self):
        rc = self.p.wait(timeout=WAIT_S * 2)
        self.err.close()
        support.sanitizer_clean(self.text(), "fsdpscope attach")
        return rc

    def trace(self):
        return os.path.join(self.out, f"{self.name}.fss")

    def kill(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()


def lint_json(args, trace):
    r = run([args.fsdpscope, "lint", "--json", trace])
    check(r.returncode in (0, 1, 4), f"lint {trace} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def dump_collectives(args, trace):
    """pid -> [collective record, ...] of the trace."""
    r = run([args.fsdpscope, "dump", "--type", "collective,process_hello", trace])
    check(r.returncode == 0, f"dump {trace} exited {r.returncode}: {r.stderr}")
    pid_of, out = {}, {}
    for line in r.stdout.splitlines():
        d = json.loads(line)
        if d.get("type") == "process_hello":
            pid_of[d["source"]] = d["pid"]
        elif d.get("type") == "collective":
            out.setdefault(pid_of.get(d["source"]), []).append(d)
    return out


def verdict(doc):
    """What attach and run must agree on."""
    findings = sorted((f["rule"], f["severity"]) for f in doc["findings"] if f["rule"] in VERDICT_RULES)
    errors = sorted(f["rule"] for f in doc["findings"] if f["severity"] == "error")
    u = doc["units"] or {}
    rs = doc["reshard"] or {}
    return {
        "verdict": doc["verdict"],
        "findings": findings,
        "errors": errors,
        "units": {k: u.get(k) for k in ("repeating_units", "gathers_per_unit", "root_gathers", "shard_ranks")},
        "reshard_after_forward": doc["reshard_after_forward"],
        "reshard": {k: rs.get(k) for k in ("units", "resharded_units", "retained_units")},
        "per_step": {k: doc["per_step"][k] for k in ("allgathers", "reduce_scatters", "allreduces")},
    }


# ------------------------------------------------------------------ scenarios

def scenario_fsdp(args, work, nranks, wrap):
    steps, at = (STEPS_SANITIZED if args.sanitized else STEPS)["fsdp"]
    job = Job(args, work, nranks, wrap, steps)
    att = None
    try:
        job.wait_ranks()
        job.wait_step(at)
        pids = job.stop()
        logged = {r: len(v) for r, v in log_steps(job.log).items()}  # steps done before the attach
        att = Attach(args, os.path.join(work, "out"), [job.p.pid])
        att.wait_attached(pids)
        job.signal_all(signal.SIGCONT)
        rc = job.wait()
        check(rc == 0, f"the job exited {rc}: {read_text(job.err.name)}")
        arc = att.wait()
        check(arc == 0, f"attach exited {arc}: {att.text()}")
        check("every process watched has ended" in att.text(), f"attach did not end with the job: {att.text()}")
    finally:
        job.kill()
        if att:
            att.kill()
    log = log_steps(job.log)
    doc = lint_json(args, att.trace())
    check(doc["verdict"] == "diagnosed", f"attach trace not diagnosed: {doc['verdict']} {doc.get('undecided')}")
    check(doc["ranks"] == nranks, f"ranks {doc['ranks']}, want {nranks}")
    # ranks from in-place AllGathers, each rank's pid the log's process
    by_rank = {s["rank"]: s for s in doc["sources"]}
    check(sorted(by_rank) == list(range(nranks)), f"source ranks {sorted(by_rank)}")
    for s in doc["sources"]:
        check(s.get("rank_from") == "inferred:in-place-allgather", f"rank {s['rank']} from {s.get('rank_from')}, want in-place")
    check(doc["exposure"]["source"] == "none", f"exposure source {doc['exposure']['source']} in attach mode")
    # AllGathers per step: the log's (every step of fsdp_ref issues the same)
    want_ag = {r: {d["allgathers"] for d in v[logged[r]:]} for r, v in log.items()}
    for r in range(nranks):
        check(len(want_ag[r]) == 1, f"rank {r}: the log's AllGathers per step vary: {want_ag[r]}")
    pr = {p["rank"]: p for p in doc["per_rank"]}
    for r in range(nranks):
        got = pr[r]["per_step"]["allgathers"]
        check(got == next(iter(want_ag[r])), f"rank {r}: {got} AllGathers per step, the log says {want_ag[r]}")
        after = len(log[r]) - logged[r]  # steps that began after the attach, the one in progress included
        seen = pr[r]["steps_analyzed"] + doc["warmup_steps"]
        check(after - 2 <= seen <= after, f"rank {r}: {seen} steps seen, the log has {after} after the attach")
    # AllGather records per rank: the log's after the attach, plus part of the step in progress
    coll = dump_collectives(args, att.trace())
    for r in range(nranks):
        pid = by_rank[r]["pid"]
        n = sum(1 for c in coll.get(pid, []) if c["op"] == "AllGather")
        full = sum(d["allgathers"] for d in log[r][logged[r] + 1:])
        part = log[r][logged[r]]["allgathers"]
        check(full <= n <= full + part, f"rank {r}: {n} AllGather records, the log has {full} (+ up to {part})")
    # the same verdict as run's on the same job
    out_run = os.path.join(work, "run")
    r = run([args.fsdpscope, "run", "--out", out_run, "--", args.fsdp_ref, "--nranks", str(nranks), "--wrap", wrap,
             "--steps", "30", "--batch", str(2 * nranks), "--quiet", *MODEL])
    check(r.returncode == 0, f"fsdpscope run exited {r.returncode}: {r.stderr}")
    want, got = verdict(lint_json(args, os.path.join(out_run, "trace.fss"))), verdict(doc)
    check(got == want, f"attach's verdict {got} differs from run's {want}")
    print(f"fsdp {nranks} {wrap}: {got}")


@contextlib.contextmanager
def detached_mid_run(args, work, job, at, until):
    """job attached while its ranks are stopped at step `at`, detached with
    SIGINT at step `until` while it runs on: (the attach, the ranks' pids).
    The job and attach are killed when the block ends."""
    att = None
    try:
        job.wait_ranks()
        job.wait_step(at)
        pids = job.stop()
        att = Attach(args, os.path.join(work, "out"), [job.p.pid])
        att.wait_attached(pids)
        job.signal_all(signal.SIGCONT)
        job.wait_step(until)
        att.p.send_signal(signal.SIGINT)
        arc = att.wait()
        check(arc == 0, f"attach exited {arc}: {att.text()}")
        check(job.p.poll() is None, "the job ended before the detach: the test detached nothing mid-run")
        yield att, pids
    finally:
        job.kill()
        if att:
            att.kill()


def scenario_detach(args, work):
    steps, at, until = (STEPS_SANITIZED if args.sanitized else STEPS)["detach"]
    ref = Job(args, work, 3, "block", steps, name="ref")
    rc_ref = ref.wait()
    job = Job(args, work, 3, "block", steps)
    with detached_mid_run(args, work, job, at, until) as (att, _):
        check("every probe removed" in att.text(), f"attach did not say it detached: {att.text()}")
        rc = job.wait()
    check(rc == rc_ref == 0, f"exit codes: attached job {rc}, never attached {rc_ref}")
    a, b = log_steps(job.log), log_steps(ref.log)
    for r in b:
        la = [(d["step"], d["loss"]) for d in a.get(r, [])]
        lb = [(d["step"], d["loss"]) for d in b[r]]
        check(la == lb, f"rank {r}: losses differ from the run never attached")
    doc = lint_json(args, att.trace())
    check(doc["ranks"] == 3, f"the detached trace has {doc['ranks']} ranks")
    for s in doc["sources"]:
        check(s["end"] == "detached", f"rank {s['rank']} ends '{s['end']}', want 'detached'")
    print(f"detach: losses equal over {len(b[0])} steps, exit code {rc}")


def comm_calls(args, trace):
    """pid -> {id_hash: (first call number, [collective, ...])} of the trace."""
    r = run([args.fsdpscope, "dump", "--type", "collective,comm,process_hello", trace])
    check(r.returncode == 0, f"dump {trace} exited {r.returncode}: {r.stderr}")
    pid_of, ids, out = {}, {}, {}
    for line in r.stdout.splitlines():
        d = json.loads(line)
        pid = pid_of.get(d["source"])
        if d.get("type") == "process_hello":
            pid_of[d["source"]] = d["pid"]
        elif d.get("type") == "comm" and (pid, d["comm"]) not in ids:
            ids[(pid, d["comm"])] = d["id_hash"]
            out.setdefault(pid, {})[d["id_hash"]] = (int(d.get("first_call") or 1), [])
        elif d.get("type") == "collective" and (pid, d["comm"]) in ids:
            out[pid][ids[(pid, d["comm"])]][1].append(d)
    return out


def scenario_detach_cut(args, work):
    steps, at, until = (STEPS_SANITIZED if args.sanitized else STEPS)["detach_cut"]
    job = Job(args, work, 4, "linear", steps)
    with detached_mid_run(args, work, job, at, until) as (att, pids):
        pass
    said = re.findall(r"detached at collective #(\d+) of communicator ([0-9a-f]+) \((\d+) processes\), "
                      r"the last every rank completed: (.*)", att.text())
    check(said, f"attach did not name the cut: {att.text()}")
    cuts = {"0x" + h.lstrip("0"): int(n) for n, h, _, _ in said}
    calls = comm_calls(args, att.trace())
    ranks = [p for p in pids if p in calls]
    check(len(ranks) == 4, f"{len(ranks)} of the 4 ranks in the trace: {sorted(calls)}")
    for h, n in cuts.items():
        last = {}
        for pid in ranks:
            check(h in calls[pid], f"pid {pid} has no communicator {h}: {sorted(calls[pid])}")
            first, cs = calls[pid][h]
            last[pid] = first + len(cs) - 1
        check(set(last.values()) == {n}, f"communicator {h}: the ranks' last calls {last}, attach said #{n}")
    # the job has no desync: the ranks' calls up to the cut are the same calls
    doc = lint_json(args, att.trace())
    wrong = [f["rule"] for f in doc["findings"] if f["rule"] in ("collective-mismatch", "collective-hang")]
    check(not wrong, f"the cut trace reads {wrong}: {att.text()}")
    print(f"detach_cut: {said}")


def blocked_in(pid, syscall):
    """The main thread of pid is blocked in that system call (/proc/PID/syscall)."""
    try:
        return read_text(f"/proc/{pid}/syscall").split()[0] == str(syscall)
    except (OSError, IndexError):
        return False


def scenario_in_flight(args, work):
    hold = os.path.join(work, "hold")
    if os.path.exists(hold):
        os.unlink(hold)
    os.mkfifo(hold)
    job = Job(args, work, 3, "block", 6, extra=["--hold-at", f"3:{hold}"])
    att = None
    try:
        job.wait_ranks()
        ranks = job.pids()[1:]
        # rank 0 (the first child) opens the FIFO (openat: 257); the others wait in their collective (futex: 202)
        wait_for(lambda: blocked_in(ranks[0], 257) and all(blocked_in(p, 202) for p in ranks[1:]),
                 "rank 0 held, the others blocked in their collective", WAIT_S)
        att = Attach(args, os.path.join(work, "out"), [job.p.pid])
        att.wait_attached(job.pids())
        with open(hold, "w") as f:
            f.write("x")
        check(job.wait() == 0, "the job failed")
        check(att.wait() == 0, f"attach failed: {att.text()}")
    finally:
        job.kill()
        if att:
            att.kill()
    m = re.search(r"(\d+) calls? (?:was|were) in flight at attach \(entered before the probes.*not in the trace: (.*)",
                  att.text())
    check(m, f"attach did not say the calls in flight: {att.text()}")
    per = dict((int(r), int(n)) for n, r in re.findall(r"(\d+) of rank (\d+)", m.group(2)))
    check(int(m.group(1)) == 2 and per == {1: 1, 2: 1}, f"in flight: {m.group(0)}, want 1 of rank 1 and 1 of rank 2")
    # the trace: ranks 1 and 2 begin one call later on the communicator than rank 0
    doc = lint_json(args, att.trace())
    rank_of = {s["pid"]: s["rank"] for s in doc["sources"]}
    firsts = {rank_of[pid]: min(f for f, _ in comms.values()) for pid, comms in comm_calls(args, att.trace()).items()
              if pid in rank_of}
    check(firsts[1] == firsts[2] == firsts[0] + 1, f"first calls seen per rank: {firsts}")
    # lint reads it from the trace (the comm records' first calls), and says it too
    r = run([args.fsdpscope, "lint", att.trace()])
    check("2 calls were in flight at attach on 2 ranks" in r.stderr, f"lint did not say the calls in flight: {r.stderr}")
    check(any("in flight at attach" in n for n in doc["notes"]), f"no note of the calls in flight: {doc['notes']}")
    # the report's Processes table counts them missing (marked), not "missing 0" beside a lower count
    r = run([args.fsdpscope, "report", att.trace()])
    rows = {int(w[0]): w[6] for w in (ln.split() for ln in r.stdout.split("\nProcesses")[1].splitlines()[2:5])}
    check(rows == {0: "0", 1: "1*", 2: "1*"}, f"the Processes table's missing column: {rows}: {r.stdout}")
    print(f"in_flight: {m.group(0)}")


def scenario_launcher(args, work):
    steps = (STEPS_SANITIZED if args.sanitized else STEPS)["launcher"]
    go, hold = os.path.join(work, "go"), os.path.join(work, "hold")
    for f in (go, hold):
        if os.path.exists(f):
            os.unlink(f)
        os.mkfifo(f)
    log = os.path.join(work, "job.jsonl")
    script = (f"cat {shlex.quote(go)} >/dev/null; exec {shlex.quote(args.fsdp_ref)} --nranks 3 --wrap block "
              f"--steps {steps} --batch 6 --quiet {shlex.join(MODEL)} --log {shlex.quote(log)} "
              f"--hold-at 0:{shlex.quote(hold)}")
    launcher = subprocess.Popen(["sh", "-c", script])
    att = None
    try:
        wait_for(lambda: children(launcher.pid), "the launcher's child", WAIT_S)
        att = Attach(args, os.path.join(work, "out"), [launcher.pid])
        wait_for(lambda: "waiting for its ranks" in att.text() or att.p.poll() is not None, "attach to wait", WAIT_S)
        check(att.p.poll() is None, f"attach ended: {att.text()}")
        with open(go, "w") as f:
            f.write("x")
        # fsdp_ref (the launcher's exec) and its 3 ranks, picked up at a later look
        wait_for(lambda: len([launcher.pid] + children(launcher.pid)) == 4, "the ranks", WAIT_S)
        att.wait_attached([launcher.pid] + children(launcher.pid))
        with open(hold, "w") as f:
            f.write("x")
        check(launcher.wait(timeout=WAIT_S) == 0, "the job failed")
        check(att.wait() == 0, f"attach failed: {att.text()}")
    finally:
        if launcher.poll() is None:
            launcher.kill()
        if att:
            att.kill()
    doc = lint_json(args, att.trace())
    logs = log_steps(log)
    check(doc["ranks"] == 3, f"{doc['ranks']} ranks in the launcher's trace")
    coll = dump_collectives(args, att.trace())
    by_rank = {s["rank"]: s["pid"] for s in doc["sources"]}
    for r in range(3):
        n = sum(1 for c in coll.get(by_rank[r], []) if c["op"] == "AllGather")
        want = sum(d["allgathers"] for d in logs[r])
        # rank 0 held before step 0; the others may have been inside its first
        # AllGather when the probes came (entered before them: not recorded)
        low = want if r == 0 else want - 1
        check(low <= n <= want, f"rank {r}: {n} AllGathers, the log has {want}")
    print(f"launcher: 3 ranks picked up after the attach, {doc['steps_analyzed']} steps analysed")


def scenario_twice(args, work):
    job = Job(args, work, 3, "block", 30)
    a1 = a2 = None
    try:
        job.wait_ranks()
        job.wait_step(5)
        pids = job.stop()
        a1 = Attach(args, os.path.join(work, "out"), [job.p.pid], name="one")
        a2 = Attach(args, os.path.join(work, "out"), [job.p.pid], name="two")
        a1.wait_attached(pids)
        a2.wait_attached(pids)
        job.signal_all(signal.SIGCONT)
        check(job.wait() == 0, "the job failed")
        check(a1.wait() == 0 and a2.wait() == 0, f"an attach failed: {a1.text()} {a2.text()}")
    finally:
        job.kill()
        for a in (a1, a2):
            if a:
                a.kill()
    c1, c2 = dump_collectives(args, a1.trace()), dump_collectives(args, a2.trace())
    check(sorted(c1) == sorted(c2) and len(c1) == 3, f"sources differ: {sorted(c1)} {sorted(c2)}")
    for pid in c1:
        check(len(c1[pid]) == len(c2[pid]), f"pid {pid}: {len(c1[pid])} and {len(c2[pid])} collectives")
    print(f"twice: both traces {[len(c1[p]) for p in sorted(c1)]} collectives per rank")


def scenario_all(args, work):
    job = Job(args, work, 3, "block", (STEPS_SANITIZED if args.sanitized else STEPS)["all"])
    att = None
    try:
        job.wait_ranks()
        job.wait_step(2)
        pids = job.stop()
        logged = {r: len(v) for r, v in log_steps(job.log).items()}
        att = Attach(args, os.path.join(work, "out"), [], extra=["--all"])
        att.wait_attached(pids)
        job.signal_all(signal.SIGCONT)
        check(job.wait() == 0, "the job failed")
        # --all never runs out of processes to watch: it ends on a signal
        check(att.p.poll() is None, f"attach --all ended with the job: {att.text()}")
        att.p.send_signal(signal.SIGTERM)
        check(att.wait() == 0, f"attach --all failed: {att.text()}")
    finally:
        job.kill()
        if att:
            att.kill()
    doc = lint_json(args, att.trace())
    coll = dump_collectives(args, att.trace())
    log = log_steps(job.log)
    mine = [s for s in doc["sources"] if s["pid"] in pids]
    check(len(mine) == 3, f"{len(mine)} of the job's ranks in the --all trace")
    for s in mine:
        r = s["rank"]
        n = sum(1 for c in coll.get(s["pid"], []) if c["op"] == "AllGather")
        full = sum(d["allgathers"] for d in log[r][logged[r] + 1:])
        part = log[r][logged[r]]["allgathers"]
        check(full <= n <= full + part, f"rank {r}: {n} AllGather records, the log has {full} (+ up to {part})")
    print(f"all: the job's 3 ranks among {len(doc['sources'])} sources")


def scenario_env_rank(args, work):
    """Ranks a launcher exec'd with RANK in their environment (torchrun's way), FSDP1 (no
    in-place gathers): the rank comes from the environment, and says so."""
    n, uid = 2, os.path.join(work, "uid")
    log = os.path.join(work, "job.jsonl")
    procs, att = [], None
    try:
        for r in range(n):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r))
            procs.append(subprocess.Popen([args.fsdp_ref, "--unique-id-file", uid, "--style", "fsdp1", "--wrap", "block",
                                           "--steps", "30", "--batch", str(2 * n), "--quiet", "--log", log, *MODEL],
                                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: len(log_steps(log)) == n and all(len(v) > 2 for v in log_steps(log).values()),
                 "both ranks past step 2", WAIT_S)
        for p in procs:
            os.kill(p.pid, signal.SIGSTOP)
        att = Attach(args, os.path.join(work, "out"), [p.pid for p in procs])
        att.wait_attached([p.pid for p in procs])
        for p in procs:
            os.kill(p.pid, signal.SIGCONT)
        for p in procs:
            check(p.wait(timeout=WAIT_S) == 0, "a rank failed")
        check(att.wait() == 0, f"attach failed: {att.text()}")
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
        if att:
            att.kill()
    doc = lint_json(args, att.trace())
    want = {p.pid: r for r, p in enumerate(procs)}
    for s in doc["sources"]:
        check(s["rank_from"] == "inferred:environment", f"pid {s['pid']}: rank from {s['rank_from']}")
        check(s["rank"] == want[s["pid"]], f"pid {s['pid']}: rank {s['rank']}, its RANK is {want[s['pid']]}")
    check(doc["verdict"] == "diagnosed", f"verdict {doc['verdict']}")
    print(f"env_rank: ranks {sorted(s['rank'] for s in doc['sources'])} from RANK")


def scenario_duration(args, work):
    job = Job(args, work, 2, "block", 100000)
    att = None
    try:
        job.wait_ranks()
        job.wait_step(2)
        att = Attach(args, os.path.join(work, "out"), [job.p.pid], extra=["--duration", "2"])
        check(att.wait() == 0, f"attach failed: {att.text()}")
        check("--duration 2 s reached" in att.text() and "every probe removed" in att.text(),
              f"attach did not detach at --duration: {att.text()}")
        check(job.p.poll() is None, "the job ended before the detach")
        job.wait_step(len(log_steps(job.log)[0]) + 2)  # it goes on after the detach
    finally:
        job.kill()
        if att:
            att.kill()
    doc = lint_json(args, att.trace())
    check(doc["ranks"] == 2, f"{doc['ranks']} ranks in the trace")
    check(all(s["end"] == "detached" for s in doc["sources"]), "a source not detached")
    print("duration: detached by itself, the job went on")


def scenario_killed(args, work):
    """A rank SIGKILLed while attached: the kernel's word on its end is in the trace."""
    # the others fail their next collective soon after (the stand-in's dead-peer timeout)
    job = Job(args, work, 3, "block", 100000, env={"FSDP_REF_NCCL_TIMEOUT_S": "2"})
    att = None
    try:
        job.wait_ranks()
        job.wait_step(2)
        pids = job.stop()
        att = Attach(args, os.path.join(work, "out"), [job.p.pid])
        att.wait_attached(pids)
        job.signal_all(signal.SIGCONT)
        job.wait_step(len(log_steps(job.log)[0]) + 3)
        victim = pids[-1]
        os.kill(victim, signal.SIGKILL)
        rc = job.wait()
        check(rc != 0, "the job went on without a rank")
        check(att.wait() == 0, f"attach failed: {att.text()}")
    finally:
        job.kill()
        if att:
            att.kill()
    doc = lint_json(args, att.trace())
    ends = {s["pid"]: s for s in doc["sources"]}
    check(victim in ends, f"the killed rank {victim} is not a source")
    check(ends[victim]["end"] == "signaled" and ends[victim]["signal"] in (9, "KILL", "SIGKILL"),
          f"the killed rank ends '{ends[victim]['end']}' signal {ends[victim]['signal']}")
    for pid, src in ends.items():
        if pid != victim:
            check(src["end"] in ("exited", "signaled"), f"rank {src['rank']} (pid {pid}) ends '{src['end']}'")
    print(f"killed: rank of pid {victim} signaled by SIGKILL, the others {sorted(s['end'] for s in ends.values())}")


def scenario_errors(args, work):
    def expect(argv, words, what, user=None, hide=None):
        cmd = [args.fsdpscope, "attach", "--out", os.path.join(work, "out"), *argv]
        if user:
            cmd = ["setpriv", "--reuid", user, "--regid", user, "--clear-groups", *cmd]
        if hide:
            # a kernel without it, as attach sees one: the folder hidden under an empty
            # tmpfs in a mount namespace of its own
            cmd = ["unshare", "--mount", "sh", "-c", f"mount -t tmpfs none {hide} && exec {shlex.join(cmd)}"]
        r = run(cmd)
        check(r.returncode == 2, f"{what}: exit {r.returncode}, want 2: {r.stderr}")
        for w in words:
            check(w in r.stderr, f"{what}: '{w}' not in: {r.stderr}")
        check(not os.path.exists(os.path.join(work, "out", "attach.fss")), f"{what}: a trace was written")

    # a pid that cannot exist (above pid_max)
    expect(["99999999"], ["99999999", "no such process"], "no such pid")
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        expect([str(sleeper.pid)], ["maps no libnccl", "libc.so.6", "fsdpscope run"], "no libnccl")
    finally:
        sleeper.kill()
        sleeper.wait()
    # a thread id of a process: fsdp_ref's ranks run a comm thread
    job = Job(args, work, 2, "block", 400)
    try:
        job.wait_ranks()
        rank = job.pids()[1]
        tids = [int(t) for t in os.listdir(f"/proc/{rank}/task") if int(t) != rank]
        check(tids, "no second thread in a rank")
        expect([str(tids[0])], ["is a thread of process", str(rank)], "a thread id")
    finally:
        job.kill()
    expect([], ["no PID"], "no PID")
    expect(["--all", "1"], ["--all"], "--all with a PID")
    expect(["--duration", "soon", "1"], ["--duration"], "a bad duration")
    expect(["1"], ["CAP_BPF", "CAP_PERFMON"], "not root", user="65534")
    expect(["1"], ["no BTF", "fsdpscope run"], "a kernel without BTF", hide="/sys/kernel/btf")
    expect(["1"], ["no uprobes", "fsdpscope run"], "a kernel without uprobes", hide="/sys/bus/event_source/devices")
    print("errors: each exits 2 with its message")


def scenario_no_nccl(args, work):
    out = os.path.join(work, "out")
    cases = [(["sleep", "30"], [], "sleep"), (["sh", "-c", "sleep 30; true"], ["--duration", "2"], "sh")]
    for cmd, extra, name in cases:
        p = subprocess.Popen(cmd)
        try:
            if name == "sh":
                wait_for(lambda: children(p.pid), "the shell's child", WAIT_S)
            else:
                # exec'd: its maps are sleep's
                wait_for(lambda: "sleep" in read_text(f"/proc/{p.pid}/maps"), "sleep to be exec'd", WAIT_S)
            r = run([args.fsdpscope, "attach", "--out", out, *extra, str(p.pid)])
        finally:
            for c in children(p.pid):  # the shell's sleep holds the test's output open
                os.kill(c, signal.SIGKILL)
            p.kill()
            p.wait()
        want = f"pid {p.pid} ({name}) maps no libnccl (checked /proc/{p.pid}/maps)"
        check(r.returncode == 2, f"{name}: exit {r.returncode}, want 2: {r.stderr}")
        check(want in r.stderr, f"{name}: '{want}' not in: {r.stderr}")
        check("LD_PRELOAD" not in r.stderr, f"{name}: LD_PRELOAD blamed: {r.stderr}")
        check(not os.path.exists(os.path.join(out, "attach.fss")), f"{name}: a trace was written: {r.stderr}")
    print("no_nccl: exit 2, said, no trace")


def scenario_real_nccl(args, work):
    if not args.probe_job or not os.path.exists(args.probe_job):
        raise Skip("the probe job (a program calling the real libnccl.so.2) is not built")
    if not os.path.exists(args.real_nccl):
        raise Skip(f"no real libnccl at {args.real_nccl}")
    p = subprocess.Popen([args.probe_job, args.real_nccl], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    att = None
    try:
        def stopped():
            with open(f"/proc/{p.pid}/stat") as f:
                s = f.read()
            return s[s.rindex(")") + 2] in "Tt"
        wait_for(stopped, "the probe job to stop itself", WAIT_S)
        maps = read_text(f"/proc/{p.pid}/maps")
        check(args.real_nccl in maps or os.path.realpath(args.real_nccl) in maps,
              f"the probe job does not map {args.real_nccl}")
        att = Attach(args, os.path.join(work, "out"), [p.pid])
        att.wait_attached([p.pid])
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=WAIT_S)
        check(p.returncode == 0, f"the probe job exited {p.returncode}: {err}")
        check(att.wait() == 0, f"attach failed: {att.text()}")
    finally:
        if p.poll() is None:
            p.kill()
        if att:
            att.kill()
    coll = dump_collectives(args, att.trace()).get(p.pid, [])
    # the job prints one line per call: "call OP result R"
    calls = [ln.split() for ln in out.splitlines() if ln.startswith("call ")]
    check(calls, f"the probe job said no call: {out}")
    got = [(c["op"], c["result"]) for c in coll]
    want = [(w[1], int(w[3])) for w in calls]
    check(got == want, f"attach saw {got}, the job made {want}")
    check(all(c["path"] == "uprobe" for c in coll), "a collective not from the uprobe path")
    print(f"real_nccl: {len(got)} calls on the real libnccl seen with their results")


def scenario_top(args, work):
    if not args.tmux:
        raise Skip("tmux is not installed")
    import top_e2e  # the tmux pane of the dashboard tests
    job = Job(args, work, 3, "linear", 100000)
    pane = None
    try:
        job.wait_ranks()
        job.wait_step(3)
        out = os.path.join(work, "out")
        targs = argparse.Namespace(tmux=args.tmux, fsdpscope=args.fsdpscope, agent=args.agent or "")
        pane = top_e2e.Pane(targs, work, ["--out", out, "--top", str(job.p.pid)], cols=120, rows=40,
                            command="attach")
        ranks = job.pids()[1:]

        def shown():
            """The header's mode, steps seen, and per rank (by its pid) AllGathers per
            step equal to the log's, exposure n/a."""
            scr = pane.screen()
            m = re.search(r"steps (\d+)", scr)
            if " attach " not in scr or not m or int(m.group(1)) < 2:
                return None
            want = log_steps(job.log)[0][-1]["allgathers"]
            for pid in ranks:
                row = [ln.replace("\u25b6", " ").split() for ln in scr.splitlines() if f" {pid} " in ln]
                # AG/st reads "this step/the analysis' steady figure"
                if not row or len(row[0]) < 7 or row[0][4].split("/")[0] != str(want) or row[0][5] != "n/a":
                    return None
            return scr
        screen = wait_for(shown, "the dashboard: 3 ranks with the log's AllGathers per step, exposure n/a",
                          WAIT_S)
        pane.keys("q")
        wait_for(lambda: os.path.exists(pane.rc_file), "attach --top to end after q", WAIT_S)
        rc = int(read_text(pane.rc_file).strip())
        check(rc == 0, f"attach --top exited {rc}: {read_text(pane.err)}")
        check(os.path.exists(os.path.join(out, "attach.fss")), "no trace after q")
        check(job.p.poll() is None, "the job ended with the dashboard")
        check("every probe removed" in read_text(pane.err), f"no detach line: {read_text(pane.err)}")
        job.signal_all(signal.SIGTERM)
        job.wait()
    finally:
        if pane:
            pane.kill()
        job.kill()
    print("top: the dashboard showed the attached job; q detached\n" + screen)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--fsdp-ref", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--agent")
    ap.add_argument("--probe-job")
    ap.add_argument("--real-nccl", default="/usr/local/cuda/lib/libnccl.so.2")
    ap.add_argument("--tmux", default=shutil.which("tmux"))
    ap.add_argument("--sanitized", action="store_true", help="a sanitizer build: fewer steps")
    args = ap.parse_args()
    work = fresh(os.path.join(args.work, args.scenario))
    try:
        if os.geteuid() != 0:
            raise Skip("attach needs root (or CAP_BPF + CAP_PERFMON); run the suite as root")
        if "built without libbpf" in run([args.fsdpscope, "attach", "1"]).stderr:
            raise Skip("fsdpscope was built without libbpf")
        s = args.scenario
        if s.startswith("fsdp_"):
            _, n, wrap = s.split("_")
            scenario_fsdp(args, work, int(n), wrap)
        else:
            {"detach": scenario_detach, "detach_cut": scenario_detach_cut, "in_flight": scenario_in_flight, "launcher": scenario_launcher, "twice": scenario_twice, "all": scenario_all,
             "env_rank": scenario_env_rank, "duration": scenario_duration, "killed": scenario_killed,
             "errors": scenario_errors, "no_nccl": scenario_no_nccl, "real_nccl": scenario_real_nccl, "top": scenario_top}[s](args, work)
    except Skip as e:
        print(f"SKIP: {e}")
        return SKIP
    except Fail as e:
        print(f"FAIL: {args.scenario}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
