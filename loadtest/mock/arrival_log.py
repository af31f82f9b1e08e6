"""``loadtest mock --arrival-log FILE``: one line per completions request, as it arrives.

Why a second log next to ``--request-log``: that one is written when a
request *ends*, so a mock killed with SIGKILL takes the lines of every request
in flight with it. A fault test that kills the server mid-level still needs
the server's own count of what reached it. Each line here is one unbuffered
``write(2)`` on an ``O_APPEND`` descriptor, made before the request is
handled, so it sits in the kernel's page cache the moment the request is
read, and a kill -9 loses none of them.
"""

from __future__ import annotations

import os
import time


class ArrivalLog:
    """Appends ``<perf_counter seconds> <path>`` per arrival to a file."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, path: str) -> None:
        os.write(self._fd, f"{time.perf_counter():.6f} {path}\n".encode())

    def close(self) -> None:
        os.close(self._fd)


def count_arrivals(path: str) -> int:
    """How many requests an arrival log holds (0 when the file does not exist)."""
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0
