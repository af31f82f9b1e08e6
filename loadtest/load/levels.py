"""Which concurrency level is in force: the one piece of state users read per request.

The shape (on a local runner or the master) changes the level; users read it
when a request starts, so every record is tagged with the level it started in.
On a worker, the level arrives as a message from the master, and
:meth:`LevelClock.set` is called by the message handler instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class LevelSpan:
    """One level as it ran: written to run.json for the analyzer."""

    index: int
    concurrency: int
    start_wall: float
    end_wall: float | None = None
    refine: bool = False
    client: dict = field(default_factory=dict)
    #: Every look the load stage took at this level's verdict: {at_s, verdict, why}.
    looks: list = field(default_factory=list)
    #: Why the level ended and how long it ran: {ended, ran_s, verdict, why, looks, extended}.
    decision: dict = field(default_factory=dict)
    #: Wall time of the latest look: what the judge treats as "now" (and the end of a level it ends).
    looked_at: float | None = None
    #: Open loop: the offered rate (requests/s); None for a closed-loop (concurrency) level.
    rate_rps: float | None = None
    #: How the level's load was held after its window for the requests it measured (:mod:`hold`).
    hold: dict = field(default_factory=dict)
    #: The deciding look's percentile values and limits (:attr:`Decision.observed`): what
    #: ``--refine`` extrapolates from during the sweep. Not written to run.json, whose
    #: analysis recomputes every value from the records.
    observed: dict = field(default_factory=dict)
    #: While the level's hold runs (:mod:`hold`), its measured requests still running; None outside
    #: a hold. What the live view says of a level whose window has ended. Not written to run.json.
    holding: int | None = None
    #: True while a look at this level is being judged (from ``looked_at`` until its verdict, and
    #: ``end_wall`` if it ends the level, are set). Not written to run.json.
    looking: bool = False

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "concurrency": self.concurrency,
            "start_wall": self.start_wall,
            "end_wall": self.end_wall,
            "refine": self.refine,
            "client": self.client,
            "looks": self.looks,
            "decision": self.decision,
            "rate_rps": self.rate_rps,
            "hold": self.hold or None,
        }


class LevelClock:
    """The current level and when it started, in this process's clocks."""

    __slots__ = ("index", "concurrency", "start_perf", "start_wall", "warmup_s", "rate_rps", "listeners")

    def __init__(self, warmup_s: float) -> None:
        self.index = -1
        self.concurrency = 0
        self.start_perf = 0.0
        self.start_wall = 0.0
        self.warmup_s = warmup_s
        #: Open loop: the level's offered rate (None in closed loop).
        self.rate_rps: float | None = None
        #: Called after every :meth:`set` (the open-loop scheduler draws the level's arrivals).
        self.listeners: list = []

    def set(self, index: int, concurrency: int, start_wall: float | None = None, rate_rps: float | None = None) -> None:
        """Enter a level. ``start_wall`` comes from the master on a worker."""
        now_wall = time.time()
        now_perf = time.perf_counter()
        start_wall = now_wall if start_wall is None else start_wall
        self.index = index
        self.concurrency = concurrency
        self.start_wall = start_wall
        # Place the start on this process's monotonic clock (message delay is sub-ms locally).
        self.start_perf = now_perf - max(0.0, now_wall - start_wall)
        self.rate_rps = rate_rps
        for listener in self.listeners:
            listener(self)

    def clear(self) -> None:
        """No level is in force (between batches, at the end of the run)."""
        self.index = -1
        self.concurrency = 0
        self.rate_rps = None
        for listener in self.listeners:
            listener(self)

    def in_warmup(self, t_perf: float) -> bool:
        return t_perf - self.start_perf < self.warmup_s
