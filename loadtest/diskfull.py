"""A run folder that cannot be written (disk full, quota): stop the load, keep what is on disk.

A load test writes all the time (a Parquet part every second, run.json at every
level change, the logs, the scraper's samples). When the filesystem fills, the
worst outcomes are a run that goes on sending load while recording nothing, a
storm of tracebacks, or a half-written file that hides the good ones. Instead:
the first failed write stops the load, every part file already flushed stays as
it is (each was written to a temporary name and renamed, so none is partial),
and ``loadtest run`` ends with one line naming the folder and exit code 5.

A small *reserve* file is written into the folder when it is made and deleted
when the disk fills, so that the final run.json (its end, and why it stopped)
still fits and ``loadtest analyze`` can later say what happened.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from pathlib import Path
from typing import Callable

from loadtest.errors import LoadtestError

#: ENOSPC: no space left on the device; EDQUOT: the user's disk quota is used up.
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})

RESERVE_NAME = ".reserve"
#: Enough for the final run.json of a long run with refine probes (a few dozen levels).
RESERVE_BYTES = 256 * 1024


def is_disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in FULL_ERRNOS


def reason(err: OSError) -> str:
    return "disk quota exceeded" if err.errno == errno.EDQUOT else "no space left on device"


class RunFolderFull(LoadtestError):
    """The run folder could not be written: the load was stopped. Exit code 5."""

    exit_code = 5


def full_disk_message(err: OSError, folder: Path | None = None) -> str:
    """One line: what could not be written (relative to ``folder`` when inside it), and why."""
    path = err.filename
    if not path:
        return reason(err)
    if folder is not None:
        try:
            path = Path(path).relative_to(folder)
        except ValueError:
            pass
    return f"cannot write {path}: {reason(err)}"


class FolderGuard:
    """The first failed write of a full disk, for a run folder; tells listeners once.

    Writers call :meth:`failed` with the error instead of raising into the event
    loop; the run registers :meth:`on_full` to stop its load.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.error: OSError | None = None
        self._listeners: list[Callable[[], None]] = []

    @property
    def full(self) -> bool:
        return self.error is not None

    def on_full(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def failed(self, err: OSError) -> None:
        if self.error is not None:
            return
        self.error = err
        logging.getLogger(__name__).error("run folder full: %s; stopping the load", full_disk_message(err))
        for listener in self._listeners:
            listener()

    def make_reserve(self, size: int = RESERVE_BYTES) -> None:
        """Hold back ``size`` bytes (random, so a compressing filesystem cannot shrink them)."""
        path = self.run_dir / RESERVE_NAME
        try:
            with open(path, "wb") as fh:
                fh.write(os.urandom(size))
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as err:
            path.unlink(missing_ok=True)
            if not is_disk_full(err):
                raise
            self.failed(err)

    def release_reserve(self) -> None:
        (self.run_dir / RESERVE_NAME).unlink(missing_ok=True)


class QuietFileHandler(logging.FileHandler):
    """A log file that, once the disk is full, stops writing instead of printing tracebacks.

    ``logging`` reports a failed write by printing a traceback to stderr for every
    record; on a full disk that would be a flood on the terminal.
    """

    def __init__(self, filename: Path, guard: FolderGuard | None = None) -> None:
        super().__init__(filename)
        self.guard = guard
        self.broken = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.broken:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        err = sys.exc_info()[1]
        if isinstance(err, OSError):
            self.broken = True
            if self.guard is not None and is_disk_full(err):
                self.guard.failed(err)
            return
        super().handleError(record)
