#!/usr/bin/env python3
"""End-to-end tests of what peers without the key can do to `fsdpscope collect
--listen tcp:...` (tests/e2e/collect.cmake): nothing that lasts; and of the
viewer endpoint's cap.

usage: collect_net_e2e.py SCENARIO --fsdpscope F --agent A --fsdp-ref R --schema S --schema-check C --work DIR

Scenarios:
  key_timeout  a peer that sends 18 of the key hello's 40 bytes and waits is cut
               at --key-timeout 1 (the collector closes its socket) while an
               agent with the key stays; once that agent has gone, --until-idle 1
               ends the collector by itself (exit 0), and its stderr names the
               cut connection
  probe        a health probe (bytes that are not the key) and a port scan
               (connect, close) before any rank do not end a collector with
               --until-idle 0; the job that comes after them (fsdp_ref over tcp,
               2 ranks, held until both are in the trace) is in its trace
  caps         connections waiting for their key: 8 of one host are kept, the
               9th and 10th closed at once; 64 in all are kept (8 hosts of the
               127/8 loopback), the next two closed at once; the end counts the
               4 closed
  viewer_cap   the viewer endpoint keeps 64 viewers open; the 65th and 66th are
               closed as they come (a client opening viewers in a loop cannot
               take the descriptors the agents need)

No timing is asserted: every wait is for a condition, with a generous limit.
Exit status: 0 pass, 1 fail (with the reason), 77 skip (with the reason).
"""
import json
import os
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import collect_e2e as collect  # noqa: E402  (its Collector, ranks and dumps)
import e2e_support as support  # noqa: E402

SKIP = 77
WAIT_S = 300
KEY_HELLO_BYTES = 40  # common/wire.h WIRE_KEY_HELLO_BYTES: "FSSKEY01" and the 32 key bytes
PER_HOST, IN_ALL = 8, 64  # collector/ingest.h INGEST_PENDING_PER_HOST, INGEST_PENDING_MAX
VIEWERS_MAX = 64  # collector/viewer_server.c VIEWER_CONNECTIONS_MAX

Fail, check, fresh, wait_for = support.Fail, support.check, support.fresh, collect.wait_for


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tcp_collector(args, work, extra):
    """collect on a tcp loopback port of its own, its default socket in a private folder."""
    port = free_port()
    out = os.path.join(work, "collect")
    env = dict(os.environ, XDG_RUNTIME_DIR=collect.private_runtime_dir(work))
    c = collect.Collector(args, out, ["--listen", f"tcp:127.0.0.1:{port}", *extra], env=env)
    return c, port, out


def key_hello(out):
    """What an agent sends first: the magic and the key of DIR/collect.key."""
    with open(os.path.join(out, "collect.key")) as f:
        return b"FSSKEY01" + bytes.fromhex(f.read().strip())


def connect(port, source="127.0.0.1", first=b""):
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    if first:
        s.sendall(first)
    return s


def peer_closed(s):
    """Whether the collector has closed s (end of stream or reset), without waiting:
    what it sent before (an ack to an agent) is read and set aside."""
    while True:
        try:
            data = s.recv(65536, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except ConnectionResetError:
            return True
        if not data:
            return True


def alive(c):
    check(c.p.poll() is None, f"collect exited {c.p.returncode} early: {c.stderr()}")


def wait_closed(c, socks, what):
    """Until the collector has closed every one of socks, failing when it exits first."""
    def closed():
        alive(c)
        return all(peer_closed(s) for s in socks)
    wait_for(closed, what)


def scenario_key_timeout(args):
    work = fresh(os.path.join(args.work, "key_timeout"))
    c, port, out = tcp_collector(args, work, ["--key-timeout", "1", "--until-idle", "1"])
    socks = []
    try:
        c.wait_ready()
        holder = connect(port, first=b"FSSKEY01" + b"\0" * 10)  # 18 of the 40 bytes, then nothing
        socks.append(holder)
        holder_port = holder.getsockname()[1]
        agent = connect(port, first=key_hello(out))
        socks.append(agent)
        # The agent's connection is open, so the collector cannot have ended
        # by --until-idle: the holder's end is the key timeout's doing.
        wait_closed(c, [holder], "the collector to close the connection that sent 18 bytes")
        check(not peer_closed(agent), "the agent with the key was cut too")
        alive(c)
        agent.close()
        rc = c.wait()
    finally:
        c.kill()
        for s in socks:
            s.close()
    err = c.stderr()
    check(rc == 0, f"collect exited {rc}: {err}")
    want = (f"(tcp peer 127.0.0.1:{holder_port}): cut: it sent 18 of the {KEY_HELLO_BYTES} bytes of the connection "
            "key in the 1 s allowed (the key timeout)")
    check(want in err, f"collect's stderr does not say the connection was cut at the key timeout ({want}): {err}")
    check("no agent connected for 1 s (--until-idle): finishing" in err, f"collect did not end by --until-idle: {err}")


def both_ranks_in(args, out, c, ranks):
    """The running session's trace holds collectives of two processes."""
    alive(c)
    check(all(p.poll() is None for p, _ in ranks), "a rank ended while the job was held")
    folder = [f for f in os.listdir(out) if f.startswith(".fsdpscope-run.")]
    partial = os.path.join(out, folder[0], "run-output.fss.partial") if folder else ""
    if not partial or not os.path.exists(partial) or os.path.getsize(partial) == 0:
        return False
    r = collect.run([args.fsdpscope, "dump", "--type", "collective", partial])
    return len({json.loads(x)["source"] for x in r.stdout.splitlines()}) >= 2


def scenario_probe(args):
    work = fresh(os.path.join(args.work, "probe"))
    # --until-idle 0: a collector that took a probe for an agent ends as soon
    # as the probe is cut, long before a rank could connect.
    c, port, out = tcp_collector(args, work, ["--until-idle", "0"])
    ranks = []
    try:
        lines = c.wait_ready()
        probe = connect(port, first=b"GET /healthz HTTP/1.1\r\nHost: collector\r\n\r\n")
        wait_closed(c, [probe], "the collector to cut the health probe")
        probe.close()
        connect(port).close()  # a port scan: connected, nothing sent
        alive(c)
        fifo = os.path.join(work, "hold")
        os.mkfifo(fifo, 0o600)
        ranks = collect.start_ranks(args, work, lines, 2,
                                    [*collect.MODEL, "--layers", "2", "--steps", "4", "--hold-at", f"2:{fifo}"], "p")
        # Held before step 2 until both agents are in the trace: no rank can
        # leave before the other has connected.
        wait_for(lambda: both_ranks_in(args, out, c, ranks), "the trace to hold both ranks' collectives")
        release = os.open(fifo, os.O_WRONLY)
        os.write(release, b"x")
        os.close(release)
        collect.wait_ranks(ranks)
        rc = c.wait()
    finally:
        c.kill()
        collect.stop_ranks(ranks)
    err = c.stderr()
    check(rc == 0, f"collect exited {rc}: {err}")
    check("refused: its first bytes are not the connection key" in err, f"collect did not report the probe: {err}")
    records = collect.dump(args, os.path.join(out, "collect.fss"))
    hellos = sorted(r["rank"] for r in records if r["type"] == "process_hello")
    check(hellos == [0, 1], f"the trace holds the processes of ranks {hellos}, want the job's [0, 1]")
    check([r for r in records if r["type"] == "collective"], "the job's collectives are missing")


def scenario_caps(args):
    work = fresh(os.path.join(args.work, "caps"))
    c, port, out = tcp_collector(args, work, ["--key-timeout", "3600"])
    kept, extra = [], []
    try:
        c.wait_ready()
        half = b"FSSKEY01" + b"\0" * 10
        # One host: the first PER_HOST wait for their key, the next two are
        # closed as they are accepted (in the order they connected).
        kept += [connect(port, "127.0.0.1", half) for _ in range(PER_HOST)]
        extra += [connect(port, "127.0.0.1", half) for _ in range(2)]
        wait_closed(c, extra, f"the collector to close the connections past {PER_HOST} of one host")
        check(not [s for s in kept if peer_closed(s)], f"a connection within the {PER_HOST} of one host was closed")
        # In all: IN_ALL from IN_ALL / PER_HOST hosts wait, the next two (of
        # yet another host, under its own cap) are closed.
        hosts = [f"127.0.0.{h}" for h in range(2, IN_ALL // PER_HOST + 1)]
        kept += [connect(port, h, half) for h in hosts for _ in range(PER_HOST)]
        extra += [connect(port, "127.0.0.200", half) for _ in range(2)]
        wait_closed(c, extra[2:], f"the collector to close the connections past {IN_ALL} in all")
        check(len(kept) == IN_ALL, f"the test kept {len(kept)}, not {IN_ALL}")
        closed = [i for i, s in enumerate(kept) if peer_closed(s)]
        check(not closed, f"connections within the caps were closed: {closed}")
        c.p.send_signal(signal.SIGTERM)
        rc = c.wait()
    finally:
        c.kill()
        for s in kept + extra:
            s.close()
    err = c.stderr()
    check(rc == 0, f"collect exited {rc} on SIGTERM: {err}")
    want = (f"closed 4 tcp connections unread: {PER_HOST} of their host, or {IN_ALL} in all, were already waiting "
            "for the connection key")
    check(want in err, f"collect's stderr does not count the 4 closed ({want}): {err}")


def scenario_viewer_cap(args):
    work = fresh(os.path.join(args.work, "viewer_cap"))
    env = dict(os.environ, XDG_RUNTIME_DIR=collect.private_runtime_dir(work))
    c = collect.Collector(args, os.path.join(work, "collect"), env=env)
    kept, extra = [], []

    def viewer(path):
        v = socket.socket(socket.AF_UNIX)
        v.connect(path)
        return v
    try:
        c.wait_ready()
        addr = [w for w in c.stderr().split() if w.startswith("unix:") and w.endswith("/viewer.sock")]
        check(addr, f"collect printed no viewer endpoint: {c.stderr()}")
        path = addr[0][len("unix:"):]
        kept += [viewer(path) for _ in range(VIEWERS_MAX)]
        extra += [viewer(path) for _ in range(2)]
        wait_closed(c, extra, f"the viewer endpoint to close the viewers past {VIEWERS_MAX}")
        closed = [i for i, v in enumerate(kept) if peer_closed(v)]
        check(not closed, f"viewers within the {VIEWERS_MAX} were closed: {closed}")
        c.p.send_signal(signal.SIGTERM)
        rc = c.wait()
    finally:
        c.kill()
        for v in kept + extra:
            v.close()
    check(rc == 0, f"collect exited {rc} on SIGTERM: {c.stderr()}")


def main():
    args = collect.parse_args()
    scenarios = {"key_timeout": scenario_key_timeout, "probe": scenario_probe, "caps": scenario_caps,
                 "viewer_cap": scenario_viewer_cap}
    if args.scenario not in scenarios:
        print(f"unknown scenario {args.scenario}", file=sys.stderr)
        return 2
    if args.scenario == "probe" and not args.fsdp_ref:
        print("SKIP: fsdp_ref is not built")
        return SKIP
    try:
        scenarios[args.scenario](args)
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
