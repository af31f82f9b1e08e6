"""Numbers read back from a ``summary.json`` level: what a comparison without records works from.

A percentile that is ``null`` while failed samples reached it is +inf (the
failures are slower than any served request), not missing.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from loadtest.compare.level_keys import LevelKey, level_key
from loadtest.compare.rules import COMPLETED_SHARE, split_class


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


def completed_share(level: Mapping[str, Any]) -> float:
    """A rate level's throughput as the gate judges it: ``open_loop.completed_rps / open_loop.sent_rps``.

    Why not output tokens/s: at a fixed offered rate the tokens/s are the client's schedule (rate ×
    tokens a request) for as long as the server keeps up, so they move with the arrival process's
    draws and say nothing of the server until it falls behind. What an open loop measures of the server
    at a rate is whether it completed what was sent (docs/method.md: ``completed_rps``, the successes
    counted over the served span, against the sends): about 1 while it keeps up, ``C / R`` at a rate
    ``R`` above the ``C`` it sustains. Goodput was the other candidate, but it is the same flow times
    the share that met the SLO's limits, so it repeats the latency checks through a threshold (a
    slowdown far below the limits never moves it) and changes with the SLO. NaN in a closed loop.
    """
    loop = level.get("open_loop") or {}
    done, sent = num(loop.get("completed_rps")), num(loop.get("sent_rps"))
    return done / sent if sent > 0 and math.isfinite(done) else math.nan


def scoped(level: Mapping[str, Any], check: str) -> tuple[Mapping[str, Any], str]:
    """Where ``check`` is read at a summary level: a request class's check (``chat.itl_ms.p95``) in the
    level's ``classes[chat]`` entry as ``itl_ms.p95`` (empty when the class has none there); else the level."""
    name, plain = split_class(check)
    if name is None:
        return level, check
    return ((level.get("classes") or {}).get(name) or {}), plain


def check_value(level: Mapping[str, Any], check: str) -> float:
    """A check's figure at a summary level: a percentile (+inf when failures reach it), the completed
    share, or a plain key (``output_tokens_per_s``, ``error_rate``, ``valid_output_rate``); NaN when none."""
    level, check = scoped(level, check)
    if check == COMPLETED_SHARE:
        return completed_share(level)
    if "." in check:
        metric, _, pct = check.partition(".")
        return point(level, metric, pct)
    return num(level.get(check))


def levels_by_key(summary: Mapping[str, Any] | None) -> dict[LevelKey, dict[str, Any]]:
    """Each measured level by its key (users, or a rate's nominal rate or speedup: :mod:`level_keys`):
    where a level ran twice, the entry with more requests (the one compared)."""
    out: dict[LevelKey, dict[str, Any]] = {}
    for level in (summary or {}).get("levels") or []:
        key = level_key(level)
        if level.get("status") == "no_data" or key is None:
            continue
        previous = out.get(key)
        if previous is None or (level.get("requests") or 0) > (previous.get("requests") or 0):
            out[key] = level
    return out
