"""A helper child that ends before its parent's pipe closes keeps its own exit code and message.

Why: the uploader waited for the run's pipe to close in a daemon thread blocked
in ``sys.stdin.buffer.read()``, which holds the buffered reader's lock. When it
ended first (CI: an error in a pass), it aborted at shutdown: "Fatal Python
error: _enter_buffered_busy" on the run's terminal and SIGABRT (-6) for the exit
code the run reads. With that wait in place of ``watch_for_eof`` the first test
fails exactly so. ``loadtest.parent_pipe`` reads the raw descriptor; the scraper
uses it too (its text-mode ``sys.stdin.read()`` did not abort, but one wait is
defined once).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.untimed

CHILD = """
import sys, threading, time
from loadtest.parent_pipe import watch_for_eof
closed = threading.Event()
watch_for_eof(closed)
if sys.argv[1] == "wait":
    closed.wait(30)
    print("closed" if closed.is_set() else "never closed", flush=True)
    sys.exit(0)
time.sleep(0.3)   # the watcher is blocked in its read
print("ending early", file=sys.stderr, flush=True)
sys.exit(5)
"""


def _child(mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_child_that_ends_first_exits_with_its_own_code_and_one_line():
    child = _child("early")
    try:
        child.wait(timeout=30)  # stdin stays open (communicate would close it first)
        err = child.stderr.read().decode()
    finally:
        child.kill()
        child.stdin.close()
    assert child.returncode == 5, err
    assert err.splitlines() == ["ending early"]


def test_the_event_is_set_when_the_parent_closes_the_pipe_and_not_before():
    child = _child("wait")
    try:
        child.stdin.write(b"bytes before the end are not the end\n")
        child.stdin.flush()
        time.sleep(0.5)
        assert child.poll() is None  # still waiting: bytes are not the end of the pipe
        child.stdin.close()
        child.wait(timeout=30)
        out, err = child.stdout.read(), child.stderr.read()
    finally:
        child.kill()
    assert child.returncode == 0, err.decode()
    assert out.decode().strip() == "closed"
