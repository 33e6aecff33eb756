#!/usr/bin/env python3
"""export_test.py - `fsdpscope export` end to end (tests/e2e/export.cmake).

fsdp_ref runs under `fsdpscope run` (per-block, per-Linear, tensor parallel,
gradient accumulation), a generated trace with hostile names
(export_gen_trace.c) and synthetic traces with CUPTI intervals, plain and
grouped (export_synth_trace.c), each exported with --perfetto and with --kineto, and
the outputs checked against `fsdpscope dump` of the same trace:

  * every file parses as strict JSON (no duplicate key, no NaN or Infinity,
    UTF-8 only) and is as docs/report-schema.json describes it;
  * every event with a timestamp carries ts, pid and tid;
  * every collective is exactly one slice with cat "kernel" named as NCCL
    names its kernels, per rank and op as many as dump's collectives, and one
    host-call slice in another cat; each call's flow (s) has its kernel's (f);
    with CUPTI intervals, every kernel spans its device interval;
  * one process per rank named "rank R";
  * --perfetto: the findings of lint as instant events, one per finding, at a step;
  * --kineto: DIR holds only rank-R.json files, each with one pid of its own,
    distributedInfo's rank and world_size, a record_param_comms op per
    collective and a cuda_runtime launch for every kernel's correlation, a
    ProfilerStep#N span per step;
  * a DIR that exists and is not empty is refused (exit 2), left as it was;
  * names from the job come back exactly (escaped on the way);
  * `fsdpscope help export` has EXAMPLES;
  * --round-trip: lint of the exported folder says what lint of the trace says (verdict,
    units, per-step counts; grouped calls come back as groups), and top --once of it
    shows the same AllGathers per step and findings.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lint_schema_check  # noqa: E402  (the schema validator of the report's tests)

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "report-schema.json")
with open(SCHEMA_PATH) as _f:
    SCHEMA = json.load(_f)
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what)
    return cond


def strict_load(path):
    """json.loads that refuses duplicate keys, NaN / Infinity and non-UTF-8."""

    def pairs(items):
        seen = {}
        for k, v in items:
            if k in seen:
                raise ValueError(f"duplicate key {k!r}")
            seen[k] = v
        return seen

    def constant(name):
        raise ValueError(f"non-finite number {name}")

    with open(path, "rb") as f:
        data = f.read()
    doc = json.loads(data.decode("utf-8", errors="strict"), object_pairs_hook=pairs, parse_constant=constant)
    # and described in docs/report-schema.json (perfetto_document, kineto_document)
    errors = lint_schema_check.problems(SCHEMA, doc)
    check(not errors, f"{path}: not as docs/report-schema.json describes it: {errors[:3]}")
    return doc


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


# dump's op -> the family in NCCL's kernel name
KERNEL_FAMILY = {
    "AllGather": "AllGather", "ReduceScatter": "ReduceScatter", "AllReduce": "AllReduce",
    "Broadcast": "Broadcast", "Reduce": "Reduce", "Send": "SendRecv", "Recv": "SendRecv",
    "AllToAll": "SendRecv", "Gather": "SendRecv", "Scatter": "SendRecv",
}
KERNEL_RE = re.compile(r"^ncclDevKernel_(AllGather|ReduceScatter|AllReduce|Broadcast|Reduce|SendRecv)[_(]")


def dump_counts(fsdpscope, trace):
    """{rank: Counter(kernel family)} and {rank: collectives} from dump."""
    r = run([fsdpscope, "dump", trace])
    check(r.returncode == 0, f"dump {trace}: exit {r.returncode}: {r.stderr}")
    ranks, fam = {}, collections.defaultdict(collections.Counter)
    for line in r.stdout.splitlines():
        rec = json.loads(line)
        if rec.get("type") == "process_hello":
            ranks[rec["source"]] = rec["rank"]
        elif rec.get("type") == "collective":
            fam[rec["rank"]][KERNEL_FAMILY[rec["op"]]] += 1
    return fam


def timed_events_ok(events, where):
    bad = [e for e in events if e.get("ph") != "M" and not all(k in e for k in ("ts", "pid", "tid"))]
    check(not bad, f"{where}: {len(bad)} timestamped events without ts, pid or tid: {bad[:2]}")


def check_perfetto(path, want, names, device=False, rules=None):
    doc = strict_load(path)
    ev = doc["traceEvents"]
    timed_events_ok(ev, path)
    rank_of = {}
    for e in ev:
        if e["ph"] == "M" and e["name"] == "process_name":
            rank_of[e["pid"]] = e["args"]["rank"]
            check(e["args"]["name"] == f"rank {e['args']['rank']}", f"{path}: process named {e['args']['name']!r}")
            check("host" in e["args"] and "pid" in e["args"], f"{path}: process_name without host and pid")
    got = collections.defaultdict(collections.Counter)
    calls = collections.defaultdict(collections.Counter)
    flows = collections.defaultdict(set)
    for e in ev:
        if e["ph"] == "X" and e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel_"):
            m = KERNEL_RE.match(e["name"])
            check(m is not None, f"{path}: kernel name {e['name']!r} is not NCCL's")
            if m:
                got[rank_of.get(e["pid"])][m.group(1)] += 1
            if device:
                check(e["args"].get("interval") == "device", f"{path}: {e['name']} seq {e['args'].get('seq')} "
                      f"drawn from {e['args'].get('interval')!r}, not its GPU interval")
        elif e["ph"] == "X" and e.get("cat") == "nccl_call":
            calls[rank_of.get(e["pid"])][e["name"]] += 1
        elif e["ph"] in ("s", "f"):
            flows[e["ph"]].add(e["id"])
            if e["ph"] == "f":
                check(e.get("bp") == "e", f"{path}: flow end without bp e")
    check(dict(got) == dict(want), f"{path}: NCCL kernels per rank and op {dict(got)} != dump's {dict(want)}")
    check(sum(sum(c.values()) for c in calls.values()) == sum(sum(c.values()) for c in want.values()),
          f"{path}: host-call slices {dict(calls)} != dump's collectives")
    check(flows["s"] == flows["f"] and len(flows["s"]) == sum(sum(c.values()) for c in want.values()),
          f"{path}: flows: {len(flows['s'])} starts, {len(flows['f'])} ends")
    # each flow inside the slice it binds to (a call's, a kernel's) on its own track
    spans = collections.defaultdict(list)
    for e in ev:
        if e["ph"] == "X" and e.get("cat") in ("nccl_call", "kernel"):
            spans[(e["pid"], e["tid"], e["cat"])].append((e["ts"], e["ts"] + e["dur"]))
    for e in ev:
        if e["ph"] in ("s", "f"):
            cat = "nccl_call" if e["ph"] == "s" else "kernel"
            check(any(a <= e["ts"] <= b for a, b in spans[(e["pid"], e["tid"], cat)]),
                  f"{path}: flow {e['ph']} {e['id']} at {e['ts']} outside every {cat} slice of its track")
    check(sorted(rank_of.values()) == sorted(want), f"{path}: processes {sorted(rank_of.values())} != ranks {sorted(want)}")
    # a named thread for every track a slice is on (host calls' threads, GPU streams)
    named = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    tracks = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "X"}
    check(tracks <= named, f"{path}: tracks without a thread_name: {sorted(tracks - named)[:4]}")
    # µs with the ns kept: at most 3 decimals; CUPTI's ns intervals between whole µs
    ts = [e["ts"] for e in ev if "ts" in e]
    check(all(abs(t * 1000 - round(t * 1000)) < 1e-3 for t in ts), f"{path}: timestamps finer than ns")
    check(not device or any(t != int(t) for t in ts), f"{path}: the ns of the device intervals lost")
    cats = collections.Counter(e.get("cat") for e in ev if e["ph"] == "X")
    check(cats.get("nvtx", 0) > 0, f"{path}: no NVTX slice")
    check(any(e["ph"] == "C" and e["name"] == "step time" for e in ev), f"{path}: no step time counter")
    check(any(e["ph"] == "C" and e["name"] == "AllGathers per step" for e in ev), f"{path}: no AllGathers counter")
    check(any(e["ph"] == "C" and e["name"] == "exposed AllGather time" for e in ev), f"{path}: no exposure counter")
    if rules is not None:
        # the findings as instant events, one per finding, at a step (inside the steps' counters)
        inst = [e for e in ev if e["ph"] == "i" and e.get("cat") == "finding"]
        check(sorted(e["name"] for e in inst) == sorted(rules),
              f"{path}: finding instants {sorted(e['name'] for e in inst)} != lint's {sorted(rules)}")
        steps = [e["ts"] for e in ev if e["ph"] == "C" and e["name"] == "step time"]
        check(not inst or (steps and all(min(steps) <= e["ts"] <= max(steps) for e in inst)),
              f"{path}: finding instants outside the steps")
    for n in names:
        check(any(e.get("name", "").startswith(n) for e in ev) or
              any(e.get("args", {}).get("comm_name", "").startswith(n) for e in ev),
              f"{path}: the job's name {n!r} does not come back")
    return ev


def union(iv):
    out = []
    for a, b in sorted(i for i in iv if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def intersection(x, y):
    i = j = t = 0
    while i < len(x) and j < len(y):
        s, e = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        t += max(0, e - s)
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return t


def kineto_overlap(events):
    """HTA's comm/comp overlap of one exported file, computed here from its events with HTA's
    rules but at the file's own precision (no inward rounding to whole us): NCCL kernels
    against the other kernels, those launched before the last ProfilerStep# only. None
    without communication time."""
    steps = sorted(e["ts"] for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    last = steps[-1] if len(steps) >= 2 else float("inf")
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    comm, comp = [], []
    for e in events:
        if e.get("cat") == "kernel" and launch[e["args"]["correlation"]] < last:
            (comm if e["name"].startswith("nccl") else comp).append((e["ts"], e["ts"] + e["dur"]))
    c, p = union(comm), union(comp)
    total = sum(b - a for a, b in c)
    return intersection(c, p) / total if total else None


def check_kineto(folder, want, names, figures=None):
    files = sorted(os.listdir(folder))
    check(files and all(re.fullmatch(r"rank-\d+\.json", f) for f in files), f"{folder}: holds {files}")
    pids = {}
    for f in files:
        path = os.path.join(folder, f)
        doc = strict_load(path)
        rank = int(f[5:-5])
        ev = doc["traceEvents"]
        timed_events_ok(ev, path)
        di = doc.get("distributedInfo", {})
        check(di.get("rank") == rank and di.get("world_size", 0) >= 1 and di.get("backend") == "nccl",
              f"{path}: distributedInfo {di}")
        check(isinstance(doc.get("baseTimeNanoseconds"), int), f"{path}: no baseTimeNanoseconds")
        pid_set = {e["pid"] for e in ev if "pid" in e}
        check(len(pid_set) == 1, f"{path}: pids {pid_set}")
        pids[f] = next(iter(pid_set)) if pid_set else None
        got = collections.Counter()
        launches = {e["args"]["correlation"] for e in ev if e.get("cat") == "cuda_runtime"}
        for e in ev:
            if e.get("cat") == "kernel":
                check(isinstance(e["args"].get("stream"), int) and e["args"]["stream"] >= 0,
                      f"{path}: kernel without a stream")
                check(e["args"].get("correlation") in launches, f"{path}: kernel {e['name']} without its launch")
                m = KERNEL_RE.match(e["name"])
                if m:
                    got[m.group(1)] += 1
                    for k in ("Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size",
                              "Process Group Name"):
                        check(k in e["args"], f"{path}: NCCL kernel without {k!r}")
        check(got == want.get(rank), f"{path}: NCCL kernels {dict(got)} != dump's {dict(want.get(rank, {}))}")
        ops = sum(1 for e in ev if e.get("cat") == "cpu_op" and e["name"] == "record_param_comms")
        check(ops == sum(want.get(rank, {}).values()), f"{path}: {ops} record_param_comms")
        steps = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
        check(len(steps) >= 2, f"{path}: {len(steps)} ProfilerStep# spans")
        if figures is not None:
            got_overlap, fss = kineto_overlap(ev), figures.get(rank)
            print(f"  {f}: overlap of the export {got_overlap}, comm_comp_overlap of the .fss {fss}")
            check((got_overlap is None) == (fss is None) and
                  (fss is None or abs(got_overlap - fss) < 1e-6),
                  f"{path}: the export's overlap {got_overlap} != comm_comp_overlap {fss} of the .fss")
        for n in names:
            check(any(e.get("args", {}).get("Process Group Description", "").startswith(n) for e in ev) or
                  any(e.get("name", "").startswith(n) for e in ev), f"{path}: the job's name {n!r} does not come back")
    check(len(set(pids.values())) == len(pids), f"{folder}: files share a pid: {pids}")


# What `lint --json` of a trace and of its --kineto export must agree on.
ROUND_TRIP_KEYS = ("verdict", "steps_analyzed", "steps_seen", "warmup_steps", "step_period", "per_step",
                   "microbatches", "reshard_after_forward", "ranks", "world_size", "tp_degree")


# a rank's row: the selection mark or a blank, the rank right-aligned (never the
# findings' tally line, "3 findings: ...", whose counts move with exposed-gather's
# severity, a matter of times the export rounds)
TOP_ROW_RE = re.compile(r"^(?:\u25b6| ) {0,3}(\d+)\s+\S+\s+\d+\s+\S+\s+(\S+)\s")
TOP_FINDING_RE = re.compile(r"^ (error|warning|info) ([a-z-]+):")


def top_words(out):
    """What top --once shows of the diagnosis: AllGathers per step (of the units' expected)
    by rank, and the findings' rules (less exposed-gather, whose times the export rounds)."""
    rows, rules, table = {}, [], False
    for line in out.splitlines():
        if line.startswith("RANK"):
            table = True
            continue
        m = TOP_ROW_RE.match(line) if table else None
        if m:
            rows[int(m.group(1))] = m.group(2)
            continue
        table = False
        m = TOP_FINDING_RE.match(line)
        if m and m.group(2) != "exposed-gather":
            rules.append(m.group(1) + " " + m.group(2))
    return rows, rules


def round_trip_top(a, trace, folder):
    """top --once reads the exported folder and shows what it shows of the .fss."""
    r1 = run([a.fsdpscope, "top", "--once", trace])
    r2 = run([a.fsdpscope, "top", "--once", folder])
    if not check(r1.returncode == r2.returncode == 0, f"top --once {folder}: exit {r2.returncode}: {r2.stderr[-300:]}"):
        return
    x, y = top_words(r1.stdout), top_words(r2.stdout)
    check(x[0] and x == y, f"top --once {trace}: {x} on the .fss, {y} on the export")


def round_trip(a, trace, folder, figures=True):
    """lint --json of the .fss and of the Kineto files: the same verdict, units and per-step
    counts; with the figures, each rank's comm_comp_overlap within 0.01."""
    r1 = run([a.fsdpscope, "lint", "--json", trace])
    r2 = run([a.fsdpscope, "lint", "--json", folder])
    if not check(r2.returncode == r1.returncode, f"round trip {trace}: lint exits {r1.returncode}, "
                 f"on the export {r2.returncode}: {r2.stderr[-400:]}"):
        return
    x, y = json.loads(r1.stdout), json.loads(r2.stdout)
    for k in ROUND_TRIP_KEYS:
        check(x.get(k) == y.get(k), f"round trip {trace}: {k}: {x.get(k)} != {y.get(k)} on the export")
    # units: the structure; their names come from NVTX module ranges, which a Kineto file has not
    ux = {k: v for k, v in (x.get("units") or {}).items() if not k.endswith("_name")}
    uy = {k: v for k, v in (y.get("units") or {}).items() if not k.endswith("_name")}
    check(ux == uy, f"round trip {trace}: units {ux} != {uy} on the export")
    print(f"round trip {os.path.basename(trace)}: verdict {y.get('verdict')}, {y.get('steps_analyzed')} steps, "
          f"per step {y.get('per_step', {}).get('allgathers')} AllGathers, {uy.get('repeating_units')} units x "
          f"{uy.get('gathers_per_unit')}")
    check([f["rule"] for f in x["findings"] if f["rule"] != "exposed-gather"] ==
          [f["rule"] for f in y["findings"] if f["rule"] != "exposed-gather"],
          f"round trip {trace}: findings {[f['rule'] for f in x['findings']]} != {[f['rule'] for f in y['findings']]}")
    round_trip_top(a, trace, folder)
    if a.figures and figures:
        ox = {row["rank"]: row["comm_comp_overlap"] for row in x["per_rank"]}
        oy = {row["rank"]: row["comm_comp_overlap"] for row in y["per_rank"]}
        check(set(ox) == set(oy), f"round trip {trace}: ranks {sorted(ox)} != {sorted(oy)}")
        for rank in ox:
            if ox[rank] is None or oy.get(rank) is None:
                check(ox[rank] == oy.get(rank), f"round trip {trace}: rank {rank} overlap {ox[rank]} != {oy.get(rank)}")
            else:
                print(f"  rank {rank}: comm_comp_overlap {ox[rank]:.4f} (.fss), {oy[rank]:.4f} (export)")
                check(abs(ox[rank] - oy[rank]) <= 0.01,
                      f"round trip {trace}: rank {rank} comm_comp_overlap {ox[rank]:.4f} on the .fss, "
                      f"{oy[rank]:.4f} on the export")


def export_and_check(a, trace, work, names=(), device=False):
    base = os.path.join(work, os.path.basename(trace)[:-4])
    want = dump_counts(a.fsdpscope, trace)
    print(f"{os.path.basename(trace)}: dump's collectives per rank: " +
          ", ".join(f"{r}: {dict(c)}" for r, c in sorted(want.items())))
    r = run([a.fsdpscope, "lint", "--json", trace])
    rules = [f["rule"] for f in json.loads(r.stdout)["findings"]] if r.stdout.strip() else None
    r = run([a.fsdpscope, "export", trace, "--perfetto", base + ".json"])
    if check(r.returncode == 0, f"export --perfetto {trace}: exit {r.returncode}: {r.stderr}"):
        check_perfetto(base + ".json", want, names, device, rules)
    figures = None
    if a.figures:
        # the exported intervals and launches give fsdpscope's own figure on the .fss
        r = run([a.fsdpscope, "report", "--json", trace])
        figures = {row["rank"]: row["comm_comp_overlap"] for row in json.loads(r.stdout)["per_rank"]}
    r = run([a.fsdpscope, "export", trace, "--kineto", base + "-kineto"])
    if check(r.returncode == 0, f"export --kineto {trace}: exit {r.returncode}: {r.stderr}"):
        check_kineto(base + "-kineto", want, [n for n in names[:1]], figures)
        return base + "-kineto"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--fsdp-ref", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--synth", required=True)
    ap.add_argument("--fixtures", required=True, help="tests/fixtures/golden (cut.fss)")
    ap.add_argument("--round-trip", action="store_true", help="the build reads Kineto files: lint them back")
    ap.add_argument("--figures", action="store_true", help="the report has per_rank comm_comp_overlap")
    ap.add_argument("--quick", action="store_true",
                    help="the generated traces only, no fsdp_ref run (the sanitizer build: the exporters' code, "
                         "not the trainer's)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="fss-export-")
    try:
        r = run([a.fsdpscope, "help", "export"])
        check(r.returncode == 0 and "\nEXAMPLES\n" in r.stdout and "fsdpscope export" in r.stdout.split("EXAMPLES")[1],
              "help export: no EXAMPLES")
        r = run([a.fsdpscope, "export", "x.fss"])
        check(r.returncode == 2 and "--perfetto" in r.stderr, f"export without an output: exit {r.returncode}")
        runs = {
            "block": ["--wrap", "block"],
            "linear": ["--wrap", "linear"],
            "tp": ["--nranks", "4", "--tp", "2", "--wrap", "block"],
            "accum": ["--grad-accum", "2"],
            # ZeRO-3's coalesced fetches: calls in ncclGroupStart / End, each its own kernel
            "zero3": ["--style", "zero3", "--zero3-gather", "coalesced", "--bucket", "3000",
                      "--persistence-threshold", "64"],
        }
        traces = []
        for name, extra in ({} if a.quick else runs).items():
            # a model big enough that HTA's rounding of each event inward to whole µs (the
            # Kineto reader follows it) moves the overlap by well under 0.01
            args = ["--nranks", "2", "--steps", "6", "--quiet", "--d-model", "128", "--ffn", "384"] + extra
            r = run([a.fsdpscope, "run", "--out", work, "--name", name, "--", a.fsdp_ref] + args)
            if check(r.returncode in (0, 1), f"run {name}: exit {r.returncode}: {r.stderr[-500:]}"):
                traces.append(os.path.join(work, name + ".fss"))
        for t in traces:
            folder = export_and_check(a, t, work)
            if folder and a.round_trip:
                round_trip(a, t, folder)
        hostile = os.path.join(work, "hostile.fss")
        r = run([a.gen, "--out", hostile, "--ranks", "3", "--steps", "5"])
        if check(r.returncode == 0, f"export_gen_trace: {r.stderr}"):
            names = r.stdout.splitlines()
            export_and_check(a, hostile, work, names)
        # CUPTI's intervals, delivered late; grouped calls share their group's one kernel
        for kind in ("plain", "grouped"):
            synth = os.path.join(work, f"cupti-{kind}.fss")
            r = run([a.synth, synth, kind])
            if check(r.returncode == 0, f"export_synth_trace {kind}: {r.stderr}"):
                folder = export_and_check(a, synth, work, device=True)
                # a group's kernels share its one launch: the reader makes them one group again
                # (not its overlap: the reader rounds each event inward to whole µs as HTA does,
                # which moves these µs-long kernels' figure by points; check_kineto compares the
                # export's overlap at its own precision)
                if folder and a.round_trip:
                    round_trip(a, synth, folder, figures=False)
        # a folder that holds something is refused and left as it was
        busy = os.path.join(work, "busy")
        os.mkdir(busy)
        open(os.path.join(busy, "keep.txt"), "w").close()
        if traces or a.quick:
            first = traces[0] if traces else hostile
            r = run([a.fsdpscope, "export", first, "--kineto", busy])
            check(r.returncode == 2 and "not empty" in r.stderr, f"export into a busy folder: exit {r.returncode}")
            check(os.listdir(busy) == ["keep.txt"], f"busy folder changed: {os.listdir(busy)}")
            # nor through a symbolic link, even to an empty folder
            empty = os.path.join(work, "empty")
            os.mkdir(empty)
            os.symlink(empty, os.path.join(work, "link"))
            r = run([a.fsdpscope, "export", first, "--kineto", os.path.join(work, "link")])
            check(r.returncode == 2 and os.listdir(empty) == [], f"export through a symbolic link: exit {r.returncode}")
            # a trace cut short: exported up to there, and said so
            cut = os.path.join(a.fixtures, "cut.fss")
            r = run([a.fsdpscope, "export", cut, "--perfetto", os.path.join(work, "cut.json")])
            check(r.returncode == 0 and "cut short, exported what could be read" in r.stderr,
                  f"export of a cut trace: exit {r.returncode}: {r.stderr}")
            # a trace that cannot be read leaves nothing behind
            r = run([a.fsdpscope, "export", os.path.join(work, "missing.fss"), "--kineto", os.path.join(work, "new")])
            check(r.returncode == 2 and not os.path.exists(os.path.join(work, "new")),
                  f"export of a missing trace: exit {r.returncode}, folder left: {os.path.exists(os.path.join(work, 'new'))}")
    finally:
        if not FAILURES:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("outputs kept in " + work)
    if FAILURES:
        print(f"{len(FAILURES)} failures")
        return 1
    print("export: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
