"""A child process's signal to end: its standard input closes.

The run's helper children (the server-metrics scraper, the bucket uploader) stop
when the pipe from the run closes: when the run ends and closes it, and also when
the run is killed, since the kernel closes the pipe then. Each child waits for it
in a daemon thread, which must read the raw descriptor: a thread blocked in
``sys.stdin.read()`` holds the buffered reader's lock, and an interpreter that
shuts down under it (a child that ends first, on an error or a full disk) aborts
with "Fatal Python error: _enter_buffered_busy" and SIGABRT instead of its own
exit code and message.
"""

from __future__ import annotations

import os
import threading

STDIN_FD = 0


def _wait_for_eof(closed: threading.Event, fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:  # the descriptor went away: as good as closed
        pass
    closed.set()


def watch_for_eof(closed: threading.Event, fd: int = STDIN_FD) -> threading.Thread:
    """Set ``closed`` when ``fd`` (standard input) reaches its end; the daemon thread that waits."""
    thread = threading.Thread(target=_wait_for_eof, args=(closed, fd), name="parent-pipe", daemon=True)
    thread.start()
    return thread
