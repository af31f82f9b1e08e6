"""The compiled per-read scanner, if this install has it, else None (the pure-Python path).

``loadtest/client/_scanner.c`` does, per socket read, what the Python hot path
does (``recvmsg`` with the kernel's arrival stamp; the SSE split and the usual
chat/completions content chunk of :meth:`~loadtest.client.decode.StreamDecoder.feed`)
and leaves every other event to the Python code, so both give the same record;
``tests/unit/test_scanner.py`` checks that on the wire zoo and on fuzzed reads.
It is built by ``pip install`` (setup.py) where a C compiler is found, and is
optional: without it, or with ``LOADTEST_SCANNER=python`` in the environment
(read at import), the client runs the pure-Python path.
"""

from __future__ import annotations

import os
from typing import Any

#: ``python``: use the pure-Python path even where the extension is built (tests run both).
ENV = "LOADTEST_SCANNER"

Scanner: Any = None
run_turns: Any = None  # Linux only (epoll)
recv_stamped: Any = None
usual: Any = None
if os.environ.get(ENV, "").strip().lower() != "python":
    try:
        from loadtest.client import _scanner
        from loadtest.client._scanner import Scanner, recv_stamped, usual  # noqa: F401
    except ImportError:  # not built here (no compiler at install): the Python path does the same work
        pass
    else:
        run_turns = getattr(_scanner, "run_turns", None)  # built on Linux only (it waits in epoll)


def active() -> str:
    """Which path decodes streams in this process: ``"c"`` or ``"python"`` (for run.json and the docs)."""
    return "c" if Scanner is not None else "python"
