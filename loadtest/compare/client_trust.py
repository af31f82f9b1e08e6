"""Could the load generator's own timing error explain a change at a level it was flagged at?

A level is ``client_saturated`` in a run's summary for one of two reasons
(:mod:`loadtest.analysis.client_error`):

* the client was busy (its self-check's CPU, loop-lag or reader limits): its
  stamps may be late by any amount, so a slowdown at that level may be the
  client's and the gate holds a regression there as inconclusive;
* the client was quiet (``client_near_limit``: under half a core and not
  flagged by its self-check), and only a verdict sat within its *measured*
  timing error of its limit. Its stamps were late by at most that bound,
  which is what made the SLO verdict undecidable, and no more.

In the second case the gate need not be blind: the difference between two
runs' values can be off by at most the two runs' error bounds added, so a
latency change larger than that is the server's, whatever the client did. A
count (errors, valid outputs) or a throughput is not moved by a few ms of
stamping at all. Runs recorded before ``client_near_limit`` existed keep the
cautious answer.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from loadtest.analysis.client_error import SPANS, error_bound
from loadtest.analysis.slo import PERCENTILES
from loadtest.compare.rules import split_class


def timing_error_ms(levels: Sequence[Mapping[str, Any]], check: str) -> float | None:
    """The most the client's error could move ``check`` (``metric.pN``) between two of these runs (ms).

    Twice the largest bound of the runs that measured theirs: one run's value late by it, the
    other's early (a run without the tables, recorded before them, is taken to be no worse).
    None where a flagged run has no tables or the check is not a timed percentile.
    """
    metric, _, pct = split_class(check)[1].partition(".")  # a class's check: its metric's error
    if metric not in SPANS or pct not in PERCENTILES:
        return None
    bounds = []
    for lv in levels:
        client = lv.get("client") or {}
        if "stamp_delay_ms" in client:
            bounds.append(error_bound(client, metric, PERCENTILES[pct]))
        elif lv.get("client_saturated"):
            return None
    return 2.0 * max(bounds) if bounds else None


def client_explains(levels: Sequence[Mapping[str, Any] | None], check: str, kind: str,
                    change_abs: float) -> tuple[bool, str]:
    """(whether a flagged client could explain the change, what the message adds when it could not).

    ``levels``: every compared run's entry at the level (None where a run did not measure it);
    ``change_abs``: the change in the check's own unit (ms for a latency).
    """
    present = [lv for lv in levels if lv is not None]
    flagged = [lv for lv in present if lv.get("client_saturated")]
    if not flagged:
        return False, ""
    if not all(lv.get("client_near_limit") for lv in flagged):
        return True, ""  # a busy client (or a run recorded before the flag): its delay is not bounded
    if kind != "latency":
        return False, "; the load generator was quiet here, and its timing error does not move this figure"
    bound = timing_error_ms(present, check)
    if bound is None or not abs(change_abs) > bound:
        return True, ""
    return False, (f"; the load generator was quiet here, and its timing error (at most {bound:.1f} ms "
                   "between two runs) cannot explain this change")
