"""Trace replay in the analysis: each rate level as the speedup of the trace window it replayed.

A trace-replay level runs as a rate (the window's mean rate × its speedup,
:mod:`loadtest.load.trace_replay`); run.json's ``trace.mean_rate_rps`` is the
rate at speedup 1, so the speedup of a level is its rate divided by it. With
the speedups marked, :func:`loadtest.analysis.capacity.find_capacity` reads
the capacity as a speedup (``capacity.speedup``) and names levels as "2×".
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from loadtest.analysis.results import LevelResult


def speedup_of(rate_rps: float | None, trace: Mapping[str, Any] | None) -> float | None:
    """The speedup a rate level replayed (3 decimals: the precision --refine probes to), or None."""
    mean = (trace or {}).get("mean_rate_rps")
    if rate_rps is None or not mean:
        return None
    return round(float(rate_rps) / float(mean), 3)


def mark_speedups(levels: Sequence[LevelResult], trace: Mapping[str, Any] | None) -> None:
    """Set each level's ``speedup`` (and its classes') from run.json's ``trace``; nothing without one."""
    if not trace:
        return
    for level in levels:
        level.speedup = speedup_of(level.rate_rps, trace)
        for sub in level.classes.values():
            sub.speedup = level.speedup


#: A level that replayed less than this share of the trace window is a partial replay (see below).
WHOLE_WINDOW = 0.9


def partial_replay_caveat(levels: Sequence[LevelResult], capacity: Any, trace: Mapping[str, Any] | None) -> str | None:
    """The capacity level replayed only the start of the trace window: say so, and what it offered.

    Each level replays the window from its start at its speedup, so a level of ``T`` s at ``s×``
    covers the first ``T × s`` s of a window of ``P``. Shorter than the window, it is judged on
    that part only, which may be quieter or burstier than the whole: a trial's 3.125× level
    covered the first 11 s of a 60 s window and was offered 9.49 req/s, where the window's mean at
    that speed is 12.97, and the capacity read "holds 3.125× the traffic of the trace window".
    """
    speedup, period = getattr(capacity, "speedup", None), float((trace or {}).get("period_s") or 0.0)
    level = next((lv for lv in reversed(levels) if speedup is not None and lv.speedup == speedup and lv.status == "pass"), None)
    if level is None or period <= 0 or level.start_wall is None or level.end_wall is None:
        return None
    replayed = (level.end_wall - level.start_wall) * speedup
    if replayed >= WHOLE_WINDOW * period:
        return None
    offered = (level.open_loop or {}).get("offered_rps")
    rates = (f" (offered {offered:.3g} req/s, against {level.rate_rps:.3g} for the whole window at this speed)"
             if offered and level.rate_rps else "")
    return (f"at {speedup:g}× the level replayed only the first {replayed:.0f} s of the {period:.0f} s trace window{rates}: "
            f"the capacity holds for that part of the trace; levels of at least {period / speedup:.0f} s at it "
            "(min_level_duration_s) replay the whole window")
