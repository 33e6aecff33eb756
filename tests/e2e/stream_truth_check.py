#!/usr/bin/env python3
"""stream_truth_check.py - the truth files stream_job wrote parse strictly.

  stream_truth_check.py TRUTH.json...

Each file must be one strict JSON document (no duplicate key, no NaN) with the
standard keys of tests/e2e/stream_job.md, its communicators' per-step counts
by class, and a setup's own keys well formed where it has them. Exit status:
0 all good, 1 a file is not.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lint_schema_check  # noqa: E402  (beside this file)

STANDARD = ("setup", "ranks", "steps", "layers", "verdict", "fsdp_allgathers_per_step", "forward_allgathers",
            "backward_allgathers", "reduce_scatters", "microbatches", "microbatches_told", "repeating_units",
            "gathers_per_unit", "reshard", "errors", "tp_degree", "roles", "params", "comms", "note")
CLASSES = ("allgathers", "reduce_scatters", "allreduces", "broadcasts", "point_to_point", "alltoalls")
# a setup's own keys: what each must be (stream_job.md, the setups' Counting tables)
EXTRA = {
    "fsdp_gather_dtypes": list, "fsdp_reduce_dtypes": list, "amax_allreduces_per_step": int,
    "reduced_units": int, "unreduced_units": int, "trainable_params": int, "reduce_order": list,
    "microbatches_countable": bool, "microbatches_per_step": list, "blocks_per_bucket": int,
}


def problems(t):
    out = ["no key %s" % k for k in STANDARD if k not in t]
    for c in t.get("comms", []):
        if sorted(c.get("per_step", {})) != sorted(CLASSES):
            out.append("communicator %s: per_step classes %s" % (c.get("name"), sorted(c.get("per_step", {}))))
    for k, kind in EXTRA.items():
        if k in t and not (isinstance(t[k], kind) and (kind is not int or not isinstance(t[k], bool))):
            out.append("%s is %r, not a %s" % (k, t[k], kind.__name__))
    return out


def main(paths):
    bad = 0
    for p in paths:
        try:
            t = lint_schema_check.strict_loads(open(p).read())
        except (OSError, ValueError) as e:
            print("%s: %s" % (p, e))
            bad += 1
            continue
        for x in problems(t):
            print("%s: %s" % (p, x))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
