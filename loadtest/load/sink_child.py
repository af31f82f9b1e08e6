"""The timing process's end of the record writer process (:mod:`loadtest.load.sink_worker`).

Frames go down a pipe of our own (its write end stays blocking, written from
the sink's native thread, which releases the GIL while the pipe is full); the
writer's one-line answers come back on its stdout, read by a greenlet, which
is cheap (a short JSON line a second). This class only moves bytes and says
what came back; what to do about it (the fallback) is :class:`~loadtest.load.sink.RunSink`'s.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

import gevent
from gevent import monkey, subprocess

from loadtest.load.sink_frames import encode_frame, write_all

_log = logging.getLogger(__name__)

#: The OS's close(2). Under Locust, ``os.close`` is gevent's, which hands the close to the event
#: loop and returns; the writer's end of the pipe then stayed open, its process never saw the end of
#: its input, and every run waited for :meth:`WriterChild.close`'s 10 s timeout before killing it.
_close_fd = monkey.get_original("os", "close")


class WriterChild:
    """One record writer process: :meth:`send` batches, answers go to the callbacks.

    ``on_answer(message)`` for each line; ``on_gone(reason)`` once, when its answers end
    (it exited, failed, or was killed); both are called in the reader greenlet.
    """

    def __init__(self, run_dir: Path, first_part: int, on_answer: Callable[[dict], None],
                 on_gone: Callable[[str], None]) -> None:
        read_fd, self._fd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "loadtest.load.sink_worker", str(run_dir), str(first_part)],
                stdin=read_fd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
        except BaseException:
            _close_fd(self._fd)
            raise
        finally:
            _close_fd(read_fd)
        #: Set (from the sending thread) when a write to the pipe failed: the process is gone.
        self.broken = False
        self._on_answer = on_answer
        self._on_gone = on_gone
        self._reader = gevent.spawn(self._read)

    def send(self, seq: int, batch: dict[str, Any]) -> None:
        """Write one batch down the pipe (called in the sink's native thread; raises OSError if it is gone)."""
        write_all(self._fd, encode_frame(seq, batch))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        reason = "it closed its output"
        try:
            for line in self.proc.stdout:
                message = json.loads(line)
                self._on_answer(message)
                if "failed" in message:
                    reason = f"it could not store a batch ({message['failed']})"
                    break
        except (OSError, ValueError) as err:
            reason = f"its answers could not be read ({err})"
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None  # still running with its output closed: the sink stops it
        self._on_gone(reason if code is None else f"{reason}; exit status {code}")

    def close(self, timeout_s: float = 10.0) -> None:
        """End its input and wait for it to finish the batches it has (idempotent)."""
        self.close_pipe()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Stop it now. The pipe stays open: the sending thread may be writing to it (its write then
        fails with EPIPE); :meth:`close_pipe` closes it from that thread once no write can be under way."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close_pipe(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                _close_fd(fd)
            except OSError:  # already gone with the process: nothing to close
                pass
