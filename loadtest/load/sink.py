"""Where flushed batches go on the process that owns the run folder.

A local run and a master both receive encoded batches (from their own
recorder, or from workers). Decoding them, updating the live progress and
writing the Parquet part file all happen in one background thread: on a local
run the event loop is timestamping chunks, and even a few milliseconds of
Arrow work per flush would show up as a late chunk. One thread also keeps the
part files in order. (The interpreter's switch interval is lowered at session
start, see :func:`loadtest.load.session.tune_interpreter`, so this thread
cannot hold the GIL for long.)
"""

from __future__ import annotations

from typing import Any

import gevent.event
import pandas as pd
from gevent.threadpool import ThreadPool

from loadtest.diskfull import FolderGuard, is_disk_full
from loadtest.load.batch import decode_table
from loadtest.load.progress import RunProgress
from loadtest.records import RequestWriter


class RunSink:
    """Decode, count, and write batches of records, off the event loop.

    ``guard``: a write that fails because the disk is full is reported to it
    (which stops the run) rather than raised; nothing more is written after it.
    """

    def __init__(self, writer: RequestWriter, progress: RunProgress, guard: FolderGuard | None = None) -> None:
        self.writer = writer
        self.progress = progress
        self.guard = guard
        self._pool = ThreadPool(1)
        self._pending: list[gevent.event.AsyncResult] = []
        #: The latest snapshot of requests in flight, per sending process.
        self.in_flight: dict[str, dict[str, list]] = {}
        #: Also told of each decoded batch, in this thread (``--metrics-port``: loadtest.export.live).
        self.observers: list = []

    def __call__(self, batch: dict[str, Any]) -> None:
        self._pending = [w for w in self._pending if not w.ready()]
        self._pending.append(self._pool.spawn(self._store, batch))

    def _store(self, batch: dict[str, Any]) -> None:
        if "in_flight" in batch:
            self.in_flight[str(batch.get("source"))] = batch["in_flight"]
        if not batch["request_id"]:
            return  # only a snapshot of requests in flight
        table = decode_table(batch)
        self.progress.update(table)
        for observe in self.observers:
            observe(table)
        if self.guard is None:
            self.writer.write(table)
            return
        if self.guard.full:
            return  # the load is stopping; these records have nowhere to go
        try:
            self.writer.write(table)
        except OSError as err:
            if not is_disk_full(err):
                raise
            self.guard.failed(err)

    def in_flight_frame(self) -> pd.DataFrame:
        """Every process's latest in-flight snapshot, as one frame."""
        frames = [pd.DataFrame(cols) for cols in self.in_flight.values() if cols.get("start_wall")]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def drain(self) -> None:
        """Wait until every batch handed over so far is on disk (re-raising a failed write)."""
        for write in self._pending:
            write.get()
        self._pending.clear()
