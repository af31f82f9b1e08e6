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
