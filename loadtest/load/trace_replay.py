"""Trace replay: each level sends a trace window's requests at the trace's own times, divided by a speedup.

A level of speedup ``s`` is an open-loop level (:mod:`loadtest.load.open_loop`)
whose arrivals are not drawn from a random process but read from the trace:
row ``i`` of the window is due ``offset_i / s`` after the level starts. So it
keeps every open-loop guarantee: the schedule is fixed before the level
starts, latency is measured from the scheduled time, each send's lag is
recorded, and an arrival beyond ``load.max_in_flight`` fails as ``dropped``.
Each request is the row's (:meth:`loadtest.workload.Workload.trace_request`):
its input length, ``max_tokens`` = its output length, its shared blocks.

A level that runs longer than the window at its speedup (``period_s / s``)
replays the window again from the start: repetition ``r`` of row ``i`` is due
at ``(r · period_s + offset_i) / s``, so the mean rate stays the window's ×
``s`` however long the judge holds the level. Each repetition's prompts are
salted apart (:mod:`loadtest.workload.trace_prompt`), so a repetition never
finds the previous one's prefixes cached.

Workers: arrival ``k`` of the merged schedule (counting rows over
repetitions) goes to the sending process ``k mod N``; each process releases
only its own, at the same times, so the schedule the server sees is the
trace's, whatever the number of workers.

The level's rate (what the shape, run.json's ``rate_rps`` and the analysis
see) is the window's mean rate × ``s``; the speedup is that rate divided by the
mean rate (:class:`loadtest.load.modes.TraceReplay`, and the analysis reads it
from run.json's ``trace``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from loadtest.load.open_loop import ArrivalScheduler
from loadtest.workload.trace import Trace, TraceArrival

if TYPE_CHECKING:
    from loadtest.load.levels import LevelClock
    from loadtest.load.recorder import Recorder
    from loadtest.scenario import Load


def replay_offsets(trace: Trace, speedup: float, horizon_s: float, level: int, streams: int = 1, stream: int = 0) -> tuple[list[float], list[TraceArrival]]:
    """This process's share of the level's schedule: send times (s from the level's start) and the rows they send."""
    if not speedup > 0:
        return [], []
    n = len(trace.rows)
    reps = max(1, math.ceil(horizon_s * speedup / trace.period_s))
    offsets: list[float] = []
    arrivals: list[TraceArrival] = []
    base = trace.offsets_s
    for rep in range(reps):
        shift = rep * trace.period_s
        first = (stream - rep * n) % streams  # the first row of this repetition that is ours
        for i in range(first, n, streams):
            t = (shift + base[i]) / speedup
            if t >= horizon_s:
                break
            offsets.append(t)
            arrivals.append(TraceArrival(i, level, rep))
    return offsets, arrivals


class TraceScheduler(ArrivalScheduler):
    """An :class:`ArrivalScheduler` whose arrivals are the trace's, at the level's speedup."""

    def __init__(self, load: "Load", clock: "LevelClock", recorder: "Recorder", *, duration_s: float, trace: Trace) -> None:
        super().__init__(load, clock, recorder, duration_s=duration_s)
        self.trace = trace

    def arrivals(self, clock: "LevelClock") -> tuple[list[float], list | None]:
        speedup = float(clock.rate_rps) / self.trace.mean_rate_rps
        return replay_offsets(self.trace, speedup, self.duration_s, clock.index, max(1, self.streams), self.stream)
