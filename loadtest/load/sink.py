"""Where flushed batches go on the process that owns the run folder.

A local run and a master both receive encoded batches (from their own
recorder, or from workers), decode them once, update the live progress, and
write them as Parquet part files in a one-thread pool: an fsync must not stall
the event loop that is timestamping chunks, and one thread keeps the part files
in order.
"""

from __future__ import annotations

from typing import Any

import gevent
import gevent.event
from gevent.threadpool import ThreadPool

from loadtest.load.batch import decode_table
from loadtest.load.progress import RunProgress
from loadtest.records import RequestWriter


class RunSink:
    """Decode, count, and write batches of records."""

    def __init__(self, writer: RequestWriter, progress: RunProgress) -> None:
        self.writer = writer
        self.progress = progress
        self._pool = ThreadPool(1)
        self._pending: list[gevent.event.AsyncResult] = []
        self.received = 0

    def __call__(self, batch: dict[str, Any]) -> None:
        table = decode_table(batch)
        self.received += table.num_rows
        self.progress.update(table)
        self._pending = [w for w in self._pending if not w.ready()]
        self._pending.append(self._pool.spawn(self.writer.write, table))

    def drain(self) -> None:
        """Wait until every batch handed over so far is on disk."""
        for write in self._pending:
            write.get()
        self._pending.clear()
