"""Small helpers for the tests that start servers (Prometheus, the Pushgateway, moto) and runs."""

from __future__ import annotations

import signal
import socket
import subprocess


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL if it is still there after ``timeout``."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def reap(proc: subprocess.Popen) -> None:
    """Kill a process a failed test left running."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def communicate_or_dump(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """``proc.communicate(timeout)``; if it is still running then, fail with its threads' Python stacks.

    For a child started with ``PYTHONFAULTHANDLER=1`` (``runkit.start_run`` starts runs so):
    SIGABRT makes faulthandler print every thread's stack to stderr before the process dies, so a
    run that hangs says where, rather than only that it timed out.
    """
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            _, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
        raise AssertionError(f"still running {timeout:g} s on; its threads then:\n{(stderr or '')[-8000:]}") from None


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    """Wait until ``url`` answers (a server we started is up), or fail if ``proc`` exits first."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{url} did not come up")
            time.sleep(0.2)
