#!/usr/bin/env python3
"""End-to-end tests of hung and desynced jobs (tests/e2e/hang.cmake).

usage: hang_e2e.py SCENARIO --fsdpscope F --agent A --fsdp-ref R --work DIR

fsdp_ref (CPU backend, the NCCL stand-in) hangs or desyncs for real at a
collective it names in its own log (--stall-at R:S, --mismatch-at R:S: a
"fault" line with the step, the communicator, the collective's number on it,
comm_seq, and the counts); fsdpscope must name the same collective. The
stand-in's dead-peer timeout (FSDP_REF_NCCL_TIMEOUT_S) is set far above the
detection threshold (--hang-timeout 1), so the job is still hung when
fsdpscope says so.

Scenarios:
  faults        fsdp_ref alone: --stall-at 1:3 writes its fault line and waits
                (the other ranks wait in that collective: the job lives on,
                nothing exits) until SIGTERM ends it; the comm_seq it gives is
                the collectives its log counts for steps 0..2, plus 1;
                --mismatch-at 0:2 names count and count - 1 (and its comm_seq,
                counted the same way), and the job fails in that step (exit
                1: the stand-in's ncclInvalidUsage); bad values exit 2
  hang_collect  fsdpscope collect --hang-timeout 1 --metrics, a 3-rank job
                started as torchrun starts ranks, --stall-at 1:3: the stderr
                line 'fsdpscope: collective-hang:' comes while every rank
                process is alive, names rank 1 and the collective number of
                the fault line; /metrics shows fsdpscope_collective_hang 1 and
                fsdpscope_collective_seq entered N on the waiting ranks, N - 1
                on rank 1; the ranks are SIGKILLed (as a timeout would), the
                collector stopped, and 'lint --hang-timeout 1 --json' of its
                trace has a collective-hang finding (missing rank 1, the same
                N) and exits 1
  hang_run      the same job under 'fsdpscope run --hang-timeout 1': the line
                while every rank is alive, then SIGTERM to fsdpscope (forwarded
                to the job); the ranks the session reaped have process_exit
                records (killed by SIGTERM), and lint names the hang as above
  hang_hsdp     a hang on a communicator other than the world's (HSDP: 4 ranks,
                shard groups of 2; rank 1 stalls before an AllGather of its
                shard group): a live line and lint's flight section name that
                communicator (the id hash of rank 1's handle in the trace), its
                own collective number (the fault line's), rank 1 (its pid)
                missing and rank 0 waiting
  hang_gave_up  the job's own timeout ends the hang: 'collect --hang-timeout 1
                --json-summary', 4 ranks started as torchrun starts them,
                --stall-at 2:3 and the stand-in's timeout at 3 s
                (FSDP_REF_NCCL_TIMEOUT_S=3): ranks 0, 1, 3 leave the collective
                with ncclRemoteError and exit with an error while rank 2 lives
                on. A live line names the hang and says the waiting ranks gave
                up, none says it cleared; after rank 2 is killed and the
                collector stopped, the closing summary and 'lint --hang-timeout
                1 --json' of the trace both hold the collective-hang (missing
                rank 2, the fault line's N, 3 waiting ranks that gave up with
                ncclRemoteError)
  mismatch      a 3-rank job with --mismatch-at 0:2 under 'fsdpscope run': lint
                --json has a collective-mismatch finding naming rank 0, the
                collective number and both counts of the fault line
  no_hang       an undisturbed HSDP job (4 ranks, shard groups of 2: two
                communicators per rank) under 'run --hang-timeout 1': no stderr
                line, neither finding in the session's summary nor in lint's

No timing is asserted: every wait is for a condition, with a generous limit.
Exit status: 0 pass, 1 fail (with the reason), 77 skip (with the reason).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support as support  # noqa: E402  (the shared check / run / wait_for)

SKIP = 77
WAIT_S = 300
HANG_LINE = "fsdpscope: collective-hang:"
# A small model (the collectives' pattern is the same at any width); 3 ranks
# need a global batch that 3 divides.
MODEL = ["--d-model", "32", "--ffn", "64", "--seq", "16", "--layers", "2", "--quiet"]
STALL_RANK, STALL_STEP = 1, 3
MISMATCH_RANK, MISMATCH_STEP = 0, 2
# The stand-in's dead-peer timeout: far above --hang-timeout 1, so that the
# hung job is still hung (every rank alive) when fsdpscope says so.
NCCL_TIMEOUT = {"FSDP_REF_NCCL_TIMEOUT_S": "600"}


Fail, check, fresh, run = support.Fail, support.check, support.fresh, support.run
sanitizer_clean, read_text = support.sanitizer_clean, support.read_text


def wait_for(cond, what, limit=WAIT_S):
    return support.wait_for(cond, what, limit)


def private_env(work):
    """The environment of one scenario: a private XDG_RUNTIME_DIR (the default
    socket is this test's own) and the stand-in's long dead-peer timeout."""
    d = os.path.join(work, "xdg")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    os.chmod(d, 0o700)
    return dict(os.environ, XDG_RUNTIME_DIR=d, **NCCL_TIMEOUT)


def log_lines(path):
    """fsdp_ref --log: (step lines, fault lines)."""
    steps, faults = [], []
    for line in read_text(path).splitlines():
        d = json.loads(line)
        (faults if "fault" in d else steps).append(d)
    return steps, faults


def fault_line(path, kind):
    """The one fault line of kind in fsdp_ref's log at path (None while absent)."""
    _, faults = log_lines(path)
    got = [f for f in faults if f["fault"] == kind]
    check(len(got) <= 1, f"{path} holds {len(got)} {kind} lines, not one")
    return got[0] if got else None


def check_fault(f, kind, rank, step, nranks):
    check(f["fault"] == kind and f["rank"] == rank and f["step"] == step and f["world_size"] == nranks,
          f"the fault line does not name rank {rank} step {step} of {nranks}: {f}")
    check(f["comm"] == "world" and f["comm_rank"] == rank and f["comm_nranks"] == nranks,
          f"the fault is not on the world communicator, rank {rank} of {nranks}: {f}")
    check(f["op"] == "AllGather" and f["comm_seq"] > 1, f"the fault is not on an AllGather after the first: {f}")
    want = f["count"] - 1 if kind == "mismatch" else f["count"]
    check(f["count"] > 1 and f["issued_count"] == want, f"the fault line's counts are not {kind}'s: {f}")


def lint_json(args, trace, *extra, want_rc=None):
    r = run([args.fsdpscope, "lint", *extra, "--json", trace])
    check(r.returncode in (0, 1, 3, 4), f"lint --json {trace} exited {r.returncode}: {r.stderr}")
    if want_rc is not None:
        check(r.returncode == want_rc, f"lint {' '.join(extra)} {trace} exited {r.returncode}, not {want_rc}: "
              f"{r.stderr}{r.stdout[:2000]}")
    return json.loads(r.stdout)


def dump(args, trace):
    r = run([args.fsdpscope, "dump", trace])
    check(r.returncode == 0, f"fsdpscope dump {trace} exited {r.returncode}: {r.stderr}")
    return [json.loads(line) for line in r.stdout.splitlines()]


def scrape(url):
    r = run(["curl", "-sf", url], timeout=30)
    return r.stdout if r.returncode == 0 else None


def samples(text, name):
    """Every sample of metric name in an exposition: [(labels dict, value)]."""
    out = []
    for line in (text or "").splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if m and m.group(1) == name:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            out.append((labels, float(m.group(4))))
    return out


def names_rank(text, rank):
    """text names rank `rank` on its own (not 'rank 10', not 'ranks 0-1')."""
    return re.search(rf"\brank {rank}\b(?![-.]\d)", text) is not None


def names_collective(text, n):
    """text names collective number n the ways fsdpscope writes it (#N, seq N, comm_seq N)."""
    return re.search(rf"(#|\bseq[ =:]?|comm_seq[ =:]?|collective ){n}\b", text) is not None


def findings(doc, rule):
    return [f for f in doc["findings"] if f["rule"] == rule]


def finding_text(f):
    return "\n".join([f["message"], f["evidence"]])


def check_hang_finding(doc, fault, nranks, where):
    """lint's collective-hang: the missing rank and the collective of the fault
    line (its metrics, docs/report-schema.md), and the words name the rank."""
    hangs = findings(doc, "collective-hang")
    check(len(hangs) == 1, f"{where}: {len(hangs)} collective-hang findings, not one: "
          f"{[(f['rule'], f['message']) for f in doc['findings']]}")
    h = hangs[0]
    check(h["severity"] == "error", f"{where}: collective-hang is {h['severity']}, not error")
    m = h["metrics"]
    n = fault["comm_seq"]
    want = {"comm_seq": n, "nranks": nranks, "missing_ranks": 1, "waiting_ranks": nranks - 1,
            "first_missing_rank": fault["rank"], "first_missing_last_seq": n - 1}
    got = {k: m.get(k) for k in want}
    check(got == want, f"{where}: collective-hang's metrics are {got}, want {want} (fsdp_ref's fault line: "
          f"rank {fault['rank']} stopped before collective {n})")
    check(names_rank(h["message"], fault["rank"]) and names_collective(h["message"], n),
          f"{where}: collective-hang's message does not name rank {fault['rank']} and #{n}: {h['message']}")
    check(not findings(doc, "collective-mismatch"),
          f"{where}: a collective-mismatch beside the hang: {findings(doc, 'collective-mismatch')}")


def hang_lines(text):
    return [line for line in text.splitlines() if line.startswith(HANG_LINE)]


def check_hang_line(line, fault, where):
    body = line[len(HANG_LINE):]
    check(names_rank(body, fault["rank"]), f"{where}: the hang line does not name rank {fault['rank']}: {line}")
    check(names_collective(body, fault["comm_seq"]),
          f"{where}: the hang line does not name collective {fault['comm_seq']} (fsdp_ref's fault line): {line}")


class Collector:
    """fsdpscope collect in the background; its stderr in a file."""

    def __init__(self, args, out, extra=(), env=None):
        self.err_path = out.rstrip("/") + ".collect.err"
        self.errf = open(self.err_path, "w")
        self.out = out
        self.p = subprocess.Popen([args.fsdpscope, "collect", "--out", out, *extra], env=env,
                                  stdout=subprocess.DEVNULL, stderr=self.errf, start_new_session=True)

    def stderr(self):
        return read_text(self.err_path)

    def wait_ready(self):
        """collect.addr is written once every listener is up; the env lines to give the ranks."""
        addr = os.path.join(self.out, "collect.addr")

        def ready():
            check(self.p.poll() is None, f"collect exited {self.p.returncode} before listening: {self.stderr()}")
            return os.path.exists(addr) and "FSDPSCOPE_OUT=" in self.stderr()
        wait_for(ready, "collect to listen")
        env = {}
        for line in self.stderr().splitlines():
            line = line.strip()
            if line.startswith("export ") and "=" in line:
                k, v = line[len("export "):].split("=", 1)
                env[k] = v
        return env

    def wait(self, limit=WAIT_S):
        try:
            self.p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            raise Fail(f"collect did not finish within {limit} s: {self.stderr()}")
        finally:
            self.errf.close()
        return self.p.returncode

    def kill(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
        self.errf.close()


def start_ranks(args, work, env, nranks, fsdp_args):
    """One process per rank, as torchrun starts them, each with its own --log
    (work/log-RANK.jsonl) and stderr (work/rank-RANK.err)."""
    uid = os.path.join(work, "uid")
    if os.path.exists(uid):
        os.unlink(uid)
    procs = []
    for r in range(nranks):
        e = dict(env, RANK=str(r), WORLD_SIZE=str(nranks), LOCAL_RANK=str(r))
        err = open(os.path.join(work, f"rank-{r}.err"), "w")
        procs.append((subprocess.Popen([args.fsdp_ref, "--backend", "cpu", "--unique-id-file", uid, *fsdp_args,
                                        "--log", os.path.join(work, f"log-{r}.jsonl")],
                                       env=e, stdout=subprocess.DEVNULL, stderr=err), err))
    return procs


def stop_ranks(procs):
    """What the test leaves: no rank runs on (or stays stalled) after it."""
    for p, err in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
        err.close()


def descendants(pid):
    """Pids of the live processes below pid (from /proc), none if it is gone."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid):
    """pid is a process that has not ended (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def comm_seq_from_steps(steps, rank, before):
    """The collectives rank's step lines count in steps 0..before-1 on the one
    (world) communicator of a job without HSDP, TP, eval or checkpoints."""
    mine = [s for s in steps if s["rank"] == rank and s["step"] < before]
    check(len(mine) == before, f"rank {rank} logged {len(mine)} of steps 0..{before - 1}")
    return sum(s["allgathers"] + s["reduce_scatters"] + s["allreduces"] for s in mine)


def scenario_faults(args):
    work = fresh(os.path.join(args.work, "faults"))
    env = dict(os.environ, **NCCL_TIMEOUT)
    nranks = 3
    base = [args.fsdp_ref, "--backend", "cpu", "--nranks", str(nranks), *MODEL, "--batch", "6", "--steps", "6"]

    # --stall-at: the fault line, then a job that lives on until SIGTERM.
    log = os.path.join(work, "stall.jsonl")
    errp = os.path.join(work, "stall.err")
    with open(errp, "w") as err:
        p = subprocess.Popen([*base, "--stall-at", f"{STALL_RANK}:{STALL_STEP}", "--log", log], env=env,
                             stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        def stalled():
            check(p.poll() is None, f"fsdp_ref --stall-at exited {p.returncode}: {read_text(errp)}")
            return fault_line(log, "stall")
        f = wait_for(stalled, "the stall's fault line")
        check_fault(f, "stall", STALL_RANK, STALL_STEP, nranks)
        # The other ranks are in that collective: they finish no step past it
        # and none of the job's processes exits while it is held (the ranks
        # have logged steps 0..2 before rank 1 stopped).
        steps, _ = log_lines(log)
        want = comm_seq_from_steps(steps, STALL_RANK, STALL_STEP) + 1
        check(f["comm_seq"] == want, f"--stall-at names collective {f['comm_seq']}; the log counts {want - 1} before it")
        # Ranks 0 and 2 logged at most steps 0..2: they wait in collective N.
        check(max(s["step"] for s in steps) < STALL_STEP, f"a rank finished step {STALL_STEP} past the stall")
        job = descendants(p.pid)
        check(len(job) == nranks and p.poll() is None,
              f"the stalled job's processes: {job} (want {nranks} ranks below the launcher)")
        stderr = read_text(errp)
        check(f"rank {STALL_RANK}: --stall-at {STALL_RANK}:{STALL_STEP}: stopped before collective {want}" in stderr,
              f"fsdp_ref's stderr does not say where rank {STALL_RANK} stopped: {stderr}")
        os.killpg(p.pid, signal.SIGTERM)
        rc = p.wait(timeout=WAIT_S)
        check(rc == -signal.SIGTERM, f"the stalled job ended with {rc} on SIGTERM, not by the signal")
        wait_for(lambda: not [q for q in job if alive(q)], "the stalled job's ranks to end")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    # --mismatch-at: the fault line with both counts; the job fails in that step.
    log = os.path.join(work, "mismatch.jsonl")
    r = run([*base, "--mismatch-at", f"{MISMATCH_RANK}:{MISMATCH_STEP}", "--log", log], env=env, timeout=WAIT_S)
    check(r.returncode == 1, f"fsdp_ref --mismatch-at exited {r.returncode}, not 1: {r.stderr}")
    f = fault_line(log, "mismatch")
    check(f, f"no mismatch line in {log}: {r.stderr}")
    check_fault(f, "mismatch", MISMATCH_RANK, MISMATCH_STEP, nranks)
    steps, _ = log_lines(log)
    want = comm_seq_from_steps(steps, MISMATCH_RANK, MISMATCH_STEP) + 1
    check(f["comm_seq"] == want, f"--mismatch-at names collective {f['comm_seq']}; the log counts {want - 1} before it")
    check(f"issued with count {f['issued_count']} instead of {f['count']}" in r.stderr,
          f"fsdp_ref's stderr does not give both counts: {r.stderr}")
    check(r.stderr.count("failed") >= 1 and max(s["step"] for s in steps) < MISMATCH_STEP,
          f"the mismatched job did not fail in step {MISMATCH_STEP}: {r.stderr}")

    # Bad values: one line, exit 2, before any rank starts.
    for flag, value, said in (("--stall-at", "1-3", "use RANK:STEP"), ("--stall-at", "3:1", "ranks 0..2"),
                              ("--mismatch-at", "0:6", "steps 0..5"), ("--mismatch-at", "x:1", "use RANK:STEP")):
        r = run([*base, flag, value], env=env, timeout=60)
        check(r.returncode == 2 and said in r.stderr, f"fsdp_ref {flag} {value}: {r.returncode} {r.stderr}")
    r = run([*base, "--stall-at", "1:2", "--mismatch-at", "1:2"], env=env, timeout=60)
    check(r.returncode == 2 and "same rank and step" in r.stderr, f"both faults on 1:2: {r.returncode} {r.stderr}")


def stall_job_args(steps=6):
    return [*MODEL, "--batch", "6", "--steps", str(steps), "--stall-at", f"{STALL_RANK}:{STALL_STEP}"]


def scenario_hang_collect(args):
    if not shutil.which("curl"):
        print("SKIP: curl is not installed (scripts/setup.sh)")
        sys.exit(SKIP)
    work = fresh(os.path.join(args.work, "hang_collect"))
    env = private_env(work)
    out = os.path.join(work, "collect")
    nranks = 3
    c = Collector(args, out, ["--hang-timeout", "1", "--metrics", "0"], env=env)
    ranks = []
    try:
        lines = c.wait_ready()
        url = [w for w in c.stderr().split() if w.startswith("http://") and w.endswith("/metrics")]
        check(url, f"collect --metrics printed no http://.../metrics: {c.stderr()}")
        ranks = start_ranks(args, work, dict(env, **lines), nranks, stall_job_args())
        log1 = os.path.join(work, f"log-{STALL_RANK}.jsonl")

        def hung():
            for r, (p, _) in enumerate(ranks):
                check(p.poll() is None, f"rank {r} exited {p.returncode} before the hang was said: "
                      f"{read_text(os.path.join(work, f'rank-{r}.err'))}\ncollect: {c.stderr()}")
            check(c.p.poll() is None, f"collect exited {c.p.returncode}: {c.stderr()}")
            return hang_lines(c.stderr())
        said = wait_for(hung, f"the line '{HANG_LINE}' on collect's stderr")
        # At that moment: the job is hung, not gone.
        alive = [p.poll() is None for p, _ in ranks]
        check(all(alive), f"a rank ended before the hang was said: {alive}")
        fault = fault_line(log1, "stall")
        check(fault, f"rank {STALL_RANK} wrote no stall line to {log1}")
        check_fault(fault, "stall", STALL_RANK, STALL_STEP, nranks)
        check_hang_line(said[0], fault, "collect")
        n = fault["comm_seq"]

        # /metrics: the gauge, and the per-communicator numbers that show where
        # each rank stands (the waiting ranks entered N, rank 1 stopped at N - 1).
        def metrics_hung():
            text = scrape(url[0])
            hang = samples(text, "fsdpscope_collective_hang")
            return text if hang and all(v == 1 for _, v in hang) else None
        text = wait_for(metrics_hung, "/metrics to show fsdpscope_collective_hang 1")
        with open(os.path.join(work, "metrics.txt"), "w") as f:
            f.write(text)
        seq = {(lab.get("rank"), lab.get("state")): v for lab, v in samples(text, "fsdpscope_collective_seq")}
        for r in range(nranks):
            want = n - 1 if r == STALL_RANK else n
            check(seq.get((str(r), "entered")) == want,
                  f"fsdpscope_collective_seq{{rank=\"{r}\",state=\"entered\"}} is {seq.get((str(r), 'entered'))}, "
                  f"want {want} (collective {n} is the stalled one)")
            check(seq.get((str(r), "left")) == n - 1,
                  f"fsdpscope_collective_seq{{rank=\"{r}\",state=\"left\"}} is {seq.get((str(r), 'left'))}, want {n - 1}")
        check(all(p.poll() is None for p, _ in ranks), "a rank ended while the test read /metrics")
        # A trace measures a wait to its last record, and a hung rank writes only its
        # once-a-second drops records: the job is killed only once one rank has sent two more
        # records than when the hang was seen (nranks + 1 more in all), so that the trace ends
        # past the timeout whatever the phase of those records (an order, not a time).
        def records(text):
            return sum(v for _, v in samples(text, "fsdpscope_rank_records_total"))
        base = records(text)
        wait_for(lambda: records(scrape(url[0])) >= base + nranks + 1,
                 "the hung ranks' next records on /metrics")
        check(all(p.poll() is None for p, _ in ranks), "a rank ended while the test waited for its records")
        # The job dies as a launcher's timeout kills it; then the collector stops.
        for p, _ in ranks:
            p.send_signal(signal.SIGKILL)
        for p, _ in ranks:
            p.wait(timeout=WAIT_S)
        c.p.send_signal(signal.SIGTERM)
        rc = c.wait()
    finally:
        c.kill()
        stop_ranks(ranks)
    check(rc == 0, f"collect exited {rc}: {c.stderr()}")
    check("error collective-hang:" in c.stderr(), f"collect's closing lint summary has no collective-hang: {c.stderr()}")
    trace = os.path.join(out, "collect.fss")
    check(os.path.exists(trace), f"no trace at {trace}: {c.stderr()}")
    doc = lint_json(args, trace, "--hang-timeout", "1", want_rc=1)
    check_hang_finding(doc, fault, nranks, "lint of collect's trace")


def scenario_hang_run(args):
    work = fresh(os.path.join(args.work, "hang_run"))
    env = private_env(work)
    out = os.path.join(work, "run")
    log = os.path.join(work, "log.jsonl")
    errp = os.path.join(work, "run.err")
    nranks = 3
    with open(errp, "w") as err:
        p = subprocess.Popen([args.fsdpscope, "run", "--hang-timeout", "1", "--out", out, "--",
                              args.fsdp_ref, "--backend", "cpu", "--nranks", str(nranks), *stall_job_args(),
                              "--log", log], env=env, stdout=subprocess.DEVNULL, stderr=err,
                             start_new_session=True)
    try:
        def hung():
            check(p.poll() is None, f"fsdpscope run exited {p.returncode} before the hang was said: {read_text(errp)}")
            return hang_lines(read_text(errp))
        said = wait_for(hung, f"the line '{HANG_LINE}' on run's stderr")
        job = [q for q in descendants(p.pid)]
        check(len(job) == nranks + 1, f"the job's processes when the hang was said: {job} (want the launcher and "
              f"{nranks} ranks alive)")
        fault = fault_line(log, "stall")
        check(fault, f"rank {STALL_RANK} wrote no stall line to {log}")
        check_fault(fault, "stall", STALL_RANK, STALL_STEP, nranks)
        check_hang_line(said[0], fault, "run")
        # SIGTERM to fsdpscope reaches the job's process group.
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=WAIT_S)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for q in descendants(p.pid):
            os.kill(q, signal.SIGKILL)
    check(rc == 128 + signal.SIGTERM, f"fsdpscope run exited {rc}, not the job's 128 + SIGTERM: {read_text(errp)}")
    trace = os.path.join(out, "trace.fss")
    check(os.path.exists(trace), f"no trace at {trace}: {read_text(errp)}")
    check("error collective-hang:" in read_text(errp), f"run's closing lint summary has no collective-hang: "
          f"{read_text(errp)}")
    records = dump(args, trace)
    hellos = {r["pid"] for r in records if r["type"] == "process_hello"}
    exits = {r["pid"]: r["wait_status"] for r in records if r["type"] == "process_exit"}
    # The ranks the session reaped (the launcher, killed, left them to it)
    # have a process_exit saying SIGTERM killed them; a rank its launcher
    # reaped first has none (no one else saw its status).
    check(len(hellos) == nranks, f"the trace holds {len(hellos)} processes, not the {nranks} ranks")
    check(exits and set(exits) <= hellos and all(st & 0x7F == signal.SIGTERM for st in exits.values()),
          f"the session's process_exit records (pid: wait status) are {exits}: want some, of the ranks, "
          f"each killed by SIGTERM")
    doc = lint_json(args, trace, "--hang-timeout", "1", want_rc=1)
    check_hang_finding(doc, fault, nranks, "lint of run's trace")


def scenario_hang_hsdp(args):
    """A hang on a communicator that is not the world's: HSDP (4 ranks, shard
    groups of 2), rank 1 stalls before step 3's first collective, an AllGather
    on its shard group. The diagnosis names that communicator (by the id hash
    the agent gave rank 1's handle) and its own collective number there."""
    work = fresh(os.path.join(args.work, "hang_hsdp"))
    env = private_env(work)
    out = os.path.join(work, "run")
    log = os.path.join(work, "log.jsonl")
    errp = os.path.join(work, "run.err")
    nranks = 4
    with open(errp, "w") as err:
        p = subprocess.Popen([args.fsdpscope, "run", "--hang-timeout", "1", "--out", out, "--",
                              args.fsdp_ref, "--backend", "cpu", "--nranks", str(nranks), "--shard-group", "2",
                              *MODEL, "--batch", "4", "--steps", "6", "--stall-at", f"{STALL_RANK}:{STALL_STEP}",
                              "--log", log], env=env, stdout=subprocess.DEVNULL, stderr=err,
                             start_new_session=True)
    try:
        def hung():
            check(p.poll() is None, f"fsdpscope run exited {p.returncode} before the hang was said: {read_text(errp)}")
            return hang_lines(read_text(errp))
        wait_for(hung, f"the line '{HANG_LINE}' on run's stderr")
        check(len(descendants(p.pid)) == nranks + 1, "a process of the job ended before the hang was said")
        # The cascade (rank 0's replicate group waits for rank 0, itself stuck) is said once
        # its wait too is past the timeout: the job is stopped after that, whatever the
        # machine's speed, so that the post mortem below holds it.
        wait_for(lambda: any("follows from another hang" in line for line in hang_lines(read_text(errp))),
                 "the cascade's hang line on run's stderr")
        fault = fault_line(log, "stall")
        check(fault, f"rank {STALL_RANK} wrote no stall line to {log}")
        check(fault["comm"] == "dp_shard" and fault["comm_nranks"] == 2 and fault["comm_rank"] == STALL_RANK % 2,
              f"the stall is not on rank {STALL_RANK}'s shard group: {fault}")
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=WAIT_S)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for q in descendants(p.pid):
            os.kill(q, signal.SIGKILL)
    check(rc == 128 + signal.SIGTERM, f"fsdpscope run exited {rc}, not the job's 128 + SIGTERM: {read_text(errp)}")
    trace = os.path.join(out, "trace.fss")
    records = dump(args, trace)
    pid = {r["rank"]: r["pid"] for r in records if r["type"] == "process_hello"}
    ids = [r["id_hash"] for r in records if r["type"] == "comm" and r["rank"] == STALL_RANK
           and r["comm"] == fault["comm_handle"]]
    check(len(ids) == 1, f"rank {STALL_RANK}'s comm records give {ids} for its handle {fault['comm_handle']}")
    comm = ids[0][2:].rjust(16, "0")
    n = fault["comm_seq"]
    # Live: a line for that communicator's collective, rank 1 (its pid) missing.
    said = [line for line in hang_lines(read_text(errp))
            if f"collective #{n} (AllGather) of communicator {comm}" in line]
    check(said, f"no hang line names collective #{n} of the shard group {comm}: {hang_lines(read_text(errp))}")
    check(re.search(rf"missing rank {fault['comm_rank']} \([^)]*pid {pid[STALL_RANK]}\)", said[0]),
          f"the shard group's hang line does not name rank {fault['comm_rank']} (pid {pid[STALL_RANK]}): {said[0]}")
    # Post mortem: the report's flight section holds that hang, with rank 1 missing, rank 0 waiting.
    doc = lint_json(args, trace, "--hang-timeout", "1", want_rc=1)
    hangs = [h for h in doc["flight"]["hangs"] if h["comm"] == comm and h["comm_seq"] == n]
    check(len(hangs) == 1, f"lint's flight has no hang at #{n} of {comm}: "
          f"{[(h['comm'], h['comm_seq']) for h in doc['flight']['hangs']]}")
    h = hangs[0]
    missing = [(m["global_rank"], m["rank"], m["pid"]) for m in h["missing"]]
    waiting = [w["global_rank"] for w in h["waiting"]]
    check(missing == [(STALL_RANK, fault["comm_rank"], pid[STALL_RANK])] and waiting == [0],
          f"the shard group's hang: missing {missing}, waiting {waiting}; want missing rank {STALL_RANK} "
          f"(comm rank {fault['comm_rank']}, pid {pid[STALL_RANK]}) and rank 0 waiting")
    check(h["op"] == "AllGather" and h["count"] == fault["count"], f"the hung collective is not the fault's: {h}")
    # The cause comes first; the hangs it causes are marked as its cascade. Rank 0 waits in the
    # shard group's hang, so a replicate group's hang that misses rank 0 follows from it; the
    # stalled rank's own replicate group misses the stalled rank itself, which waits nowhere.
    # (The stalled rank's own groups both miss it: which of those waited longer is the
    # machine's timing, so only that the first one listed misses it is asserted.)
    first = doc["flight"]["hangs"][0]
    check(not first["cascade"] and [m["global_rank"] for m in first["missing"]] == [STALL_RANK],
          f"the first hang listed does not miss the stalled rank {STALL_RANK}: {first}")
    for g in doc["flight"]["hangs"]:
        blocked = [m for m in g["missing"] if m["evidence"] is not None]
        stalled = [m for m in g["missing"] if m["global_rank"] == STALL_RANK]
        check(not stalled or not stalled[0]["evidence"],
              f"the stalled rank is said to wait elsewhere in {g['comm']} #{g['comm_seq']}: {stalled}")
        check(g["cascade"] == (len(blocked) == len(g["missing"]) > 0),
              f"hang {g['comm']} #{g['comm_seq']}: cascade {g['cascade']} but missing {g['missing']}")
        if g["cascade"]:
            check(all(m["global_rank"] != STALL_RANK for m in g["missing"]) and
                  doc["flight"]["hangs"].index(g) > 0, f"a cascade listed before its cause: {g}")
    check(any(g["cascade"] for g in doc["flight"]["hangs"]),
          f"no replicate-group hang is marked as the shard group's cascade: {doc['flight']['hangs']}")


GAVE_UP_RANK, GAVE_UP_STEP = 2, 3


def check_gave_up(doc, fault, nranks, where):
    """The hang of a job whose waiting ranks gave up (the stand-in's timeout):
    the finding as any hang's, and the flight section says how it ended."""
    check_hang_finding(doc, fault, nranks, where)
    hangs = [h for h in doc["flight"]["hangs"] if h["comm_seq"] == fault["comm_seq"]]
    check(len(hangs) == 1, f"{where}: no hang at #{fault['comm_seq']} in the flight section: {doc['flight']}")
    h = hangs[0]
    ends = sorted((w["rank"], w["wait_end"], w["nccl_result"]) for w in h["waiting"])
    want = [(r, "gave-up", "ncclRemoteError") for r in range(nranks) if r != fault["rank"]]
    check(h["ended"] == "gave-up" and ends == want,
          f"{where}: the hang's end is {h['ended']}, its waiting ranks' {ends}; want gave-up, {want}")
    text = finding_text(findings(doc, "collective-hang")[0])
    check("gave up" in text and "ncclRemoteError" in text,
          f"{where}: collective-hang does not say the waiting ranks gave up (ncclRemoteError): {text}")


def scenario_hang_gave_up(args):
    """Issue 24: the hang stays in the verdict when the job's own timeout ends it."""
    work = fresh(os.path.join(args.work, "hang_gave_up"))
    env = dict(private_env(work), FSDP_REF_NCCL_TIMEOUT_S="3")
    out = os.path.join(work, "collect")
    summary = os.path.join(work, "summary.json")
    nranks = 4
    c = Collector(args, out, ["--hang-timeout", "1", "--json-summary", summary], env=env)
    ranks = []
    try:
        lines = c.wait_ready()
        ranks = start_ranks(args, work, dict(env, **lines), nranks,
                            [*MODEL, "--batch", "4", "--steps", "6", "--stall-at", f"{GAVE_UP_RANK}:{GAVE_UP_STEP}"])
        # The waiting ranks' calls fail (ncclRemoteError) and they exit with that error; the
        # stalled rank waits for a signal.
        for r, (p, _) in enumerate(ranks):
            if r == GAVE_UP_RANK:
                continue
            try:
                rc = p.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                raise Fail(f"rank {r} did not end on the stand-in's timeout: {c.stderr()}")
            err = read_text(os.path.join(work, f"rank-{r}.err"))
            check(rc == 1 and f"step {GAVE_UP_STEP} failed" in err,
                  f"rank {r} exited {rc}, not failing step {GAVE_UP_STEP} on the stand-in's timeout: {err}")
        check(ranks[GAVE_UP_RANK][0].poll() is None, f"the stalled rank {GAVE_UP_RANK} ended by itself")
        fault = fault_line(os.path.join(work, f"log-{GAVE_UP_RANK}.jsonl"), "stall")
        check(fault, f"rank {GAVE_UP_RANK} wrote no stall line")
        check_fault(fault, "stall", GAVE_UP_RANK, GAVE_UP_STEP, nranks)

        # Live: the hang is named (while they waited, or once they gave up), then said
        # to have ended by their giving up; never cleared.
        def said_end():
            check(c.p.poll() is None, f"collect exited {c.p.returncode}: {c.stderr()}")
            return [line for line in c.stderr().splitlines() if line.startswith("fsdpscope: collective-hang")
                    and ("gave up" in line or "cleared" in line)]
        ended = wait_for(said_end, "a live line saying the waiting ranks gave up")
        check("cleared" not in ended[0], f"collect said the hang cleared when the waiting ranks gave up: {ended[0]}")
        check("ncclRemoteError" in ended[0] and names_collective(ended[0], fault["comm_seq"]),
              f"the line of the hang's end does not name the error and #{fault['comm_seq']}: {ended[0]}")
        named = hang_lines(c.stderr())
        check(named, f"no live line '{HANG_LINE}': {c.stderr()}")
        check_hang_line(named[0], fault, "collect")
        ranks[GAVE_UP_RANK][0].send_signal(signal.SIGKILL)
        ranks[GAVE_UP_RANK][0].wait(timeout=WAIT_S)
        c.p.send_signal(signal.SIGTERM)
        rc = c.wait()
    finally:
        c.kill()
        stop_ranks(ranks)
    check(rc == 0, f"collect exited {rc}: {c.stderr()}")
    check("collective-hang cleared" not in c.stderr(), f"collect said the hang cleared: {c.stderr()}")
    check("error collective-hang:" in c.stderr(), f"collect's closing lint summary has no collective-hang: "
          f"{c.stderr()}")
    with open(summary) as f:
        check_gave_up(json.load(f), fault, nranks, "collect's closing summary")
    trace = os.path.join(out, "collect.fss")
    check_gave_up(lint_json(args, trace, "--hang-timeout", "1", want_rc=1), fault, nranks, "lint of the trace")
    r = run([args.fsdpscope, "lint", "--hang-timeout", "1", trace])
    check(r.returncode == 1 and "collective-hang" in r.stdout + r.stderr,
          f"lint's text of the trace has no collective-hang (exit {r.returncode}): {r.stdout}{r.stderr}")


def scenario_mismatch(args):
    work = fresh(os.path.join(args.work, "mismatch"))
    env = private_env(work)
    out = os.path.join(work, "run")
    log = os.path.join(work, "log.jsonl")
    nranks = 3
    r = run([args.fsdpscope, "run", "--out", out, "--", args.fsdp_ref, "--backend", "cpu", "--nranks", str(nranks),
             *MODEL, "--batch", "6", "--steps", "5", "--mismatch-at", f"{MISMATCH_RANK}:{MISMATCH_STEP}",
             "--log", log], env=env, timeout=WAIT_S)
    check(r.returncode == 1, f"fsdpscope run of the mismatched job exited {r.returncode}, not the job's 1: {r.stderr}")
    check("error collective-mismatch:" in r.stderr, f"run's closing lint summary has no collective-mismatch: {r.stderr}")
    fault = fault_line(log, "mismatch")
    check(fault, f"rank {MISMATCH_RANK} wrote no mismatch line to {log}: {r.stderr}")
    check_fault(fault, "mismatch", MISMATCH_RANK, MISMATCH_STEP, nranks)
    trace = os.path.join(out, "trace.fss")
    # The trace itself holds what fsdp_ref says it issued: the smaller
    # AllGather on rank 0's communicator, the meant count on the others'.
    colls = [r for r in dump(args, trace) if r["type"] == "collective" and r["op"] == "AllGather"]
    mine = [r for r in colls if r["rank"] == MISMATCH_RANK and r["comm"] == fault["comm_handle"]]
    check(len(mine) >= 1 and mine[-1]["count"] == fault["issued_count"],
          f"rank {MISMATCH_RANK}'s last AllGather on {fault['comm_handle']} in the trace is not of count "
          f"{fault['issued_count']}: {mine[-1:] if mine else None}")
    doc = lint_json(args, trace, want_rc=1)
    mm = findings(doc, "collective-mismatch")
    check(len(mm) == 1, f"{len(mm)} collective-mismatch findings, not one: "
          f"{[(f['rule'], f['message']) for f in doc['findings']]}")
    f = mm[0]
    check(f["severity"] == "error", f"collective-mismatch is {f['severity']}, not error")
    # Signature a is the one most ranks issued (the meant count), b rank 0's.
    want = {"comm_seq": fault["comm_seq"], "nranks": nranks, "a_ranks": nranks - 1, "b_ranks": 1,
            "a_count": fault["count"], "b_count": fault["issued_count"], "first_b_rank": MISMATCH_RANK}
    got = {k: f["metrics"].get(k) for k in want}
    check(got == want, f"collective-mismatch's metrics are {got}, want {want} (fsdp_ref's fault line)")
    text = finding_text(f)
    check(names_rank(text, MISMATCH_RANK) or re.search(rf"\branks? {MISMATCH_RANK}\b", text),
          f"collective-mismatch does not name rank {MISMATCH_RANK}: {text}")
    for count in (fault["count"], fault["issued_count"]):
        check(re.search(rf"\b{count}\b", f["message"]),
              f"collective-mismatch's message does not give count {count} (fsdp_ref's fault line: "
              f"{fault['count']} and {fault['issued_count']}): {f['message']}")
    check(not findings(doc, "collective-hang"), f"a collective-hang beside the mismatch: {findings(doc, 'collective-hang')}")


def scenario_no_hang(args):
    work = fresh(os.path.join(args.work, "no_hang"))
    env = private_env(work)
    out = os.path.join(work, "run")
    summary = os.path.join(work, "summary.json")
    r = run([args.fsdpscope, "run", "--hang-timeout", "1", "--json-summary", summary, "--out", out, "--",
             args.fsdp_ref, "--backend", "cpu", "--nranks", "4", "--shard-group", "2", *MODEL, "--batch", "4",
             "--steps", "6"], env=env, timeout=WAIT_S)
    check(r.returncode == 0, f"fsdpscope run exited {r.returncode}: {r.stderr}")
    said = [line for line in r.stderr.splitlines() if line.startswith("fsdpscope: collective-")]
    check(not said, f"run said a hang or a mismatch of an undisturbed job: {said}")
    with open(summary) as f:
        streamed = json.load(f)
    doc = lint_json(args, os.path.join(out, "trace.fss"), "--hang-timeout", "1")
    check(doc["verdict"] == "diagnosed", f"the undisturbed job is not diagnosed: {doc['verdict']}")
    for where, d in (("the session's summary", streamed), ("lint", doc)):
        for rule in ("collective-hang", "collective-mismatch"):
            check(not findings(d, rule), f"{where} has {rule} for an undisturbed job: {findings(d, rule)}")


SCENARIOS = {
    "faults": (scenario_faults, False),
    "hang_collect": (scenario_hang_collect, True),
    "hang_run": (scenario_hang_run, True),
    "hang_hsdp": (scenario_hang_hsdp, True),
    "hang_gave_up": (scenario_hang_gave_up, True),
    "mismatch": (scenario_mismatch, True),
    "no_hang": (scenario_no_hang, True),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--fsdpscope")
    ap.add_argument("--agent")
    ap.add_argument("--fsdp-ref")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    fn, needs_fsdpscope = SCENARIOS[args.scenario]
    if not args.fsdp_ref:
        print("SKIP: fsdp_ref is not built (needs nccl.h and the CUDA headers)")
        return SKIP
    if needs_fsdpscope and not (args.fsdpscope and args.agent):
        print("SKIP: the agent is not built in this configuration")
        return SKIP
    args.fsdp_ref = os.path.abspath(args.fsdp_ref)
    if args.fsdpscope:
        args.fsdpscope = os.path.abspath(args.fsdpscope)
    if args.agent:
        os.environ["FSDPSCOPE_AGENT"] = os.path.abspath(args.agent)
    os.makedirs(args.work, exist_ok=True)
    try:
        fn(args)
        # the stderr of every process the scenario ran in the background
        for root, _, files in os.walk(os.path.join(args.work, args.scenario)):
            for name in files:
                if name.endswith(".err"):
                    sanitizer_clean(read_text(os.path.join(root, name)), os.path.join(root, name))
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
