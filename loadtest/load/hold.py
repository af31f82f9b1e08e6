"""The hold: a level keeps its load until the requests it measured have finished.

A level's *window* (its measured span) ends when a look decides it, or at its
duration. The requests that started in the window are still running then: the
longest answers, and in a TTFT-bound level the queued ones. Were the next
level's users added at once, those requests would run their last tokens (or
wait for their slot) at the higher load and be booked, with their TPOT and
e2e, at the level where they started: TPOT at 4 users would read the 8-user
steps (issue 23: +45% with 16-token answers). ITL gaps can be given to the
level they arrive in; TPOT and e2e are per request and cannot be split.

So between the end of a level's window and the start of the next level, the
load stays as it was: the same users in closed loop, the same arrival rate in
open loop. The requests that start in the hold are not measured (they started
after the window); they only keep the load honest for those that are. The
measured ones that end in the hold are the level's ``spillover``. The hold ends as soon as no measured request is in flight,
and at the latest after :func:`hold_cap_s` (``target.timeout_s``, at most
:data:`HOLD_CAP_S`). A measured request still running at the cap is *cut* at
the hold's end by the analysis (``analysis/hold_cut.py``): it becomes a
censored request with what it had streamed by then, under the rules for every
cut request (``analysis/frame.py``), never a sample of the next level's load.

The same hold ends a batch (the last level of a sweep, each refine probe): its
requests finish at the load they ran under, where before only those waiting
for a first token were waited for.

Each level's hold goes to run.json as ``levels[].hold``: ``{start_wall,
end_wall, held_s, waited_for, ended, censored, cap_s}`` with ``ended`` one of
``drained`` (every measured request finished), ``cap`` (the cap was reached;
``censored`` of them were still running) or ``stopped`` (the run was stopped).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from loadtest.load.levels import LevelSpan

#: The longest a level is held for its measured requests (seconds), whatever ``target.timeout_s``.
HOLD_CAP_S = 30.0

#: The measured requests of a level still in flight now.
Pending = Callable[["LevelSpan"], int]


def hold_cap_s(timeout_s: float) -> float:
    """How long a hold may last: a request cannot outlive ``target.timeout_s``; and never past the cap."""
    return max(0.0, min(float(timeout_s), HOLD_CAP_S))


def measured_running(in_flight: "pd.DataFrame", span: "LevelSpan") -> int:
    """How many of ``span``'s measured requests are in ``in_flight`` (an in-flight snapshot).

    Measured: stamped with the level, not warm-up, and started (open loop:
    scheduled) before the window ended. Requests started in the hold do not count.
    """
    if span.end_wall is None or not len(in_flight):
        return 0
    index = in_flight["level_index"].to_numpy()
    warmup = in_flight["warmup"].to_numpy(dtype=bool)
    start = in_flight["start_wall"].to_numpy(dtype=float)
    if "schedule_lag_ms" in in_flight:
        lag = np.nan_to_num(in_flight["schedule_lag_ms"].to_numpy(dtype=float))
        start = start - lag / 1000.0
    return int(np.sum((index == span.index) & ~warmup & (start < span.end_wall)))


class Hold:
    """One level's hold: ask :meth:`over` until it says the next level may start."""

    def __init__(self, span: "LevelSpan", pending: Pending, cap_s: float) -> None:
        self.span = span
        self.pending = pending
        self.cap_s = cap_s
        self.start_wall = span.end_wall if span.end_wall is not None else time.time()
        self._start_perf = time.perf_counter() - max(0.0, time.time() - self.start_wall)
        self.waited_for = pending(span)
        span.holding = self.waited_for

    def over(self) -> bool:
        """True (and the hold is written to the span) once no measured request runs, or at the cap."""
        running = self.waited_for if self.waited_for == 0 else self.pending(self.span)
        self.span.holding = running
        if running == 0:
            self.finish("drained")
            return True
        if time.perf_counter() - self._start_perf >= self.cap_s:
            self.finish("cap", censored=running)
            return True
        return False

    def finish(self, ended: str, censored: int = 0) -> None:
        """Record the hold on the span (run.json ``levels[].hold``)."""
        end = time.time()
        self.span.holding = None
        self.span.hold = {
            "start_wall": self.start_wall,
            "end_wall": end,
            "held_s": round(max(0.0, end - self.start_wall), 3),
            "waited_for": self.waited_for,
            "ended": ended,
            "censored": censored,
            "cap_s": self.cap_s,
        }
