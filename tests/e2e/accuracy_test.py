#!/usr/bin/env python3
"""accuracy_test.py - the diagnosis against fsdp_ref's own ground truth.

A labelled matrix of fsdp_ref runs under `fsdpscope run`, over the setups of
docs/patterns.md: FSDP2 on one communicator (wrap block / linear / model /
group:2 / mixed specs x reshard true / false / 2 x prefetch 0 / 1 x layers x
ranks), gradient accumulation with and without sync and the clip-norm
AllReduce, a 2-D mesh with tensor parallelism, HSDP, FSDP1 (init broadcasts,
activation-checkpoint re-gathers), eval passes and checkpoint saves, each with
NVTX markers and without (a job that marks nothing). For every run, from
`fsdpscope report --json` and `fsdpscope lint --json` against fsdp_ref's
JSON-lines log:

  * a verdict was reached (never "undecided" where the setup has an answer);
  * steps seen = the steps the trainer ran (eval passes, checkpoints and set-up
    are not steps);
  * AllGathers, forward / backward, ReduceScatters and AllReduces per step of
    the FSDP group: exact; micro-batches per step and gathers per micro-batch:
    exact;
  * repeating units and gathers per unit, reshard_after_forward, the
    recomputation's re-gathers: exact;
  * the communicators' roles: the FSDP group, the tensor-parallel group (and
    its degree), the HSDP replicate group;
  * the expected error findings present (wrap-too-fine for per-Linear and mixed
    specs, wrap-too-coarse for the whole model, gather-count-mismatch with
    --layers), and no false error;
  * the exposure figures check against each other, exactly, on every gather
    (exposure_invariants): exposed <= the gather's time, hidden + exposed = its
    time, cause hidden exactly when nothing is exposed, the rows of the gathers
    table sum to the per-step totals, forward + backward and the causes sum to
    the totals, AllGather exposure <= the breakdown's exposed communication, the
    breakdown adds up to its step, the headline rank's row is the same step's;
  * compute's wait on the gathers in the representative step (exposure.step)
    beside the trainer's own gather_wait_ns of that very step, and gather by
    gather beside its gather_waits_ns: printed as figures (a test asserts on
    decisions, not on a duration; the two read CLOCK_MONOTONIC at different
    points: NVTX push / pop against fsdp_ref's wait call); --exposure-tolerance
    F makes the step's figure a check for a recorded run.
  * every JSON document read (report and lint --json, fsdp_ref's log lines,
    stream_job's truth) parses strictly (no duplicate key, no NaN), and
    fsdpscope's are valid against docs/report-schema.json.

Figures reported at the end: verdicts right / total, false errors, undecided
runs. A sample of the matrix runs under `make test`; the whole product is
`--matrix full` (the command and its result are recorded in
bench/results/accuracy.txt), which also runs STREAM_PENDING: the stream_job
setups the analysis does not read right yet, alone with `--matrix pending`.

Usage:
  accuracy_test.py matrix --fsdpscope BIN --fsdp-ref BIN --agent SO [--matrix sample|full|pending]
                          [--keep DIR] [--only NAME[,NAME...]] [--backend cpu|cuda] [--steps T]
                          [--repeat N] [--exposure-tolerance F]
  accuracy_test.py check --fsdpscope BIN --trace T.fss --log T.jsonl --wrap SPEC
                          --reshard true|false|G --layers L [--prefetch P] [--flags "..."]
     (a run made elsewhere, e.g. on a GPU machine: same checks)

Exit status: 0 all checks passed, 1 a check failed, 77 a needed binary is
missing (ctest reports it as skipped).
"""
import argparse
import itertools
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lint_schema_check  # noqa: E402  (beside this file)

SCHEMA = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                                     "report-schema.json")))


def tool_json(text, what, fails):
    """One JSON document fsdpscope wrote: parsed strictly (no duplicate key,
    no NaN) and checked against docs/report-schema.json with the built-in
    validator. Violations go into fails; None when it does not parse."""
    try:
        d = lint_schema_check.strict_loads(text)
    except ValueError as e:
        fails.append("%s: not strict JSON: %s" % (what, e))
        return None
    for p in lint_schema_check.problems(SCHEMA, d)[:5]:
        fails.append("%s: against the schema: %s" % (what, p))
    return d


def findings_of(text, what, fails):
    """rule -> severity of a lint --json document ({} when lint wrote none)."""
    d = tool_json(text, what, fails) if text else None
    return {x["rule"]: x["severity"] for x in d["findings"]} if d else {}


def spec_of(name, wrap="block", reshard="true", prefetch=1, layers=4, ranks=2, flags="", nvtx=True):
    return {"name": name, "wrap": wrap, "reshard": reshard, "prefetch": prefetch, "layers": layers, "ranks": ranks,
            "flags": flags, "nvtx": nvtx}


# Every value of every dimension at least once, the interesting pairs
# (linear x 12 layers, group reshard x 4 ranks, one rank, TP x per-Linear,
# accumulation without sync x markers off) included.
SAMPLE = [
    spec_of("block-r2-l5", "block", "true", 1, 5, 2),
    spec_of("linear-r4-l12", "linear", "true", 1, 12, 4),
    spec_of("model-r2-l2", "model", "true", 0, 2, 2),
    spec_of("group2-r2-l12-keep", "group:2", "false", 1, 12, 2),
    spec_of("mixed-r4-l5", "linear:0-1,block:2-4", "true", 0, 5, 4),
    spec_of("block-r4-l12-g2", "block", "2", 1, 12, 4),
    spec_of("linear-r1-l2-keep", "linear", "false", 0, 2, 1),
    spec_of("block-r2-l12-noprefetch", "block", "true", 0, 12, 2, nvtx=False),
    spec_of("mixed-r2-l12", "block:0-5,linear:6-11", "false", 1, 12, 2),
    spec_of("accum4-clip-nonvtx", "block", "true", 1, 6, 2, "--grad-accum 4 --clip-grad 1", nvtx=False),
    spec_of("accum4-nosync-nonvtx", "block", "true", 1, 6, 2, "--grad-accum 4 --grad-sync last --clip-grad 1",
            nvtx=False),
    spec_of("accum2-linear", "linear", "true", 1, 4, 2, "--grad-accum 2"),
    spec_of("tp2-block-nonvtx", "block", "true", 1, 6, 4, "--tp 2", nvtx=False),
    spec_of("tp2-linear-nonvtx", "linear", "true", 1, 6, 4, "--tp 2", nvtx=False),
    spec_of("tp2-keep-accum", "block", "false", 1, 4, 4, "--tp 2 --grad-accum 2 --clip-grad 1"),
    spec_of("fsdp1-hsdp-sms-nonvtx", "block", "true", 1, 6, 4,
            "--style fsdp1 --shard-group 2 --sync-module-states", nvtx=False),
    spec_of("fsdp1-ac-nonvtx", "block", "true", 1, 6, 2, "--style fsdp1 --activation-checkpoint", nvtx=False),
    spec_of("eval-ckpt-nonvtx", "block", "true", 1, 6, 2, "--eval-every 3 --checkpoint-every 4", nvtx=False),
    spec_of("hsdp-eval-nvtx", "linear", "true", 1, 3, 4, "--shard-group 2 --eval-every 2"),
    spec_of("tp2-hsdp-names-nonvtx", "block", "true", 1, 4, 8, "--tp 2 --shard-group 2 --comm-names", nvtx=False),
    spec_of("zero3-flat-nonvtx", "block", "true", 1, 6, 2,
            "--style zero3 --bucket 3000 --persistence-threshold 64 --max-reuse-distance 3000", nvtx=False),
    spec_of("zero3-coalesced-r4", "block", "true", 1, 6, 4,
            "--style zero3 --zero3-gather coalesced --bucket 20000 --persistence-threshold 64 --reduce-bucket 4096"),
]


def full_matrix():
    out = []
    # FSDP2 on one communicator: every wrap, reshard, prefetch, layer count, rank count
    for wrap, reshard, prefetch, layers, ranks in itertools.product(
            ["block", "linear", "model", "group:2", "mixed"], ["true", "false", "2"], [0, 1], [2, 5, 12], [1, 2, 4]):
        if reshard == "2" and ranks < 4:
            continue  # a group smaller than the world needs 4 ranks
        spec = wrap
        if wrap == "mixed":
            half = layers // 2
            spec = "linear:0-%d,block:%d-%d" % (half - 1, half, layers - 1)
        out.append(spec_of("%s-r%d-l%d-%s-p%d" % (wrap.replace(":", ""), ranks, layers, reshard, prefetch), spec,
                           reshard, prefetch, layers, ranks))
    # the setups, with and without markers
    setups = [
        ("accum2", "--grad-accum 2", 2), ("accum4-clip", "--grad-accum 4 --clip-grad 1", 2),
        ("accum3-nosync", "--grad-accum 3 --grad-sync last --clip-grad 1", 2), ("tp2", "--tp 2", 4),
        ("tp2-accum", "--tp 2 --grad-accum 2 --grad-sync last", 4), ("hsdp", "--shard-group 2", 4),
        ("fsdp1-hsdp-sms", "--style fsdp1 --shard-group 2 --sync-module-states", 4),
        ("fsdp1-ac", "--style fsdp1 --activation-checkpoint", 2),
        ("eval-ckpt", "--eval-every 3 --checkpoint-every 4", 2),
    ]
    for (tag, flags, ranks), wrap, reshard, prefetch, layers, nvtx in itertools.product(
            setups, ["block", "linear"], ["true", "false"], [0, 1], [2, 6], [True, False]):
        out.append(spec_of("%s-%s-%s-p%d-l%d-%s" % (tag, wrap, reshard, prefetch, layers, "nvtx" if nvtx else "nonvtx"),
                           wrap, reshard, prefetch, layers, ranks, flags, nvtx))
    return out


# Setups fsdp_ref does not run, from stream_job (tests/e2e/stream_job.md): its
# own truth file is the ground truth. (name, stream_job arguments)
STREAM_SAMPLE = [
    ("stream-fsdp2-titan-accum-nosync-clip", "--setup fsdp2 --nranks 4 --torchtitan --accum 2 --no-sync --clip"),
    ("stream-fsdp2-linear-nvtx", "--setup fsdp2 --nranks 2 --wrap linear --nvtx"),
    ("stream-fsdp2-accum-untold", "--setup fsdp2 --nranks 2 --accum 2"),
    ("stream-tp", "--setup tp --nranks 4"),
    ("stream-tp-linear-nvtx", "--setup tp --nranks 4 --wrap linear --nvtx"),
    ("stream-fsdp1-hsdp-sms-ckpt", "--setup fsdp1-hsdp --nranks 4 --sync-module-states --checkpoint-wrapper"),
    ("stream-zero3-flat", "--setup zero3 --nranks 4"),
    ("stream-zero3-coalesced-nvtx", "--setup zero3 --nranks 2 --gather coalesced --nvtx"),
    ("stream-zero3-hpz", "--setup zero3 --nranks 4 --hpz 2"),
    ("stream-pp-clip", "--setup pp --nranks 4 --clip"),
    ("stream-ddp-fsdp", "--setup ddp-fsdp --nranks 2"),
    ("stream-tp-seq", "--setup tp --nranks 4 --seq-lens 256,192,256,128"),
    ("stream-cp-sdpa-alltoall-world", "--setup cp --nranks 2 --attention sdpa --rotate alltoall"),
    ("stream-cp-sdpa-world", "--setup cp --nranks 2 --attention sdpa"),
    ("stream-float8-linear-fp8-nvtx", "--setup float8 --nranks 2 --wrap linear --nccl-fp8 --nvtx"),
    ("stream-deferred-keep-schedule", "--setup deferred --nranks 4 --accum-schedule 2,3 --reshard-after-forward false"),
    ("stream-simplefsdp-clip", "--setup simplefsdp --nranks 4 --clip"),
    ("stream-cp-flex", "--setup cp --nranks 4"),
    ("stream-cp-sdpa", "--setup cp --nranks 4 --attention sdpa"),
    ("stream-cp-sdpa-alltoall", "--setup cp --nranks 4 --attention sdpa --rotate alltoall"),
    ("stream-cp-flex-world", "--setup cp --nranks 2"),
    ("stream-moe", "--setup moe --nranks 4"),
    ("stream-moe-ep-world", "--setup moe --nranks 2"),
    ("stream-zero3-qwz", "--setup zero3 --nranks 2 --qwz"),
    ("stream-zero3-zeropp", "--setup zero3 --nranks 4 --qwz --hpz 2"),
    # read right since the forward gather sequence carries the inference (issue 21)
    ("stream-dpo", "--setup dpo --nranks 2"),
    ("stream-dpo-ref-model-nvtx", "--setup dpo --nranks 4 --ref-wrap model --nvtx"),
    ("stream-distill", "--setup distill --nranks 2"),
    ("stream-rl-sync2-logprobs", "--setup rl --nranks 2 --sync-every 2 --log-probs"),
    ("stream-rl-sync1-nvtx", "--setup rl --nranks 4 --sync-every 1 --nvtx"),
    ("stream-ddp-fsdp-reshard-nvtx", "--setup ddp-fsdp --nranks 4 --block-reshard --nvtx"),
    ("stream-pp-interleaved-clip", "--setup pp --nranks 4 --virtual-stages 2 --layers 8 --clip"),
    ("stream-ulysses", "--setup ulysses --nranks 4"),
    ("stream-float8-precompute-clip", "--setup float8 --nranks 4 --clip"),
    ("stream-float8-dynamic", "--setup float8 --nranks 2 --float8-dynamic"),
    ("stream-lora-accum", "--setup lora --nranks 4 --accum 2"),
    ("stream-frozen-blocks", "--setup frozen --nranks 2 --frozen 2"),
    ("stream-frozen-embeddings-root-first", "--setup frozen --nranks 4 --frozen-embeddings"),
    ("stream-frozen-prefix-no-backward", "--setup frozen --nranks 4 --frozen 2 --frozen-embeddings"),
    ("stream-frozen-root", "--setup frozen --nranks 2 --frozen 1 --frozen-root"),
    ("stream-deferred-regather-clip", "--setup deferred --nranks 2 --accum 3 --clip"),
    ("stream-deferred-schedule", "--setup deferred --nranks 4 --accum-schedule 2,3"),
]


def stream_full():
    variants = {
        "fsdp2": ["", "--wrap linear", "--accum 2", "--accum 2 --no-sync", "--clip", "--torchtitan",
                  "--torchtitan --accum 2 --no-sync --clip", "--torchtitan --reshard-last-block",
                  "--wrap linear --accum 2 --no-sync --clip"],
        "tp": ["", "--wrap linear", "--no-loss-parallel", "--accum 2 --no-sync", "--reshard-last-block"],
        "fsdp1-hsdp": ["", "--sync-module-states", "--checkpoint-wrapper", "--sync-module-states --checkpoint-wrapper",
                       "--checkpoint-wrapper=no-reentrant"],
        "zero3": ["", "--gather coalesced", "--init-broadcast", "--bucket 0", "--qwz", "--hpz 2", "--qwz --hpz 2",
                  "--qwz --hpz 2 --qgz", "--hpz 2 --gather coalesced"],
        "pp": ["", "--clip", "--microbatches 2", "--virtual-stages 2 --layers 8",
               "--virtual-stages 2 --layers 8 --clip", "--virtual-stages 2 --layers 8 --microbatches 2"],
        "tp-seq": ["--seq-lens 256,192,256,128", "--seq-lens 256,192,256,128 --no-loss-parallel",
                   "--seq-lens 128,256 --accum 2 --no-sync"],
        "dpo": ["", "--ref-wrap model"],
        "distill": [""],
        "rl": ["", "--sync-every 1", "--sync-every 3 --log-probs"],
        "ddp-fsdp": ["", "--block-reshard"],
        "cp": ["", "--attention sdpa", "--attention sdpa --rotate alltoall", "--cp 4"],
        "ulysses": ["", "--sp 4"],
        "moe": ["", "--experts 4", "--experts 2", "--ep 4"],
        # FSDP2 variants (tests/e2e/stream_job_fsdp2_variants.c)
        "float8": ["", "--float8-dynamic", "--clip", "--reshard-last-block", "--wrap linear",
                   "--wrap linear --nccl-fp8"],
        "lora": ["", "--accum 2", "--clip", "--lora-rank 16"],
        "frozen": ["--frozen 2", "--frozen 2 --frozen-embeddings", "--frozen-embeddings", "--frozen 1 --frozen-root",
                   "--frozen-root --clip", "--frozen 4"],
        "deferred": ["--accum 2", "--accum 3 --clip", "--accum-schedule 2,3", "--accum 3 --reshard-after-forward false",
                     "--accum-schedule 2,3 --reshard-after-forward false",
                     "--accum-schedule 2,3 --reshard-after-forward false --clip"],
        "simplefsdp": ["", "--bucket-blocks 1", "--layers 6 --bucket-blocks 3", "--layers 6 --clip"],
    }
    out = []
    for setup, vs in variants.items():
        for v, n, nvtx in itertools.product(vs, [2, 4], [False, True]):
            if (setup in ("tp", "pp", "tp-seq") or any(w in v for w in ("--cp 4", "--sp 4", "--ep 4"))) and n < 4:
                continue
            tag = v.replace("--", "").replace(" ", "-").replace(",", "-")
            name = "stream-%s-n%d%s%s" % (setup, n, ("-" + tag) if v else "", "-nvtx" if nvtx else "")
            out.append((name, "--setup %s --nranks %d %s%s" % ("tp" if setup == "tp-seq" else setup, n, v,
                                                               " --nvtx" if nvtx else "")))
    return out


# Setups the analysis does not read right yet (issue 21): run by --matrix full
# and --matrix pending; each moves into STREAM_SAMPLE once it passes.
STREAM_PENDING = [
    ("stream-zero3-zeropp-qgz", "--setup zero3 --nranks 4 --qwz --hpz 2 --qgz"),
]


def hpz_against_truth(d, t):
    """ZeRO++ hpZ: the fetch events of a step on the hpZ group (truth
    hpz_fetches, a value + scale pair once) against the report's
    buckets.regather_fetches_per_step, where the report has that field."""
    b = d.get("buckets") or {}
    if "hpz_fetches" not in t or "regather_fetches_per_step" not in b:
        return []
    if b["regather_fetches_per_step"] != t["hpz_fetches"]:
        return ["hpZ group fetches per step: %r, the job says %r" % (b["regather_fetches_per_step"], t["hpz_fetches"])]
    return []


def quantized_against_truth(d, t):
    """ZeRO++ qwZ: fetch events sent as int8 values + fp32 scales (truth
    quantized_fetches) against buckets.quantized_fetches_per_step, where the
    report has that field."""
    b = d.get("buckets") or {}
    if "quantized_fetches" not in t or "quantized_fetches_per_step" not in b:
        return []
    if b["quantized_fetches_per_step"] != t["quantized_fetches"]:
        return ["quantized fetches per step: %r, the job says %r" % (b["quantized_fetches_per_step"],
                                                                      t["quantized_fetches"])]
    return []


def comms_against_truth(d, t, scale=1):
    """Each communicator the job used (truth "comms": role, ranks, its events of
    a step by class) against report --json's communicators[] of the same role
    and size: the counts per communicator, exactly (divided by scale where
    micro-batches that nothing tells apart are the report's steps)."""
    fails = []
    got = sorted((c["role"], c["nranks"], tuple(sorted(c["per_step"].items()))) for c in d["communicators"]
                 if c["role"] != "idle")
    for c in t.get("comms", []):
        keys = sorted(c["per_step"])
        mine = [g for g in got if g[0] == c["role"] and g[1] == c["nranks"]]
        if not any(all(dict(g[2]).get(k) == c["per_step"][k] // scale for k in keys) for g in mine):
            fails.append("communicator %s (%s, %d ranks): per step %s, the report has %s" % (
                c["name"], c["role"], c["nranks"], c["per_step"], [dict(g[2]) for g in mine] or "none of that role"))
    return fails


def dtypes_against_truth(d, t):
    """float8: the dtypes of the FSDP group's parameter gathers and gradient
    reductions (truth fsdp_gather_dtypes, fsdp_reduce_dtypes: a ncclUint8
    gather of bytes beside bf16 ones) against report --json's sizes."""
    fails = []
    for key, field in (("fsdp_gather_dtypes", "allgather_dtypes"), ("fsdp_reduce_dtypes", "reduce_scatter_dtypes")):
        if key in t and (d.get("sizes") or {}).get(field) is not None:
            if sorted(d["sizes"][field]) != sorted(t[key]):
                fails.append("%s: %s, the job says %s" % (field, sorted(d["sizes"][field]), sorted(t[key])))
    return fails


def trainable_against_truth(d, t):
    """Frozen parameters: the parameters that get gradients (truth
    trainable_params) against the ledger's trainable_params, where the report
    has that field."""
    if "trainable_params" in t and "trainable_params" in (d.get("ledger") or {}):
        if d["ledger"]["trainable_params"] != t["trainable_params"]:
            return ["trainable parameters %r, the job says %r" % (d["ledger"]["trainable_params"],
                                                                  t["trainable_params"])]
    return []


def reductions_against_truth(d, t):
    """Frozen parameters: the units reduced per step and those gathered but
    never reduced (truth reduced_units, unreduced_units) against the report's
    units, where it has those fields."""
    fails = []
    for key in ("reduced_units", "unreduced_units"):
        if key in t and key in (d.get("units") or {}) and d["units"][key] != t[key]:
            fails.append("%s: %r, the job says %r" % (key, d["units"][key], t[key]))
    return fails


def countable_against_truth(d, t):
    """Deferred reductions: whether the FSDP group's stream can show the
    micro-batches (truth microbatches_countable) against the report's
    microbatches.countable, where it has that field."""
    mb = d.get("microbatches") or {}
    if "microbatches_countable" in t and "countable" in mb and mb["countable"] != t["microbatches_countable"]:
        return ["micro-batches countable %r, the job says %r" % (mb["countable"], t["microbatches_countable"])]
    return []


def variants_against_truth(d, t):
    """A micro-batch count that changes from step to step (deferred
    --accum-schedule, the FSDP group able to show it: truth
    microbatches_countable): with steps from the period, the report lists one
    step variant per count (step_variants), the most micro-batches first, each
    with the steps of that count the job ran (truth microbatches_per_step)."""
    per_step = t.get("microbatches_per_step") or []
    if len(set(per_step)) < 2 or not t.get("microbatches_countable") or d.get("step_detection") != "period":
        return []
    want = [per_step.count(k) for k in sorted(set(per_step), reverse=True)]
    got = [v["steps"] for v in d.get("step_variants") or []]
    if got != want:
        return ["step variants: steps of each %r, the job ran %r (micro-batches %r)" % (got, want, per_step)]
    return []


def buckets_against_truth(d, t):
    """Compiler bucketing: blocks per bucketed gather (truth
    blocks_per_bucket) against the report's units.blocks_per_unit, where it
    has that field; the units themselves are the standard keys."""
    u = d.get("units") or {}
    if "blocks_per_bucket" in t and "blocks_per_unit" in u and u["blocks_per_unit"] != t["blocks_per_bucket"]:
        return ["blocks per unit %r, the job says %r" % (u["blocks_per_unit"], t["blocks_per_bucket"])]
    return []


def forward_only_against_truth(d, t):
    """Forward-only passes inside a step (a reference model, a teacher, log-probs)
    against microbatches.forward_only, and the models gathered per step where
    the report counts them."""
    fails = []
    mb = d.get("microbatches") or {}
    if "forward_only_passes" in t and mb.get("forward_only") != t["forward_only_passes"]:
        fails.append("forward-only passes per step: %r, the job says %d" % (mb.get("forward_only"),
                                                                         t["forward_only_passes"]))
    if "models" in t and "models" in d and d["models"] != t["models"]:
        fails.append("models: %r, the job says %d" % (d["models"], t["models"]))
    return fails


def fsdp_groups_against_truth(d, t):
    """Truth "fsdp_groups" (one per FSDP group: ranks, parameter AllGathers
    and ReduceScatters per step, units; the primary, most parameter bytes
    gathered, first) against report --json's fsdp_groups[], where the report
    has that array: the same groups, in the same order, with the same counts."""
    if "fsdp_groups" not in t or "fsdp_groups" not in d:
        return []
    fails = []

    def counts(g):
        ps = g.get("per_step") or {}
        units = g.get("units")
        if isinstance(units, dict):
            units = units.get("forward_units", units.get("units", units.get("count")))
        return (g.get("nranks"), g.get("allgathers", ps.get("allgathers")),
                g.get("reduce_scatters", ps.get("reduce_scatters")), units)

    want = [(g["nranks"], g["allgathers"], g["reduce_scatters"], g["units"]) for g in t["fsdp_groups"]]
    got = [counts(g) for g in d["fsdp_groups"]]
    if got != want:
        fails.append("FSDP groups (ranks, AllGathers, ReduceScatters, units), primary first: %s, the job says %s" % (
            got, want))
    return fails


def step_allgathers_against_truth(d, t):
    """AllGathers per step on the FSDP communicator that gather no parameter
    (metrics), where the report counts them apart."""
    ps = d.get("per_step") or {}
    if "step_allgathers" not in t or "step_allgathers" not in ps:
        return []
    if ps["step_allgathers"] != t["step_allgathers"]:
        return ["AllGathers per step that gather no parameter: %r, the job says %d" % (ps["step_allgathers"],
                                                                                    t["step_allgathers"])]
    return []


def sync_against_truth(d, t):
    """Weight syncs outside the steps: every sync's gathers are events outside
    the analysed steps of the FSDP communicator (the steps seen are the training
    steps: check_stream's own check)."""
    if "sync_allgathers" not in t:
        return []
    fsdp = [c for c in d["communicators"] if c["role"] == "fsdp"]
    outside = fsdp[0]["outside_steps"] if fsdp else 0
    need = t["sync_allgathers"] * t["syncs"]
    if outside < need:
        return ["weight sync: %d events outside the steps on the FSDP communicator, the job made %d syncs of %d "
                "gathers outside them" % (outside, t["syncs"], t["sync_allgathers"])]
    return []


def ddp_buckets_against_truth(d, t):
    """DDP's gradient-bucket AllReduces beside fully_shard: the per-step
    all-reduces of the data-parallel side."""
    if "ddp_buckets" not in t:
        return []
    got = (d.get("per_step") or {}).get("allreduces")
    if got != t["ddp_buckets"]:
        return ["DDP bucket AllReduces per step: %r, the job says %d" % (got, t["ddp_buckets"])]
    return []


def tp_sizes_against_truth(d, t):
    """A sequence that changes every step: the tensor-parallel group's sizes
    vary, where the report says whether they do."""
    if "tp_sizes_vary" not in t:
        return []
    fails = []
    for c in d["communicators"]:
        if c["role"] == "tensor-parallel" and "sizes_vary" in c and c["sizes_vary"] != t["tp_sizes_vary"]:
            fails.append("tensor-parallel sizes vary: %r, the job says %r" % (c["sizes_vary"], t["tp_sizes_vary"]))
    return fails


def qgz_against_truth(d, t):
    """ZeRO++ qgZ reduces most gradients by all-to-all (truth qgz_tensors): a
    P from the ReduceScatters alone is short, and the report must say so."""
    if not t.get("qgz_tensors"):
        return []
    if not any("qgZ" in n and "P can be short" in n for n in d.get("notes", [])):
        return ["qgZ: %d gradient tensors reduced by all-to-all, and no note that P can be short" % t["qgz_tensors"]]
    return []


def extra_keys_against_truth(d, t):
    """The keys a setup adds to the truth (stream_job.md, each setup's Counting)."""
    return (forward_only_against_truth(d, t) + step_allgathers_against_truth(d, t) + sync_against_truth(d, t) +
            ddp_buckets_against_truth(d, t) + tp_sizes_against_truth(d, t) + fsdp_groups_against_truth(d, t) +
            dtypes_against_truth(d, t) + trainable_against_truth(d, t) + reductions_against_truth(d, t) +
            countable_against_truth(d, t) + buckets_against_truth(d, t) + variants_against_truth(d, t) +
            qgz_against_truth(d, t))


def check_stream(name, fsdpscope, trace, truth_path, tally):
    """A stream_job run against its own truth file."""
    fails = []
    t = lint_schema_check.strict_loads(open(truth_path).read())
    rep = run([fsdpscope, "report", "--json", trace])
    if rep.returncode != 0:
        return ["report --json exit %d: %s" % (rep.returncode, rep.stderr.strip())]
    d = tool_json(rep.stdout, "report --json", fails)
    if d is None:
        return fails
    lint = run([fsdpscope, "lint", "--json", trace])
    f = findings_of(lint.stdout, "lint --json", fails)
    tally["runs"] += 1
    fails += exposure_invariants(d) + fsdp_groups_invariants(d)

    def want(what, got, exp):
        if got != exp:
            fails.append("%s: %r, the job says %r" % (what, got, exp))

    if d["verdict"] != t["verdict"]:
        tally["undecided"] += d["verdict"] == "undecided"
        fails.append("verdict %s (%s), the job says %s" % (d["verdict"], (d.get("undecided") or {}).get("why"),
                                                           t["verdict"]))
    else:
        ps, mb = d["per_step"], d["microbatches"]
        # K micro-batches that nothing tells from steps are K steps here
        k = 1 if t["microbatches_told"] is False else t["microbatches"]
        scale = 1 if k == t["microbatches"] else t["microbatches"]
        want("steps seen", d["steps_seen"], t["steps"] * (t["microbatches"] if scale > 1 else 1))
        if t["verdict"] == "bucketed":
            b = d["buckets"]
            want("fetch events per step", b["fetches_per_step"], t["fetches_per_step"])
            want("AllGather calls per step", b["calls_per_step"], t["calls_per_step"])
            want("reduce buckets per step", b["reduce_buckets_per_step"], t["reduce_scatters"])
            want("P", d["ledger"]["params"], t["params"])
            fails += hpz_against_truth(d, t)
            fails += quantized_against_truth(d, t)
        else:
            want("FSDP AllGathers per step", ps["allgathers"], t["fsdp_allgathers_per_step"] // scale)
            want("forward AllGathers per step", ps["forward_allgathers"], t["forward_allgathers"] // scale)
            want("backward AllGathers per step", ps["backward_allgathers"], t["backward_allgathers"] // scale)
            want("ReduceScatters per step", ps["reduce_scatters"], t["reduce_scatters"] // scale)
            want("micro-batches per step", mb["per_step"], k)
            if t["microbatches"] > 1 or t["microbatches_told"] is False:
                want("micro-batches told apart from steps", mb["told"], bool(t["microbatches_told"]))
            want("repeating units", d["units"]["repeating_units"], t["repeating_units"])
            want("gathers per unit", d["units"]["gathers_per_unit"], t["gathers_per_unit"])
            want("reshard_after_forward", d["reshard_after_forward"], t["reshard"])
            want("tensor-parallel degree", d["tp_degree"], t["tp_degree"])
            # P is the whole model's: a TP or pipeline rank, or an EP rank (its
            # share of the experts), gathers only part of it
            if "--setup tp" not in name and "--setup pp" not in name and t["setup"] not in ("tp", "pp", "moe"):
                want("P", d["ledger"]["params"], t["params"])
        roles = {}
        for c in d["communicators"]:
            if c["role"] != "idle":
                roles[c["role"]] = roles.get(c["role"], 0) + 1
        want("roles", roles, t["roles"])
        fails += comms_against_truth(d, t, scale)
        fails += extra_keys_against_truth(d, t)
        for rule in t["errors"]:
            if f.get(rule) != "error":
                fails.append("expected finding %s error, got %s" % (rule, f.get(rule)))
        errors = {r for r, sev in f.items() if sev == "error"}
        if errors - set(t["errors"]):
            fails.append("false error(s): %s" % sorted(errors - set(t["errors"])))
            tally["false_errors"] += 1
    if not fails:
        tally["right"] += 1
    print("%-44s %-9s AG/step %4d (job %4d) mb %s units %sx%s reshard %-7s roles %-40s findings %s  %s" % (
        name, d["verdict"], d["per_step"]["allgathers"], t["fsdp_allgathers_per_step"],
        (d["microbatches"] or {}).get("per_step"), d["units"]["repeating_units"], d["units"]["gathers_per_unit"],
        d["reshard_after_forward"], ",".join(c["role"] for c in d["communicators"]),
        ",".join("%s:%s" % (r, sev[0]) for r, sev in sorted(f.items())), "FAIL" if fails else "ok"))
    return fails


def flag(flags, name, default=None, cast=str):
    """The value of --name in a flags string, or default; True for a switch."""
    words = shlex.split(flags)
    for i, w in enumerate(words):
        if w == name:
            if i + 1 < len(words) and not words[i + 1].startswith("--"):
                return cast(words[i + 1])
            return True
    return default


def blocks_per_policy(spec, layers):
    """How the blocks are wrapped: list of (policy, group, first, last)."""
    if spec in ("block", "linear") or spec.startswith("group:") and spec.count(":") == 1:
        pol, _, k = spec.partition(":")
        return [(pol, int(k) if k else 1, 0, layers - 1)]
    ranges = []
    for part in spec.split(","):
        bits = part.split(":")
        pol, k = bits[0], 1
        if pol == "group":
            k, rng = int(bits[1]), bits[2]
        else:
            rng = bits[1]
        a, _, b = rng.partition("-")
        ranges.append((pol, k, int(a), int(b or a)))
    return ranges


def expected(s):
    """What a correct diagnosis says about this run."""
    spec, reshard, layers, ranks, flags = s["wrap"], s["reshard"], s["layers"], s["ranks"], s["flags"]
    tp = flag(flags, "--tp", 1, int)
    shard = flag(flags, "--shard-group", 0, int)
    style = flag(flags, "--style", "fsdp2")
    e = {"units": None, "k": None, "errors": set(), "reshard": None, "mismatch": None, "tp": tp,
         "replicate": bool(shard) and shard < ranks // tp, "recompute": 0,
         "microbatches": flag(flags, "--grad-accum", 1, int)}
    if spec == "model":
        e["errors"].add("wrap-too-coarse")
        return e
    ranges = blocks_per_policy(spec, layers)
    cover = []
    for pol, k, a, b in ranges:
        n = b - a + 1
        cover.append((8 * n, n, 8) if pol == "linear" else (n // k, n // k, 1) if pol == "group" else (n, n, 1))
    best = max(cover, key=lambda c: (c[0], -c[2]))
    if len(ranges) == 1:
        e["units"], e["k"] = best[1], best[2]
    if best[2] == 8 and best[1] >= 2:
        e["errors"].add("wrap-too-fine")
    if len(ranges) == 1 and ranges[0][0] == "group" and layers // ranges[0][1] <= 1:
        e["errors"].add("wrap-too-coarse")
    e["reshard"] = {"true": "true", "false": "false"}.get(reshard, "group:%s" % reshard)
    dp = ranks // tp
    if reshard not in ("true", "false") and int(reshard) >= (shard or dp):
        e["reshard"] = "true"  # a group of the whole shard group is plain resharding
    blocks = sum((8 * (b - a + 1)) if p == "linear" else ((b - a + 1 + k - 1) // k) for p, k, a, b in ranges)
    e["mismatch"] = None if blocks == layers else ("error" if blocks > layers else "warning")
    if flag(flags, "--activation-checkpoint") and style == "fsdp1" and e["reshard"] == "true":
        e["recompute"] = 1
    return e


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def log_truth(log_path, report=None):
    """Rank 0's per-step figures from fsdp_ref's log, over the steps the report
    analysed (its warm-up left out; step 0 without a report), as the report
    gives them: lower medians."""
    rows = [lint_schema_check.strict_loads(line) for line in open(log_path) if line.strip()]
    r0 = sorted((r for r in rows if r["rank"] == 0), key=lambda r: r["step"])
    steady = r0[1:] if len(r0) > 1 else r0
    if report is not None and report.get("steps_analyzed"):
        first = report.get("warmup_steps", 0)
        last = first + report["steps_analyzed"] if not report.get("irregular_steps") else len(r0)
        steady = r0[first:last] or steady
    med = lambda key: statistics.median_low(r[key] for r in steady)
    return {
        "steps": len(r0),
        "allgathers": med("allgathers"),
        "forward_allgathers": med("forward_allgathers"),
        "backward_allgathers": med("backward_allgathers"),
        "reduce_scatters": med("reduce_scatters"),
        "allreduces": med("allreduces"),
        "units": r0[0]["units"],
        "microbatches": r0[0].get("microbatches", 1),
        "forward_per_mb": r0[0].get("forward_allgathers_per_microbatch", r0[0]["units"]),
        "backward_per_mb": r0[0].get("backward_allgathers_per_microbatch"),
        "recompute": r0[0].get("recompute_allgathers", 0),
        "gather_wait_ns": med("gather_wait_ns"),
        "step_ns": med("step_ns"),
    }


def fsdp_groups_invariants(d):
    """report --json's fsdp_groups[] against the figures beside it: the primary
    first, repeating per_step, units and exposure; each group's gathers those
    of its communicators; the ledger the sum of the groups' shares. Returns
    failure strings."""
    fails = []
    groups = d.get("fsdp_groups")
    if groups is None:
        return fails
    comms = d["communicators"]

    def want(what, got, exp):
        if got != exp:
            fails.append("fsdp_groups: %s: %r != %r" % (what, got, exp))

    want("primary flags", [g["primary"] for g in groups], [i == 0 for i in range(len(groups))])
    if d["fsdp_communicator"] is None:
        want("groups without an FSDP group", len(groups), 0)
    if not groups:  # no FSDP group, or no analysed step to read one from
        return fails
    p = groups[0]
    want("primary's communicator", p["communicator"], d["fsdp_communicator"])
    for k in ("allgathers", "forward_allgathers", "backward_allgathers", "allgather_calls", "reduce_scatters"):
        want("primary's per_step." + k, p["per_step"][k], d["per_step"][k])
    for k in ("forward_units", "repeating_units", "gathers_per_unit"):
        want("primary's units." + k, p["units"][k], d["units"][k])
    want("primary's reshard", p["reshard_after_forward"], d["reshard_after_forward"])
    if p["exposure"]["measured"]:
        for k in ("allgather_ns_per_step", "exposed_allgather_ns_per_step", "compute_wait_ns_per_step"):
            want("primary's exposure." + k, p["exposure"][k], d["exposure"][k])
    # activations told apart on the primary's own communicator (cp = N) are its events too
    shared = any("also carries activations" in n for n in d["notes"])
    for i, g in enumerate(groups):
        c = [comms[g["communicator"]]] + ([comms[g["regather_communicator"]]]
                                          if g["regather_communicator"] is not None else [])
        want("group %d's role" % i, [x["role"] for x in c], ["fsdp", "fsdp-regather"][:len(c)])
        ag, rs = sum(x["per_step"]["allgathers"] for x in c), c[0]["per_step"]["reduce_scatters"]
        if i == 0:  # the primary's gathers of no unit (metrics, weight sync, activations) are counted apart
            ag -= d["per_step"].get("step_allgathers", 0)
        if i == 0 and shared:
            ag, rs = min(ag, g["per_step"]["allgathers"]), min(rs, g["per_step"]["reduce_scatters"])
        want("group %d's AllGathers against its communicators" % i, g["per_step"]["allgathers"], ag)
        want("group %d's ReduceScatters against its communicator" % i, g["per_step"]["reduce_scatters"], rs)
    if d["verdict"] != "bucketed":
        for k in ("params", "persistent_bytes_per_rank", "transient_bytes_per_rank", "largest_unit_params"):
            want("ledger.%s against the groups' shares" % k, d["ledger"][k], sum(g["ledger"][k] for g in groups))
    return fails


def exposure_invariants(d):
    """The exposure figures of a report, against each other: they are all of one
    representative step, so these hold exactly. Returns failure strings."""
    fails = []
    e, b = d["exposure"], d["breakdown"]
    if e["source"] == "none":
        return fails
    g = e["gathers"]

    def want(what, got, exp):
        if got != exp:
            fails.append("exposure: %s: %r != %r" % (what, got, exp))

    for x in g:
        where = "gather #%d" % x["index"]
        if x["exposed_ns"] > x["duration_ns"]:
            fails.append("exposure: %s: exposed %d > its time %d" % (where, x["exposed_ns"], x["duration_ns"]))
        want(where + ": hidden + exposed = its time", x["hide_ns"] + x["exposed_ns"], x["duration_ns"])
        want(where + ": cause hidden exactly when nothing is exposed", x["cause"] == "hidden", x["exposed_ns"] == 0)
    want("rows' time = allgather_ns_per_step", sum(x["duration_ns"] for x in g), e["allgather_ns_per_step"])
    want("rows' exposed = exposed_allgather_ns_per_step", sum(x["exposed_ns"] for x in g),
         e["exposed_allgather_ns_per_step"])
    want("rows' compute wait = compute_wait_ns_per_step", sum(x.get("compute_wait_ns", 0) for x in g),
         e.get("compute_wait_ns_per_step", 0))
    want("forward + backward exposed", e["forward_exposed_ns_per_step"] + e["backward_exposed_ns_per_step"],
         e["exposed_allgather_ns_per_step"])
    want("forward + backward compute wait",
         e.get("forward_compute_wait_ns_per_step", 0) + e.get("backward_compute_wait_ns_per_step", 0), e.get("compute_wait_ns_per_step", 0))
    c = e["causes"]
    want("causes' gathers = rows", sum(v["gathers"] for v in c.values()), len(g))
    want("causes' exposed = exposed", sum(v["ns"] for v in c.values()), e["exposed_allgather_ns_per_step"])
    want("causes' compute wait = compute wait", sum(v.get("compute_wait_ns", 0) for v in c.values()),
         e.get("compute_wait_ns_per_step", 0))
    for name, v in c.items():
        rows = [x for x in g if x["cause"] == name]
        want("cause %s: gathers = its rows" % name, v["gathers"], len(rows))
        want("cause %s: exposed = its rows'" % name, v["ns"], sum(x["exposed_ns"] for x in rows))
        want("cause %s: compute wait = its rows'" % name, v.get("compute_wait_ns", 0), sum(x.get("compute_wait_ns", 0) for x in rows))
    want("exposed_gathers = rows not hidden", e["exposed_gathers"], sum(x["cause"] != "hidden" for x in g))
    if e["exposed_allgather_ns_per_step"] > b["exposed_comm_ns"]:
        fails.append("exposure: AllGather exposure %d > the breakdown's exposed communication %d" % (
            e["exposed_allgather_ns_per_step"], b["exposed_comm_ns"]))
    want("breakdown: compute + exposed communication + idle = step",
         b["compute_ns"] + b["exposed_comm_ns"] + b["idle_ns"], b["step_ns"])
    head = [r for r in d["per_rank"] if r["rank"] == d["headline_rank"]]
    if head:
        for k in ("allgather_ns_per_step", "exposed_allgather_ns_per_step", "compute_wait_ns_per_step"):
            want("headline rank's %s = the exposure's" % k, head[0].get(k), e.get(k))
    return fails


def log_line(log_path, rank, step):
    """fsdp_ref's log line of one rank and step, None when it has none."""
    for line in open(log_path):
        if line.strip():
            r = lint_schema_check.strict_loads(line)
            if r["rank"] == rank and r["step"] == step:
                return r
    return None


def check(s, fsdpscope, trace, log, tally, tolerance=None, err_out=None):
    """All checks of one run; returns a list of failure strings. tally counts
    verdicts right / false errors / undecided; err_out receives (name, signed
    compute wait error as a fraction of the step, worst gather's error in ns)."""
    fails = []
    name, layers = s["name"], s["layers"]
    rep = run([fsdpscope, "report", "--json", trace])
    if rep.returncode != 0:
        return ["report --json exit %d: %s" % (rep.returncode, rep.stderr.strip())]
    d = tool_json(rep.stdout, "report --json", fails)
    if d is None:
        return fails
    lint = run([fsdpscope, "lint", "--json", trace])
    lint_layers = run([fsdpscope, "lint", "--json", "--layers", str(layers), trace])
    f = findings_of(lint.stdout, "lint --json", fails)
    fl = findings_of(lint_layers.stdout, "lint --json --layers", fails)
    tally["runs"] += 1
    if flag(s["flags"], "--style") == "zero3":
        return fails + exposure_invariants(d) + fsdp_groups_invariants(d) + check_bucketed(s, d, f, log, tally)
    if d["verdict"] != "diagnosed" or lint.returncode == 3:
        tally["undecided"] += 1
        return fails + ["not diagnosed (%s): %s" % (d["verdict"], (d.get("undecided") or {}).get("why"))]
    if lint.returncode not in (0, 1) or lint_layers.returncode not in (0, 1):
        return ["lint exit %d / %d: %s" % (lint.returncode, lint_layers.returncode, lint.stderr.strip())]
    t = log_truth(log, d)
    e = expected(s)
    ps, u, mb = d["per_step"], d["units"], d["microbatches"]

    def want(what, got, exp):
        if got != exp:
            fails.append("%s: %r, fsdp_ref says %r" % (what, got, exp))

    want("steps seen", d["steps_seen"], t["steps"])
    want("AllGathers per step", ps["allgathers"], t["allgathers"])
    want("forward AllGathers per step", ps["forward_allgathers"], t["forward_allgathers"])
    want("backward AllGathers per step", ps["backward_allgathers"], t["backward_allgathers"])
    want("ReduceScatters per step", ps["reduce_scatters"], t["reduce_scatters"])
    want("AllReduces per step", ps["allreduces"], t["allreduces"])
    want("micro-batches per step", mb["per_step"], t["microbatches"])
    want("forward AllGathers per micro-batch (= units)", mb["forward_allgathers"], t["units"])
    if t["backward_per_mb"] is not None:
        want("backward AllGathers per micro-batch", mb["backward_allgathers"], t["backward_per_mb"])
    want("recomputation re-gathers per micro-batch", mb["recompute_allgathers"],
         t["recompute"] // max(t["microbatches"], 1))
    if e["units"] is not None:
        want("repeating units", u["repeating_units"], e["units"])
        want("gathers per unit", u["gathers_per_unit"], e["k"])
    if e["reshard"] is not None:
        want("reshard_after_forward", d["reshard_after_forward"], e["reshard"])
    # the figures add up: per communicator, per micro-batch, per gather
    want("FSDP communicators' AllGathers = per_step.allgathers",
         sum(c["per_step"]["allgathers"] for c in d["communicators"] if c["role"] in ("fsdp", "fsdp-regather")),
         ps["allgathers"])
    want("forward + backward = allgathers", ps["forward_allgathers"] + ps["backward_allgathers"], ps["allgathers"])
    want("micro-batches x gathers per micro-batch (+ forward-only passes) = allgathers",
         mb["per_step"] * (mb["forward_allgathers"] + mb["backward_allgathers"]) +
         mb["forward_only"] * mb["forward_allgathers"], ps["allgathers"])
    g = d["exposure"]["gathers"]
    want("gathers table rows = allgathers", len(g), ps["allgathers"])
    want("forward rows = forward_allgathers", sum(x["phase"] == "forward" for x in g), ps["forward_allgathers"])
    want("rows per micro-batch", sorted({x["microbatch"] for x in g}), list(range(mb["per_step"] + mb["forward_only"])))
    roles = [c["role"] for c in d["communicators"]]
    want("FSDP groups", roles.count("fsdp"), 1)
    want("tensor-parallel degree", d["tp_degree"], e["tp"])
    want("tensor-parallel group", "tensor-parallel" in roles, e["tp"] > 1)
    want("HSDP replicate group", "replicate" in roles, e["replicate"])
    for rule in e["errors"]:
        if f.get(rule) != "error":
            fails.append("expected finding %s error, got %s" % (rule, f.get(rule)))
    errors = {r for r, sev in f.items() if sev == "error"}
    if errors - e["errors"]:
        fails.append("false error(s): %s" % sorted(errors - e["errors"]))
        tally["false_errors"] += 1
    if e["mismatch"] and fl.get("gather-count-mismatch") != e["mismatch"]:
        fails.append("--layers %d: gather-count-mismatch %s, expected %s" % (layers, fl.get("gather-count-mismatch"),
                                                                           e["mismatch"]))
    if e["mismatch"] is None and s["wrap"] != "model" and "gather-count-mismatch" in fl:
        fails.append("--layers %d: false gather-count-mismatch" % layers)
        tally["false_errors"] += fl["gather-count-mismatch"] == "error"
    fails += exposure_invariants(d) + fsdp_groups_invariants(d)
    # compute's wait on the gathers against fsdp_ref's own, the same step
    xp = d["exposure"]
    measured = xp["source"] != "none"  # without NVTX compute ranges nothing is measured
    line = log_line(log, d["headline_rank"], xp.get("step")) if measured else None
    wait, truth, step_ns, worst = xp.get("compute_wait_ns_per_step", 0), 0, 0, 0
    if line is not None:
        truth, step_ns = line["gather_wait_ns"], line["step_ns"]
        each = line.get("gather_waits_ns", [])
        if len(each) == len(xp["gathers"]):
            worst = max([abs(x["compute_wait_ns"] - w) for x, w in zip(xp["gathers"], each)] or [0])
    err = (wait - truth) / step_ns if step_ns else 0
    if err_out is not None and line is not None:
        err_out.append((name, err, worst))
    if tolerance is not None and line is not None and abs(err) > tolerance:
        fails.append("compute wait on gathers %.3f ms in step %d vs fsdp_ref gather_wait %.3f ms: %.1f%% of the "
                     "%.2f ms step (> %.0f%%)" % (wait / 1e6, xp["step"], truth / 1e6, 100 * abs(err), step_ns / 1e6,
                                                 100 * tolerance))
    if flag(s["flags"], "--comm-names"):
        # the names the job gave, and --fsdp-comm by name and by dimension
        fsdp = d["communicators"][d["fsdp_communicator"]]
        want("FSDP group's name", fsdp["name"], "dp_shard" if flag(s["flags"], "--shard-group") else "world")
        for by in (fsdp["name"], fsdp["dimension"][:6]):
            o = run([fsdpscope, "report", "--json", "--fsdp-comm", by, trace])
            if o.returncode != 0:
                fails.append("--fsdp-comm %s: exit %d: %s" % (by, o.returncode, o.stderr.strip()))
                continue
            od = tool_json(o.stdout, "report --json --fsdp-comm %s" % by, fails)
            if od is None:
                continue
            og = od["communicators"][od["fsdp_communicator"]]
            want("--fsdp-comm %s: role given" % by, og["role_given"], True)
            want("--fsdp-comm %s: AllGathers per step" % by, od["per_step"]["allgathers"], ps["allgathers"])
        o = run([fsdpscope, "lint", "--fsdp-comm", "no-such-communicator", trace])
        want("--fsdp-comm naming nothing: exit status", o.returncode, 2)
    if not fails:
        tally["right"] += 1
    print("%-34s AG/step %4d (log %4d) mb %d units %2dx%d reshard %-7s tp %d roles %-40s step %s: wait %7.3f ms (log "
          "%7.3f), exposed %7.3f ms findings %s  %s" % (
              name, ps["allgathers"], t["allgathers"], mb["per_step"], u["repeating_units"], u["gathers_per_unit"],
              d["reshard_after_forward"], d["tp_degree"], ",".join(roles), xp.get("step"), wait / 1e6, truth / 1e6,
              xp["exposed_allgather_ns_per_step"] / 1e6,
              ",".join("%s:%s" % (r, sev[0]) for r, sev in sorted(f.items())), "FAIL" if fails else "ok"))
    return fails


def check_bucketed(s, d, f, log, tally):
    """DeepSpeed ZeRO-3 style: the verdict is bucketed fetching; counts of
    events and calls, reduce buckets and P are exact; no unit claim, no error."""
    fails = []
    rows = [lint_schema_check.strict_loads(line) for line in open(log) if line.strip()]
    r0 = sorted((r for r in rows if r["rank"] == 0), key=lambda r: r["step"])
    first = d.get("warmup_steps", 0)
    steady = r0[first:first + d["steps_analyzed"]] or r0[1:]
    med = lambda key: statistics.median_low(r[key] for r in steady)
    b, ps = d["buckets"] or {}, d["per_step"]

    def want(what, got, exp):
        if got != exp:
            fails.append("%s: %r, fsdp_ref says %r" % (what, got, exp))

    if d["verdict"] != "bucketed":
        tally["undecided"] += d["verdict"] == "undecided"
        fails.append("verdict %s, expected bucketed" % d["verdict"])
        return fails
    want("steps seen", d["steps_seen"], len(r0))
    want("first step (module trace) is warm-up", d["warmup_steps"], 1)
    want("fetch events per step", b.get("fetches_per_step"), med("allgathers"))
    want("AllGather calls per step", b.get("calls_per_step"), med("allgather_calls"))
    want("reduce buckets per step", b.get("reduce_buckets_per_step"), med("reduce_scatters"))
    want("forward AllGathers (not claimed)", ps["forward_allgathers"], None)
    want("P in the ledger", d["ledger"]["params"], r0[0]["params"])
    want("bucketed-fetch finding", "bucketed-fetch" in f, True)
    for rule in ("wrap-too-fine", "wrap-too-coarse", "gather-count-mismatch", "reshard-policy"):
        if rule in f:
            fails.append("claim about units: %s" % rule)
    errors = sorted(r for r, sev in f.items() if sev == "error")
    if errors:
        fails.append("false error(s): %s" % errors)
        tally["false_errors"] += 1
    if not fails:
        tally["right"] += 1
    print("%-34s bucketed: %d fetches / %d calls per step (log %d / %d), %d reduce buckets, P %d (log %d) "
          "findings %s  %s" % (s["name"], b.get("fetches_per_step", -1), b.get("calls_per_step", -1), med("allgathers"),
                               med("allgather_calls"), b.get("reduce_buckets_per_step", -1), d["ledger"]["params"],
                               r0[0]["params"], ",".join("%s:%s" % (r, sev[0]) for r, sev in sorted(f.items())),
                               "FAIL" if fails else "ok"))
    return fails


def trainer_args(s, steps, backend, log):
    args = ["--backend", backend, "--nranks", str(s["ranks"]), "--layers", str(s["layers"]), "--wrap", s["wrap"],
            "--reshard-after-forward", s["reshard"], "--prefetch", str(s["prefetch"]), "--steps", str(steps),
            "--quiet", "--log", log]
    # a model every TP degree and micro-batch count divides
    args += ["--heads", "4", "--kv-heads", "2", "--batch", str(4 * s["ranks"])]
    if not s["nvtx"]:
        args.append("--no-nvtx")
    return args + shlex.split(s["flags"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["matrix", "check"])
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--fsdp-ref")
    ap.add_argument("--agent")
    ap.add_argument("--matrix", choices=["sample", "full", "pending"], default="sample")
    ap.add_argument("--only")
    ap.add_argument("--keep")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--trace")
    ap.add_argument("--log")
    ap.add_argument("--wrap")
    ap.add_argument("--reshard", default="true")
    ap.add_argument("--prefetch", type=int, default=1)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--ranks", type=int, default=0)
    ap.add_argument("--flags", default="")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--exposure-tolerance", type=float)
    ap.add_argument("--stream-job")
    ap.add_argument("--restart-job", help="restart_job (tests/e2e/restart_job.c): a restart's two worlds are "
                    "two entries (tests/e2e/restart_e2e.py)")
    a = ap.parse_args()
    tally = {"runs": 0, "right": 0, "false_errors": 0, "undecided": 0}

    if a.mode == "check":
        s = spec_of(os.path.basename(a.trace), a.wrap, a.reshard, a.prefetch, a.layers, a.ranks, a.flags)
        fails = check(s, a.fsdpscope, a.trace, a.log, tally, a.exposure_tolerance)
        for x in fails:
            print("  FAIL: " + x)
        return 1 if fails else 0

    for what, path in (("fsdpscope", a.fsdpscope), ("fsdp_ref", a.fsdp_ref), ("agent", a.agent)):
        if not path or not os.path.exists(path):
            print("SKIP: %s not found (%s)" % (what, path))
            return 77
    out = a.keep or tempfile.mkdtemp(prefix="fss-accuracy-")
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, FSDPSCOPE_AGENT=os.path.abspath(a.agent))
    # --matrix pending runs STREAM_PENDING alone, no fsdp_ref run
    matrix = SAMPLE if a.matrix == "sample" else full_matrix() if a.matrix == "full" else []
    if a.repeat > 1:
        matrix = [dict(m, name="%s.%d" % (m["name"], k)) for k in range(a.repeat) for m in matrix]
    failed = 0
    errors = []
    try:
        for s in matrix:
            if a.only and s["name"].split(".")[0] not in a.only.split(","):
                continue
            name = s["name"]
            trace, log = os.path.join(out, name + ".fss"), os.path.join(out, name + ".jsonl")
            r = run([a.fsdpscope, "run", "--out", out, "--name", name, "--", a.fsdp_ref] +
                    trainer_args(s, a.steps, a.backend, log), env=env, timeout=300)
            if r.returncode != 0 or not os.path.exists(trace):
                print("%-34s FAIL: fsdpscope run exit %d\n%s" % (name, r.returncode, r.stderr[-2000:]))
                failed += 1
                continue
            fails = check(s, a.fsdpscope, trace, log, tally, a.exposure_tolerance, errors)
            for x in fails:
                print("  FAIL: " + x)
            failed += bool(fails)
        streams = {"sample": STREAM_SAMPLE, "full": stream_full() + STREAM_PENDING, "pending": STREAM_PENDING}[a.matrix]
        if not a.stream_job or not os.path.exists(a.stream_job):
            print("stream_job not given or not built (%s): its setups are not run" % a.stream_job)
            streams = []
        for name, args in streams:
            if a.only and name not in a.only.split(","):
                continue
            trace, truth = os.path.join(out, name + ".fss"), os.path.join(out, name + ".truth.json")
            r = run([a.fsdpscope, "run", "--out", out, "--name", name, "--", a.stream_job] + shlex.split(args) +
                    ["--steps", str(a.steps), "--compute-us", "50", "--truth", truth], env=env, timeout=300)
            if r.returncode != 0 or not os.path.exists(trace):
                print("%-44s FAIL: fsdpscope run exit %d\n%s" % (name, r.returncode, r.stderr[-2000:]))
                failed += 1
                continue
            fails = check_stream(name, a.fsdpscope, trace, truth, tally)
            for x in fails:
                print("  FAIL: " + x)
            failed += bool(fails)
        if streams and a.restart_job and os.path.exists(a.restart_job) and (not a.only or "restart" in a.only):
            import restart_e2e
            fails = restart_e2e.accuracy(a.fsdpscope, a.agent, a.stream_job, a.restart_job,
                                         os.path.join(out, "restart"), tally)
            for x in fails:
                print("  FAIL: " + x)
            failed += bool(fails)
    finally:
        if not a.keep:
            shutil.rmtree(out, ignore_errors=True)
    if errors:
        worst = sorted(errors, key=lambda x: -abs(x[1]))
        print("compute wait on gathers - fsdp_ref gather_wait, the representative step's, / step, %d runs with compute "
              "ranges, worst first (a figure, not a check%s): %s; median %+.2f%%; worst single gather %.3f ms (%s)"
              % (len(errors), "" if a.exposure_tolerance is None else "; tolerance %g" % a.exposure_tolerance,
                 " ".join("%s %+.2f%%" % (n, 100 * x) for n, x, _ in worst[:12]),
                 100 * statistics.median(x for _, x, _ in errors),
                 max(w for _, _, w in errors) / 1e6, max(errors, key=lambda x: x[2])[0]))
    print("accuracy: verdicts right %d / %d, false errors %d, undecided %d; %d run(s) failed" % (
        tally["right"], tally["runs"], tally["false_errors"], tally["undecided"], failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
