#!/usr/bin/env python3
"""mfu_test.py FSDPSCOPE LINT_GEN_TRACE SCHEMA SCHEMA_CHECK WORK - MFU end to end.

Generated traces with fixed timestamps (lint_gen_trace, and a PyTorch profiler
trace written by kineto_read.py's job_trace), read by `fsdpscope report`:
  - MFU from each input path: --model-flops, --flops-per-step (the same flag),
    6 P T from --tokens-per-step; the peak from --peak-flops, from the device
    table on the device record's name, from a Kineto trace's deviceProperties;
  - MFU null with the missing input named, in JSON and in the text report:
    no FLOPs, no device, a device the table does not know, the MI300X on a
    CUDA device record (the table gives it only from a Kineto trace);
  - the device record through dump --sources and the report's sources;
  - a trace of format 1.4 (no device records) still reads, MFU unknown.
Every figure is compared with the one computed here from the same document's
step time and P: counts and decisions, never durations.
"""
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kineto_read import job_trace, write  # noqa: E402

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def report(fss, trace, *flags):
    rc, out, err = run(fss, "report", "--json", *flags, trace)
    check(rc == 0, f"report --json {' '.join(flags)} {os.path.basename(trace)}: exit 0, not {rc} {err[-200:]}")
    return json.loads(out) if rc == 0 else {}


def schema_ok(fss, trace, flags, work):
    rc, out, _ = run(fss, "report", "--json", *flags, trace)
    path = os.path.join(work, "doc.json")
    with open(path, "w") as f:
        f.write(out)
    rc, o, e = run(sys.executable, SCHEMA_CHECK, SCHEMA, path)
    check(rc == 0, f"report --json {' '.join(flags)} {os.path.basename(trace)} against the schema: {(o + e)[-400:]}")


def close(a, b):
    return a is not None and b is not None and abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def main(argv):
    global SCHEMA, SCHEMA_CHECK
    fss, gen, SCHEMA, SCHEMA_CHECK, work = argv[1:6]
    os.makedirs(work, exist_ok=True)

    def gen_trace(name, *args):
        path = os.path.join(work, name)
        rc, _, err = run(gen, "--out", path, "--ranks", "4", "--layers", "4", *args)
        check(rc == 0, f"lint_gen_trace {name}: {err[-200:]}")
        return path

    plain = gen_trace("plain.fss")
    h100 = gen_trace("h100.fss", "--device", "NVIDIA H100 80GB HBM3")
    pcie = gen_trace("pcie.fss", "--device", "NVIDIA H100 PCIe")
    l40s = gen_trace("l40s.fss", "--device", "NVIDIA L40S")
    mi300 = gen_trace("mi300.fss", "--device", "AMD Instinct MI300X")

    # no input: null, both inputs named
    m = report(fss, plain).get("mfu", {})
    check(m.get("mfu") is None and m.get("missing") == ["model_flops", "device"],
          f"no input: mfu null, missing model_flops and device ({m.get('missing')})")
    check("--model-flops" in (m.get("missing_text") or "") and "--peak-flops" in (m.get("missing_text") or ""),
          "no input: the text names --model-flops and --peak-flops")
    check(m.get("device") is None and m.get("peak_source") is None, "no input: no device, no peak source")

    # the device record: dump --sources and the report's sources
    rc, out, _ = run(fss, "dump", "--sources", "--type", "device", h100)
    lines = [json.loads(x) for x in out.splitlines()]
    recs = [x for x in lines if x.get("type") == "device"]
    srcs = [x for x in lines if x.get("type") == "source"]
    check(rc == 0 and len(recs) == 4, f"dump: 4 device records ({len(recs)})")
    check(all(r.get("name") == "NVIDIA H100 80GB HBM3" and r.get("sm_count") == 132 and r.get("origin") == "cupti"
              for r in recs), "dump: each record's name, SMs and origin")
    check(len(srcs) == 4 and all(len(s.get("devices", [])) == 1 and s["devices"][0]["name"] == "NVIDIA H100 80GB HBM3"
                                 and s["devices"][0]["compute_capability"] == "9.0" for s in srcs),
          "dump --sources: every source names its GPU")
    rep = report(fss, h100)
    check([s.get("device", {}).get("device") for s in rep.get("sources", [])] == [0, 1, 2, 3],
          "report: each source's device ordinal")

    # --model-flops and the device table (H100 SXM)
    F = 3.2e15
    for flag in ("--model-flops", "--flops-per-step"):
        rep = report(fss, h100, flag, str(F))
        m = rep.get("mfu", {})
        step = rep.get("breakdown", {}).get("step_ns")
        want = F / (step * 1e-9) / (989.5e12 * 4) if step else None
        check(close(m.get("mfu"), want), f"{flag}: mfu {m.get('mfu')} = F / step / (989.5e12 x 4) = {want}")
        check(m.get("model_flops_from") == "--model-flops" and m.get("peak_from") == "device table",
              f"{flag}: FLOPs from --model-flops, peak from the device table")
        check(m.get("peak_source") == "device table: H100 SXM dense BF16, NVIDIA H100 Tensor Core GPU datasheet",
              f"{flag}: peak source named ({m.get('peak_source')})")
        check(m.get("missing") == [] and m.get("missing_text") is None and m.get("ranks") == 4,
              f"{flag}: nothing missing, 4 GPUs")
        check(close(rep.get("breakdown", {}).get("mfu"), m.get("mfu")), f"{flag}: breakdown.mfu is the same")
    schema_ok(fss, h100, ["--model-flops", str(F)], work)

    # 6 P T, the PCIe peak
    T = 524288
    rep = report(fss, pcie, "--tokens-per-step", str(T))
    m = rep.get("mfu", {})
    P = rep.get("ledger", {}).get("params")
    step = rep.get("breakdown", {}).get("step_ns")
    check(P and close(m.get("model_flops"), 6.0 * P * T) and m.get("model_flops_from") == "6PT",
          f"6 P T: model_flops {m.get('model_flops')} = 6 x {P} x {T}")
    check(close(m.get("mfu"), 6.0 * P * T / (step * 1e-9) / (756.5e12 * 4)) and "H100 PCIe" in m.get("peak_source", ""),
          "6 P T: mfu over the H100 PCIe peak")

    # --peak-flops wins over the table
    m = report(fss, h100, "--model-flops", str(F), "--peak-flops", "1e15").get("mfu", {})
    check(m.get("peak_from") == "--peak-flops" and m.get("peak_source") == "--peak-flops" and m.get("peak_flops") == 1e15,
          "--peak-flops: the given peak, named")

    # a GPU the table does not know, and the MI300X from a CUDA device record
    for path, name in ((l40s, "NVIDIA L40S"), (mi300, "AMD Instinct MI300X")):
        rep = report(fss, path, "--model-flops", str(F))
        m = rep.get("mfu", {})
        check(m.get("mfu") is None and m.get("missing") == ["device_unknown"] and name in (m.get("missing_text") or ""),
              f"{name}: mfu null, the device named as not in the table ({m.get('missing_text')})")
        check((m.get("device") or {}).get("name") == name, f"{name}: the device is reported")
        rc, out, _ = run(fss, "report", "--model-flops", str(F), path)
        check(rc == 0 and "MFU unknown: " in out and name in out, f"{name}: the text report says MFU is unknown and why")
    m = report(fss, mi300, "--model-flops", str(F), "--peak-flops", "1307.4e12").get("mfu", {})
    check(m.get("mfu") is not None and m.get("peak_from") == "--peak-flops", "MI300X: --peak-flops gives MFU")

    # the text report of a trace without inputs
    rc, out, _ = run(fss, "report", plain)
    check(rc == 0 and "MFU unknown: the model's FLOPs per step: give --model-flops or --tokens-per-step" in out,
          "text: no FLOPs named")

    # a format 1.4 trace (no device records) reads; MFU with --peak-flops only
    old = os.path.join(work, "old14.fss")
    with open(plain, "rb") as f:
        data = bytearray(f.read())
    struct.pack_into("<H", data, 14, 4)  # version_minor
    data[60:64] = struct.pack("<I", crc32c(bytes(data[:60])))
    with open(old, "wb") as f:
        f.write(data)
    rc, out, _ = run(fss, "dump", "--header", "--type", "process_hello", old)
    check(rc == 0 and json.loads(out.splitlines()[0]).get("version") == "1.4", "format 1.4: dump reads its header")
    rep = report(fss, old, "--model-flops", str(F), "--peak-flops", "989e12")
    check(rep.get("mfu", {}).get("mfu") is not None and all(s.get("device") is None for s in rep.get("sources", [])),
          "format 1.4: no device, MFU from --peak-flops")

    # a PyTorch profiler trace's deviceProperties: the MI300X and an H100
    for name, sms, entry in (("AMD Instinct MI300X", 304, "MI300X"), ("NVIDIA H100 80GB HBM3", 132, "H100 SXM")):
        job = os.path.join(work, "kineto_" + entry.replace(" ", "_"))
        os.makedirs(job, exist_ok=True)
        for r in range(2):
            doc = job_trace(r, 2)
            doc["deviceProperties"] = [{"id": 0, "name": name, "totalGlobalMem": 206158430208, "numSms": sms}]
            write(os.path.join(job, f"rank{r}.json"), doc)
        rep = report(fss, job, "--model-flops", "1e12")
        m = rep.get("mfu", {})
        d = m.get("device") or {}
        check(d.get("name") == name and d.get("origin") == "kineto" and d.get("sm_count") == sms,
              f"Kineto {entry}: the device from deviceProperties ({d})")
        check(m.get("peak_from") == "kineto" and (m.get("peak_source") or "").startswith("Kineto deviceProperties: " + entry),
              f"Kineto {entry}: the peak named from deviceProperties ({m.get('peak_source')})")
        step = rep.get("breakdown", {}).get("step_ns")
        peak = {"MI300X": 1307.4e12, "H100 SXM": 989.5e12}[entry]
        check(step and close(m.get("mfu"), 1e12 / (step * 1e-9) / (peak * m.get("ranks", 0))),
              f"Kineto {entry}: mfu from the step, the table's peak and {m.get('ranks')} ranks")
        schema_ok(fss, job, ["--model-flops", "1e12"], work)

    print(f"mfu_test: {len(FAILS)} failed")
    return 1 if FAILS else 0


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


if __name__ == "__main__":
    sys.exit(main(sys.argv))
