"""Where flushed batches go on the process that owns the run folder.

A local run and a master both receive encoded batches (from their own
recorder, or from workers). On a local run this process's event loop is
timestamping chunks, and the Arrow decoding, the live figures and the Parquet
write of a one-second flush held its GIL for 4-7 ms (``benchmarks/bench_sink_gil.py``):
a late chunk for every stream meanwhile, even from a background thread. So
that work runs in a record writer process (:mod:`loadtest.load.sink_worker`);
here a native thread only writes each batch's plain bytes down a pipe
(:mod:`loadtest.load.sink_frames`), and the live figures come back computed.

Nothing measured depends on that process. A batch stays here until the
writer says it is on disk. If the writer fails, exits, or does not answer
within :data:`ANSWER_TIMEOUT_S` of a drain, it is stopped, a warning says so,
and every batch it had not stored, then every later one, is stored in this
process's thread as before it existed (same part files in the same order; a
batch it wrote but had not yet confirmed is written again under the same name,
with the same content). One thread also keeps the part files in order.
With ``--metrics-port`` the writer also buckets each batch for the live
metrics and sends the buckets back; only folding them in and rendering the
text happen here, in the sink thread.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import gevent.event
import pandas as pd
from gevent.threadpool import ThreadPool

from loadtest.diskfull import FolderGuard, is_disk_full
from loadtest.export.live import observation_from_json
from loadtest.load.batch import decode_table
from loadtest.load.look_rows import LOOKS_OPEN, RowsAwaitingLook
from loadtest.load.progress import WINDOW_ENDS, RunProgress
from loadtest.load.sink_child import WriterChild
from loadtest.load.sink_frames import OBSERVE
from loadtest.records import RequestWriter

_log = logging.getLogger(__name__)

#: The longest a drain waits for the writer process to confirm what it was sent.
ANSWER_TIMEOUT_S = 60.0
#: The longest a level's closing line waits for its last records' figures (:meth:`RunSink.settle`).
SETTLE_TIMEOUT_S = 2.0


class RunSink:
    """Decode, count, and write batches of records, out of the timing process.

    ``guard``: a write that fails because the disk is full is reported to it
    (which stops the run) rather than raised; nothing more is written after it.
    ``child``: use the record writer process (False: store in this process's thread).
    """

    def __init__(self, writer: RequestWriter, progress: RunProgress, guard: FolderGuard | None = None,
                 child: bool = True) -> None:
        self.writer = writer
        self.progress = progress
        self.guard = guard
        self._pool = ThreadPool(1)
        self._pending: list[gevent.event.AsyncResult] = []
        #: The latest snapshot of requests in flight, per sending process.
        self.in_flight: dict[str, dict[str, list]] = {}
        #: Told of each batch stored in this process, as its decoded table, in the sink thread; and
        #: ``watchers``, of each batch the writer process stored, as the observation it computed there
        #: (:func:`loadtest.export.live.observation`), also in the sink thread. ``--metrics-port`` registers
        #: both (:meth:`loadtest.export.serve.LiveExport.attach`): each batch reaches one of them, once.
        self.observers: list = []
        self.watchers: list = []
        #: Each ended level's window end (wall s, by index), asked at each batch and sent with it: the
        #: live figures leave out the requests a level started in its hold, as the analysis does.
        self.window_ends: Callable[[], dict[int, float]] | None = None
        #: Each level whose look is being judged, with the look's wall time: asked with ``window_ends``;
        #: the rows such a level started after its look wait for the verdict (:mod:`loadtest.load.look_rows`).
        self.looks_open: Callable[[], dict[int, float]] | None = None
        self._awaiting = RowsAwaitingLook()
        #: Batches handed over and not yet on disk, by sequence number (in order). Touched by the
        #: event loop and the sink thread; each access is one dict operation on int keys (atomic under the GIL).
        self._unstored: dict[int, dict[str, Any]] = {}
        self._seq = 0
        self._next_part = writer.next_part
        self._errors: list[BaseException] = []
        self._answered = gevent.event.Event()
        #: Why the writer process was given up on (None while it works, or when never used).
        self.fallback_reason: str | None = None
        self.child: WriterChild | None = None
        if child:
            try:
                self.child = WriterChild(writer.run_dir, writer.next_part, self._on_answer, self._give_up)
            except OSError as err:
                self.fallback_reason = f"it could not be started ({err})"
                _log.warning("could not start the record writer process (%s); records are written in this process", err)

    def __call__(self, batch: dict[str, Any]) -> None:
        if "in_flight" in batch:
            self.in_flight[str(batch.get("source"))] = batch["in_flight"]
        if not batch["request_id"]:
            return  # only a snapshot of requests in flight
        if self.window_ends is not None:
            # asked now, in the event loop: every record here ended after any end it must be held to was set
            batch = {**batch, WINDOW_ENDS: self.window_ends()}
        if self.looks_open is not None:
            batch = {**batch, LOOKS_OPEN: self.looks_open()}
        self._seq += 1
        self._unstored[self._seq] = batch
        self._pending = [w for w in self._pending if not w.ready()]
        self._pending.append(self._pool.spawn(self._handle, self._seq))

    # -- in the sink thread ----------------------------------------------------------------
    def _handle(self, seq: int) -> None:
        """Send batch ``seq`` to the writer process, or store it here once that is gone."""
        batch = self._unstored.get(seq)
        if batch is None:
            return  # stored already, by a take-over
        child = self.child
        if child is None or (self.guard is not None and self.guard.full):
            self._store_through(seq)
            return
        if child.broken:
            return  # the reader sees it gone and takes over, from the last batch it confirmed
        if self.watchers:
            batch = {**batch, OBSERVE: True}  # bucketed there too; the batch kept here is unchanged
        try:
            child.send(seq, batch)
        except OSError:  # it is gone; its answers end and _give_up takes over
            child.broken = True

    def _store_through(self, seq: int) -> None:
        """Store here, in order, every batch not yet stored up to ``seq`` (a failure is raised at drain)."""
        for s in list(self._unstored):
            if s > seq:
                break
            batch = self._unstored.pop(s, None)
            if batch is None:
                continue
            try:
                self._store(batch)
            except Exception as err:  # noqa: BLE001 - kept for drain, as a failed write always was
                self._errors.append(err)

    def _store(self, batch: dict[str, Any]) -> None:
        table = decode_table(batch)
        placed = self._awaiting.settle(table, batch.get(WINDOW_ENDS), batch.get(LOOKS_OPEN))
        self.progress.update(placed, batch.get(WINDOW_ENDS), arrived=table.num_rows)
        for observe in self.observers:
            observe(placed, batch.get(WINDOW_ENDS))
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

    def _tell_watchers(self, observed: tuple[dict, list]) -> None:
        for watch in self.watchers:
            watch(observed)

    # -- in the event loop -----------------------------------------------------------------
    def _on_answer(self, message: dict) -> None:
        if self.child is None or "failed" in message:
            return
        self._unstored.pop(int(message["seq"]), None)
        self._next_part = int(message["next_part"])
        self.progress.absorb(int(message["total"]), message["levels"])
        if "observed" in message and self.watchers:
            self._pool.spawn(self._tell_watchers, observation_from_json(message["observed"]))
        self._answered.set()

    def _give_up(self, reason: str) -> None:
        """The writer process is gone (or stopped answering): store here from its last confirmed batch."""
        child = self.child
        if child is None:
            return
        self.child = None
        self.fallback_reason = reason
        _log.warning("the record writer process stopped (%s); writing records in this process from now on", reason)
        child.kill()
        self.writer.next_part = self._next_part
        self._answered.set()
        if self._unstored:
            self._pending.append(self._pool.spawn(self._store_through, max(self._unstored)))
        self._pool.spawn(child.close_pipe)

    def in_flight_count(self) -> int:
        """The requests in flight in every process's latest snapshot (up to a second old; no draining,
        so any thread may ask: the live metrics' ``loadtest_in_flight``)."""
        return sum(len(cols.get("start_wall") or ()) for cols in list(self.in_flight.values()))

    def in_flight_frame(self) -> pd.DataFrame:
        """Every process's latest in-flight snapshot, as one frame."""
        frames = [pd.DataFrame(cols) for cols in self.in_flight.values() if cols.get("start_wall")]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> bool:
        """Wait, at most ``timeout_s``, until every batch handed over so far is in the live figures.

        Why: a level's closing line is printed once its hold has ended, right after the last
        records were flushed; the writer process answers with their figures a few ms later.
        Printed without waiting, the line missed the requests that ended in the last second
        (a trial read "87 requests" against the table's 88, and an open-loop TTFT p95 of
        2618 ms against 2,881: the slowest requests end last). False when the time ran out.
        Unlike :meth:`drain` it never gives the writer up nor raises: the figures are a view.
        """
        target = self._seq
        deadline = time.monotonic() + timeout_s
        while any(seq <= target for seq in list(self._unstored)) or any(not w.ready() for w in self._pending):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._answered.clear()
            self._answered.wait(timeout=min(left, 0.02))  # an answer wakes it; a store here is polled
        return True

    def drain(self) -> None:
        """Wait until every batch handed over so far is on disk (re-raising a failed write)."""
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while True:
            for write in self._pending:
                write.get()
            self._pending.clear()
            if not self._unstored:
                break
            if self.child is None:  # taken over: store what is left here, then look again
                self._pending.append(self._pool.spawn(self._store_through, max(self._unstored)))
                continue
            self._answered.clear()
            left = deadline - time.monotonic()
            if left <= 0 or not self._answered.wait(timeout=left):
                self._give_up(f"no answer within {ANSWER_TIMEOUT_S:g} s")
        if self._errors:
            first = self._errors[0]
            self._errors.clear()
            raise first

    def close(self) -> None:
        """Drain, then let the writer process end (idempotent; also after a take-over)."""
        try:
            self.drain()
        finally:
            child, self.child = self.child, None
            if child is not None:
                child.close()
