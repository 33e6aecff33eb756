"""What every end-to-end script needs (collect_e2e, hang_e2e, top_e2e, nodes_e2e):
failing with a reason, polling for a condition, running a command, a fresh folder,
and refusing a sanitizer's report on a command's stderr."""
import os
import shutil
import subprocess
import time


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def sanitizer_clean(text, what):
    """A sanitized build reports on stderr: none of its reports is accepted."""
    marks = [m for m in SANITIZER_MARKS if m in (text or "")]
    check(not marks, f"{what}: a sanitizer report ({marks[0] if marks else ''}): {text}")


def run(cmd, env=None, timeout=600, sanitized=True):
    """cmd's result (text); with sanitized, a sanitizer report on its stderr fails."""
    r = subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True)
    if sanitized:
        sanitizer_clean(r.stderr, " ".join(os.path.basename(c) for c in cmd[:2]))
    return r


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def read_text(path):
    """A file's text (undecodable bytes replaced), "" when it is not there (yet)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait_for(cond, what, limit):
    """Poll cond() until it gives something true (tried once more at the limit): a generous
    limit, never asserted as a duration."""
    deadline = time.monotonic() + limit
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise Fail(f"gave up waiting ({limit} s) for {what}")
        time.sleep(0.05)
