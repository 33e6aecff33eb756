#!/usr/bin/env python3
"""live_snapshot_check.py SCHEMA FILE... - check snapshots of the viewer
endpoint (fsdpscope.live/2, docs/live.md) against docs/live-schema.json.

Each FILE holds snapshot lines as a viewer reads them off the socket, one
JSON object a line. Every line is parsed strictly (lint_schema_check's
strict_loads: a duplicate key, NaN or text after the object is a
violation), validated against the schema (the jsonschema package when it
is installed, and lint_schema_check's built-in validator always), and held
to the relations docs/live.md promises between a figure and the totals
beside it. Within a file the generations must rise.

Exits 0 when every line passes, 1 with every violation listed otherwise,
2 on bad usage. relations() is importable for other tests.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lint_schema_check import problems, strict_loads  # noqa: E402

WINDOW_MAX = 64  # LIVE_WINDOW
STRIP_MAX = 512  # LIVE_STRIP_MAX
COMMS_MAX = 16  # LIVE_COMMS_MAX
FINDINGS_MAX = 16  # LIVE_FINDINGS_MAX
GATHERS_MAX = 512  # LIVE_GATHERS_MAX

STEP_SUMS = (("step_ns", "step_ns_sum"), ("allgathers", "allgathers_sum"),
             ("exposed_allgather_ns", "exposed_allgather_ns_sum"),
             ("compute_wait_ns", "compute_wait_ns_sum"), ("compute_ns", "compute_ns_sum"))

DIAGNOSIS_FIELDS = ("verdict", "undecided_reason", "reshard", "repeating_units", "gathers_per_unit",
                    "allgathers_per_step", "microbatches", "exposed_allgather_ns_per_step",
                    "compute_wait_ns_per_step")


def rank_relations(r, where, errors):
    """The relations of one rank's figures (docs/live.md, "Checks")."""
    t = r["totals"]
    window, strip, comms = r["window"], r["strip"], r["comms"]
    if r["collectives"] > r["records"]:
        errors.append("%s: collectives %d > records %d" % (where, r["collectives"], r["records"]))
    if len(window) > WINDOW_MAX or len(strip) > STRIP_MAX or len(comms) > COMMS_MAX:
        errors.append("%s: window, strip or comms longer than the live state keeps" % where)
    seen_steps = t["steps"] + t["steps_excluded"]
    if len(window) > seen_steps:
        errors.append("%s: %d steps in the window, %d in the totals" % (where, len(window), seen_steps))
    ordinals = [s["ordinal"] for s in window]
    if any(b <= a for a, b in zip(ordinals, ordinals[1:])):
        errors.append("%s: window ordinals do not rise: %r" % (where, ordinals))
    if r["last_step"] is None:
        if window or seen_steps:
            errors.append("%s: no last_step, yet %d steps" % (where, seen_steps))
    elif window and r["last_step"] != window[-1]:
        errors.append("%s: last_step is not the window's newest step" % where)
    if t["steps"] > 0:
        lo, hi, total = t["step_ns_min"], t["step_ns_max"], t["step_ns_sum"]
        if lo is None or hi is None or not (lo <= hi and lo * t["steps"] <= total <= hi * t["steps"]):
            errors.append("%s: step_ns min %r, max %r, sum %r of %d steps do not fit"
                          % (where, lo, hi, total, t["steps"]))
    elif t["step_ns_min"] is not None or t["step_ns_max"] is not None:
        errors.append("%s: step_ns_min / max of no step" % where)
    if len(window) == seen_steps:
        # The window holds every step of the run: its analysed steps add up
        # to the whole-run totals.
        analysed = [s for s in window if not s["excluded"]]
        if len(analysed) != t["steps"]:
            errors.append("%s: %d analysed steps in the window, totals say %d" % (where, len(analysed), t["steps"]))
        for field, total in STEP_SUMS:
            got = sum(s[field] for s in analysed)
            if got != t[total]:
                errors.append("%s: window's %s add up to %d, totals.%s is %d" % (where, field, got, total, t[total]))
    for i, c in enumerate(comms):
        if c["left"] > c["entered"]:
            errors.append("%s.comms[%d]: left %d > entered %d" % (where, i, c["left"], c["entered"]))
    on_comms = sum(c["collectives"] for c in comms)
    if on_comms > r["collectives"]:
        errors.append("%s: %d collectives on its comms, %d in all" % (where, on_comms, r["collectives"]))
    for i, e in enumerate(strip):
        if e["end_ns"] < e["start_ns"] or e["exposed_ns"] > e["end_ns"] - e["start_ns"]:
            errors.append("%s.strip[%d]: end before start, or exposed longer than the event" % (where, i))


def relations(doc):
    """Every relation docs/live.md promises that doc breaks."""
    errors = []
    job, ranks = doc["job"], doc["ranks"]
    dropped = sum(r["dropped"] for r in ranks)
    if job["records_dropped_total"] != dropped:
        errors.append("$.job: records_dropped_total %d, the ranks' dropped add up to %d"
                      % (job["records_dropped_total"], dropped))
    records = sum(r["records"] for r in ranks)
    if job["records_total"] < records:
        errors.append("$.job: records_total %d < the ranks' records %d" % (job["records_total"], records))
    if job["diagnosed"] != (job["diagnoses"] > 0):
        errors.append("$.job: diagnosed is %r after %d diagnoses" % (job["diagnosed"], job["diagnoses"]))
    flight = job["flight"]
    if (flight is None) == job["diagnosed"]:
        errors.append("$.job: flight is %s with diagnosed %r" % ("null" if flight is None else "set", job["diagnosed"]))
    if flight is not None and flight["hang"] != (len(flight["hangs"]) > 0):
        errors.append("$.job.flight: hang is %r with %d hangs" % (flight["hang"], len(flight["hangs"])))
    if not job["diagnosed"]:
        set_fields = [f for f in DIAGNOSIS_FIELDS if job[f] is not None]
        if set_fields or job["findings"] or job["gathers"]:
            errors.append("$.job: not diagnosed, yet %s" % (", ".join(set_fields) or "findings or gathers"))
    elif job["verdict"] is None:
        errors.append("$.job: diagnosed without a verdict")
    for i, f in enumerate(job["findings"]):
        if f["fix"] == "":
            errors.append("$.job.findings[%d]: fix is \"\" (a finding without a fix has null)" % i)
    if len(job["findings"]) > FINDINGS_MAX or len(job["gathers"]) > GATHERS_MAX:
        errors.append("$.job: more findings or gathers than the live state keeps")
    sources = [r["source"] for r in ranks]
    if len(set(sources)) != len(sources):
        errors.append("$.ranks: a source twice: %r" % sources)
    order = [(0, r["rank"], r["source"]) if r["rank"] is not None else (1, 0, r["source"]) for r in ranks]
    if order != sorted(order):
        errors.append("$.ranks: not by rank, unknown ranks last by source")
    for i, r in enumerate(ranks):
        rank_relations(r, "$.ranks[%d]" % i, errors)
    return errors


def check_file(schema, path, jsonschema):
    """Every violation of the snapshot lines in path."""
    errors, last = [], 0
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return ["no snapshot"]
    for n, line in enumerate(lines, 1):
        try:
            doc = strict_loads(line)
        except ValueError as e:
            errors.append("line %d: not strict JSON: %s" % (n, e))
            continue
        found = problems(schema, doc, jsonschema)
        if found:
            errors += ["line %d: %s" % (n, e) for e in found]
            continue
        if list(doc)[0] != "schema":
            errors.append("line %d: schema is not the first key" % n)
        if doc["generation"] <= last:
            errors.append("line %d: generation %d after %d" % (n, doc["generation"], last))
        last = doc["generation"]
        errors += ["line %d: %s" % (n, e) for e in relations(doc)]
    return errors


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        schema = json.load(f)
    try:
        import jsonschema  # python3-jsonschema
    except ImportError:
        jsonschema = None
    failed = 0
    for path in argv[2:]:
        errors = check_file(schema, path, jsonschema)
        if errors:
            failed = 1
            print("%s: INVALID" % path)
            for e in errors:
                print("  " + e)
        else:
            print("%s: valid (%s)" % (path, "jsonschema and the built-in validator" if jsonschema
                                      else "built-in validator only: jsonschema not installed"))
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv))
