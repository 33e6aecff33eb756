#!/usr/bin/env python3
"""soak.py - fsdp_ref ranks on the stand-in under `fsdpscope collect` for a
long run, with the faults a real job meets, and what must hold at the end.

usage: bench/soak.py --fsdpscope F --agent A --fsdp-ref R [--ranks 64] [--minutes 30]
                     [--work DIR] [--results bench/results/soak.txt]

During the run: the collector is SIGKILLed and a new one started in the same
--out twice (at a quarter and at half of the run), one rank is SIGKILLed (at
three quarters: the others then end on the stand-in's NCCL timeout, as a real
job's ranks do), and a viewer on the session's live socket and a /metrics
scraper stay attached the whole time (each reconnecting to the collector of
the moment). At the end:
  * every collective of every surviving rank is in the trace once: its seq
    numbers 1..N, no gap, no duplicate, N its process_end's count;
  * the collectors' RSS after warm-up: first and last sample of each, and
    their ratio (flat: near 1);
  * the dead rank is named in lint's output of the trace.
The figures go to --results. Exit status 0 when every check held.
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import collect_e2e as ce  # noqa: E402  (Collector, start_ranks, dump, collectives_by_rank)

MODEL = ["--d-model", "32", "--ffn", "64", "--seq", "16", "--batch", "4", "--layers", "4", "--wrap", "block"]


class Watchers:
    """The viewer and the scraper, following the collector of the moment."""

    def __init__(self):
        self.stderr_path = None
        self.stop = False
        self.snapshots = self.viewer_connects = self.scrapes = self.scrape_fails = 0
        self.lock = threading.Lock()

    def follow(self, c):
        with self.lock:
            self.stderr_path = c.err_path

    def addresses(self):
        with self.lock:
            path = self.stderr_path
        text = open(path).read() if path and os.path.exists(path) else ""
        view = re.findall(r"live view \([^)]*\): unix:(\S+)", text)
        metrics = re.findall(r"Prometheus metrics: (http://\S+/metrics)", text)
        return (view[-1] if view else None), (metrics[-1] if metrics else None)

    def viewer(self):
        while not self.stop:
            path, _ = self.addresses()
            if not path:
                time.sleep(0.2)
                continue
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                self.viewer_connects += 1
                f = s.makefile("rb")
                while not self.stop and f.readline():
                    self.snapshots += 1
                s.close()
            except OSError:
                time.sleep(0.2)

    def scraper(self):
        while not self.stop:
            _, url = self.addresses()
            if url:
                r = subprocess.run(["curl", "-sf", "-m", "10", url], capture_output=True)
                if r.returncode == 0:
                    self.scrapes += 1
                else:
                    self.scrape_fails += 1
            time.sleep(5)


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdpscope", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--fsdp-ref", required=True)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--work", default="/tmp/fsdpscope-soak")
    ap.add_argument("--results", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "soak.txt"))
    args = ap.parse_args()
    os.environ["FSDPSCOPE_AGENT"] = args.agent
    os.environ["FSDP_REF_NCCL_TIMEOUT_S"] = "20"
    total = args.minutes * 60
    work = ce.fresh(args.work)
    env = dict(os.environ, XDG_RUNTIME_DIR=ce.private_runtime_dir(work))
    out = os.path.join(work, "collect")
    w = Watchers()
    collectors, rss, ranks, lines_out = [], {}, [], []
    t0 = time.time()

    def start_collector(n):
        c = ce.Collector(args, out, extra=["--metrics", "127.0.0.1:0"], env=env, name=f"c{n}")
        lines = c.wait_ready()
        collectors.append(c)
        rss[c.p.pid] = []
        w.follow(c)
        return lines

    lines = start_collector(1)
    threads = [threading.Thread(target=w.viewer, daemon=True), threading.Thread(target=w.scraper, daemon=True)]
    for t in threads:
        t.start()
    os.environ.update(XDG_RUNTIME_DIR=env["XDG_RUNTIME_DIR"])
    ranks = ce.start_ranks(args, work, lines, args.ranks, [*MODEL, "--steps", "100000000"], "soak")
    events = [(0.25, "collector"), (0.5, "collector"), (0.75, "rank")]
    killed_rank = args.ranks - 1
    try:
        while events or any(p.poll() is None for p, _ in ranks):
            now = time.time() - t0
            for c in collectors[-1:]:
                kb = rss_kb(c.p.pid)
                if kb:
                    rss[c.p.pid].append((round(now), kb))
            if events and now >= events[0][0] * total:
                _, what = events.pop(0)
                if what == "collector":
                    collectors[-1].kill()
                    lines_out.append(f"{now:7.0f} s: collector {len(collectors)} SIGKILLed")
                    start_collector(len(collectors) + 1)
                    lines_out.append(f"{time.time() - t0:7.0f} s: collector {len(collectors)} started in the same --out")
                else:
                    ranks[killed_rank][0].send_signal(signal.SIGKILL)
                    lines_out.append(f"{now:7.0f} s: rank {killed_rank} SIGKILLed")
            if now > total + 600:
                lines_out.append(f"{now:7.0f} s: ranks still running 10 min after the end: stopped")
                break
            time.sleep(5)
        collectors[-1].p.send_signal(signal.SIGTERM)
        rc = collectors[-1].wait(limit=600)
    finally:
        w.stop = True
        for c in collectors:
            c.kill()
        ce.stop_ranks(ranks)
    elapsed = time.time() - t0
    trace = os.path.join(out, "collect.fss")
    seqs, ends = ce.collectives_by_rank(ce.dump(args, trace))
    problems = []
    total_coll = 0
    for r in range(args.ranks):
        if r == killed_rank:
            continue
        s, n = seqs.get(r, []), ends.get(r)
        total_coll += len(s)
        if not n:
            problems.append(f"rank {r}: no process_end with its collective count")
        elif sorted(s) != list(range(1, n + 1)):
            problems.append(f"rank {r}: {len(s)} collectives, {len(set(s))} distinct, want seq 1..{n} once each")
    lint = subprocess.run([args.fsdpscope, "lint", trace], capture_output=True, text=True)
    named = [l for l in (lint.stdout + lint.stderr).splitlines() if re.search(rf"\brank {killed_rank}\b", l)]
    if not named:
        problems.append(f"lint does not name rank {killed_rank}")
    with open(args.results, "w") as f:
        f.write(f"# bench/soak.py --ranks {args.ranks} --minutes {args.minutes}: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                f"{os.cpu_count()} cores\n")
        f.write(f"ran {elapsed:.0f} s; the last collector exited {rc}\n")
        f.write("\n".join(lines_out) + "\n")
        f.write(f"surviving ranks: {args.ranks - 1}, their collectives in the trace: {total_coll}; "
                f"checks of seq 1..N once each: {'all held' if not any('seq' in p for p in problems) else 'FAILED'}\n")
        f.write(f"viewer: {w.viewer_connects} connections, {w.snapshots} snapshots read; "
                f"/metrics: {w.scrapes} scrapes answered, {w.scrape_fails} failed (a collector being restarted)\n")
        for i, c in enumerate(collectors, 1):
            samples = rss.get(c.p.pid, [])
            warm = samples[len(samples) // 3:] if len(samples) >= 3 else samples
            if warm:
                f.write(f"collector {i} RSS after warm-up: {warm[0][1]} kB at {warm[0][0]} s, {warm[-1][1]} kB at "
                        f"{warm[-1][0]} s (x{warm[-1][1] / warm[0][1]:.2f}), max {max(k for _, k in warm)} kB\n")
        f.write(f"the dead rank in lint's output: {named[0].strip() if named else '(not named)'}\n")
        f.write("problems: " + ("none" if not problems else "; ".join(problems)) + "\n")
    print(open(args.results).read())
    return 0 if not problems and rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
