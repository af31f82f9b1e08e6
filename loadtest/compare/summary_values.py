"""Numbers read back from a ``summary.json`` level: what a comparison without records works from.

A percentile that is ``null`` while failed samples reached it is +inf (the
failures are slower than any served request), not missing.
"""

from __future__ import annotations

import math
from typing import Any, Mapping


def num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def pair(value: Any) -> tuple[float, float]:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return (num(value[0]), num(value[1]))
    return (math.nan, math.nan)


def point(level: Mapping[str, Any], metric: str, pct: str) -> float:
    """A percentile from a summary level; null with failed samples means +inf (failures reach it)."""
    stats = level.get(metric) or {}
    value = stats.get(pct)
    if value is None:
        return math.inf if (stats.get("n") or 0) > 0 and (stats.get("n_failed") or 0) > 0 else math.nan
    return float(value)


def ci(level: Mapping[str, Any], metric: str, pct: str) -> tuple[float, float]:
    return pair(((level.get(metric) or {}).get("ci") or {}).get(pct))


def levels_by_concurrency(summary: Mapping[str, Any] | None) -> dict[int, dict[str, Any]]:
    """Each measured concurrency's level: where a level ran twice, the entry with more requests (the one compared)."""
    out: dict[int, dict[str, Any]] = {}
    for level in (summary or {}).get("levels") or []:
        if level.get("status") == "no_data" or level.get("concurrency") is None:
            continue
        previous = out.get(int(level["concurrency"]))
        if previous is None or (level.get("requests") or 0) > (previous.get("requests") or 0):
            out[int(level["concurrency"])] = level
    return out
