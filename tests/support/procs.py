"""Small helpers for the tests that start servers (Prometheus, the Pushgateway, moto) and runs."""

from __future__ import annotations

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
