#!/usr/bin/env python3
"""kineto_hta.py - HTA's parse and get_comm_comp_overlap on one folder of
Kineto traces, timed, for bench/kineto_bench.sh (peak RSS comes from
/usr/bin/time around this script). HTA is imported from PYTHONPATH: a
checkout of facebookresearch/HolisticTraceAnalysis (the script's caller
extracts it from the mirror); it never runs in `make test`.

usage: PYTHONPATH=HTA kineto_hta.py FOLDER
prints: hta parse S s overlap S s percent P (per rank: rank=P ...)
"""
import logging
import sys
import time

logging.disable(logging.WARNING)

from hta.trace_analysis import TraceAnalysis  # noqa: E402


def main(folder):
    t0 = time.monotonic()
    analysis = TraceAnalysis(trace_dir=folder)
    t1 = time.monotonic()
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    t2 = time.monotonic()
    per_rank = " ".join(f"{int(r)}={p:.4f}" for r, p in zip(overlap["rank"], overlap["comp_comm_overlap_pctg"]))
    print(f"hta parse {t1 - t0:.2f} s overlap {t2 - t1:.2f} s percent {per_rank}")


if __name__ == "__main__":
    main(sys.argv[1])
