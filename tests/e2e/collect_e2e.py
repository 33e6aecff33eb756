#!/usr/bin/env python3
"""End-to-end tests of `fsdpscope collect` (tests/e2e/collect.cmake).

usage: collect_e2e.py SCENARIO --fsdpscope F --agent A --fsdp-ref R --schema S --schema-check C --work DIR

Scenarios:
  equal:WRAP  fsdp_ref (CPU backend, 2 ranks, --wrap WRAP) started the way
              torchrun starts ranks (one process per rank with RANK /
              WORLD_SIZE / --unique-id-file) with the environment lines
              `fsdpscope collect --until-idle 1` prints: the collect's lint
              verdict, AllGathers per step, units and findings equal those of
              `fsdpscope run` on the same configuration; the session's
              --json-summary (the streamed analysis) equals `lint --json` on
              the trace it wrote, and follows the report schema. With
              linear, collect --metrics is scraped while the ranks train
              (held before a step by fsdp_ref --hold-at for the scrape) and after they left:
              fsdpscope_allgathers_per_step{rank="0"} is fsdp_ref's --log
              count, promtool accepts the exposition, and the viewer
              endpoint's first snapshot follows docs/live-schema.json
  restart     a collector killed with SIGKILL mid-job and restarted in the
              same --out: the final trace holds every collective of the job
              (per rank seq 1..N, no gap, no duplicate, N the collectives
              its process_end counts) and lint gives an undisturbed run's
              verdict (needs the agent's retry and the ingest's resumption)
  keep        --keep last:2 through the session: the trace keeps the last
              steps (lint reads the policy in its header), the session's
              --json-summary covers every step; a bad --keep is refused
  security    a second collect on the default socket is refused (naming the
              first one's pid); the socket's folder is 0700 and the socket
              0600 whatever the umask; a tcp listener keeps its key in a 0600
              file and prints FSDPSCOPE_SINK with ,key=; a connection with a
              wrong key is cut and never reaches the trace
  options     an analysis option that fits no rank of the job (--rank 5 of
              2) is said at the end as lint says it, no summary is printed,
              and the trace is kept

No timing is asserted: every wait is for a condition, with a generous limit.
Exit status: 0 pass, 1 fail (with the reason), 77 skip (with the reason).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support as support  # noqa: E402  (the shared check / run / wait_for)

SKIP = 77
WAIT_S = 300
HOLD = 11  # the step before which the linear job is held for /metrics
# A small model: the collectives' pattern is the same at any width, and a
# sanitized fsdp_ref computes fifteen times faster.
MODEL = ["--d-model", "32", "--ffn", "64", "--seq", "16", "--batch", "4"]


Fail, check, fresh = support.Fail, support.check, support.fresh


def run(cmd, env=None, timeout=600):
    return support.run(cmd, env=env, timeout=timeout, sanitized=False)


def wait_for(cond, what, limit=WAIT_S):
    return support.wait_for(cond, what, limit)


def private_runtime_dir(work):
    """A private XDG_RUNTIME_DIR, so that the default socket is this test's own."""
    d = os.path.join(work, "xdg")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    os.chmod(d, 0o700)
    return d


class Collector:
    """fsdpscope collect in the background; its stderr in a file."""

    def __init__(self, args, out, extra=(), env=None, name="collect"):
        self.err_path = out.rstrip("/") + f".{name}.err"
        self.errf = open(self.err_path, "w")
        self.out = out
        self.p = subprocess.Popen([args.fsdpscope, "collect", "--out", out, *extra], env=env,
                                  stdout=subprocess.DEVNULL, stderr=self.errf, start_new_session=True)

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def wait_ready(self):
        """collect.addr is written once every listener is up."""
        addr = os.path.join(self.out, "collect.addr")

        def ready():
            check(self.p.poll() is None, f"collect exited {self.p.returncode} before listening: {self.stderr()}")
            return os.path.exists(addr) and "FSDPSCOPE_OUT=" in self.stderr()
        wait_for(ready, "collect to listen")
        return self.env_lines()

    def env_lines(self):
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


def start_ranks(args, work, env_lines, nranks, fsdp_args, tag, log=False):
    """One process per rank, as torchrun starts them (with log: each its own
    fsdp_ref --log, work/log-TAG-RANK.jsonl)."""
    uid = os.path.join(work, f"uid-{tag}")
    if os.path.exists(uid):
        os.unlink(uid)
    procs = []
    for r in range(nranks):
        env = dict(os.environ)
        env.update(env_lines)
        env.update(RANK=str(r), WORLD_SIZE=str(nranks), LOCAL_RANK=str(r))
        err = open(os.path.join(work, f"rank{r}-{tag}.err"), "w")
        extra = ["--log", os.path.join(work, f"log-{tag}-{r}.jsonl")] if log else []
        procs.append((subprocess.Popen([args.fsdp_ref, "--backend", "cpu", "--unique-id-file", uid, *fsdp_args,
                                        *extra], env=env, stdout=subprocess.DEVNULL, stderr=err), err))
    return procs


def stop_ranks(procs):
    """What a failed test leaves: no rank runs on (or stays stopped) after it."""
    for p, log in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()


def wait_ranks(procs, limit=WAIT_S * 2):
    for p, log in procs:
        try:
            rc = p.wait(timeout=limit)
        finally:
            log.close()
        check(rc == 0, f"rank exited {rc} (see {log.name})")


def lint_json(args, trace):
    r = run([args.fsdpscope, "lint", "--json", trace])
    check(r.returncode in (0, 1, 3, 4), f"lint --json {trace} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def schema_ok(args, path):
    r = run([sys.executable, args.schema_check, args.schema, path])
    check(r.returncode == 0, f"{path} does not follow {args.schema}: {r.stdout}{r.stderr}")


# Rules whose verdict rests on measured times (exposure, arrival skew): two
# runs of one job on a busy machine may differ there, so they are not compared.
TIMED_RULES = {"exposed-gather", "rank-skew"}


def headline(doc):
    """What 'the same verdict, counts and units' means: and the findings that
    rest on counts and sizes, not on times."""
    return {
        "verdict": doc["verdict"],
        "ranks": doc["ranks"],
        "allgathers_per_step": doc["per_step"]["allgathers"],
        "forward_allgathers": doc["per_step"]["forward_allgathers"],
        "units": {k: doc["units"][k] for k in ("repeating_units", "gathers_per_unit", "root_gathers")},
        "findings": sorted((f["rule"], f["severity"]) for f in doc["findings"] if f["rule"] not in TIMED_RULES),
    }


def dump(args, trace):
    r = run([args.fsdpscope, "dump", trace])
    check(r.returncode == 0, f"fsdpscope dump {trace} exited {r.returncode}: {r.stderr}")
    return [json.loads(line) for line in r.stdout.splitlines()]


def scrape(url):
    r = run(["curl", "-sf", url], timeout=30)
    return r.stdout if r.returncode == 0 else None


def metric(text, name, labels):
    """The value of sample name{labels} in an exposition, None when absent."""
    want = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else name
    for line in (text or "").splitlines():
        if line.startswith("#"):
            continue
        parts = line.rsplit(" ", 1)
        if len(parts) == 2 and parts[0] == want:
            return float(parts[1])
    return None


def check_viewer(args, c, work, want):
    """The viewer endpoint printed: a 0600 socket whose first snapshot follows
    docs/live-schema.json and shows rank 0's last step as fsdp_ref logged it."""
    addr = [w for w in c.stderr().split() if w.startswith("unix:") and w.endswith("/viewer.sock")]
    check(addr, f"collect printed no viewer endpoint: {c.stderr()}")
    path = addr[0][len("unix:"):]
    st = os.lstat(path)
    check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
          f"the viewer socket is {oct(stat.S_IMODE(st.st_mode))}, not 0600")
    v = socket.socket(socket.AF_UNIX)
    v.settimeout(WAIT_S)
    v.connect(path)
    buf = b""
    while b"\n" not in buf:
        chunk = v.recv(65536)
        check(chunk, "the viewer endpoint closed before a whole snapshot")
        buf += chunk
    v.close()
    line = buf.split(b"\n", 1)[0].decode()
    snap_path = os.path.join(work, "snapshot.jsonl")
    with open(snap_path, "w") as f:
        f.write(line + "\n")
    checker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "live_snapshot_check.py")
    r = run([sys.executable, checker, os.path.join(os.path.dirname(args.schema), "live-schema.json"), snap_path])
    check(r.returncode == 0, f"the viewer's snapshot does not follow docs/live-schema.json: {r.stdout}{r.stderr}")
    snap = json.loads(line)
    rank0 = [r for r in snap["ranks"] if r["rank"] == 0]
    check(rank0 and rank0[0]["last_step"]["allgathers"] == want,
          f"the viewer's rank 0 last step has {rank0[0]['last_step']['allgathers'] if rank0 else None} AllGathers, "
          f"fsdp_ref logged {want}")


def scenario_equal(args, wrap):
    work = fresh(os.path.join(args.work, f"equal-{wrap}"))
    xdg = private_runtime_dir(work)
    env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
    # linear: /metrics is read while the job stands still before step HOLD
    # (fsdp_ref --hold-at: rank 0 waits on a FIFO the test writes, the other
    # rank in its collectives), so the job cannot end before the scrape.
    fsdp_args = [*MODEL, "--layers", "4", "--wrap", wrap, "--steps", str(HOLD + 3) if wrap == "linear" else "4"]

    # The reference: the same job under fsdpscope run.
    ref_out = os.path.join(work, "run")
    r = run([args.fsdpscope, "run", "--out", ref_out, "--", args.fsdp_ref, "--backend", "cpu", "--nranks", "2",
             *fsdp_args], env=env)
    check(r.returncode == 0, f"fsdpscope run exited {r.returncode}: {r.stderr}")
    ref = lint_json(args, os.path.join(ref_out, "trace.fss"))

    out = os.path.join(work, "collect")
    summary = os.path.join(work, "summary.json")
    # linear: /metrics checked against fsdp_ref's own log, then stopped with
    # SIGTERM; block: it stops by itself, --until-idle after the ranks left.
    with_metrics = wrap == "linear"
    if with_metrics and not shutil.which("curl"):
        print("SKIP: curl is not installed (scripts/setup.sh)")
        sys.exit(SKIP)
    stop = ["--metrics", "0"] if with_metrics else ["--until-idle", "1"]
    c = Collector(args, out, [*stop, "--json-summary", summary], env=env)
    ranks = []
    try:
        lines = c.wait_ready()
        for k in ("LD_PRELOAD", "FSDPSCOPE_SINK", "FSDPSCOPE_OUT"):
            check(k in lines, f"collect did not print 'export {k}=...': {c.stderr()}")
        check(os.path.isabs(lines["LD_PRELOAD"]) and os.path.exists(lines["LD_PRELOAD"]),
              f"LD_PRELOAD is not the agent's absolute path: {lines['LD_PRELOAD']}")
        check(os.path.realpath(lines["LD_PRELOAD"]) == os.path.realpath(args.agent),
              f"LD_PRELOAD {lines['LD_PRELOAD']} is not the agent {args.agent}")
        with open(os.path.join(out, "collect.addr")) as f:
            check(f.readline().strip() == lines["FSDPSCOPE_SINK"],
                  "collect.addr does not hold the FSDPSCOPE_SINK printed")
        check(lines["FSDPSCOPE_SINK"] == "unix:" + os.path.join(xdg, "fsdpscope", "collect.sock"),
              f"the default socket is not under XDG_RUNTIME_DIR: {lines['FSDPSCOPE_SINK']}")
        fifo = os.path.join(work, "hold")
        hold = []
        if with_metrics:
            os.mkfifo(fifo, 0o600)
            hold = ["--hold-at", f"{HOLD}:{fifo}"]
        ranks = start_ranks(args, work, lines, 2, [*fsdp_args, *hold], "c", log=with_metrics)
        if with_metrics:
            url = [w for w in c.stderr().split() if w.startswith("http://") and w.endswith("/metrics")]
            check(url, f"collect --metrics printed no http://.../metrics: {c.stderr()}")

            def live_value():
                check(all(p.poll() is None for p, _ in ranks), "the job ended before /metrics showed a step: more steps")
                return metric(scrape(url[0]), "fsdpscope_allgathers_per_step", {"rank": "0"})
            # While the job runs: held before step HOLD until the scrape is done.
            wait_for(lambda: live_value() is not None, "/metrics to show rank 0's AllGathers per step while it trains")
            during = metric(scrape(url[0]), "fsdpscope_allgathers_per_step", {"rank": "0"})
            check(all(p.poll() is None for p, _ in ranks), "a rank ended while the job was held")
            release = os.open(fifo, os.O_WRONLY)
            os.write(release, b"x")
            os.close(release)
            wait_ranks(ranks)
            with open(os.path.join(work, "log-c-0.jsonl")) as f:
                logged = [json.loads(x)["allgathers"] for x in f]
            want = logged[-1]
            check(during in logged, f"/metrics showed fsdpscope_allgathers_per_step{{rank=\"0\"}} {during} while the job "
                  f"ran; fsdp_ref logged {sorted(set(logged))} per step")
            # The collector still runs: its view reaches the ranks' last steps.
            wait_for(lambda: metric(scrape(url[0]), "fsdpscope_allgathers_per_step", {"rank": "0"}) == want,
                     f"/metrics to show fsdpscope_allgathers_per_step{{rank=\"0\"}} {want} (fsdp_ref --log)")
            text = scrape(url[0])
            path = os.path.join(work, "metrics.txt")
            with open(path, "w") as f:
                f.write(text)
            if shutil.which("promtool"):
                r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
                check(r.returncode == 0, f"promtool check metrics: {r.stdout}{r.stderr}")
            check_viewer(args, c, work, want)
            c.p.send_signal(signal.SIGTERM)
        else:
            wait_ranks(ranks)
        rc = c.wait()
    finally:
        c.kill()
        stop_ranks(ranks)
    check(rc == 0, f"collect exited {rc}: {c.stderr()}")
    trace = os.path.abspath(os.path.join(out, "collect.fss"))
    check(os.path.exists(trace), f"no trace at {trace}: {c.stderr()}")
    check("fsdpscope lint:" in c.stderr(), f"collect printed no lint summary: {c.stderr()}")
    got = lint_json(args, trace)
    check(headline(got) == headline(ref),
          f"collect's diagnosis differs from run's:\n  collect {headline(got)}\n  run     {headline(ref)}")
    # The streamed analysis is what lint reads from the trace, to the byte of JSON.
    with open(summary) as f:
        streamed = json.load(f)
    schema_ok(args, summary)
    check(streamed == got, "the session's --json-summary (streamed analysis) differs from 'lint --json' on its trace:"
          + "".join(f"\n  {k}: {streamed.get(k)!r:.200} != {got.get(k)!r:.200}"
                    for k in sorted(set(streamed) | set(got)) if streamed.get(k) != got.get(k)))
    # The agents' spool stays the user's alone.
    check(stat.S_IMODE(os.stat(lines["FSDPSCOPE_OUT"]).st_mode) == 0o700, "the spool is not 0700")


def collectives_by_rank(records):
    """rank -> list of collective seq numbers, and rank -> process_end's collective count."""
    seqs, ends = {}, {}
    for r in records:
        if r["type"] == "collective":
            seqs.setdefault(r["rank"], []).append(r["seq"])
        elif r["type"] == "process_end":
            ends[r["rank"]] = r["collectives"]
    return seqs, ends


def scenario_restart(args):
    work = fresh(os.path.join(args.work, "restart"))
    xdg = private_runtime_dir(work)
    env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
    # The job is held before step HOLD (fsdp_ref --hold-at) while the
    # collector is killed and another started, then released: the job
    # outlives the first collector whatever the machine's speed, and the
    # second one is there when it goes on.
    fsdp_args = [*MODEL, "--layers", "4", "--wrap", "block", "--steps", str(2 * HOLD)]
    out = os.path.join(work, "collect")

    ref_out = os.path.join(work, "run")
    r = run([args.fsdpscope, "run", "--out", ref_out, "--", args.fsdp_ref, "--backend", "cpu", "--nranks", "2",
             *fsdp_args], env=env, timeout=600)
    check(r.returncode == 0, f"fsdpscope run exited {r.returncode}: {r.stderr}")
    ref = lint_json(args, os.path.join(ref_out, "trace.fss"))

    first = Collector(args, out, env=env, name="first")
    second = None
    ranks = []
    try:
        lines = first.wait_ready()
        fifo = os.path.join(work, "hold")
        os.mkfifo(fifo, 0o600)
        ranks = start_ranks(args, work, lines, 2, [*fsdp_args, "--hold-at", f"{HOLD}:{fifo}"], "r")
        folder = wait_for(lambda: [f for f in os.listdir(out) if f.startswith(".fsdpscope-run.")], "the private folder")
        partial = os.path.join(out, folder[0], "run-output.fss.partial")

        def both_ranks_on_disk():
            check(all(p.poll() is None for p, _ in ranks), "a rank ended while the job was held")
            if not os.path.exists(partial) or os.path.getsize(partial) == 0:
                return False
            rr = run([args.fsdpscope, "dump", "--type", "collective", partial])
            return len({json.loads(x)["source"] for x in rr.stdout.splitlines()}) >= 2
        wait_for(both_ranks_on_disk, "the first collector's trace to hold both ranks' collectives", limit=300)
        first.kill()
        check(all(p.poll() is None for p, _ in ranks), "a rank ended while the job was held")
        second = Collector(args, out, env=env, name="second")
        second.wait_ready()
        release = os.open(fifo, os.O_WRONLY)
        os.write(release, b"x")
        os.close(release)
        wait_ranks(ranks, limit=600)
        # Every rank has exited: what it sent is in the socket or the spool.
        second.p.send_signal(signal.SIGTERM)
        rc = second.wait(limit=120)
    finally:
        first.kill()
        if second:
            second.kill()
        stop_ranks(ranks)
    check(rc == 0, f"the second collect exited {rc}: {second.stderr()}")
    left = [f for f in os.listdir(out) if f.startswith(".fsdpscope-run.")]
    check(not left, f"a session's folder is left in {out} (the dead one's is merged and removed): {left}")
    trace = os.path.join(out, "collect.fss")
    seqs, ends = collectives_by_rank(dump(args, trace))
    check(len(seqs) == 2, f"the trace holds collectives of {len(seqs)} ranks, not 2")
    for rank, s in sorted(seqs.items()):
        n = ends.get(rank)
        check(n, f"rank {rank} has no process_end with its collective count")
        check(sorted(s) == list(range(1, n + 1)),
              f"rank {rank}: {len(s)} collectives, {len(set(s))} distinct, want seq 1..{n} once each")
    got = lint_json(args, os.path.abspath(trace))
    check(headline(got) == headline(ref),
          f"the restarted collect's diagnosis differs from run's:\n  collect {headline(got)}\n  run     {headline(ref)}")


def scenario_security(args):
    work = fresh(os.path.join(args.work, "security"))
    xdg = private_runtime_dir(work)
    env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
    old = os.umask(0)  # whatever the umask: the folder 0700, the socket 0600
    try:
        first = Collector(args, os.path.join(work, "a"), env=env, name="first")
    finally:
        os.umask(old)
    try:
        lines = first.wait_ready()
        sock = lines["FSDPSCOPE_SINK"][len("unix:"):]
        folder = os.path.dirname(sock)
        st = os.lstat(folder)
        check(stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700,
              f"the socket's folder {folder} is {oct(stat.S_IMODE(st.st_mode))}, not 0700")
        st = os.lstat(sock)
        check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
              f"the socket {sock} is {oct(stat.S_IMODE(st.st_mode))}, not 0600")
        # A second collector on the same default socket is refused, and says who is there.
        r = run([args.fsdpscope, "collect", "--out", os.path.join(work, "b"), "--until-idle", "0"], env=env, timeout=30)
        check(r.returncode == 2, f"a second collect on the default socket exited {r.returncode}, not 2: {r.stderr}")
        check(f"pid {first.p.pid}" in r.stderr and "--listen" in r.stderr,
              f"the refusal does not name pid {first.p.pid} and --listen: {r.stderr}")
        check(first.p.poll() is None, "the first collector did not survive the second's attempt")
        # The same for an explicit unix address a collector answers on.
        r = run([args.fsdpscope, "collect", "--out", os.path.join(work, "b"), "--listen", "unix:" + sock], env=env,
                timeout=30)
        check(r.returncode == 2 and f"pid {first.p.pid}" in r.stderr,
              f"collect --listen on a live collector's socket exited {r.returncode}: {r.stderr}")
        # A folder open to others is refused, not used.
        bad = os.path.join(work, "xdg-bad")
        os.makedirs(os.path.join(bad, "fsdpscope"), exist_ok=True)
        os.chmod(bad, 0o700)
        os.chmod(os.path.join(bad, "fsdpscope"), 0o755)
        r = run([args.fsdpscope, "collect", "--out", os.path.join(work, "c")], env=dict(env, XDG_RUNTIME_DIR=bad),
                timeout=30)
        check(r.returncode == 2 and "0700" in r.stderr, f"a 0755 socket folder was not refused: {r.stderr}")
    finally:
        first.p.send_signal(signal.SIGTERM)
        rc = first.wait()
    check(rc == 0, f"collect exited {rc} on SIGTERM: {first.stderr()}")
    check(not os.path.exists(sock), "the socket is still there after the collector finished")

    # tcp: a key file of the user's own, named in the printed FSDPSCOPE_SINK.
    out = os.path.join(work, "tcp")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t = Collector(args, out, ["--listen", f"tcp:127.0.0.1:{port}"], env=env, name="tcp")
    try:
        lines = t.wait_ready()
        key = os.path.join(os.path.realpath(out), "collect.key")
        check(lines["FSDPSCOPE_SINK"] == f"tcp:127.0.0.1:{port},key={key}",
              f"FSDPSCOPE_SINK is not the tcp address with its key: {lines['FSDPSCOPE_SINK']}")
        st = os.lstat(key)
        check(stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
              f"the key file is {oct(stat.S_IMODE(st.st_mode))}, not 0600")
        # A connection with a wrong key: cut, and nothing of it in the trace.
        c = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        c.sendall(b"FSSKEY01" + b"\0" * 32 + b"FSS-garbage-after-a-wrong-key" * 100)
        c.settimeout(WAIT_S)
        try:
            while c.recv(4096):
                pass  # the collector closes it: recv returns b""
            cut = True
        except ConnectionResetError:
            cut = True
        except socket.timeout:
            cut = False
        c.close()
        check(cut, "a connection with a wrong key was not cut")
        # An agent with the key the printed line names gets in.
        agents = 0
        if args.fsdp_ref:
            env_job = dict(env, **lines)
            r = run([args.fsdp_ref, "--backend", "cpu", "--nranks", "1", *MODEL, "--layers", "2", "--steps", "2"], env=env_job)
            check(r.returncode == 0, f"fsdp_ref over tcp exited {r.returncode}: {r.stderr}")
            agents = 1
        t.p.send_signal(signal.SIGINT)
        rc = t.wait()
    finally:
        t.kill()
    check(rc == 0, f"collect exited {rc} on SIGINT: {t.stderr()}")
    records = dump(args, os.path.join(out, "collect.fss"))
    hellos = [r for r in records if r["type"] == "process_hello"]
    check(len(hellos) == agents, f"the trace holds {len(hellos)} processes, want {agents}: the agent with the key "
          "only (a wrong-key connection never reaches it)")
    check(agents == 0 or [r for r in records if r["type"] == "collective"], "the keyed agent's collectives are missing")


def scenario_keep(args):
    """--keep last:2 through the session: the trace keeps the last steps (its
    header says so: lint's notes), the session's own summary covers them all."""
    work = fresh(os.path.join(args.work, "keep"))
    env = dict(os.environ, XDG_RUNTIME_DIR=private_runtime_dir(work))
    out = os.path.join(work, "run")
    summary = os.path.join(work, "summary.json")
    steps = 16
    r = run([args.fsdpscope, "run", "--out", out, "--keep", "last:2", "--json-summary", summary, "--",
             args.fsdp_ref, "--backend", "cpu", "--nranks", "2", *MODEL, "--layers", "4", "--wrap", "block",
             "--steps", str(steps)], env=env)
    check(r.returncode == 0, f"fsdpscope run --keep last:2 exited {r.returncode}: {r.stderr}")
    check("the trace holds the last 2 of" in r.stderr, f"run did not say what the trace holds: {r.stderr}")
    with open(summary) as f:
        whole = json.load(f)
    schema_ok(args, summary)
    kept = lint_json(args, os.path.abspath(os.path.join(out, "trace.fss")))
    check(whole["steps_seen"] == steps, f"the session's analysis saw {whole['steps_seen']} steps, not {steps}")
    check(kept["steps_seen"] < steps, f"the last:2 trace holds {kept['steps_seen']} of {steps} steps")
    check(any("--keep last:2" in n for n in kept["notes"]), f"lint does not read last:2 in the header: {kept['notes']}")
    check(whole["verdict"] == kept["verdict"] == "diagnosed", "the verdicts differ")
    check(not [f for f in os.listdir(os.path.join(out)) if f.startswith(".fsdpscope-run.")],
          "the session's folder (its segments) is left")
    r = run([args.fsdpscope, "collect", "--keep", "last:0"], env=env, timeout=30)
    check(r.returncode == 2 and "--keep last:0" in r.stderr, f"collect --keep last:0 was not refused: {r.stderr}")


def scenario_options(args):
    """An analysis option that does not fit the job is said at the session's
    end, as lint says it, and the trace is kept."""
    work = fresh(os.path.join(args.work, "options"))
    xdg = private_runtime_dir(work)
    env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
    out = os.path.join(work, "collect")
    c = Collector(args, out, ["--rank", "5", "--until-idle", "1"], env=env)
    ranks = []
    try:
        lines = c.wait_ready()
        ranks = start_ranks(args, work, lines, 2, [*MODEL, "--layers", "2", "--steps", "3"], "o")
        wait_ranks(ranks)
        rc = c.wait()
    finally:
        c.kill()
        stop_ranks(ranks)
    err = c.stderr()
    check(rc == 0, f"collect exited {rc}: {err}")
    check("--rank 5: the trace has no rank 5; its ranks are 0..1" in err, f"collect did not say --rank 5 fits no rank: {err}")
    check("fsdpscope lint: " not in err, f"collect printed a lint summary for an option that does not fit: {err}")
    trace = os.path.join(out, "collect.fss")
    check(os.path.exists(trace), f"no trace at {trace}")
    r = run([args.fsdpscope, "lint", "--rank", "5", trace])
    check(r.returncode == 2 and "--rank 5: the trace has no rank 5" in r.stderr,
          f"lint --rank 5 on the session's trace: {r.returncode} {r.stderr}")


def parse_args():
    """The options of collect's e2e scripts (this one, collect_net_e2e.py), the agent exported."""
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--fsdp-ref")
    ap.add_argument("--schema", required=True)
    ap.add_argument("--schema-check", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    args.fsdpscope = os.path.abspath(args.fsdpscope)
    os.environ["FSDPSCOPE_AGENT"] = os.path.abspath(args.agent)
    os.makedirs(args.work, exist_ok=True)
    return args


def main():
    args = parse_args()
    try:
        if args.scenario.startswith("equal:"):
            if not args.fsdp_ref:
                print("SKIP: fsdp_ref is not built")
                return SKIP
            scenario_equal(args, args.scenario.split(":", 1)[1])
        elif args.scenario == "restart":
            if not args.fsdp_ref:
                print("SKIP: fsdp_ref is not built")
                return SKIP
            scenario_restart(args)
        elif args.scenario == "keep":
            if not args.fsdp_ref:
                print("SKIP: fsdp_ref is not built")
                return SKIP
            scenario_keep(args)
        elif args.scenario == "security":
            scenario_security(args)
        elif args.scenario == "options":
            if not args.fsdp_ref:
                print("SKIP: fsdp_ref is not built")
                return SKIP
            scenario_options(args)
        else:
            print(f"unknown scenario {args.scenario}", file=sys.stderr)
            return 2
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
