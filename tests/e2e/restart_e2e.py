#!/usr/bin/env python3
"""restart_e2e.py - a job restarted with a new world, and two jobs at once, under `fsdpscope run`.

restart: restart_job (tests/e2e/restart_job.c) runs stream_job with 4 ranks wrapped per Linear
over 4 blocks, kills rank 1 with SIGKILL once rank 0's log shows step 5 (the others fail in the
collective it never enters, then its supervisor stops what is left, as torchelastic's agent stops
a worker group at its next monitor pass), and starts a second world: 2 new
processes on new communicators, wrapped per block over 3 blocks. The report must hold both worlds
(docs/patterns.md "Restarts"): which processes belong to which (restart_job's truth), their ranks,
the rank that died first, and each world's own verdict, counts and units against stream_job's
truth of the same setup; the headline figures are the second world's; the first world's
wrap-too-fine error is its own, not the headline's; lint says "restart: 2 worlds".

concurrent: two 2-rank jobs started together under one run (restart_job --together): one world (they overlap in time) whose
ranks 0 and 1 are claimed twice: reported (duplicate-rank), never merged (4 rows in per_rank).

Every JSON document is parsed strictly and checked against docs/report-schema.json.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lint_schema_check  # noqa: E402
from e2e_support import Fail, check, fresh, run  # noqa: E402

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "report-schema.json")
FIRST = ["--setup", "fsdp2", "--nranks", "4", "--layers", "4", "--wrap", "linear", "--compute-us", "20"]
SECOND = ["--setup", "fsdp2", "--nranks", "2", "--layers", "3", "--compute-us", "20"]
KILL_RANK, KILL_STEP = 1, 5


def document(text, what):
    """A JSON document of fsdpscope, parsed strictly and valid against the schema."""
    try:
        d = lint_schema_check.strict_loads(text)
    except ValueError as e:
        raise Fail("%s: not strict JSON: %s" % (what, e))
    schema = json.load(open(SCHEMA))
    problems = lint_schema_check.problems(schema, d)
    check(not problems, "%s: against the schema: %s" % (what, "; ".join(problems[:5])))
    return d


def want(what, got, exp):
    check(got == exp, "%s: %r, want %r" % (what, got, exp))


def truth_of(a, args, path):
    """stream_job's truth of a setup, run to its end outside fsdpscope (3 steps)."""
    r = run([a.stream_job] + args + ["--steps", "3", "--truth", path], timeout=120)
    check(r.returncode == 0, "stream_job %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr[-500:]))
    return json.load(open(path))


def counts_match(what, w, t):
    """A world's verdict, per-step counts and units against a stream_job truth."""
    want(what + " verdict", w["verdict"], t["verdict"])
    ps = w["per_step"]
    want(what + " AllGathers per step", ps["allgathers"], t["fsdp_allgathers_per_step"])
    want(what + " forward AllGathers", ps["forward_allgathers"], t["forward_allgathers"])
    want(what + " backward AllGathers", ps["backward_allgathers"], t["backward_allgathers"])
    want(what + " ReduceScatters", ps["reduce_scatters"], t["reduce_scatters"])
    want(what + " repeating units", w["units"]["repeating_units"], t["repeating_units"])
    want(what + " gathers per unit", w["units"]["gathers_per_unit"], t["gathers_per_unit"])
    want(what + " reshard_after_forward", w["reshard_after_forward"], t["reshard"])


def check_world_processes(what, w, truth):
    """The world's processes are the generation's, rank r the r-th rank it forked."""
    check(truth["pids_complete"], "%s: restart_job did not see every rank's pid" % what)
    got = {p["pid"]: p["rank"] for p in w["processes"]}
    exp = {pid: r for r, pid in enumerate(truth["pids"])}
    want(what + " processes (pid: rank)", got, exp)
    want(what + " size", w["size"], truth["nranks"])
    want(what + " ranks", w["ranks"], truth["nranks"])


def scenario_restart(a, env, work):
    t0 = truth_of(a, FIRST, os.path.join(work, "truth0.json"))
    t1_path = os.path.join(work, "truth1.json")
    cmd = [a.fsdpscope, "run", "--out", work, "--name", "restart", "--", a.restart_job, "--dir", work,
           "--kill-rank", str(KILL_RANK), "--kill-at-step", str(KILL_STEP), "--", a.stream_job] + FIRST + \
        ["--steps", "100000", "--truth", os.path.join(work, "never.json"), "--then", a.stream_job] + SECOND + \
        ["--steps", "6", "--truth", t1_path]
    r = run(cmd, env=env, timeout=240)
    check(r.returncode == 0, "fsdpscope run (restart): exit %d: %s" % (r.returncode, r.stderr[-2000:]))
    trace = os.path.join(work, "restart.fss")
    truth = json.load(open(os.path.join(work, "restart_truth.json")))["worlds"]
    t1 = json.load(open(t1_path))
    # its supervisor's: the first failure it reaped, the kill (137) or a survivor's NCCL error (1)
    check(truth[0]["exit"] != 0, "generation 0 exited 0 after a rank was killed")
    want("killed rank", truth[0]["killed_rank"], KILL_RANK)

    rep = run([a.fsdpscope, "report", "--json", trace])
    check(rep.returncode == 0, "report --json: exit %d: %s" % (rep.returncode, rep.stderr))
    d = document(rep.stdout, "report --json (restart)")
    check("worlds" in d, "report --json: no worlds in a restarted job's report")
    ws = d["worlds"]
    want("worlds", len(ws), 2)
    check_world_processes("world 0", ws[0], truth[0])
    check_world_processes("world 1", ws[1], truth[1])
    want("world 0 headline", ws[0]["headline"], False)
    want("world 1 headline", ws[1]["headline"], True)
    check(ws[0]["id"] != ws[1]["id"], "the worlds share a world communicator id %s" % ws[0]["id"])
    check(ws[0]["last_realtime_ns"] < ws[1]["first_realtime_ns"], "world 1 starts before world 0 ended")
    # every process of world 0 died: the one killed, and the others in the collective it never
    # entered (the stand-in reports the dead peer) or by their supervisor; the killed one stopped first
    want("world 0 processes that died", ws[0]["died"], 4)
    check(ws[0]["first_stop"] is not None, "world 0: no first_stop")
    want("world 0 stopped first (pid)", ws[0]["first_stop"]["pid"], truth[0]["killed_pid"])
    want("world 0 stopped first (rank)", ws[0]["first_stop"]["rank"], KILL_RANK)
    want("world 1 processes that died", ws[1]["died"], 0)
    check(ws[0]["steps_analyzed"] >= 3, "world 0: %d steps analysed, want >= 3" % ws[0]["steps_analyzed"])
    counts_match("world 0", ws[0], t0)
    counts_match("world 1", ws[1], t1)
    want("world 1 steps analysed", ws[1]["steps_analyzed"], t1["steps"])
    # the headline figures are world 1's, its ranks alone
    want("headline world size", d["world_size"], 2)
    want("headline ranks", d["ranks"], 2)
    want("headline units", d["units"]["repeating_units"], t1["repeating_units"])
    want("per_rank pids", sorted(x["pid"] for x in d["per_rank"]), sorted(truth[1]["pids"]))
    rules0 = {f["rule"]: f["severity"] for f in ws[0]["findings"]}
    rules1 = {f["rule"]: f["severity"] for f in ws[1]["findings"]}
    want("world 0 wrap-too-fine (per Linear)", rules0.get("wrap-too-fine"), "error")
    check("wrap-too-fine" not in rules1, "world 1 (per block) got world 0's wrap-too-fine: %s" % rules1)
    want("world 1 restart finding", rules1.get("restart"), "info")
    top = {f["rule"]: f["severity"] for f in d["findings"]}
    check("wrap-too-fine" not in top, "the headline findings hold world 0's wrap-too-fine: %s" % top)

    lint = run([a.fsdpscope, "lint", "--json", trace])
    d2 = document(lint.stdout, "lint --json (restart)")
    f = [x for x in d2["findings"] if x["rule"] == "restart"]
    want("lint restart findings", len(f), 1)
    want("restart severity", f[0]["severity"], "info")
    want("restart metric worlds", f[0]["metrics"]["worlds"], 2)
    want("restart metric first_stop_rank", f[0]["metrics"]["first_stop_rank"], KILL_RANK)
    lint = run([a.fsdpscope, "lint", trace])
    check("restart: 2 worlds of 4, then 2 ranks" in lint.stdout, "lint: no 'restart: 2 worlds': %s" % lint.stdout)
    check("world 0 (4 ranks, before the restart): 1 error" in lint.stdout,
          "lint: world 0's block missing or not its own: %s" % lint.stdout)
    # the killed world's processes did not end cleanly (4); its error is not the headline's (not 1)
    want("lint exit", lint.returncode, 4)
    check("all in the worlds before the restart" in lint.stderr, "lint stderr: %s" % lint.stderr)
    rep = run([a.fsdpscope, "report", trace])
    check("Worlds (2: a restart" in rep.stdout, "report: no Worlds block: %s" % rep.stdout[:3000])
    print("restart: ok (world 0 %d steps, %d ranks, rank %d died first; world 1 %d steps, %d ranks)" % (
        ws[0]["steps_analyzed"], ws[0]["ranks"], KILL_RANK, ws[1]["steps_analyzed"], ws[1]["ranks"]))
    return ws, [t0, t1]


def scenario_concurrent(a, env, work):
    job = ["--setup", "fsdp2", "--nranks", "2", "--layers", "3", "--steps", "40", "--compute-us", "100"]
    cmd = [a.fsdpscope, "run", "--out", work, "--name", "concurrent", "--", a.restart_job, "--dir", work,
           "--together", "--", a.stream_job] + job + ["--truth", os.path.join(work, "c0.json"), "--then",
                                                      a.stream_job] + job + ["--truth", os.path.join(work, "c1.json")]
    r = run(cmd, env=env, timeout=240)
    check(r.returncode == 0, "fsdpscope run (concurrent): exit %d: %s" % (r.returncode, r.stderr[-2000:]))
    trace = os.path.join(work, "concurrent.fss")
    rep = run([a.fsdpscope, "report", "--json", trace])
    d = document(rep.stdout, "report --json (concurrent)")
    check("worlds" not in d, "two jobs at the same time read as a restart: %s" % d.get("worlds"))
    check("duplicate_ranks" in d, "two jobs at the same time: no duplicate_ranks")
    want("ranks claimed twice", d["duplicate_ranks"]["count"], 2)
    want("the lowest rank claimed twice", d["duplicate_ranks"]["rank"], 0)
    want("per_rank rows (not merged)", len(d["per_rank"]), 4)
    want("per_rank ranks", sorted(x["rank"] for x in d["per_rank"]), [0, 0, 1, 1])
    f = {x["rule"]: x["severity"] for x in d["findings"]}
    want("duplicate-rank finding", f.get("duplicate-rank"), "warning")
    check("restart" not in f, "a restart finding for two jobs at once")
    print("concurrent: ok (one world, ranks 0 and 1 claimed twice, 4 rows)")


def accuracy(fsdpscope, agent, stream_job, restart_job, work, tally):
    """The restart as entries of the accuracy matrix (tests/e2e/accuracy_test.py): each world one
    run, right when every check above holds, a false error an error finding its truth does not
    name. Returns the failures, as words."""
    a = argparse.Namespace(fsdpscope=fsdpscope, stream_job=stream_job, restart_job=restart_job)
    env = dict(os.environ, FSDPSCOPE_AGENT=os.path.abspath(agent))
    tally["runs"] += 2
    try:
        ws, truths = scenario_restart(a, env, fresh(work))
    except Fail as e:
        print("%-44s FAIL" % "restart (2 worlds)")
        return [str(e)]
    for w, t in zip(ws, truths):
        errors = {f["rule"] for f in w["findings"] if f["severity"] == "error"}
        tally["false_errors"] += bool(errors - set(t["errors"]))
    tally["right"] += 2
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--stream-job", required=True)
    ap.add_argument("--restart-job", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", choices=["restart", "concurrent"])
    a = ap.parse_args()
    env = dict(os.environ, FSDPSCOPE_AGENT=os.path.abspath(a.agent))
    try:
        if a.only in (None, "restart"):
            scenario_restart(a, env, fresh(os.path.join(a.work, "restart")))
        if a.only in (None, "concurrent"):
            scenario_concurrent(a, env, fresh(os.path.join(a.work, "concurrent")))
    except Fail as e:
        print("FAIL: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
