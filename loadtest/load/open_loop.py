"""Open-loop load: arrivals on their own schedule, sent by whichever user is free.

In a closed loop a slow server receives fewer requests, so its latency looks
better than users would feel it (*coordinated omission*). Here the send times
of each level are drawn in advance (:mod:`arrivals`) when the level starts, and
one dispatcher greenlet per sending process releases each arrival at its time
to a queue that idle users wait on. Users are not the concurrency: there are
``max_in_flight`` of them (spread over the workers), most of them idle while the
server keeps up; in-flight requests grow as the server slows.

What each arrival records (:class:`Slot`):

* its scheduled time (wall clock, for the timeline; ``perf_counter``, to
  measure against). TTFT and e2e are judged from the *scheduled* time
  (``analysis/frame.py``), so a request that could not go out on time, or
  waited for a free user, carries that wait in its latency;
* its send lag (actual send − scheduled), reported on its own: a late send is
  the client's fault, and a level whose sends ran late is ``client_saturated``;
* an arrival that finds this process's share of ``max_in_flight`` requests
  in flight is not silently skipped: it is recorded as a failed request of
  kind ``dropped``, which counts against the error budget. (Users are as many
  as that share, so normally one is free; while they are still starting, an
  arrival waits in the queue and its lag says so.)

With ``--workers N`` each worker sends its share of the level's arrivals
(:func:`~loadtest.load.arrivals.share_offsets`; its share is its Locust worker
index): Poisson, ``rate / N`` from its own seeded stream (the superposition is
Poisson at the full rate); constant and gamma, every N-th arrival of the one
schedule all workers draw alike, so the merged schedule is one process's.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import gevent
import gevent.queue

from loadtest.client.record import RequestRecord
from loadtest.load.arrivals import share_offsets

if TYPE_CHECKING:
    from loadtest.load.levels import LevelClock
    from loadtest.load.recorder import Recorder
    from loadtest.scenario import Load


@dataclass(slots=True)
class Slot:
    """One scheduled arrival: its level and when it was due."""

    level_index: int
    rate_rps: float
    perf: float  # perf_counter() when due
    wall: float  # time.time() when due
    warmup: bool
    #: Trace replay: which trace row this arrival sends (:class:`~loadtest.load.trace_replay.TraceArrival`).
    trace: Any = None

    def lag_ms(self, rec: RequestRecord) -> float | None:
        """How late the request went out (its perf start − the scheduled time), ms; None if never sent."""
        if rec.error_kind == "dropped":
            return None
        return (rec.start_perf - self.perf) * 1000.0


class ArrivalScheduler:
    """Draws each level's arrivals and hands them to free users (one per sending process).

    ``streams`` is how many processes share the rate (1 locally, N workers);
    ``stream`` is this process's index among them, which says its share
    (:func:`~loadtest.load.arrivals.share_offsets`).
    """

    def __init__(
        self, load: "Load", clock: "LevelClock", recorder: "Recorder", *, duration_s: float,
        classes: Sequence[tuple[str, float]] = (),
    ) -> None:
        self.load = load
        #: ``workload.classes`` as (name, weight): a dropped arrival is drawn a class as a sent one is
        #: (:meth:`_drop`), so it counts against its class's error budget, not only the whole run's.
        self.classes = list(classes)
        self._class_rng = random.Random(f"{load.arrival_seed}-dropped-classes")
        self.clock = clock
        self.recorder = recorder
        self.duration_s = duration_s
        self.streams = 1
        self.stream = 0
        self.queue: gevent.queue.Queue = gevent.queue.Queue()
        #: Arrivals released and not yet finished (queued or being sent).
        self.busy = 0
        self._greenlet: gevent.Greenlet | None = None
        clock.listeners.append(self.level_changed)

    # -- levels -------------------------------------------------------------------------
    def level_changed(self, clock: "LevelClock") -> None:
        """A level started (draw its arrivals and start releasing them) or the load stopped."""
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        if clock.index < 0 or not clock.rate_rps:
            return
        offsets, payloads = self.arrivals(clock)
        self._greenlet = gevent.spawn(
            self._release, offsets, payloads, clock.index, float(clock.rate_rps), clock.start_perf, clock.start_wall
        )

    def arrivals(self, clock: "LevelClock") -> tuple[list[float], list | None]:
        """This process's send times for the level in force (s from its start), and what each sends (None: the workload's next)."""
        offsets = share_offsets(
            float(clock.rate_rps), self.duration_s, self.load.arrival, seed=self.load.arrival_seed,
            level_index=clock.index, streams=self.streams, stream=self.stream, burstiness=self.load.burstiness,
        )
        return offsets.tolist(), None

    def _release(self, offsets, payloads, level_index: int, rate: float, start_perf: float, start_wall: float) -> None:
        """Release each arrival at its time; arrivals already due go at once, in order."""
        warmup_end = self.clock.warmup_s
        for k, offset in enumerate(offsets):
            due = start_perf + offset
            wait = due - time.perf_counter()
            if wait > 0:
                gevent.sleep(wait)
            payload = payloads[k] if payloads is not None else None
            slot = Slot(level_index, rate, due, start_wall + offset, offset < warmup_end, payload)
            if self.busy >= self.cap:
                self._drop(slot)
                continue
            self.busy += 1
            self.queue.put(slot)

    def _drop(self, slot: Slot) -> None:
        rec = RequestRecord(start_wall=slot.wall, start_perf=slot.perf, e2e_ms=0.0)
        rec.fail("dropped", f"{self.busy} requests in flight in this process (load.max_in_flight: {self.load.max_in_flight})")
        self.recorder.add(rec, -1, slot.level_index, 0, slot.warmup, slot=slot, request_class=self._drop_class())

    def _drop_class(self) -> str | None:
        """The class a dropped arrival would have had: drawn by ``workload.classes``' weights, as a user
        draws a sent request's (:mod:`loadtest.workload.generator`). Without it the arrival counted in the
        run's error rate and in no class's, so a class judged by its own SLO never saw its drops."""
        if len(self.classes) < 2:
            return self.classes[0][0] if self.classes else None
        names, weights = zip(*self.classes)
        return self._class_rng.choices(names, weights)[0]

    @property
    def cap(self) -> int:
        """This process's share of ``load.max_in_flight`` (Locust spreads the users the same way)."""
        return max(1, -(-self.load.max_in_flight // max(1, self.streams)))

    # -- users --------------------------------------------------------------------------
    def take(self) -> Slot:
        """Block until an arrival is due and this user is the free one to send it."""
        return self.queue.get()

    def done(self) -> None:
        """The user finished sending a slot (whatever the outcome)."""
        self.busy = max(0, self.busy - 1)
