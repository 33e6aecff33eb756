#!/usr/bin/env python3
"""docs_agree_test.py - the documented signals, intervals, defaults and limits
against the code's constants.

    docs_agree_test.py FSDPSCOPE SOURCE_ROOT

Every entry of FACTS is one fact the user reads in more than one place: a
value taken from the C sources (a #define, a static array, the code that sets
a default) and the places that state it (docs/*.md, README.md, a command's
--help as the built binary prints it, a line the code prints). The test fails,
naming the document, the code location and both values, when a place says
something else than the code, or no longer says it at all (a statement that
moved or was reworded must move its entry too).

To add a fact: one Fact(...) entry below; `code` is a file and a regex whose
group 1 is the C value (an expression over numbers and the project's
#defines, or a list of signal names), `docs` the places, each a file (or
help:CMD, help:CMD#--option for that option's paragraph of CMD --help) and a
regex whose group 1 is the documented value. Text is matched with its
whitespace collapsed and backticks removed, so a wrapped sentence still
matches.
"""
import os
import re
import subprocess
import sys

# ---- the facts ---------------------------------------------------------------


class Code:
    def __init__(self, path, regex, group=1, unit=None, none_if=None, nul=False):
        self.path, self.regex, self.group = path, regex, group
        self.nul = nul            # a char buffer's size: the text it holds is one byte less
        self.unit = unit          # 'ns', 'ms', 's' for durations (the test compares ms)
        self.none_if = none_if    # a code value that means "no default" (-1: off)


class Doc:
    def __init__(self, where, regex, unit=None, absent_is_none=False):
        self.where, self.regex = where, regex
        self.unit = unit                    # the unit of a bare number ('s', 'ms')
        self.absent_is_none = absent_is_none  # no match means "no default" (not an error)


class Fact:
    def __init__(self, what, kind, code, docs, exclude=()):
        self.what, self.kind, self.code, self.docs = what, kind, code, docs
        self.exclude = set(exclude)  # signals: names of the code's list that are not this fact's


# A list of signals as the docs write it: "SIGINT, SIGTERM or SIGHUP".
SIGLIST = r"SIG[A-Z]+(?:(?:, | or | and |, or |, and )SIG[A-Z]+)*"
# The signals job_catch_signals (cli/job.c) gives its caller's handler.
JOB_SIGNALS = r"job_catch_signals[^{]*\{\s*static const int sigs\[\] = \{([^}]*)\}"


def define(path, name, unit=None):
    """A #define's value (its comment left out)."""
    return Code(path, r"^#define %s\s+(.+?)\s*(?:/\*.*)?$" % name, unit=unit)


def env_default(var):
    """An agent environment variable's default (agent/agent.c env_long)."""
    return Code("agent/agent.c", r"env_long\(AGENT_ENV_%s, ([^,]+)," % var)


def env_range(var):
    return Code("agent/agent.c", r"env_long\(AGENT_ENV_%s, [^,]+, ([^,]+), (.+?)\);" % var, group=(1, 2))


def env_row_default(name):
    return Doc("docs/agent.md", r"\| %s \| ([^|]+) \|" % name)


def env_row_range(name):
    return Doc("docs/agent.md", r"\| %s \| [^|]+ \| [^|]*\(([^()]*\.\.[^()]*)\) \|" % name)


FACTS = [
    # -- how often the trace is written
    Fact("the trace-write interval (a chunk at most this long after its records arrived)", "ms",
         define("collector/ingest_internal.h", "INGEST_FLUSH_MS_DEFAULT", unit="ms"),
         [Doc("help:collect", r"The trace is written as it goes\W+(?:and flushed )?((?:every|once) [^):,]*)"),
          Doc("docs/collect.md", r"The trace is written as it goes\W+(?:and flushed )?((?:every|once) [^):,]*)"),
          Doc("docs/run.md", r"The trace being written[^.]*?((?:every|once) [^):,]*)"),
          Doc("docs/run.md", r"run-output\.fss\.partial \(everything (?:written|flushed) up to the last ([^)]*)\)")]),
    # -- signals
    Fact("collect stops on", "signals",
         Code("cli/cmd_collect.c", r"(job_catch_signals)\(collect_on_signal"),
         [Doc("help:collect", r"It stops on (" + SIGLIST + ")"),
          Doc("cli/cmd_collect.c", r"\"fsdpscope collect: stop with ([^%\"]*)"),
          Doc("docs/collect.md", r"fsdpscope collect: stop with (" + SIGLIST + ")"),
          Doc("docs/collect.md", r"## When it stops On (" + SIGLIST + ")")]),
    Fact("attach detaches on", "signals",
         Code("cli/cmd_attach.c", r"(job_catch_signals)\(on_signal"),
         [Doc("help:attach", r"It detaches on (" + SIGLIST + ")"),
          Doc("cli/cmd_attach.c", r"detach with \"\s*\"(" + SIGLIST + ")"),
          Doc("docs/attach.md", r"When it detaches \((" + SIGLIST + ")")]),
    Fact("run forwards to the job", "signals",
         Code("cli/cmd_run.c", r"run_forwarded_signals\[\] = \{([^}]*)\}"),
         [Doc("help:run", r"(" + SIGLIST + ") sent to fsdpscope are forwarded"),
          Doc("docs/run.md", r"(" + SIGLIST + ") sent to fsdpscope are forwarded")]),
    Fact("top's dashboard ends on (SIGINT is ^C, the q key; SIGWINCH a resize)", "signals",
         Code("tui/term.c", r"soft_signals\[\] = \{([^}]*)\}"),
         [Doc("help:top", r"(" + SIGLIST + ") sent to fsdpscope top end"),
          Doc("docs/top.md", r"(" + SIGLIST + ") sent to fsdpscope top end"),
          Doc("tui/screen.c", r"terminated by a signal \((" + SIGLIST + ")\)"),
          Doc("docs/top.md", r"terminated by a signal \((" + SIGLIST + ")\)")],
         exclude=("SIGINT", "SIGWINCH")),
    Fact("top without a screen (top --once -- CMD, after the screen) stops the job on", "signals",
         Code("cli/top_run.c", r"(job_catch_signals)\(on_signal"),
         [Doc("help:top", r"with --once -- CMD\), (" + SIGLIST + ") stop the job"),
          Doc("docs/top.md", r"with --once -- CMD\), (" + SIGLIST + ") stop the job")]),
    # -- what the ranks' environment needs (what collect prints, what its examples export)
    Fact("the environment collect prints for the ranks", "exports",
         Code("cli/cmd_collect.c", r"(?s)static void print_env_lines\(.*?\n\}", group=0),
         [Doc("help:collect", r"EXAMPLES (.*?) torchrun"),
          Doc("docs/collect.md", r"## What it prints (.*?) fsdpscope collect: stop with"),
          Doc("docs/collect.md", r"\*\*torchrun\*\* \(one node\): (.*?) torchrun")]),
    # -- option defaults
    Fact("collect --until-idle default (none: collect does not stop by itself)", "int",
         Code("cli/cmd_collect.c", r"o->until_idle_s = (-?\d+);", none_if=-1),
         [Doc("help:collect#--until-idle", r"\(default (\w+)", absent_is_none=True)]),
    Fact("--flush-timeout default", "ms",
         define("cli/session_options.c", "SESSION_DEFAULT_FLUSH_S", unit="s"),
         [Doc("help:run#--flush-timeout", r"\(default (\d+)\)", unit="s"),
          Doc("docs/run.md", r"at most --flush-timeout seconds \(default (\d+)\)", unit="s")]),
    Fact("--wait-descendants default", "ms",
         define("cli/session_options.c", "SESSION_DEFAULT_WAIT_DESCENDANTS_S", unit="s"),
         [Doc("help:run#--wait-descendants", r"\(default (\d+)\)", unit="s"),
          Doc("docs/run.md", r"at most --wait-descendants seconds after CMD exited \(default (\d+)", unit="s")]),
    Fact("--hang-timeout default", "ms",
         Code("collector/analysis_flight.h", r"#define ANALYSIS_DEFAULT_HANG_TIMEOUT_NS (.+?) /\*", unit="ns"),
         [Doc("help:run#--hang-timeout", r"default (\d+);", unit="s"),
          Doc("help:collect#--hang-timeout", r"\(default (\d+);", unit="s"),
          Doc("help:attach#--hang-timeout", r"\(default (\d+);", unit="s"),
          Doc("docs/collect.md", r"the hang timeout \((\d+ s), the collectors' default --hang-timeout")]),
    Fact("collect --key-timeout default", "ms",
         define("collector/ingest.h", "INGEST_KEY_TIMEOUT_MS_DEFAULT", unit="ms"),
         [Doc("help:collect#--key-timeout", r"default (\d+)\)", unit="s"),
          Doc("help:collect", r"within --key-timeout \((\d+ s)\)"),
          Doc("docs/collect.md", r"--key-timeout SEC \(1\.\.3600, default (\d+)\)", unit="s")]),
    Fact("collect --key-timeout range", "range",
         Code("cli/cmd_collect.c",
              r"#define COLLECT_MIN_KEY_TIMEOUT_S (\S+)\s+#define COLLECT_MAX_KEY_TIMEOUT_S (\S+)", group=(1, 2)),
         [Doc("help:collect#--key-timeout", r"\((\d+\.\.\d+),"),
          Doc("docs/collect.md", r"--key-timeout SEC \((\d+\.\.\d+),")]),
    Fact("tcp connections of one host waiting for their key", "int",
         define("collector/ingest.h", "INGEST_PENDING_PER_HOST"),
         [Doc("help:collect", r"while (\d+) others of its host"),
          Doc("docs/collect.md", r"At most (\d+) connections of one peer host")]),
    Fact("tcp connections waiting for their key, in all", "int",
         define("collector/ingest.h", "INGEST_PENDING_MAX"),
         [Doc("help:collect", r"others of its host, or (\d+) in all"),
          Doc("docs/collect.md", r"connections of one peer host, and (\d+) in all")]),
    Fact("top -d default", "ms",
         Code("cli/cmd_top.c", r"a->opt\.delay_ms = (\d+);", unit="ms"),
         [Doc("help:top#-d", r"\(default (\d+);", unit="s")]),
    Fact("--keep summary: steps kept in full", "int",
         define("collector/keep_policy.h", "KEEP_SUMMARY_STEPS"),
         [Doc("help:collect#--keep", r"summary\[:N\] \(the first (\d+) \(N\) steps"),
          Doc("docs/keep.md", r"the first (\d+) \(N\) steps of every rank in full")]),
    Fact("--keep full's disk guard switches to last:N", "int",
         define("collector/keep.h", "KEEP_GUARD_LAST"),
         [Doc("help:collect#--keep", r"switches to last:(\d+)"),
          Doc("help:run#--keep", r"switches to last:(\d+)"),
          Doc("docs/keep.md", r"it switches to last:(\d+)")]),
    Fact("--hang-timeout default, as docs/hangs.md says it", "ms",
         Code("collector/analysis_flight.h", r"#define ANALYSIS_DEFAULT_HANG_TIMEOUT_NS (.+?) /\*", unit="ns"),
         [Doc("docs/hangs.md", r"options\.hang_timeout_ns, (\d+ s) by default"),
          Doc("docs/hangs.md", r"is a hang; default (\d+);", unit="s")]),
    Fact("top's replay --speed default", "int",
         Code("cli/cmd_top.c", r"a->speed = (\d+);"),
         [Doc("help:top#--speed", r"\(default (\d+)\)"),
          Doc("docs/top.md", r"--speed X.{0,80}?\(default (\d+);")]),
    Fact("top's replay: a pause at most", "ms",
         define("tui/feed_replay.c", "REPLAY_PAUSE_MAX_NS", unit="ns"),
         [Doc("docs/top.md", r"a pause is at most (\d+ s)")]),
    Fact("top --connect: a socket that sends no snapshot is not a viewer after", "ms",
         define("tui/feed_viewer.c", "VIEWER_FIRST_MS", unit="ms"),
         [Doc("docs/top.md", r"a socket that sends no snapshot in (\d+ s)")]),
    Fact("top --once waits for its first view", "ms",
         define("tui/once.c", "FIRST_VIEW_MS", unit="ms"),
         [Doc("cli/cmd_top.c", r"--once: no view came in (\d+ s)"),
          Doc("tui/top.h", r"waits up to (\d+ s) for it")]),
    Fact("--exposed-min-ns default", "int",
         define("collector/analysis.h", "ANALYSIS_DEFAULT_EXPOSED_MIN_NS"),
         [Doc("help:lint#--exposed-min-ns", r"\(default (\d+)\)"),
          Doc("help:report#--exposed-min-ns", r"\(default (\d+)\)")]),
    Fact("--prefetch default", "int",
         define("collector/analysis.h", "ANALYSIS_DEFAULT_PREFETCH"),
         [Doc("help:lint#--prefetch", r"\(default (\d+)\)"),
          Doc("help:ledger#--prefetch", r"\(default (\d+)\)")]),
    Fact("--hang-timeout default, lint and report", "ms",
         Code("collector/analysis_flight.h", r"#define ANALYSIS_DEFAULT_HANG_TIMEOUT_NS (.+?) /\*", unit="ns"),
         [Doc("help:lint#--hang-timeout", r"\(default (\d+);", unit="s"),
          Doc("help:report#--hang-timeout", r"\(default (\d+);", unit="s")]),
    Fact("ledger --ranks at most", "int", define("collector/ledger.h", "LEDGER_RANKS_MAX"),
         [Doc("docs/report-schema.md", r"--ranks 1 to ([\d ]+?),")]),
    Fact("ledger --prefetch at most", "int", define("collector/ledger.h", "LEDGER_PREFETCH_MAX"),
         [Doc("docs/report-schema.md", r"--prefetch 0 to (\d+),")]),
    Fact("ledger --params at most", "int", define("collector/ledger.h", "LEDGER_PARAMS_MAX"),
         [Doc("docs/report-schema.md", r"--params 1 to (\S+),")]),
    Fact("ledger --optimizer bytes at most", "int", define("collector/ledger.h", "LEDGER_OPTIMIZER_BYTES_MAX"),
         [Doc("docs/report-schema.md", r"--optimizer 0 to (\d+) bytes per parameter"),
          Doc("help:ledger#--optimizer", r"\(0 to (\d+)\)")]),
    Fact("ledger --gpu-mem at most", "int", define("collector/ledger.h", "LEDGER_GPU_MEM_MAX"),
         [Doc("docs/report-schema.md", r"--gpu-mem up to (\S+?);")]),
    # -- the agent's environment (docs/agent.md's table, agent/agent.h's comments)
    Fact("FSDPSCOPE_RETRY_MS default", "int", env_default("RETRY"),
         [env_row_default("FSDPSCOPE_RETRY_MS"),
          Doc("agent/agent.h", r"try FSDPSCOPE_SINK again this often \(default (\d+)"),
          Doc("docs/agent.md", r"again every FSDPSCOPE_RETRY_MS \((\d+ s);", unit="ms"),
          Doc("docs/format.md", r"the agent retries (every [a-z0-9 ]+)\)", unit="ms")]),
    Fact("FSDPSCOPE_RETRY_MS range", "range", env_range("RETRY"), [env_row_range("FSDPSCOPE_RETRY_MS")]),
    Fact("FSDPSCOPE_SINK_TIMEOUT_MS default", "int", env_default("SINK_TIMEOUT"),
         [env_row_default("FSDPSCOPE_SINK_TIMEOUT_MS"),
          Doc("agent/agent.h", r"= sink stalled \(default (\d+)\)")]),
    Fact("FSDPSCOPE_SINK_TIMEOUT_MS range", "range", env_range("SINK_TIMEOUT"),
         [env_row_range("FSDPSCOPE_SINK_TIMEOUT_MS")]),
    Fact("FSDPSCOPE_RING_SLOTS default", "int", env_default("RING"),
         [env_row_default("FSDPSCOPE_RING_SLOTS"),
          Doc("agent/agent.h", r"ring capacity in records \(default (\d+)\)"),
          Doc("docs/agent.md", r"\(FSDPSCOPE_RING_SLOTS, (\d+) records\)")]),
    Fact("FSDPSCOPE_RING_SLOTS range", "range", env_range("RING"), [env_row_range("FSDPSCOPE_RING_SLOTS")]),
    Fact("FSDPSCOPE_RETAIN_BYTES default", "int", env_default("RETAIN"),
         [env_row_default("FSDPSCOPE_RETAIN_BYTES"),
          Doc("agent/agent.h", r"acknowledges them \(default (\d+ MiB)\)"),
          Doc("docs/agent.md", r"up to FSDPSCOPE_RETAIN_BYTES \((\d+ MiB)\)"),
          Doc("help:collect", r"at most (\d+ MiB) \(FSDPSCOPE_RETAIN_BYTES\)")]),
    Fact("FSDPSCOPE_RETAIN_BYTES range", "range", env_range("RETAIN"), [env_row_range("FSDPSCOPE_RETAIN_BYTES")]),
    Fact("FSDPSCOPE_EXIT_WAIT_MS default", "int", env_default("EXIT_WAIT"),
         [env_row_default("FSDPSCOPE_EXIT_WAIT_MS"),
          Doc("docs/agent.md", r"it waits at most (\d+ s) \(AGENT_EXIT_WAIT_MS", unit="ms")]),
    Fact("FSDPSCOPE_EXIT_WAIT_MS range", "range", env_range("EXIT_WAIT"), [env_row_range("FSDPSCOPE_EXIT_WAIT_MS")]),
    # -- the agent's sender
    Fact("the agent's partial chunk of a busy ring", "ms",
         define("agent/sender.c", "SENDER_FLUSH_EVERY_NS", unit="ns"),
         [Doc("docs/agent.md", r"a partial one at least (every \d+ ms)"),
          Doc("docs/agent.md", r"at least (every \d+ ms) while it is not")]),
    Fact("the agent's idle sleep, at most", "ms",
         define("agent/sender.c", "SENDER_IDLE_MAX_MS", unit="ms"),
         [Doc("docs/agent.md", r"backing off to (\d+ ms)")]),
    Fact("the agent's records per drain pass", "int", define("agent/sender.c", "SENDER_BATCH"),
         [Doc("docs/agent.md", r"more than (\d+) records per pass")]),
    Fact("the agent's first idle sleep", "ms", Code("agent/sender.c", r"unsigned idle_ms = (\d+);", unit="ms"),
         [Doc("docs/agent.md", r"and sleeps (\d+ ms), backing off")]),
    Fact("the agent's drops record", "ms",
         define("agent/sender.c", "SENDER_DROPS_EVERY_NS", unit="ns"),
         [Doc("docs/agent.md", r"A drops record goes out (every second)"),
          Doc("docs/hangs.md", r"The agent writes a drops record (every second)")]),
    Fact("the agent's retry connect timeout", "ms",
         define("agent/sender_failover.c", "SENDER_RETRY_CONNECT_TIMEOUT_MS", unit="ms"),
         [Doc("docs/agent.md", r"\(1 s; 0: never\) with a (\d+ ms) connect timeout")]),
    Fact("the agent's retry after a stall, times longer", "int",
         define("agent/sender_failover.c", "SENDER_STALL_RETRY_FACTOR"),
         [Doc("docs/agent.md", r"it waits (\d+) times as long")]),
    Fact("the agent's backoff, at most times", "int",
         define("agent/sender_failover.c", "SENDER_BACKOFF_MAX"),
         [Doc("docs/agent.md", r"doubles the wait, up to (\d+) times")]),
    Fact("a retried connection without an ack is used after", "ms",
         define("agent/sender_failover.c", "SENDER_PROBE_NS", unit="ns"),
         [Doc("docs/agent.md", r"or for (\d+ s) \(FSDPSCOPE_RETRY_MS when shorter\)")]),
    Fact("a spool file the agent sends, at most", "int",
         Code("agent/sender_failover.c", r"#define SENDER_COPY_MAX_BYTES (.+?) /\*"),
         [Doc("docs/agent.md", r"A file over (\d+ MiB) is not sent")]),
    Fact("a dormant agent tries the socket", "ms",
         define("agent/sender.c", "SENDER_DORMANT_RETRY_NS", unit="ns"),
         [Doc("docs/agent.md", r"at activation and then (every \d+ ms)")]),
    Fact("a dormant agent's connect timeout", "ms",
         define("agent/sender_socket.c", "SENDER_DORMANT_CONNECT_TIMEOUT_MS", unit="ms"),
         [Doc("docs/agent.md", r"then every 500 ms \((\d+ ms) connect timeout\)")]),
    Fact("CUPTI's flush period", "ms",
         define("agent/cupti.c", "CUPTI_FLUSH_PERIOD_MS", unit="ms"),
         [Doc("docs/hangs.md", r"CUPTI's flush period \((\d+ s) in the agent\)")]),
    # -- the session's schedule
    Fact("the session publishes its live state, at most", "ms",
         define("collector/session.c", "SESSION_PUBLISH_EVERY_MS", unit="ms"),
         [Doc("docs/collect.md", r"published for readers at most (ten times a second)"),
          Doc("help:top", r"publishes anyway \(at most (\d+ a second)")]),
    Fact("the session diagnoses while a rank is inside a collective", "ms",
         define("collector/session.c", "SESSION_DIAGNOSE_EVERY_MS", unit="ms"),
         [Doc("docs/live.md", r"session diagnoses at least (once a second) while a rank is inside"),
          Doc("docs/metrics.md", r"A session diagnoses at least (once a second)"),
          Doc("docs/hangs.md", r"holds at least (once a second) while a step completes"),
          Doc("docs/collect.md", r"and about (once a second) a diagnosis")]),
    Fact("attach looks at /proc again", "ms",
         define("cli/attach_capture.h", "ATTACH_RESCAN_MS", unit="ms"),
         [Doc("docs/attach.md", r"/proc is looked at again (every second)")]),
    # -- the viewer and /metrics limits
    Fact("viewers open at once", "int",
         define("collector/viewer_server.c", "VIEWER_CONNECTIONS_MAX"),
         [Doc("docs/live.md", r"at most (\d+) viewers are open at once")]),
    Fact("live view: findings at most", "int", define("collector/live.h", "LIVE_FINDINGS_MAX"),
         [Doc("docs/live.md", r"findings\[\] \| the findings so far \((\d+) at most\)")]),
    Fact("live view: a finding's message bytes at most", "int",
         Code("collector/live.h", r"^#define LIVE_TEXT_BYTES (\d+)", nul=True),
         [Doc("docs/live.md", r"message \(at most ([\d,]+) bytes\)")]),
    Fact("live view: a finding's evidence bytes at most", "int",
         Code("collector/live.h", r"^#define LIVE_EVIDENCE_BYTES (\d+)", nul=True),
         [Doc("docs/live.md", r"evidence \(at most ([\d,]+) bytes\)")]),
    Fact("live view: a finding's fix bytes at most", "int",
         Code("collector/live.h", r"^#define LIVE_FIX_BYTES (\d+)", nul=True),
         [Doc("docs/live.md", r"\(at most ([\d,]+) bytes\); null when the rule gives no fix")]),
    Fact("live view: gathers of the representative step at most", "int", define("collector/live.h", "LIVE_GATHERS_MAX"),
         [Doc("docs/live.md", r"so grouped by unit \((\d+) at most\)")]),
    Fact("live view: a rank's window of recent steps", "int", define("collector/live.h", "LIVE_WINDOW"),
         [Doc("docs/live.md", r"its recent steps, oldest first, (\d+) at most"),
          Doc("docs/metrics.md", r"window of recent steps \((\d+) steps\)")]),
    Fact("live view: a rank's communicators at most", "int", define("collector/live.h", "LIVE_COMMS_MAX"),
         [Doc("docs/live.md", r"its communicators \((\d+) at most\)"),
          Doc("docs/metrics.md", r"A rank has at most (\d+) communicators")]),
    Fact("live view: a rank's time strip events at most", "int", define("collector/live.h", "LIVE_STRIP_MAX"),
         [Doc("docs/live.md", r"the events of its last completed step in issue order, (\d+) at most")]),
    Fact("collect names the first peers refused without the key", "int",
         define("collector/ingest.h", "INGEST_REFUSED_NAMED"),
         [Doc("docs/collect.md", r"the first (\d+) peers refused without the key")]),
    Fact("/metrics connections at once", "int",
         define("collector/metrics.c", "METRICS_CONNECTIONS_MAX"),
         [Doc("docs/metrics.md", r"At most (\d+) connections at once")]),
    Fact("/metrics connections of one client host", "int",
         define("collector/metrics.c", "METRICS_CONNECTIONS_PER_HOST"),
         [Doc("docs/metrics.md", r"at most (\d+) of one client host")]),
    Fact("/metrics closes a silent connection after", "ms",
         define("collector/metrics.c", "METRICS_TIMEOUT_S", unit="s"),
         [Doc("docs/metrics.md", r"a connection silent for (\d+ seconds)"),
          Doc("docs/metrics.md", r"one connection slot for (\d+ seconds)")]),
]

# ---- reading values ------------------------------------------------------------

WORDS = {"one": 1, "two": 2, "ten": 10}
BINARY = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1000, "second": 1000, "seconds": 1000}


def c_value(expr, defines, depth=0):
    """A C constant expression over numbers and #defines, as a Python number."""
    if depth > 20:
        raise ValueError("#define loop in %r" % expr)
    expr = re.sub(r"/\*.*?\*/", "", expr).strip()
    expr = re.sub(r"\((?:long|int|size_t|uint64_t|uint32_t|unsigned)\)", "", expr)
    expr = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)(?:ull|ll|ul|u|l)\b", r"\1", expr, flags=re.I)

    def name(m):
        if m.group(0) not in defines:
            raise ValueError("unknown name %s" % m.group(0))
        return "(%r)" % c_value(defines[m.group(0)], defines, depth + 1)

    expr = re.sub(r"\b[A-Za-z_]\w*\b", name, expr)
    if not re.fullmatch(r"[0-9a-fA-Fx()+\-*/<> .]*", expr):
        raise ValueError("not a constant: %r" % expr)
    return eval(expr, {"__builtins__": {}})


def doc_number(text):
    """A documented number: 65536, 16,777,216, 2^28, 16 MiB, ten."""
    text = text.strip().strip("()")
    m = re.fullmatch(r"\d+(?:\.\d+)?e\d+", text)
    if m:
        return float(text)
    if re.fullmatch(r"\d{1,3}(?: \d{3})+", text):  # 10 000 000
        return int(text.replace(" ", ""))
    m = re.fullmatch(r"(\d+)\^(\d+)", text)
    if m:
        return int(m.group(1)) ** int(m.group(2))
    m = re.fullmatch(r"([\d,]+)\s*(KiB|MiB|GiB)", text)
    if m:
        return int(m.group(1).replace(",", "")) * BINARY[m.group(2)]
    m = re.fullmatch(r"([\d,]+)(?:\s*(ms|s|seconds?))?", text)
    if m:
        return int(m.group(1).replace(",", "")) * (1000 if m.group(2) in ("s", "second", "seconds") else 1)
    if text in WORDS:
        return WORDS[text]
    raise ValueError("not a number: %r" % text)


def doc_ms(text, unit):
    """A documented duration in ms: '100 ms', 'every 100 ms', '1 s', 'once a second',
    'ten times a second', '10 a second', or a bare number in `unit`."""
    t = text.strip().lower()
    if t in ("once a second", "every second", "second"):
        return 1000
    m = re.fullmatch(r"(\w+) (?:times )?a second", t)
    if m:
        return 1000 / (WORDS.get(m.group(1)) or int(m.group(1)))
    m = re.fullmatch(r"(?:every )?([\d.,]+)\s*(ns|us|ms|s|seconds?)", t)
    if m:
        return float(m.group(1).replace(",", "")) * TO_MS[m.group(2)]
    m = re.fullmatch(r"[\d.]+", t)
    if m and unit:
        return float(t) * TO_MS[unit]
    raise ValueError("not a duration: %r" % text)


def exports(text):
    """The environment variables `export NAME=` lines set."""
    return set(re.findall(r"\bexport ([A-Z][A-Z0-9_]*)=", text))


def signals(text):
    return set(re.findall(r"\bSIG[A-Z]+\b", text))


# ---- the sources ------------------------------------------------------------------


class Sources:
    def __init__(self, root, exe):
        self.root, self.exe = root, exe
        self.files, self.helps = {}, {}
        self.defines = {}
        for top in ("agent", "cli", "collector", "common", "tui", "rules"):
            for dirpath, _, names in os.walk(os.path.join(root, top)):
                for n in names:
                    if n.endswith((".h", ".c")):
                        with open(os.path.join(dirpath, n), encoding="utf-8", errors="replace") as f:
                            for m in re.finditer(r"^#define (\w+) (.+?)\s*(?:/\*.*)?$", f.read(), re.M):
                                self.defines.setdefault(m.group(1), m.group(2))

    def file(self, rel):
        if rel not in self.files:
            with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                self.files[rel] = f.read()
        return self.files[rel]

    def help(self, cmd):
        if cmd not in self.helps:
            r = subprocess.run([self.exe, cmd, "--help"], capture_output=True, text=True, timeout=30)
            self.helps[cmd] = r.stdout + r.stderr
        return self.helps[cmd]

    def doc_text(self, where):
        """The text of a place, whitespace collapsed, backticks gone; with its name."""
        if where.startswith("help:"):
            cmd, _, opt = where[5:].partition("#")
            text = self.help(cmd)
            name = "'fsdpscope %s --help'" % cmd
            if opt:
                text = option_paragraph(text, opt)
                name += " (%s)" % opt
                if text is None:
                    return None, name
        else:
            text, name = self.file(where), where
        return re.sub(r"\s+", " ", text.replace("`", "")), name


def option_paragraph(help_text, opt):
    """The lines of one option in a --help's OPTIONS: its line and the more indented ones after."""
    lines = help_text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s{1,8})(?:-\w, )?%s\b" % re.escape(opt), line)
        if m:
            indent = len(m.group(1))
            out = [line]
            for nxt in lines[i + 1:]:
                if not nxt.strip() or len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                out.append(nxt)
            return "\n".join(out)
    return None


# ---- the check ----------------------------------------------------------------------


def code_value(src, fact):
    c = fact.code
    text = src.file(c.path)
    m = re.search(c.regex, text, re.M)
    if not m:
        raise LookupError("%s: no match for %r (the code moved: update this entry)" % (c.path, c.regex))
    line = text.count("\n", 0, m.start()) + 1
    where = "%s:%d" % (c.path, line)
    groups = c.group if isinstance(c.group, tuple) else (c.group,)
    raw = [m.group(g) for g in groups]
    if fact.kind == "signals":
        if raw[0] == "job_catch_signals":  # a caller of cli/job.c's: the signals it catches
            job = src.file("cli/job.c")
            j = re.search(JOB_SIGNALS, job)
            if not j:
                raise LookupError("cli/job.c: no match for %r" % JOB_SIGNALS)
            return ("%s (cli/job.c:%d)" % (where, job.count("\n", 0, j.start()) + 1),
                    signals(j.group(1)) - fact.exclude, j.group(1).strip())
        return where, signals(raw[0]) - fact.exclude, raw[0].strip()
    if fact.kind == "exports":
        return where, exports(raw[0]), "print_env_lines"
    if fact.kind == "range":
        return where, tuple(int(c_value(r, src.defines)) for r in raw), " .. ".join(raw)
    v = c_value(raw[0], src.defines) - (1 if c.nul else 0)
    if c.none_if is not None and v == c.none_if:
        return where, None, raw[0]
    if fact.kind == "ms":
        v = v * TO_MS[c.unit]
    return where, v, raw[0].strip()


def documented_value(fact, doc, raw):
    if fact.kind == "exports":
        return exports(raw)
    if fact.kind == "signals":
        return signals(raw)
    if fact.kind == "ms":
        return doc_ms(raw, doc.unit)
    if fact.kind == "range":
        m = re.search(r"([\w^]+)\s*\.\.\s*([\w^]+)\s*$", raw.strip())
        if not m:
            raise ValueError("not a range: %r" % raw)
        return (doc_number(m.group(1)), doc_number(m.group(2)))
    if fact.kind == "int" and doc.unit == "ms":  # a default in ms, said as a duration
        return doc_ms(raw, "ms")
    if raw in ("none", "off"):
        return None
    return doc_number(raw)


def show(v, kind=None):
    if kind == "ms" and isinstance(v, (int, float)):
        return show(v) + " ms"
    if isinstance(v, set):
        return ", ".join(sorted(v)) or "(none)"
    if v is None:
        return "no default"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def check(src):
    failures, checked = [], 0
    for fact in FACTS:
        try:
            where, want, raw = code_value(src, fact)
        except (LookupError, ValueError, OSError) as e:
            failures.append("%s: the code's value: %s" % (fact.what, e))
            continue
        for doc in fact.docs:
            checked += 1
            try:
                text, name = src.doc_text(doc.where)
            except OSError as e:
                failures.append("%s: %s: %s" % (fact.what, doc.where, e))
                continue
            m = re.search(doc.regex, text) if text is not None else None
            if not m:
                if doc.absent_is_none and text is not None:
                    got, said = None, "(no default given)"
                else:
                    failures.append("%s: %s no longer says it (no match for %r); the code, %s, says %s (%s)"
                                    % (fact.what, name, doc.regex, where, show(want, fact.kind), raw))
                    continue
            else:
                said = m.group(1).strip()
                try:
                    got = documented_value(fact, doc, said)
                except ValueError as e:
                    failures.append("%s: %s: %s" % (fact.what, name, e))
                    continue
            if fact.kind == "ms" and got is not None and want is not None:
                same = abs(got - want) < 1e-6
            else:
                same = got == want
            if not same:
                failures.append("%s: %s says %s ('%s'); the code, %s, says %s (%s)"
                                % (fact.what, name, show(got, fact.kind), said, where, show(want, fact.kind), raw))
    return failures, checked


# Where a document names another (docs/live.md, "see DESIGN.md"): the places searched.
REFERENCE_PLACES = ("README.md", "docs", "agent", "cli", "collector", "common", "tui", "rules", "export")


def check_references(root):
    """Every X.md a document or a source comment names is a file of the project: a
    reader must be able to open what the text sends them to."""
    failures, checked = [], 0
    for place in REFERENCE_PLACES:
        path = os.path.join(root, place)
        files = [path] if os.path.isfile(path) else [
            os.path.join(d, n) for d, _, ns in os.walk(path) for n in ns if n.endswith((".md", ".c", ".h"))]
        for f in sorted(files):
            with open(f, encoding="utf-8", errors="replace") as fh:
                text = fh.read().replace("\\n", " ")
            rel = os.path.relpath(f, root)
            for m in re.finditer(r"(?<![\w/.-])((?:\.\./)?[\w/.-]*\w\.md)\b", text):
                name = m.group(1)
                checked += 1
                tries = [os.path.join(os.path.dirname(f), name), os.path.join(root, "docs", name),
                         os.path.join(root, name)]
                if not any(os.path.isfile(t) and os.path.realpath(t).startswith(os.path.realpath(root) + os.sep)
                           for t in tries):
                    failures.append("%s:%d names %s, which is not a file of the project"
                                    % (rel, text.count("\n", 0, m.start()) + 1, name))
    return failures, checked


def main():
    if len(sys.argv) != 3:
        print("usage: docs_agree_test.py FSDPSCOPE SOURCE_ROOT", file=sys.stderr)
        return 2
    src = Sources(sys.argv[2], sys.argv[1])
    failures, checked = check(src)
    ref_failures, ref_checked = check_references(sys.argv[2])
    failures += ref_failures
    for f in failures:
        print("FAIL " + f)
    print("docs_agree: %d facts, %d places checked, %d documents named; %d disagree"
          % (len(FACTS), checked, ref_checked, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
