#!/usr/bin/env python3
"""fsdpscope on PyTorch profiler (Kineto) traces: lint, report --json, top --once and dump.

  kineto_read.py shared FSDPSCOPE SHARED_DIR HTA_FIGURES
      on each of SHARED_DIR/*/*.gz (the real traces, read from there): exit codes,
      the verdict undecided with a reason that says the job is not sharded
      training, and the source's figures (dump's source_figures record, and
      report --json's per_rank keys where they exist) equal to this script's
      own computation of HTA's overlap from the JSON, and to HTA's numbers
      (HTA_FIGURES) to 0.1 point. Exit 77 without SHARED_DIR.

  kineto_read.py seeds DIR
      the seeds of tests/fuzz/kineto_map_fuzz (its corpus).

  kineto_read.py generated FSDPSCOPE FSS_TRACE WORKDIR
      on traces this script writes (never copies of the shared ones): two
      ranks of one job (files and folder), 2 files of a 128-rank world with no
      process-group names (partial), worlds that disagree (refused), a list
      mixing a .fss and a Kineto file (refused), one rank with no NCCL kernel,
      a cut file and a bad gzip (a partial reading stated with its offset).
"""
import gzip
import json
import math
import os
import re
import subprocess
import sys
from decimal import Decimal

FAILS = []
HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "..", "..", "docs", "report-schema.json")


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def schema_ok(text, what, work="/tmp"):
    """The document is strict JSON and valid against docs/report-schema.json (lint_schema_check.py)."""
    path = os.path.join(work, "kineto_read_doc.json")
    with open(path, "w") as f:
        f.write(text)
    rc, out, err = run(sys.executable, os.path.join(HERE, "lint_schema_check.py"), SCHEMA, path)
    check(rc == 0, f"{what}: valid against the schema: {(out + err)[-400:]}")


# ---- HTA's overlap, written from its definition (hta/analyzers/communication_analysis.py,
# hta/utils/utils.py, hta/common/trace.py and trace_parser.py), on the JSON itself ----

COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)"
    r"|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)")
STEP = re.compile(r"^ProfilerStep#(\d+)")


def load(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def stream_of(e):
    s = (e.get("args") or {}).get("stream", -1)
    try:
        return int(s)
    except (TypeError, ValueError):
        return -1


def union(spans):
    """HTA's merge: sorted by start, a new group where a start passes every end before it."""
    out, max_end = [], None
    for s, t in sorted(spans):
        if out and s <= max_end:
            out[-1][1] = max(out[-1][1], t)
        else:
            out.append([s, t])
        max_end = t if max_end is None else max(max_end, t)
    return out


def intersect(a, b):
    a = [x for x in a if x[1] > x[0]]
    b = [x for x in b if x[1] > x[0]]
    i = j = 0
    total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def hta_figures(doc):
    """(comm_ns, overlap_ns) as HTA computes them, in exact ns."""
    ev = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e
          and e.get("cat") not in (None, "Trace")]
    fractional = any(isinstance(e.get("ts"), Decimal) for e in doc["traceEvents"] if isinstance(e, dict))

    def times(e):
        s, t = Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"])
        if fractional:
            s, t = Decimal(math.ceil(s)), Decimal(math.floor(t))
        return int(s * 1000), int(t * 1000)

    def corr(e):
        c = (e.get("args") or {}).get("correlation", -1)
        return int(c) if isinstance(c, (int, Decimal)) else -1

    gpu = [e for e in ev if stream_of(e) >= 0 and corr(e) >= 0]
    cpu = [e for e in ev if not (stream_of(e) >= 0 and corr(e) >= 0)]
    steps = {e["name"] for e in cpu if STEP.match(e["name"])}
    if len(steps) >= 2:
        last = max(times(e)[0] for e in cpu if STEP.match(e["name"]))
        keep = {corr(e) for e in cpu if times(e)[0] < last}
        gpu = [e for e in gpu if corr(e) in keep]
    comm = union([times(e) for e in gpu if COMM.match(e["name"])])
    comp = union([times(e) for e in gpu if not COMM.match(e["name"]) and not MEMORY.match(e["name"])
                  and not NOT_COMPUTE.match(e["name"])])
    comm_ns = sum(t - s for s, t in comm)
    return max(comm_ns, 0), intersect(comm, comp)


def nccl_kernels(doc):
    """The file's NCCL kernels by type: the Collective name arg, else the kernel's name."""
    out = {"allgather": 0, "reduce_scatter": 0, "allreduce": 0, "other": 0}
    for e in doc["traceEvents"]:
        if not isinstance(e, dict) or e.get("cat") != "kernel":
            continue
        name = e.get("name", "")
        if not (name.startswith("ncclDevKernel_") or name.startswith("ncclKernel_")):
            continue
        what = str((e.get("args") or {}).get("Collective name", "")).lower().replace("_", "")
        word = name.split("_", 2)[1] if "_" in name else ""
        if "allgather" in what or (not what and word == "AllGather"):
            out["allgather"] += 1
        elif "reducescatter" in what or (not what and word == "ReduceScatter"):
            out["reduce_scatter"] += 1
        elif "allreduce" in what or (not what and word == "AllReduce"):
            out["allreduce"] += 1
        else:
            out["other"] += 1
    return out


def profiler_steps(doc):
    return sum(1 for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"
               and e.get("cat") == "user_annotation" and STEP.match(str(e.get("name", ""))))


def figures_of_dump(out):
    for line in out.splitlines():
        rec = json.loads(line)
        if rec["type"] == "source_figures":
            return rec
    return None


# ---- the shared traces ----

def shared(fsdpscope, folder, hta_path):
    if not os.path.isdir(folder):
        print("skipped: no", folder)
        return 77
    hta = json.load(open(hta_path))["traces"]
    for name in sorted(os.listdir(folder)):
        sub = os.path.join(folder, name)
        files = sorted(f for f in os.listdir(sub) if f.endswith(".gz")) if os.path.isdir(sub) else []
        for f in files:
            path = os.path.join(sub, f)
            doc = load(path)
            rc, out, err = run(fsdpscope, "lint", path)
            check(rc == 3, f"{path}: lint exits 3 (undecided), not {rc}: {err[-300:]}")
            check("not sharded training" in err + out, f"{path}: lint says the job is not sharded training")
            rc, out, err = run(fsdpscope, "lint", "--json", path)
            lint = json.loads(out) if out.strip().startswith("{") else {}
            verdict = json.dumps(lint)
            check(rc == 3 and '"undecided"' in verdict, f"{path}: lint --json verdict undecided")
            schema_ok(out, f"{path}: lint --json")
            rc, out, err = run(fsdpscope, "report", "--json", path)
            check(rc == 0, f"{path}: report --json exits 0, not {rc}")
            report = json.loads(out) if rc == 0 else {}
            schema_ok(out, f"{path}: report --json")
            notes = " ".join(report.get("notes", []))
            check("cannot be known" in notes, f"{path}: the report says what a profiler trace cannot tell")
            rc, out, err = run(fsdpscope, "top", "--once", path)
            check(rc == 0, f"{path}: top --once exits 0, not {rc}")
            rc, out, err = run(fsdpscope, "dump", path)
            check(rc == 0, f"{path}: dump exits 0, not {rc}")
            fig = figures_of_dump(out) if rc == 0 else None
            check(fig is not None, f"{path}: dump shows the source_figures record")
            if not fig:
                continue
            comm, overlap = hta_figures(doc)
            check((fig["comm_ns"], fig["overlap_ns"]) == (comm, overlap),
                  f"{path}: comm/overlap {fig['comm_ns']}/{fig['overlap_ns']} ns, the JSON's own {comm}/{overlap}")
            k = nccl_kernels(doc)
            check([fig["allgather_kernels"], fig["reduce_scatter_kernels"], fig["allreduce_kernels"],
                   fig["other_kernels"]] == [k["allgather"], k["reduce_scatter"], k["allreduce"], k["other"]],
                  f"{path}: NCCL kernels by type {fig}, the JSON's {k}")
            check(fig["profiler_steps"] == profiler_steps(doc), f"{path}: profiler_steps")
            ours = 100.0 * fig["overlap_ns"] / fig["comm_ns"] if fig["comm_ns"] else None
            want = hta[name]["comm_comp_overlap_pctg"]
            check(ours is not None and abs(ours - want) <= 0.1, f"{path}: overlap {ours} %, HTA's {want} %")
            for row in report.get("per_rank", []):
                if "comm_comp_overlap" in row and ours is not None:
                    check(abs(100 * row["comm_comp_overlap"] - want) <= 0.1, f"{path}: per_rank overlap")
                if "nccl_kernels" in row:
                    check(row["nccl_kernels"] == k, f"{path}: per_rank nccl_kernels")
                if "profiler_steps" in row:
                    check(row["profiler_steps"] == profiler_steps(doc), f"{path}: per_rank profiler_steps")
            print(f"{path}: overlap {ours:.2f} % (HTA {want}), kernels {k}")
    return 1 if FAILS else 0


# ---- generated traces ----

def job_trace(rank, world, groups=True, nccl=True, steps=3, layers=2, base=1700000000000000000, tp=False):
    """A small FSDP-like rank: per step, an AllGather per layer forward and backward, a
    ReduceScatter per layer backward, each issued by a c10d op around its launch; compute
    kernels between; ProfilerStep#N spans. tp: tensor-parallel inference instead, two
    all-reduces per layer in a forward pass, no gather, no backward."""
    pid, tid = 1000 + rank, 2000 + rank
    ev = []
    t = 1000.0
    corr = [100]
    ranks = "[" + ", ".join(str(r) for r in range(world)) + "]"

    def coll(op, kname, nin, nout):
        nonlocal t
        corr[0] += 1
        c = corr[0]
        a = {"Collective name": op, "In msg nelems": nin, "Out msg nelems": nout, "Group size": world,
             "dtype": "BFloat16"}
        if groups:
            a.update({"Process Group Name": "0", "Process Group Description": "default_pg",
                      "Process Group Ranks": ranks})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "c10d::" + op + "_", "pid": pid, "tid": tid, "ts": t,
                   "dur": 30, "args": {"External id": c}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": pid, "tid": tid,
                   "ts": t + 2, "dur": 25, "args": dict(a, **{"External id": c + 100000})})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                   "ts": t + 5, "dur": 10, "args": {"correlation": c, "External id": c + 100000}})
        if nccl:
            ka = dict(a, **{"stream": 20, "correlation": c, "device": rank})
            ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": rank, "tid": 20, "ts": t + 20,
                       "dur": 40, "args": ka})
        t += 35

    def compute(us):
        nonlocal t
        corr[0] += 1
        c = corr[0]
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid, "ts": t,
                   "dur": 5, "args": {"correlation": c}})
        ev.append({"ph": "X", "cat": "kernel", "name": "void gemm<bf16>(x)", "pid": rank, "tid": 7,
                   "ts": t + 6, "dur": us, "args": {"stream": 7, "correlation": c, "device": rank}})
        t += us + 10

    for s in range(steps):
        start = t
        for _ in range(layers if tp else 0):
            compute(50)
            coll("allreduce", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", 1000, 1000)
            compute(50)
            coll("allreduce", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", 1000, 1000)
        for _ in range(0 if tp else layers):
            coll("_allgather_base", "ncclDevKernel_AllGather_RING_LL(x)", 1000, 1000 * world)
            compute(50)
        for _ in range(0 if tp else layers):
            coll("_allgather_base", "ncclDevKernel_AllGather_RING_LL(x)", 1000, 1000 * world)
            compute(80)
            coll("_reduce_scatter_base", "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)", 1000 * world, 1000)
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": pid, "tid": tid,
                   "ts": start - 1, "dur": t - start + 2})
        t += 20
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
            "baseTimeNanoseconds": base, "traceEvents": ev, "traceName": f"rank{rank}"}


def write(path, doc, gz=False):
    text = json.dumps(doc).encode()
    if gz:
        text = gzip.compress(text)
    with open(path, "wb") as f:
        f.write(text)
    return path


def generated(fsdpscope, fss_trace, work):
    os.makedirs(work, exist_ok=True)
    job = os.path.join(work, "job")
    os.makedirs(job, exist_ok=True)
    r0 = write(os.path.join(job, "rank0.json"), job_trace(0, 2))
    r1 = write(os.path.join(job, "rank1.json.gz"), job_trace(1, 2), gz=True)

    # two ranks of one job: as files and as their folder
    for args in ([r0, r1], [job]):
        rc, out, err = run(fsdpscope, "report", "--json", *args)
        check(rc == 0, f"two ranks {args}: report exits 0, not {rc}: {err[-300:]}")
        rep = json.loads(out) if rc == 0 else {}
        schema_ok(out, f"two ranks {args}: report --json", work)
        check(rep.get("ranks") == 2 and len(rep.get("per_rank", [])) == 2, f"two ranks {args}: 2 ranks read")
        check("partial" not in " ".join(rep.get("notes", [])), f"two ranks {args}: not said partial")
        for row, path in zip(sorted(rep.get("per_rank", []), key=lambda x: x["rank"]), (r0, r1)):
            comm, overlap = hta_figures(load(path))
            check(row.get("comm_comp_overlap") is not None and abs(row["comm_comp_overlap"] - overlap / comm) < 1e-6,
                  f"two ranks {args}: rank {row['rank']} overlap {row.get('comm_comp_overlap')}, HTA's {overlap / comm}")
            check(row.get("nccl_kernels") == nccl_kernels(load(path)), f"two ranks: rank {row['rank']} kernels")
            check(row.get("profiler_steps") == 3, f"two ranks: rank {row['rank']} profiler_steps")
            # what a profiler trace cannot know is null, not 0; the pid it names is there
            check(all(k in row and row[k] is None for k in ("dropped_records", "steps_cut", "cut")) and
                  row.get("pid") == 1000 + row["rank"], f"two ranks: rank {row['rank']} nullable fields {row}")
    rc, out, err = run(fsdpscope, "lint", r0, r1)
    check(rc in (0, 1, 3, 4), f"two ranks: lint reads them (exit {rc}): {err[-300:]}")
    # top reads the folder as lint does: a row per rank
    rc, out, err = run(fsdpscope, "top", "--once", job)
    rows = [m.group(1) for m in (re.match(r"^\S?\s*(\d+)\s+-\s+\d+\s", line) for line in out.splitlines()) if m]
    check(rc == 0 and rows == ["0", "1"], f"two ranks: top --once of their folder (exit {rc}): {out[:400]}{err[-300:]}")
    rc, out, err = run(fsdpscope, "dump", r0)
    kinds = [json.loads(line)["type"] for line in out.splitlines()]
    check(rc == 0 and kinds.count("collective") == 3 * 6 and kinds[-1] == "source_figures",
          f"dump: 18 collectives, the figures last (exit {rc})")
    check(any(json.loads(line).get("event") == "init" for line in out.splitlines() if '"comm"' in line),
          "dump: a communicator from the process group")

    # 2 files of a 128-rank world, no process-group names
    big = os.path.join(work, "big")
    os.makedirs(big, exist_ok=True)
    b0 = write(os.path.join(big, "r0.json"), job_trace(0, 128, groups=False))
    b1 = write(os.path.join(big, "r1.json"), job_trace(1, 128, groups=False))
    rc, out, err = run(fsdpscope, "report", "--json", b0, b1)
    notes = " ".join(json.loads(out).get("notes", [])) if rc == 0 else ""
    check(rc == 0, f"128-rank world: report exits 0, not {rc}: {err[-300:]}")
    check("2 of the 128 ranks of the job: the job is partial" in notes, "128-rank world: said partial")
    check("communicators inferred" in notes, "128-rank world: communicators said inferred")

    # worlds that disagree; the same rank twice
    w4 = write(os.path.join(work, "w4.json"), job_trace(0, 4))
    w8 = write(os.path.join(work, "w8.json"), job_trace(1, 8))
    rc, out, err = run(fsdpscope, "lint", w4, w8)
    check(rc == 2 and "w4.json" in err and "w8.json" in err and "not of one job" in err,
          f"worlds disagree: refused naming both (exit {rc}): {err[-300:]}")
    again = write(os.path.join(work, "again.json"), job_trace(0, 4))
    rc, out, err = run(fsdpscope, "report", "--json", w4, again)
    check(rc == 2 and "both are rank 0" in err, f"one rank twice: refused (exit {rc})")

    # two runs of a 2-rank job profiled into one folder, the second an hour later: two jobs,
    # grouped by run (issue 24); rank 0 of one with rank 1 of the other is no job either
    runs = os.path.join(work, "runs")
    os.makedirs(runs, exist_ok=True)
    later = 1700000000000000000 + 3600 * 10**9
    paths = [write(os.path.join(runs, f"{name}.json"), job_trace(rank, 2, base=base))
             for name, rank, base in (("a-r0", 0, later), ("a-r1", 1, later),
                                      ("b-r0", 0, 1700000000000000000), ("b-r1", 1, 1700000000000000000))]
    rc, out, err = run(fsdpscope, "lint", runs)
    check(rc == 2 and "the traces are of 2 jobs, not one" in err and
          f"): {paths[2]}, {paths[3]}; job 2 (ranks 0-1, " in err and f"): {paths[0]}, {paths[1]}; read one" in err,
          f"two runs' profiler traces: refused, grouped by run, the earlier first (exit {rc}): {err[-600:]}")
    rc, out, err = run(fsdpscope, "lint", paths[2], paths[1])
    check(rc == 2 and "their times do not overlap" in err,
          f"rank 0 of one run, rank 1 of the next: refused (exit {rc}): {err[-300:]}")
    rc, out, err = run(fsdpscope, "lint", paths[2], paths[3])
    check(rc in (0, 1, 3, 4), f"one run's two ranks: read (exit {rc}): {err[-300:]}")

    # a .fss and a Kineto file
    rc, out, err = run(fsdpscope, "lint", fss_trace, r0)
    check(rc == 2 and "mixes fsdpscope traces" in err and "give one kind" in err,
          f"mixed list: refused (exit {rc}): {err[-300:]}")

    mixed = os.path.join(work, "mixed")
    os.makedirs(mixed, exist_ok=True)
    with open(fss_trace, "rb") as src, open(os.path.join(mixed, "a.fss"), "wb") as dst:
        dst.write(src.read())
    write(os.path.join(mixed, "b.json"), job_trace(0, 2))
    rc, out, err = run(fsdpscope, "lint", mixed)
    check(rc == 2 and "mixes fsdpscope traces" in err, f"mixed folder: refused (exit {rc})")

    # the format is told by the content, never by the name
    odd = os.path.join(work, "named-odd")
    os.makedirs(odd, exist_ok=True)
    as_fss = os.path.join(odd, "rank0.fss")
    as_json = os.path.join(odd, "trace.json")
    with open(r0, "rb") as src, open(as_fss, "wb") as dst:
        dst.write(src.read())
    with open(fss_trace, "rb") as src, open(as_json, "wb") as dst:
        dst.write(src.read())
    rc, out, err = run(fsdpscope, "report", "--json", as_fss)
    rep = json.loads(out) if rc == 0 else {}
    check(rc == 0 and [r["profiler_steps"] for r in rep.get("per_rank", [])] == [3] and
          "PyTorch profiler" in " ".join(rep.get("notes", [])),
          f"a Kineto file named .fss: read as one (exit {rc}): {err[-300:]}")
    want = run(fsdpscope, "lint", "--json", fss_trace)
    rc, out, err = run(fsdpscope, "lint", "--json", as_json)
    check(rc == want[0] and rc in (0, 1) and json.loads(out).get("verdict") == json.loads(want[1]).get("verdict"),
          f"a .fss named .json: read as a trace (exit {rc}, not {want[0]}): {err[-300:]}")

    # names that are not UTF-8 (a range's, the trace's): read, and written back as strict UTF-8 JSON
    doc = job_trace(0, 1)
    doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": "@RANGE@", "pid": 1000, "tid": 2000,
                               "ts": 1001, "dur": 5})
    doc["traceName"] = "@TRACE@"
    raw = json.dumps(doc).encode().replace(b"@RANGE@", b"caf\xff\xfe").replace(b"@TRACE@", b"r\xc3(")
    bad8 = os.path.join(work, "not-utf8.json")
    open(bad8, "wb").write(raw)
    for cmd in (["report", "--json"], ["lint", "--json"], ["dump"]):
        p = subprocess.run([fsdpscope] + cmd + [bad8], capture_output=True, timeout=300)
        try:
            text = p.stdout.decode("utf-8")
            docs = [json.loads(line) for line in text.splitlines()] if cmd == ["dump"] else [json.loads(text)]
            ok = p.returncode in (0, 3) and docs
        except ValueError as e:
            ok = False
            print(f"  {cmd}: {e}")
        check(ok, f"non-UTF-8 names: {' '.join(cmd)} exits {p.returncode} with strict UTF-8 JSON")

    # no host event (GPU events only): the row's pid is null
    gpu_only = job_trace(0, 1)
    gpu_only["traceEvents"] = [e for e in gpu_only["traceEvents"] if e.get("cat") == "kernel"]
    path = write(os.path.join(work, "gpu-only.json"), gpu_only)
    rc, out, err = run(fsdpscope, "report", "--json", path)
    rows = json.loads(out).get("per_rank", []) if rc == 0 else []
    check(rc == 0 and len(rows) == 1 and "pid" in rows[0] and rows[0]["pid"] is None,
          f"no host event: report exits 0 ({rc}) with a null pid: {rows}")

    # tensor-parallel inference (all-reduces only): described, not diagnosed
    tp = os.path.join(work, "tp")
    os.makedirs(tp, exist_ok=True)
    for r in range(2):
        write(os.path.join(tp, f"rank{r}.json"), job_trace(r, 2, tp=True))
    rc, out, err = run(fsdpscope, "report", "--json", tp)
    rows = json.loads(out).get("per_rank", []) if rc == 0 else []
    check(rc == 0 and len(rows) == 2 and all(r["nccl_kernels"]["allreduce"] == 12 and
                                            r["nccl_kernels"]["allgather"] == 0 for r in rows),
          f"tensor-parallel inference: report exits 0 ({rc}) with both ranks' figures: {rows}")
    rc, out, err = run(fsdpscope, "lint", "--json", tp)
    lint = json.loads(out) if out.strip().startswith("{") else {}
    check(rc == 3 and lint.get("verdict") == "undecided", f"tensor-parallel inference: lint exits 3 ({rc}), "
          f"verdict {lint.get('verdict')}")
    rc, out, err = run(fsdpscope, "lint", tp)
    check(rc == 3 and "not sharded training" in out + err,
          f"tensor-parallel inference: lint says why: {(out + err)[-300:]}")

    # one rank, no NCCL kernel
    lone = write(os.path.join(work, "lone.json"), job_trace(0, 1, nccl=False))
    rc, out, err = run(fsdpscope, "report", "--json", lone)
    check(rc == 0, f"no NCCL kernel: report exits 0, not {rc}")
    rows = json.loads(out).get("per_rank", []) if rc == 0 else []
    # the rank has its row, with the overlap there and null (no communication time)
    check(len(rows) == 1 and rows[0].get("rank") == 0 and "comm_comp_overlap" in rows[0] and
          rows[0]["comm_comp_overlap"] is None and rows[0].get("profiler_steps") == 3 and
          rows[0].get("nccl_kernels") == {"allgather": 0, "reduce_scatter": 0, "allreduce": 0, "other": 0},
          f"no NCCL kernel: one row for rank 0 with a null overlap: {rows}")
    rc, out, err = run(fsdpscope, "lint", lone)
    check(rc == 3, f"no NCCL kernel: lint exits 3, not {rc}")
    rc, out, err = run(fsdpscope, "dump", lone)
    fig = figures_of_dump(out) or {}
    check(fig.get("comm_ns") == 0 and fig.get("profiler_steps") == 3, f"no NCCL kernel: no comm time {fig}")

    # a cut file and a bad gzip: partial readings, said with their offsets
    text = json.dumps(job_trace(0, 2)).encode()
    cut = os.path.join(work, "cut.json")
    open(cut, "wb").write(text[: len(text) * 2 // 3])
    z = bytearray(gzip.compress(text))
    for i in range(len(z) - 8, len(z) - 4):  # its CRC: zlib refuses the stream at its end
        z[i] ^= 0x5A
    badgz = os.path.join(work, "bad.json.gz")
    open(badgz, "wb").write(bytes(z))
    for path, words in ((cut, "ends inside the document"), (badgz, "gzip stream is damaged")):
        rc, out, err = run(fsdpscope, "report", "--json", path)
        rep = json.loads(out) if out.strip().startswith("{") else {}
        schema_ok(out, f"{path}: report --json", work)
        notes = " ".join(rep.get("notes", []))
        # as for a cut .fss: the report of what was read, and exit 2 with the damage said
        check(rc == 2 and rep.get("trace", {}).get("truncated") is True and re.search(r"at byte \d+", err),
              f"{path}: read in part, marked truncated, the damage said (exit {rc}) {err[-200:]}")
        check("a partial reading" in notes and words in notes and re.search(r"at byte \d+", notes),
              f"{path}: the partial reading stated with its offset: {notes[:300]}")
        rc, out, err = run(fsdpscope, "lint", path)
        check(os.path.basename(path) in err and words in err and re.search(r"at byte \d+", err),
              f"{path}: lint states the partial reading: {err[-300:]}")
    # duplicate keys, NaN, nesting past the tokenizer's depth: partial readings at the exact byte
    text = json.dumps(job_trace(0, 2))
    i = text.index('"ph": "X"', len(text) // 2)
    for name, insert, at, words in (("dup", '"ph": "X", ', i + 11, 'duplicate key "ph"'),
                                    ("nan", '"x": NaN, ', i + 5, "NaN is not JSON"),
                                    ("deep", '"x": ' + "[" * 80 + "]" * 80 + ", ", i + 5 + 64 - 3,
                                     "nested deeper than 64")):
        path = os.path.join(work, name + ".json")
        open(path, "w").write(text[:i] + insert + text[i:])
        rc, out, err = run(fsdpscope, "report", "--json", path)
        check(rc == 2 and f"at byte {at}:" in err and words in err,
              f"{name}: a partial reading at byte {at}, {words!r} (exit {rc}): {err[-300:]}")
    # a number too large for a time: the event left out, said with its byte
    doc = job_trace(0, 1)
    doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "void gemm(x)", "pid": 0, "tid": 7,
                               "ts": 12345678901234567890123, "dur": 1, "args": {"stream": 7}})
    text = json.dumps(doc)
    path = write(os.path.join(work, "huge.json"), doc)
    rc, out, err = run(fsdpscope, "report", "--json", path)
    notes = " ".join(json.loads(out).get("notes", [])) if rc == 0 else ""
    check(rc == 0 and f"1 event left out as not understood, the first at byte {text.index('1234567890123')}: "
          "ts: a time too large" in notes, f"a huge time: the event left out and said (exit {rc}): {notes[:400]}")

    # not a trace at all
    junk = os.path.join(work, "junk.json")
    open(junk, "w").write('{"hello": 1}')
    rc, out, err = run(fsdpscope, "lint", junk)
    check(rc == 2 and "junk.json" in err and "not a Chrome trace" in err, f"JSON, not a trace: an error naming it ({err[-200:]})")
    return 1 if FAILS else 0


def seeds(folder):
    """The seeds of tests/fuzz/kineto_map_fuzz: a control byte (0), then a small trace."""
    os.makedirs(folder, exist_ok=True)
    docs = {
        "job": job_trace(0, 2, steps=2, layers=1),
        "no_groups": job_trace(1, 4, groups=False, steps=2, layers=1),
        "no_nccl": job_trace(0, 1, nccl=False, steps=1, layers=1),
    }
    frac = job_trace(0, 2, steps=2, layers=1)
    for e in frac["traceEvents"]:
        e["ts"] = Decimal(str(e["ts"])) + Decimal("0.375")
    docs["fractional"] = frac
    # two NCCL kernels per launch, as an export writes a group's calls: one group each
    shared = job_trace(0, 2, steps=2, layers=1)
    shared["traceEvents"] += [dict(e, ts=e["ts"] + 1) for e in shared["traceEvents"]
                              if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    docs["shared_launch"] = shared
    for name, doc in docs.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(b"\0" + json.dumps(doc, default=float).encode())
    return 0


def main(argv):
    if argv[1] == "seeds":
        return seeds(argv[2])
    if argv[1] == "shared":
        return shared(argv[2], argv[3], argv[4])
    return generated(argv[2], argv[3], argv[4])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
