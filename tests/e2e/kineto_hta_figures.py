#!/usr/bin/env python3
"""HTA's own comm/comp overlap on trace folders, as tests/fixtures/kineto/hta_figures.json records it.

Not run by `make test` (HTA needs a fetched snapshot and pandas): run by hand,

  git -C /work/.mirror/facebookresearch+HolisticTraceAnalysis/repo archive HEAD hta | tar -x -C /tmp/hta
  PYTHONPATH=/tmp/hta /usr/bin/python3 tests/e2e/kineto_hta_figures.py ../shared/kineto/*/

and prints {folder: {rank: comp_comm_overlap_pctg}}.
"""
import json
import sys

from hta.trace_analysis import TraceAnalysis  # noqa: E402 (PYTHONPATH)


def main(folders):
    out = {}
    for d in folders:
        df = TraceAnalysis(trace_dir=d).get_comm_comp_overlap(visualize=False)
        out[d.rstrip("/").split("/")[-1]] = {
            str(int(r)): float(p) for r, p in zip(df["rank"], df["comp_comm_overlap_pctg"])
        }
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
