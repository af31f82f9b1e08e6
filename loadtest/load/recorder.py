"""The recorder: keep each finished request, tagged with its level, and get it to disk.

Records are buffered in columns (:class:`~loadtest.load.batch.RecordBuffer`)
and flushed at least once a second through a *sink*: on a local run the sink
(:class:`~loadtest.load.sink.RunSink`) hands it to the record writer process,
which decodes it and writes a Parquet part file, so neither an fsync nor the
Arrow work stalls the event loop; on a Locust worker it sends the batch to the master. A batch the sink refuses is kept and
retried, and a final flush on stop means nothing measured is lost.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import gevent

from loadtest.analysis.decide import IN_FLIGHT_COLUMNS
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
        self._busy_last = False
        #: Finished requests per level index, warm-up and harness-cancelled ones left out: a look is
        #: deferred until its level has enough of them (:func:`loadtest.analysis.decide.requests_for_a_look`).
        self.measured_done: dict[int, int] = {}
        #: Requests being sent, by user: (client, level index, warmup, class, open-loop slot). A
        #: decision taken mid-level must see the ones still waiting for their first token (the slow tail).
        self._active: dict[int, tuple[Any, int, bool, str | None, Any]] = {}

    def begin(
        self, user: int, client: Any, level_index: int, warmup: bool, request_class: str | None = None, slot: Any = None
    ) -> None:
        """A user is about to send a request through ``client`` (its ``in_flight`` record).

        ``request_class``: a slow request still waiting counts against its own class's SLO.
        ``slot``: its open-loop arrival (its wait counts from the scheduled time).
        """
        self._active[user] = (client, level_index, warmup, request_class, slot)

    def end(self, user: int) -> None:
        self._active.pop(user, None)

    def in_flight(self) -> dict[str, list]:
        """Columns (see :data:`loadtest.analysis.decide.IN_FLIGHT_COLUMNS`) of the requests running now."""
        cols: dict[str, list] = {name: [] for name in IN_FLIGHT_COLUMNS}
        now = time.perf_counter()
        for client, level_index, warmup, request_class, slot in list(self._active.values()):
            rec = client.in_flight
            if rec is None:
                continue
            cols["schedule_lag_ms"].append(slot.lag_ms(rec) if slot is not None else None)
            cols["level_index"].append(level_index)
            cols["warmup"].append(warmup)
            cols["start_wall"].append(rec.start_wall)
            cols["elapsed_ms"].append((now - rec.start_perf) * 1000.0)
            cols["ttfb_ms"].append(rec.ttfb_ms)
            cols["ttft_ms"].append(rec.ttft_ms)
            cols["class"].append(request_class)
        return cols

    def add(self, rec: RequestRecord, user: int, level_index: int, level: int, warmup: bool, **tags: Any) -> None:
        """Record a finished request under the level in force when it *started*.

        ``tags``: what the workload says about the request (``request_class``,
        ``turn``, ``conversation_id``, ``prompt_words``; open loop: ``slot``); see RecordBuffer.add.
        """
        self.buffer.add(rec, user=user, level=level, level_index=level_index, warmup=warmup, **tags)
        self.total += 1
        if not warmup and rec.error_kind != "cancelled":
            self.measured_done[level_index] = self.measured_done.get(level_index, 0) + 1

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        # A fixed cadence, not a sleep after each flush: the time a flush takes does not push
        # the next one later, so a kill -9 never loses more than about one interval.
        due = time.monotonic()
        while True:
            due += self.interval_s
            gevent.sleep(max(0.0, due - time.monotonic()))
            due = max(due, time.monotonic() - self.interval_s)  # after a long stall, do not burst
            self.flush()

    def flush(self) -> None:
        """Hand buffered records to the sink; a batch the sink refused is retried next time.

        Every batch also carries a snapshot of the requests in flight (even a batch
        with no finished record), so the process that decides levels sees them.
        """
        in_flight = self.in_flight()
        # after a snapshot with requests in flight, one empty one too: the master's view must not stay stale
        if len(self.buffer) or in_flight["start_wall"] or self._busy_last:
            self._busy_last = bool(in_flight["start_wall"])
            batch = self.buffer.take()
            batch["in_flight"] = in_flight
            batch["source"] = self.buffer.worker
            self._unsent.append(batch)
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
