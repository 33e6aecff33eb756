#!/usr/bin/env python3
"""hang_live_check.py FSDPSCOPE TRACE DIR - a live session that sees a hang.

Starts `fsdpscope collect --hang-timeout 1 --metrics 127.0.0.1:0` in DIR,
streams TRACE (lint_gen_trace --stall 1:4: rank 1 never enters collective
#57 of communicator 5eed, ranks 0 and 2 wait in it) into its socket as an
agent would, keeps the connection open, and waits (60 s at most: a bound,
not a measurement) for the session's stderr line. Then, while the
"job" is still connected: the line names rank 1 and collective #57;
/metrics has fsdpscope_collective_hang 1 and fsdpscope_collective_seq
entered 57 / 56 / 57 and left 56 per rank in the communicator; the viewer
snapshot's job.flight holds the hang. Stops the session (SIGINT) and
checks that its lint summary names the hang. Exits 0, or 1 with what
failed.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

WAIT_S = 60


def main(argv):
    fss, trace, d = argv[1], argv[2], argv[3]
    os.makedirs(d, mode=0o700, exist_ok=True)
    sock = os.path.join(d, "sock")
    errpath = os.path.join(d, "collect.err")
    fails = []
    with open(errpath, "w") as err:
        p = subprocess.Popen([fss, "collect", "--listen", "unix:" + sock, "--out", os.path.join(d, "out"),
                              "--hang-timeout", "1", "--metrics", "127.0.0.1:0"],
                             stdout=subprocess.DEVNULL, stderr=err)
    agent = None
    try:
        deadline = time.monotonic() + WAIT_S

        def stderr_has(pattern):
            while time.monotonic() < deadline:
                m = re.search(pattern, open(errpath).read())
                if m or p.poll() is not None:
                    return m
                time.sleep(0.05)
            return None

        m = stderr_has(r"Prometheus metrics: (http://\S+/metrics)")
        viewer = stderr_has(r"live view \(fsdpscope\.live/2, docs/live\.md\): unix:(\S+)")
        if not m or not viewer or not os.path.exists(sock):
            print("FAIL: the session did not start:\n" + open(errpath).read())
            return 1
        url = m.group(1)
        agent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        agent.connect(sock)
        agent.sendall(open(trace, "rb").read())
        line = stderr_has(r"fsdpscope: collective-hang: [^\n]*\n")
        if not line:
            print("FAIL: no collective-hang line:\n" + open(errpath).read())
            return 1
        line = line.group(0)
        print("line: " + line.strip())
        for want in ("missing rank 1 (pid 1001)", "collective #57 (AllGather)", "communicator 0000000000005eed",
                     "ranks 0, 2 have waited"):
            if want not in line:
                fails.append("the line lacks %r" % want)
        metrics = urllib.request.urlopen(url, timeout=10).read().decode()
        want_metrics = {
            'fsdpscope_collective_hang': "1",
            'fsdpscope_collective_seq{comm="0000000000005eed",rank="0",state="entered"}': "57",
            'fsdpscope_collective_seq{comm="0000000000005eed",rank="1",state="entered"}': "56",
            'fsdpscope_collective_seq{comm="0000000000005eed",rank="2",state="entered"}': "57",
            'fsdpscope_collective_seq{comm="0000000000005eed",rank="1",state="left"}': "56",
        }
        samples = dict(l.rsplit(" ", 1) for l in metrics.split("\n") if l and not l.startswith("#"))
        for k, v in want_metrics.items():
            if samples.get(k) != v:
                fails.append("/metrics %s is %r, want %s" % (k, samples.get(k), v))
        v = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        v.connect(viewer.group(1))
        v.settimeout(WAIT_S)
        buf = b""
        flight = None
        while flight is None or not flight.get("hang"):
            while b"\n" not in buf:
                chunk = v.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
            if b"\n" not in buf:
                break
            snap, buf = buf.split(b"\n", 1)
            flight = json.loads(snap)["job"]["flight"]
        v.close()
        if not flight or not flight["hang"] or flight["hangs"][0]["comm_seq"] != 57 or \
                [r["rank"] for r in flight["hangs"][0]["missing"]] != [1]:
            fails.append("the viewer's job.flight: %r" % flight)
        if p.poll() is not None:
            fails.append("the session ended while the job was connected")
    finally:
        if agent:
            agent.close()
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    end = open(errpath).read()
    if "error collective-hang" not in end:
        fails.append("the session's lint summary does not name the hang")
    for f in fails:
        print("FAIL: " + f)
    if fails:
        print(end)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
