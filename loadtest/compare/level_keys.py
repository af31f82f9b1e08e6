"""How the gate matches and names a run's levels: by concurrent users, offered rate, or trace speedup.

A closed loop's level is its users (``levels[].concurrency``). An open loop's is its nominal rate in
requests/s (``levels[].rate_rps``; its ``concurrency`` is 0 at every level), and a trace replay's its
speedup of the trace window (``levels[].speedup``; its ``rate_rps`` is the window's mean rate times
that). Every summary level says which it is (``rate_rps`` and ``speedup`` are null in a closed
loop), so the key is read from the level itself; a comparison only ever holds runs of one mode
(``engine.require_same_mode``), so its keys are all of one unit.

Why: matched by users, every level of an open loop fell on one key ("0 users"), and only its largest
rate was compared. Why the *nominal* rate, not the achieved one (``open_loop.sent_rps``): the achieved
rate is one draw of the arrival process, different in every run, while the nominal rate is what the
scenario asked for, the same in every run of its fingerprint. A speedup is matched to 3 decimals (the
precision the analysis gives it, ``analysis.trace_levels.speedup_of``), a rate to 6 (as the scenario
generates a rate sweep).

The words: ``4 users`` (as the gate always wrote them), ``4 req/s``, ``1.5×``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from loadtest.analysis.results import fmt_rate
from loadtest.analysis.trace_levels import speedup_of

USERS, RATE, SPEEDUP = "users", "req/s", "×"
#: The unit of each load mode's levels (run.json ``load_mode``).
UNIT_OF_MODE = {"closed_loop": USERS, "open_loop": RATE, "trace_replay": SPEEDUP}
#: The load mode each unit belongs to (compare.json ``load_mode``).
MODE_OF_UNIT = {unit: mode for mode, unit in UNIT_OF_MODE.items()}
#: The summary's capacity key in each unit (``capacity.concurrency``, ``capacity.rate_rps``, ``capacity.speedup``).
CAPACITY_KEY = {USERS: "concurrency", RATE: "rate_rps", SPEEDUP: "speedup"}
#: A plot's axis title in each unit (compare.html, history.html).
AXIS_TITLE = {USERS: "concurrent users", RATE: "offered rate (req/s)", SPEEDUP: "speedup of the trace window (×)"}

#: A level's key: users (int), or a rate / speedup (float).
LevelKey = int | float


def level_key(level: Mapping[str, Any]) -> LevelKey | None:
    """A summary level's key: its speedup, else its nominal rate, else its users (None: none of them)."""
    speedup = level.get("speedup")
    if speedup is not None:
        return round(float(speedup), 3)
    rate = level.get("rate_rps")
    if rate is not None:
        return round(float(rate), 6)
    users = level.get("concurrency")
    return int(users) if users is not None else None


def window_key(concurrency: int, rate_rps: float | None, trace: Mapping[str, Any] | None) -> LevelKey:
    """The key of an analysis window (:class:`loadtest.analysis.windows.LevelWindow`), as its summary
    level will have it: run.json's ``trace`` turns a rate into the speedup the analysis reports."""
    if rate_rps is None:
        return int(concurrency)
    speedup = speedup_of(rate_rps, trace) if trace else None
    return round(float(speedup), 3) if speedup is not None else round(float(rate_rps), 6)


def window_unit(rates: Iterable[float | None], trace: Mapping[str, Any] | None) -> str:
    """The unit of analysis windows with these ``rate_rps``, keyed as :func:`window_key` keys them."""
    if not any(rate is not None for rate in rates):
        return USERS
    return SPEEDUP if (trace or {}).get("mean_rate_rps") else RATE


def unit_of(levels: Iterable[Mapping[str, Any]]) -> str:
    """The unit of a summary's levels: ``×`` when one has a speedup, ``req/s`` a rate, else ``users``."""
    levels = [lv for lv in levels if isinstance(lv, Mapping)]
    if any(lv.get("speedup") is not None for lv in levels):
        return SPEEDUP
    if any(lv.get("rate_rps") is not None for lv in levels):
        return RATE
    return USERS


def number(value: float, unit: str) -> str:
    """The level's number alone: ``4``, ``5.502`` (a rate: four significant digits), ``1.5``."""
    if unit == USERS:
        return str(int(value))
    if unit == RATE:
        return fmt_rate(float(value))
    return f"{float(value):g}"


def load_text(value: float, unit: str) -> str:
    """``4 users``, ``4 req/s``, ``1.5×``."""
    return f"{number(value, SPEEDUP)}×" if unit == SPEEDUP else f"{number(value, unit)} {unit}"


def load_list(values: Iterable[float], unit: str) -> str:
    """``2, 4 users``, ``2, 4 req/s``, ``0.5×, 1×``."""
    if unit == SPEEDUP:
        return ", ".join(load_text(v, unit) for v in values)
    return ", ".join(number(v, unit) for v in values) + f" {unit}"


def load_change(before: float, after: float, unit: str) -> str:
    """``4 → 2 users``, ``4 → 2 req/s``, ``2× → 1.5×``."""
    if unit == SPEEDUP:
        return f"{load_text(before, unit)} → {load_text(after, unit)}"
    return f"{number(before, unit)} → {number(after, unit)} {unit}"
