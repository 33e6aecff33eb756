#!/usr/bin/env python3
"""kineto_counts.py - an independent count of what the Kineto reader should
keep from a PyTorch profiler trace, printed in the "key value" lines of
tests/e2e/kineto_counts.c, so that the two can be compared line by line.

The rules are kineto_file.h's, written again over Python's json module:
numbers are taken from their text (parse_int / parse_float hooks) and
converted to ns with decimal arithmetic, never through a float.

usage: kineto_counts.py FILE.json[.gz]...
"""
import decimal
import gzip
import json
import sys

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


class Num:
    def __init__(self, text):
        self.text = text

    def is_int(self):
        return all(ch not in self.text for ch in ".eE")

    def int_value(self):
        return int(self.text) if self.is_int() else None


def int_of(v, lo=INT64[0], hi=INT64[1]):
    """The integer of a JSON integer in range, else None."""
    if isinstance(v, Num):
        i = v.int_value()
        if i is not None and lo <= i <= hi:
            return i
    return None


def ns_of(v):
    """µs text to ns, half up; None when not a plain decimal number."""
    if not isinstance(v, Num) or "e" in v.text or "E" in v.text:
        return None
    ns = (decimal.Decimal(v.text) * 1000).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP)
    if not (INT64[0] <= ns <= INT64[1] - 1000):
        return None
    return int(ns)


COMM_STR = ("Collective name", "dtype", "Process Group Name", "Process Group Description")
COMM_INT = ("In msg nelems", "Out msg nelems", "Seq", "Rank")
IDS = ("stream", "correlation", "External id")


def ranks_ok(v):
    return isinstance(v, str) or (isinstance(v, list) and all(int_of(x) is not None for x in v))


def event_bad(e):
    for k in ("ph", "cat", "name"):
        if k in e and not isinstance(e[k], str):
            return True
    for k in ("pid", "tid"):
        if k in e and not isinstance(e[k], str) and int_of(e[k], *INT32) is None:
            return True
    for k in ("ts", "dur"):
        if k in e and ns_of(e[k]) is None:
            return True
    if "args" in e:
        a = e["args"]
        if not isinstance(a, dict):
            return True
        for k in IDS + COMM_INT:
            if k in a and int_of(a[k]) is None:
                return True
        for k in COMM_STR:
            if k in a and not isinstance(a[k], str):
                return True
        if "Group size" in a and int_of(a["Group size"], 0, INT32[1]) is None:
            return True
        if "Process Group Ranks" in a and not ranks_ok(a["Process Group Ranks"]):
            return True
    return False


def kept_cat(e):
    cat, args = e.get("cat"), e.get("args", {})
    name = e.get("name", "")
    if cat in ("kernel", "gpu_memcpy", "gpu_memset", "user_annotation", "gpu_user_annotation"):
        return cat
    if cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
        return cat
    if cat == "cpu_op" and ("Collective name" in args or name == "record_param_comms"
                            or name.startswith("c10d::") or name.startswith("nccl:")):
        return cat
    if "stream" in args and int_of(args["stream"]) >= 0 and "dur" in e:
        return "gpu_other"
    return None


CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op",
        "user_annotation", "gpu_user_annotation", "gpu_other")


def wrap64(v):
    v &= 2**64 - 1
    return v - 2**64 if v >= 2**63 else v


def ranks_text(v):
    return v if isinstance(v, str) else "[" + ", ".join(str(int_of(x)) for x in v) + "]"


def count(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        doc = json.load(fh, parse_int=Num, parse_float=Num)
    c = dict.fromkeys(("events", "kept", "complete", "flows", "instants", "metadata", "other",
                       "cpu_ops", "skipped"), 0)
    per_cat = dict.fromkeys(CATS, 0)
    x = dict.fromkeys(("fractional", "with_stream", "with_correlation", "with_comm_args",
                       "ts_sum", "dur_sum", "correlation_sum", "with_collective_name"), 0)
    for e in doc["traceEvents"]:
        c["events"] += 1
        if not isinstance(e, dict) or event_bad(e) or "ph" not in e:
            c["skipped"] += 1
            continue
        ph = e["ph"]
        cat = kept_cat(e) if ph == "X" else None
        if cat and ("ts" not in e or "dur" not in e or ns_of(e["dur"]) < 0):
            c["skipped"] += 1
            continue
        if ph == "X":
            c["complete"] += 1
            c["cpu_ops"] += e.get("cat") == "cpu_op"
        elif ph in ("s", "f", "t"):
            c["flows"] += 1
        elif ph in ("i", "I"):
            c["instants"] += 1
        elif ph == "M":
            c["metadata"] += 1
        else:
            c["other"] += 1
        if not cat:
            continue
        c["kept"] += 1
        per_cat[cat] += 1
        args = e.get("args", {})
        x["fractional"] += "." in e["ts"].text or "." in e["dur"].text
        x["with_stream"] += "stream" in args
        x["with_correlation"] += "correlation" in args
        x["with_comm_args"] += any(k in args for k in COMM_STR + COMM_INT + ("Group size", "Process Group Ranks"))
        x["with_collective_name"] += "Collective name" in args
        x["ts_sum"] = wrap64(x["ts_sum"] + ns_of(e["ts"]))
        x["dur_sum"] = wrap64(x["dur_sum"] + ns_of(e["dur"]))
        if "correlation" in args:
            x["correlation_sum"] += int_of(args["correlation"])
    out = [f"file {path}", "status 0"] + [f"{k} {v}" for k, v in c.items()]
    out += [f"kept.{k} {v}" for k, v in per_cat.items()]
    out += [f"{k} {x[k]}" for k in ("fractional", "with_stream", "with_correlation", "with_comm_args",
                                     "ts_sum", "dur_sum", "correlation_sum", "with_collective_name")]
    dist = doc.get("distributedInfo", {})
    if not isinstance(dist, dict):
        dist = {}
    pgs = [p for p in dist.get("pg_config", []) if isinstance(p, dict)] if isinstance(dist.get("pg_config"), list) else []
    rank, world = int_of(dist.get("rank"), *INT32), int_of(dist.get("world_size"), *INT32)
    backend = dist.get("backend") if isinstance(dist.get("backend"), str) else ""
    out += [f"rank {-1 if rank is None else rank}", f"world_size {-1 if world is None else world}",
            f"backend {backend}", f"pgs {len(pgs)}"]
    for p in pgs:
        size = int_of(p.get("pg_size"), *INT32)
        ranks = ranks_text(p["ranks"]) if "ranks" in p and ranks_ok(p["ranks"]) else ""
        out.append(f"pg {p.get('pg_name', '')} {p.get('pg_desc', '')} {-1 if size is None else size} {ranks}")
    base = int_of(doc.get("baseTimeNanoseconds"))
    if base is not None:
        out.append(f"base_time_ns {base}")
    devs = doc.get("deviceProperties")
    dev = devs[0] if isinstance(devs, list) and devs and isinstance(devs[0], dict) else {}
    sms, mem = int_of(dev.get("numSms"), *INT32), int_of(dev.get("totalGlobalMem"))
    schema = int_of(doc.get("schemaVersion"))
    name = dev.get("name") if isinstance(dev.get("name"), str) else ""
    trace_name = doc.get("traceName") if isinstance(doc.get("traceName"), str) else ""
    out += [f"device {name}", f"sms {-1 if sms is None else sms}", f"memory {-1 if mem is None else mem}",
            f"schema {-1 if schema is None else schema}", f"trace_name {trace_name}"]
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print("\n".join(count(path)))
