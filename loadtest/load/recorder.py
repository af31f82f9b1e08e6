"""The recorder: keep each finished request, tagged with its level, and get it to disk.

Records are buffered in columns (:class:`~loadtest.load.batch.RecordBuffer`)
and flushed at least once a second through a *sink*: on a local run the sink
(:class:`~loadtest.load.sink.RunSink`) decodes and writes a Parquet part file
in a background thread, so an fsync never stalls the event loop; on a Locust
worker it sends the batch to the master. A batch the sink refuses is kept and
retried, and a final flush on stop means nothing measured is lost.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import gevent

from loadtest.client.record import RequestRecord
from loadtest.load.batch import RecordBuffer

log = logging.getLogger(__name__)

Sink = Callable[[dict[str, Any]], None]

FLUSH_INTERVAL_S = 1.0


class Recorder:
    """Buffers tagged records and flushes them to a sink every second."""

    def __init__(self, worker: str, sink: Sink, interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.buffer = RecordBuffer(worker)
        self.sink = sink
        self.interval_s = interval_s
        self.total = 0
        self._greenlet: gevent.Greenlet | None = None
        self._unsent: list[dict[str, Any]] = []

    def add(self, rec: RequestRecord, user: int, level_index: int, level: int, warmup: bool, **tags: Any) -> None:
        """Record a finished request under the level in force when it *started*.

        ``tags``: what the workload says about the request (``request_class``,
        ``turn``, ``conversation_id``, ``prompt_words``); see RecordBuffer.add.
        """
        self.buffer.add(rec, user=user, level=level, level_index=level_index, warmup=warmup, **tags)
        self.total += 1

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            gevent.sleep(self.interval_s)
            self.flush()

    def flush(self) -> None:
        """Hand buffered records to the sink; a batch the sink refused is retried next time."""
        if len(self.buffer):
            self._unsent.append(self.buffer.take())
        while self._unsent:
            batch = self._unsent[0]
            try:
                self.sink(batch)
            except Exception:  # a failed flush must not kill the run: log it, keep the batch
                log.exception("could not flush %d records; will retry", len(batch["request_id"]))
                return
            self._unsent.pop(0)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=True)
            self._greenlet = None
        self.flush()
