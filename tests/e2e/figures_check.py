#!/usr/bin/env python3
"""figures_check.py - recompute the report's per_rank HTA figures from the
trace's own records and compare.

    figures_check.py --fsdpscope BIN --trace T.fss [--log FSDP_REF_LOG] [--steps N]

Reads `fsdpscope dump T.fss` (every record as JSON lines) and
`fsdpscope report --json T.fss`, and checks, for every per_rank row:

* nccl_kernels: the source's collective records by op (allgather,
  reduce_scatter, allreduce, every other op), and with --log the
  collectives fsdp_ref's own log says the rank issued;
* profiler_steps: the trace's step ranges (fsdp_ref's "step N" NVTX
  ranges), and --steps when given;
* comm_comp_overlap: in [0, 1] and equal (1e-9) to HTA's definition
  computed here on the records: communication = each collective event's
  host interval [enter, exit] (a group of calls is one event, running
  from its ncclGroupEnd's enter to its return; launched at its first
  call), computation = the leaves of the rank's compute NVTX ranges per
  thread (sorted by start, parents first: a range inside which the next
  range of its thread starts is no leaf), with
  two or more steps only what was launched (entered, started) before the
  last step's start; null exactly when there is no communication time.

Host timing only: the traces it is run on (fsdp_ref on the CPU stand-in)
have no GPU intervals, and it says so and fails on one that has.
Exits 1 with every mismatch listed.
"""
import argparse
import fnmatch
import json
import subprocess
import sys

OPS = {"AllGather": "allgather", "ReduceScatter": "reduce_scatter", "AllReduce": "allreduce"}


def strict(text):
    def pairs(p):
        d = {}
        for k, v in p:
            if k in d:
                raise ValueError("duplicate key " + k)
            d[k] = v
        return d

    def const(name):
        raise ValueError(name + " is not JSON")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=const)


def matches(patterns, domain, name):
    """collector/timeline.c timeline_pattern_match: the last item that matches decides."""
    hit = False
    for item in patterns.split(","):
        neg = item.startswith("-")
        if neg:
            item = item[1:]
        if ":" in item:
            d, n = item.split(":", 1)
            ok = fnmatch.fnmatchcase(domain, d) and fnmatch.fnmatchcase(name, n)
        else:
            ok = fnmatch.fnmatchcase(name, item)
        if ok:
            hit = not neg
    return hit


STEP_RANGES = "fsdp_ref:step *,*:ProfilerStep#*"
COMPUTE_RANGES = "fsdp_ref:*,-fsdp_ref:step *,*:nn.Module: *"


def merge(iv):
    out = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def total(iv):
    return sum(e - s for s, e in iv)


def intersect(a, b):
    t, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            t += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return t


def leaves(ranges):
    """overlap_host_compute's rule, batch form."""
    out = []
    by_thread = {}
    for r in ranges:
        by_thread.setdefault(r["thread"], []).append(r)
    for rs in by_thread.values():
        rs.sort(key=lambda r: (r["start_ns"], -r["end_ns"]))
        for i, r in enumerate(rs):
            if i + 1 < len(rs) and rs[i + 1]["start_ns"] < r["end_ns"]:
                continue
            out.append((r["start_ns"], r["end_ns"]))
    return out


def source_events(recs):
    """Collective events as the timeline forms them: a call, or the calls of one group."""
    events, open_ev = [], None
    for r in recs:
        if r["type"] == "collective":
            gid = r["group_id"]
            if open_ev and (gid == 0 or gid != open_ev["gid"]):
                events.append(open_ev)
                open_ev = None
            if gid == 0:
                events.append({"enter": r["enter_ns"], "exit": r["exit_ns"], "gid": 0})
            elif open_ev is None:
                open_ev = {"enter": r["enter_ns"], "exit": r["exit_ns"], "gid": gid}
            else:
                open_ev["exit"] = max(open_ev["exit"], r["exit_ns"])
        elif r["type"] == "group" and open_ev and open_ev["gid"] == r["group_id"]:
            open_ev["start"] = r["end_enter_ns"]  # it runs at ncclGroupEnd
            open_ev["exit"] = max(open_ev["exit"], r["end_exit_ns"])
            events.append(open_ev)
            open_ev = None
    if open_ev:
        events.append(open_ev)
    return events


def overlap_of(recs):
    steps = sorted(r["start_ns"] for r in recs if r["type"] == "nvtx_range" and
                   matches(STEP_RANGES, r["domain"] or "", r["name"] or ""))
    # nested step markers count once (the analysis skips a range inside one analysed)
    told, last_end = [], 0
    for r in sorted((r for r in recs if r["type"] == "nvtx_range" and
                     matches(STEP_RANGES, r["domain"] or "", r["name"] or "")),
                    key=lambda r: r["start_ns"]):
        if last_end and r["start_ns"] < last_end:
            continue
        told.append(r["start_ns"])
        last_end = r["end_ns"]
    window = told[-1] if len(told) >= 2 else None

    def counts(launch):
        return window is None or launch < window

    comm = [(e.get("start", e["enter"]), e["exit"]) for e in source_events(recs) if counts(e["enter"])]
    ranges = [r for r in recs if r["type"] == "nvtx_range" and
              matches(COMPUTE_RANGES, r["domain"] or "", r["name"] or "") and
              not matches(STEP_RANGES, r["domain"] or "", r["name"] or "")]
    comp = [(s, e) for s, e in leaves(ranges) if counts(s)]
    c, p = merge(comm), merge(comp)
    tc = total(c)
    return (None if tc == 0 else intersect(c, p) / tc), len(told), len(steps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--log")
    ap.add_argument("--steps", type=int)
    a = ap.parse_args()
    bad = []
    dump = subprocess.run([a.fsdpscope, "dump", a.trace], capture_output=True, text=True, check=True).stdout
    rep = subprocess.run([a.fsdpscope, "report", "--json", a.trace], capture_output=True, text=True)
    if rep.returncode not in (0,):
        print("report --json exited %d: %s" % (rep.returncode, rep.stderr))
        return 1
    report = strict(rep.stdout)
    by_source = {}
    for line in dump.splitlines():
        r = json.loads(line)
        if "source" in r:
            by_source.setdefault(r["source"], []).append(r)
    logged = {}
    if a.log:
        for line in open(a.log):
            x = json.loads(line)
            if "step" not in x:
                continue
            k = logged.setdefault(x["rank"], {"allgather": 0, "reduce_scatter": 0, "allreduce": 0, "other": 0})
            k["allgather"] += sum(x.get(f, 0) for f in ("allgathers", "tp_allgathers", "eval_allgathers",
                                                         "eval_tp_allgathers", "checkpoint_allgathers"))
            k["reduce_scatter"] += sum(x.get(f, 0) for f in ("reduce_scatters", "tp_reduce_scatters",
                                                              "eval_tp_reduce_scatters"))
            k["allreduce"] += sum(x.get(f, 0) for f in ("allreduces", "tp_allreduces", "eval_allreduces",
                                                         "checkpoint_allreduces"))
            k["other"] += sum(x.get(f, 0) for f in ("init_broadcasts", "checkpoint_broadcasts"))
    rows = report["per_rank"]
    if not rows:
        bad.append("no per_rank rows")
    for row in rows:
        recs = by_source.get(row["source"], [])
        if any(r["type"] == "gpu_interval" for r in recs):
            bad.append("source %d has GPU intervals: this check recomputes host timing only" % row["source"])
            continue
        want = {"allgather": 0, "reduce_scatter": 0, "allreduce": 0, "other": 0}
        for r in recs:
            if r["type"] == "collective":
                want[OPS.get(r["op"], "other")] += 1
        got = row["nccl_kernels"]
        if got != want:
            bad.append("rank %d: nccl_kernels %s, dump's collectives %s" % (row["rank"], got, want))
        if a.log and row["rank"] in logged:
            lg = logged[row["rank"]]
            if got != lg:
                bad.append("rank %d: nccl_kernels %s, fsdp_ref's log %s" % (row["rank"], got, lg))
        overlap, told, ranges = overlap_of(recs)
        if ranges and row["profiler_steps"] != told:
            bad.append("rank %d: profiler_steps %d, step ranges %d" % (row["rank"], row["profiler_steps"], told))
        if a.steps is not None and row["profiler_steps"] != a.steps:
            bad.append("rank %d: profiler_steps %d, --steps %d" % (row["rank"], row["profiler_steps"], a.steps))
        cco = row["comm_comp_overlap"]
        if (cco is None) != (overlap is None):
            bad.append("rank %d: comm_comp_overlap %s, recomputed %s" % (row["rank"], cco, overlap))
        elif cco is not None and not (0 <= cco <= 1 and abs(cco - overlap) <= 1e-9):
            bad.append("rank %d: comm_comp_overlap %r, recomputed %r" % (row["rank"], cco, overlap))
        print("rank %d: comm_comp_overlap %s (recomputed %s), nccl_kernels %s, profiler_steps %d" %
              (row["rank"], cco, overlap, got, row["profiler_steps"]))
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
