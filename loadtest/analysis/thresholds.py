"""One signal's scale-out threshold from its values at the capacity level, and how a signal's value is written.

``value at capacity × (1 − headroom)``, by the signal's role (analysis/autoscaling.py says why):
kept apart from the choice of the recommended signal so that what a threshold is set on can
change without touching how the trigger is picked or how a fleet's share is taken.
"""

from __future__ import annotations

import math

from loadtest.analysis.server import SignalStats
from loadtest.analysis.signals import Signal

#: Waiting below this (p50) at capacity counts as "nothing waits": arrivals sit in the
#: queue until the next engine step, so a scrape now and then sees one in passing.
NOTHING_WAITS = 0.5


def fmt_signal(value: float | None, fraction: bool) -> str:
    """A server signal's value as the thresholds' sentences and the report's tables show it (one
    format, so a threshold cell and its sentence agree: they once read 2.3% and "above 2%")."""
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.1%}" if fraction else f"{value:g}"


def signal_threshold(
    signal: Signal, cap: SignalStats, fail: SignalStats | None, headroom: float, typical: float
) -> tuple[float | None, str]:
    """The scale-out threshold for one signal, and why (one sentence).

    ``typical`` is the signal's largest median over the passing levels: for waiting requests,
    whether requests queue while the SLO still holds.
    """
    if cap.n == 0 or math.isnan(cap.p50):
        return None, "no sample at the capacity level"
    frac = signal.is_fraction
    at_cap = f"at capacity the server reports p50 {fmt_signal(cap.p50, frac)} (p95 {fmt_signal(cap.p95, frac)})"
    at_fail = (
        f", at the first failing level p50 {fmt_signal(fail.p50, frac)} (p95 {fmt_signal(fail.p95, frac)})"
        if fail is not None and fail.n
        else ""
    )
    if signal.role == "waiting":
        if typical < NOTHING_WAITS:
            if fail is not None and fail.n and fail.p50 >= NOTHING_WAITS:
                why = "requests rarely wait while the SLO holds (median 0) and wait once it breaks: scale out as soon as requests wait"
            else:
                why = "requests rarely wait while the SLO holds (median 0): scale out as soon as requests wait"
            return 1.0, f"{at_cap}{at_fail}; {why} (this fires at the edge, without headroom of its own)."
        below = round(cap.p50 * (1 - headroom), 2)
        value = max(1.0, below)
        # a count under 1 is no trigger: floored there, the threshold is not "20% below" anything
        how = (f"{headroom:.0%} below" if below >= 1.0 else
               f"the least a count of requests can trigger on; {headroom:.0%} below the median would be {below:g}")
        return value, (
            f"{at_cap}{at_fail}; requests already wait while the SLO holds (arrivals queue for the next step), "
            f"so waiting is a weak trigger: scale out above {value:g} waiting per replica ({how})."
        )
    value = round(cap.p50 * (1 - headroom), 3 if frac else 2)
    return value, f"{at_cap}{at_fail}; scale out above {fmt_signal(value, frac)} per replica, {headroom:.0%} below the value at capacity."
