#!/usr/bin/env python3
"""More than one node, end to end (tests/e2e/nodes.cmake).

usage: nodes_e2e.py --fsdpscope F --agent A --fsdp-ref R --schema S --schema-check C --work DIR

One fsdp_ref job (CPU backend, 4 ranks, started as a launcher starts them:
RANK / WORLD_SIZE / LOCAL_RANK / --unique-id-file) whose ranks send to two
`fsdpscope collect` sessions on this machine, each with its own --out and
socket: ranks 0-1 to collector A; ranks 2-3 and collector B run inside
`unshare --time --monotonic 1000 --fork`, so that node B's CLOCK_MONOTONIC
is 1000 s ahead of node A's (the stand-in's cross-process stamps are on
CLOCK_REALTIME, docs/nccl_cpu.md "Clocks", so the job runs as one). Then:

  * `lint --json A/collect.fss B/collect.fss` equals, in its decisions
    (verdict, findings' rule ids and severities but for the timed rules,
    repeating units, gathers per unit, reshard policy, ranks, step counts),
    `lint --json` of the same job under one collector;
  * the merged `report --json` follows the schema, and its nodes section
    puts node B's offset within a second of -1000 s (the shift is the time
    namespace's, deterministic), with a residual and the collectives it
    rests on; `lint A/ B/` (folders) reads the same two traces and says so;
  * `dump` of the two traces gives one job's records (sources 0-3, node B's
    stamps on node A's clock); `ledger --json` of them measures one
    collector's P, N and U;
  * `lint` of node B's trace alone works and says it is a partial job;
  * a hang across the nodes (rank 2 on node B stalled, ranks 0-1 on node A
    waiting): node A's collector says its ranks wait and the others are
    another node's, the merged lint names rank 2 as missing.

Needs root (unshare --time): skips with the reason otherwise. No timing is
asserted (the 1 s tolerance is on an offset of 1000 s set by the test).
Exit status: 0 pass, 1 fail (with the reason), 77 skip (with the reason).
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import collect_e2e as ce  # noqa: E402  (its collector and rank helpers)

SKIP = 77
SHIFT_S = 1000
UNSHARE = ["unshare", "--time", "--monotonic", str(SHIFT_S), "--fork"]
FSDP_ARGS = [*ce.MODEL, "--layers", "4", "--wrap", "block", "--steps", "5"]
check = ce.check
Fail = ce.Fail


def can_unshare_time():
    """unshare --time needs root (CAP_SYS_ADMIN) and a kernel with time namespaces (5.6)."""
    if os.geteuid() != 0:
        return "not root: unshare --time needs CAP_SYS_ADMIN"
    try:
        r = subprocess.run([*UNSHARE, "cat", "/proc/self/timens_offsets"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return "unshare is not installed (util-linux)"
    if r.returncode != 0 or f"monotonic {SHIFT_S}" not in " ".join(r.stdout.split()):
        return f"unshare --time failed here: {r.stderr.strip() or r.stdout.strip()}"
    return None


class Node:
    """One node: a collector on its own socket and --out (in the time namespace when shifted)."""

    def __init__(self, args, work, name, shifted, more=()):
        self.name = name
        self.out = os.path.join(work, name)
        xdg = ce.private_runtime_dir(os.path.join(work, f"{name}-rt"))
        self.env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
        sock = os.path.join(xdg, "collect.sock")
        extra = ["--listen", f"unix:{sock}", "--until-idle", "1", *more]
        prefix = UNSHARE if shifted else []
        self.prefix = prefix
        self.err_path = os.path.join(work, f"{name}.collect.err")
        self.errf = open(self.err_path, "w")
        self.p = subprocess.Popen([*prefix, args.fsdpscope, "collect", "--out", self.out, *extra], env=self.env,
                                  stdout=subprocess.DEVNULL, stderr=self.errf, start_new_session=True)
        self.c = self  # ce.Collector's interface, for its helpers

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def wait_ready(self):
        addr = os.path.join(self.out, "collect.addr")

        def ready():
            check(self.p.poll() is None, f"collect {self.name} exited {self.p.returncode}: {self.stderr()}")
            return os.path.exists(addr) and "FSDPSCOPE_OUT=" in self.stderr()
        ce.wait_for(ready, f"collect {self.name} to listen")
        return ce.Collector.env_lines(self)

    def wait(self):
        try:
            self.p.wait(timeout=ce.WAIT_S)
        except subprocess.TimeoutExpired:
            raise Fail(f"collect {self.name} did not finish: {self.stderr()}")
        finally:
            self.errf.close()
        check(self.p.returncode == 0 or self.p.returncode in (1, 3, 4),
              f"collect {self.name} exited {self.p.returncode}: {self.stderr()}")
        return os.path.join(self.out, "collect.fss")

    def kill(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, 9)
            self.p.wait()
        self.errf.close()


def start_rank(args, work, node, lines, rank, uid, tag, more=()):
    env = dict(node.env)
    env.update(lines)
    env.update(RANK=str(rank), WORLD_SIZE="4", LOCAL_RANK=str(rank % 2))
    # the stand-in's dead-peer timeout far above any hang timeout here
    env.update(FSDP_REF_NCCL_TIMEOUT_S="600")
    err = open(os.path.join(work, f"rank{rank}-{tag}.err"), "w")
    # its own process group: `unshare --fork` runs the rank as its child, and a kill must reach both
    p = subprocess.Popen([*node.prefix, args.fsdp_ref, "--backend", "cpu", "--unique-id-file", uid, *FSDP_ARGS,
                          *more], env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    return p, err


def kill_ranks(procs):
    """SIGKILL every rank's process group (as a job timeout would), and reap. All are
    stopped first, so that none sees another die (the stand-in fails a collective
    whose peer died) before it is killed itself."""
    for sig in (19, 9):  # SIGSTOP, then SIGKILL
        for p, _ in procs:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
    for p, log in procs:
        p.wait()
        log.close()


def run_job(args, work, nodes, placement, tag):
    """The 4 ranks, rank r sending to nodes[placement[r]]; the nodes' traces."""
    uid = os.path.join(work, f"uid-{tag}")
    if os.path.exists(uid):
        os.unlink(uid)
    ranks = []
    try:
        lines = [n.wait_ready() for n in nodes]
        for r in range(4):
            ranks.append(start_rank(args, work, nodes[placement[r]], lines[placement[r]], r, uid, tag))
        ce.wait_ranks(ranks)
        return [n.wait() for n in nodes]
    finally:
        ce.stop_ranks(ranks)
        for n in nodes:
            n.kill()


HANG_RANK = 2  # on node B


def hang_across_nodes(args, work):
    """Rank 2 (node B) stops before a collective of step 3; ranks 0, 1 (node A)
    wait in it. Node A's collector sees its ranks inside a collective and none
    missing: only the merged traces name rank 2. The ranks are killed once node
    A has said its partial hang (an order, not a time)."""
    more = ["--hang-timeout", "1"]
    a, b = Node(args, work, "hangA", False, more + ["--metrics", "127.0.0.1:0"]), Node(args, work, "hangB", True, more)
    uid = os.path.join(work, "uid-hang")
    ranks = []
    try:
        lines = [a.wait_ready(), b.wait_ready()]
        for r in range(4):
            node = a if r < 2 else b
            ranks.append(start_rank(args, work, node, lines[0 if r < 2 else 1], r, uid, "hang",
                                    ["--stall-at", f"{HANG_RANK}:3"]))
        ce.wait_for(lambda: "fsdpscope: collective-hang:" in a.stderr(), "node A's collector to say a hang")
        check(all(p.poll() is None for p, _ in ranks), "a rank ended before node A said the hang")
        said = [l for l in a.stderr().splitlines() if l.startswith("fsdpscope: collective-hang:")][0]
        check("another node's" in said and "every rank entered" not in said,
              f"node A's collector claims to see the whole communicator: {said}")
        # A trace measures a wait to its last record; hung ranks write only their drops
        # records, once a second: kill once node A's 2 ranks have sent 3 more records than
        # when the hang was said (one of them two), so that the traces end past the timeout
        # (an order, not a time).
        url = [w for w in a.stderr().split() if w.startswith("http://") and w.endswith("/metrics")]
        check(url, f"collect --metrics printed no address: {a.stderr()}")

        def records():
            return sum(float(l.split()[-1]) for l in (ce.scrape(url[0]) or "").splitlines()
                       if l.startswith("fsdpscope_rank_records_total{"))
        base = records()
        ce.wait_for(lambda: records() >= base + 3, "node A's hung ranks' next records")
        check(all(p.poll() is None for p, _ in ranks), "a rank ended before the test killed the job")
    finally:
        kill_ranks(ranks)
    trace_a, trace_b = a.wait(), b.wait()

    r = ce.run([args.fsdpscope, "lint", "--json", "--hang-timeout", "1", trace_a, trace_b], timeout=300)
    check(r.returncode == 1, f"lint of the hung job's two traces exited {r.returncode}: {r.stderr}")
    doc = json.loads(r.stdout)
    hangs = doc["flight"]["hangs"]
    check(hangs, f"the merged traces name no hang: {doc['flight']}")
    h = hangs[0]
    missing = [m["global_rank"] for m in h["missing"]]
    waiting = [w["global_rank"] for w in h["waiting"]]
    check(missing == [HANG_RANK] and waiting == [0, 1, 3] and not h["cascade"],
          f"the merged hang: missing {missing}, waiting {waiting}; want rank {HANG_RANK} missing, 0, 1, 3 waiting")
    check(any(f["rule"] == "collective-hang" for f in doc["findings"]), "no collective-hang finding merged")

    # Node A alone: its ranks wait, and it says the rest are another node's.
    r = ce.run([args.fsdpscope, "lint", "--json", "--hang-timeout", "1", trace_a], timeout=300)
    alone = json.loads(r.stdout)
    msgs = [f["message"] for f in alone["findings"] if f["rule"] == "collective-hang"]
    check(msgs and all("not in this trace" in m for m in msgs) and not alone["flight"]["hangs"][0]["missing"],
          f"node A alone: {msgs}")


def decisions(doc):
    """What 'the same diagnosis' means across two runs of one job."""
    return {
        "verdict": doc["verdict"],
        "ranks": doc["ranks"],
        "world_size": doc["world_size"],
        "steps_seen": doc["steps_seen"],
        "steps_analyzed": doc["steps_analyzed"],
        "allgathers_per_step": doc["per_step"]["allgathers"],
        "units": {k: doc["units"][k] for k in ("repeating_units", "gathers_per_unit", "root_gathers")},
        "reshard_after_forward": doc["reshard_after_forward"],
        "findings": sorted((f["rule"], f["severity"]) for f in doc["findings"] if f["rule"] not in ce.TIMED_RULES),
    }


def fss(args, *argv):
    r = ce.run([args.fsdpscope, *argv], timeout=300)
    check(r.returncode in (0, 1, 3, 4), f"fsdpscope {' '.join(argv)} exited {r.returncode}: {r.stderr}")
    return r


def scenario(args):
    work = ce.fresh(args.work)
    # The reference: the whole job under one collector (no namespace).
    ref_trace, = run_job(args, work, [Node(args, work, "single", False)], [0, 0, 0, 0], "ref")
    ref = json.loads(fss(args, "lint", "--json", ref_trace).stdout)
    check(ref["verdict"] == "diagnosed", f"the single-collector job was not diagnosed: {ref['verdict']}")

    # Two nodes, B's CLOCK_MONOTONIC 1000 s ahead.
    a, b = Node(args, work, "nodeA", False), Node(args, work, "nodeB", True)
    trace_a, trace_b = run_job(args, work, [a, b], [0, 0, 1, 1], "two")

    merged = json.loads(fss(args, "lint", "--json", trace_a, trace_b).stdout)
    want, got = decisions(ref), decisions(merged)
    check(got == want, f"the merged diagnosis differs from one collector's:\n merged {got}\n single {want}")

    # On one time base the ranks of both nodes reach their collectives together:
    # unaligned, node B's would be 1000 s late (the bound is that shift, not a timing).
    check(merged["spread"]["max_skew_ns"] < 10**9,
          f"the merged ranks are {merged['spread']['max_skew_ns']} ns apart: the clocks were not aligned")

    r = fss(args, "report", "--json", trace_a, trace_b)
    path = os.path.join(work, "merged-report.json")
    with open(path, "w") as f:
        f.write(r.stdout)
    ce.schema_ok(args, path)
    nodes = json.loads(r.stdout)["nodes"]
    check(nodes["traces"] == 2 and not nodes["partial"], f"nodes section: {nodes}")
    n0, n1 = nodes["per_node"]
    check(n0["basis"] == "reference" and n0["offset_ns"] == 0 and n0["ranks"] == [0, 1], f"node A: {n0}")
    check(n1["ranks"] == [2, 3], f"node B's ranks: {n1['ranks']}")
    check(abs(n1["offset_ns"] + SHIFT_S * 10**9) < 10**9, f"node B's offset is {n1['offset_ns']} ns, not about -{SHIFT_S} s")
    check(abs(n1["from_anchors_ns"] + SHIFT_S * 10**9) < 10**9, f"node B's anchor part: {n1['from_anchors_ns']}")
    check(n1["basis"] == "host-exit" and n1["collectives"] > 0 and n1["residual_ns"] is not None
          and n1["aligned_to"] == 0, f"node B not refined by the shared collectives: {n1}")
    text = fss(args, "report", trace_a, trace_b).stdout
    check("2 traces read as one job" in text and "host exits shared with node 0" in text,
          f"the text report has no nodes block: {text[:2000]}")

    # Folders stand for their traces, and say which were read.
    r = fss(args, "lint", "--json", a.out, b.out)
    check(decisions(json.loads(r.stdout)) == got, "lint A/ B/ differs from lint A/collect.fss B/collect.fss")
    check(f"{a.out}: reading {trace_a}" in r.stderr, f"lint DIR does not say what it read: {r.stderr}")

    # dump of both: one job's records, sources distinct, node B's stamps on node A's clock.
    r = ce.run([args.fsdpscope, "dump", "--type", "process_hello,collective", trace_a, trace_b])
    check(r.returncode == 0, f"dump A B exited {r.returncode}: {r.stderr}")
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    hellos = {h["source"]: h for h in recs if h["type"] == "process_hello"}
    check(sorted(hellos) == [0, 1, 2, 3] and {hellos[s]["node"] for s in (2, 3)} == {1},
          f"dump A B: sources {sorted(hellos)}, not 0..3 with node B's 2 and 3")
    mono_a = min(hellos[s]["mono_ns"] for s in (0, 1))
    check(all(abs(hellos[s]["mono_ns"] - mono_a) < 600 * 10**9 for s in (2, 3)),
          "dump A B: node B's hello is not on node A's CLOCK_MONOTONIC")
    check(sum(1 for c in recs if c["type"] == "collective") == merged["trace"]["collectives"],
          "dump A B does not hold every collective of the merged job")

    # The measured ledger: the merged job's P, N and U are one collector's.
    def ledger(*traces):
        d = json.loads(fss(args, "ledger", "--json", *traces).stdout)["ledger"]
        return {k: d[k] for k in ("params", "ranks", "largest_unit_params", "persistent_bytes_per_rank")}
    check(ledger(trace_a, trace_b) == ledger(ref_trace),
          f"the merged ledger differs: {ledger(trace_a, trace_b)} against {ledger(ref_trace)}")

    # Node B alone: a partial job, analysed, and said to be one.
    r = fss(args, "lint", "--json", trace_b)
    alone = json.loads(r.stdout)
    check("a partial job: 2 of the 4 ranks" in r.stderr, f"lint of node B alone does not say it is partial: {r.stderr}")
    check(alone["nodes"]["partial"] and alone["ranks"] == 2, f"node B alone: {alone['nodes']}")

    # The same trace twice is refused.
    r = ce.run([args.fsdpscope, "lint", trace_a, trace_a])
    check(r.returncode == 2 and "the same file" in r.stderr, f"lint A A: {r.returncode} {r.stderr}")

    # A hang across the nodes: seen whole only in the merged post-mortem.
    hang_across_nodes(args, work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--fsdp-ref")
    ap.add_argument("--schema", required=True)
    ap.add_argument("--schema-check", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    if not args.fsdp_ref:
        print("SKIP: fsdp_ref is not built")
        return SKIP
    why = can_unshare_time()
    if why:
        print(f"SKIP: {why}")
        return SKIP
    args.fsdpscope = os.path.abspath(args.fsdpscope)
    os.environ["FSDPSCOPE_AGENT"] = os.path.abspath(args.agent)
    try:
        scenario(args)
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
