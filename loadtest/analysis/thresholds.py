"""One signal's scale-out threshold: which value at capacity it is set on, and the threshold itself.

A threshold is ``value at capacity × (1 − headroom)`` (analysis/autoscaling.py says why). This
module decides what "value at capacity" may honestly be, the **basis**:

* **closed loop: the scrapes' median** (``p50``). The users hold the requests in flight at their
  count, so a running-requests gauge sits at it (or at the batch limit) and leaves it only in the
  moment between one request's end and that user's next; a few scrapes read it, and its median is
  the count the users hold, the figure the users-per-replica target also gives.
* **open loop and trace replay: the scrapes' time-weighted mean** (``time_mean``, from at least
  :data:`MIN_GAUGE_SCRAPES` scrapes). Arrivals are random, so the count in flight wanders within
  a level from 0 to several times its average, and an autoscaler's ``ceil(total / threshold)``
  follows its average over time (Little's law's requests in flight), not its median: a trial's
  trace replay read a median of 0.5 running where 1.6 were in flight on average.
* **fewer scrapes than that, running requests: the client's own time average of requests in
  flight** (``client_in_flight``), per replica. The client counts every request sent and not yet
  ended, over the whole window, so it is what the running gauge counts plus the waiting one (the
  trial found running + waiting equal to the records' count at every scrape). It stands for the
  running gauge only when the waiting gauge read 0 at every scrape at capacity; otherwise the queue
  is in it too, by an amount the few scrapes cannot tell.
* **otherwise, nothing** (``None``): the threshold is left out (a placeholder the user fills) rather
  than written from 3 to 7 scrapes of a moving count. A KV cache fraction, token counts, a
  scenario's own signal have no client-side equivalent.

"Any request waits" (waiting threshold 1) reads no magnitude off the scrapes, so it needs no basis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from loadtest.analysis.server import SignalStats
from loadtest.analysis.signals import Signal

#: Waiting below this (p50) at capacity counts as "nothing waits": arrivals sit in the
#: queue until the next engine step, so a scrape now and then sees one in passing.
NOTHING_WAITS = 0.5
#: An open loop's threshold is read off the server's gauge from this many scrapes at the capacity
#: level: the number docs/server-view.md asks of a level for a signal to separate (8), for the same
#: reason (a median or mean of 3 scrapes of a count that moves with each arrival is a draw, not the load).
MIN_GAUGE_SCRAPES = 8
#: A signal is said to rise from the capacity level to the first failing one only from this many
#: scrapes at each: a trial's levels, decided in a few seconds at the default 1 s interval, had 3,
#: whose medians aliased with the 1 s request cycle (running read 8 at both 8 and 10 users, waiting
#: 0 then 2), and "scale out when any request waits" was recommended for a server where, over 16
#: scrapes, one or two already waited at 8 users. With fewer, no signal separates, the most direct
#: one is used, and the sentence says why.
MIN_SEPARATING_SCRAPES = 8
#: What the manifests and the sentences write where no threshold was measured.
PLACEHOLDER = "<THRESHOLD>"


@dataclass(frozen=True)
class Basis:
    """The value at capacity a threshold is set on (None: none measured well enough), its kind, and
    the words for it: what the scrapes at capacity read, and what follows the first failing level's."""

    value: float | None
    kind: str | None  # "p50", "time_mean", "client_in_flight"; None: no threshold
    words: str
    note: str = ""


def fmt_signal(value: float | None, fraction: bool) -> str:
    """A server signal's value as the thresholds' sentences and the report's tables show it (one
    format, so a threshold cell and its sentence agree: they once read 2.3% and "above 2%")."""
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.1%}" if fraction else f"{value:g}"


def threshold_basis(
    signal: Signal,
    cap: SignalStats,
    open_loop: bool = False,
    client_in_flight: float | None = None,
    waiting_at_cap: SignalStats | None = None,
) -> Basis:
    """The basis of ``signal``'s threshold (module doc). ``client_in_flight`` is the client's time
    average of requests in flight at the capacity level per replica (open loop only);
    ``waiting_at_cap`` the server's waiting gauge there (per pod)."""
    frac = signal.is_fraction
    if cap.n == 0 or math.isnan(cap.p50):
        return Basis(None, None, "no sample at the capacity level")
    seen = f"at capacity the server reports p50 {fmt_signal(cap.p50, frac)} (p95 {fmt_signal(cap.p95, frac)})"
    if not open_loop:
        return Basis(cap.p50, "p50", seen)
    if cap.n >= MIN_GAUGE_SCRAPES and math.isfinite(cap.mean):
        return Basis(cap.mean, "time_mean", (
            f"at capacity the server reports {fmt_signal(round(cap.mean, 3), frac)} on average over {cap.n} scrapes "
            f"(p50 {fmt_signal(cap.p50, frac)}, p95 {fmt_signal(cap.p95, frac)})"),
            "; arrivals at random move the count, and an autoscaler follows its average, not its median")
    seen += f" over only {cap.n} scrape{'' if cap.n == 1 else 's'}"
    few = (f"; {cap.n} scrape{' is' if cap.n == 1 else 's are'} too few (at least {MIN_GAUGE_SCRAPES}) to average a "
           "count that moves with each arrival")
    if signal.role != "running":
        return Basis(None, None, seen, f"{few}, and no count of the client's measures this signal")
    if client_in_flight is None or not math.isfinite(client_in_flight):
        return Basis(None, None, seen, f"{few}, and the client's time average of requests in flight is not known")
    if waiting_at_cap is None or not waiting_at_cap.n:
        return Basis(None, None, seen, (f"{few}; the client's time average of requests in flight counts waiting "
                                        "requests too, and no waiting count was scraped to show that none waited"))
    if waiting_at_cap.max > 0:
        return Basis(None, None, seen, (f"{few}; the client's time average of requests in flight counts waiting "
                                        f"requests too, and up to {fmt_signal(waiting_at_cap.max, False)} waited there"))
    value = round(client_in_flight, 3)
    return Basis(value, "client_in_flight", seen, (
        f"{few}; the client's own time average of requests in flight at capacity, {value:g} per replica, counts the "
        "same requests (every request sent and not yet ended, over the whole window; the server's waiting "
        "count read 0 at every scrape, so none of them waited)"))


def any_waiting_rule(signal: Signal, typical: float) -> bool:
    """Waiting requests where none typically wait while the SLO holds: "any request waits", threshold 1."""
    return signal.role == "waiting" and typical < NOTHING_WAITS


def signal_threshold(
    signal: Signal, cap: SignalStats, fail: SignalStats | None, headroom: float, typical: float,
    basis: Basis | None = None,
) -> tuple[float | None, str]:
    """The scale-out threshold for one signal, and why (one sentence); None where none was measured.

    ``typical`` is the signal's largest median over the passing levels: for waiting requests,
    whether requests queue while the SLO still holds. ``basis`` defaults to the median at capacity.
    """
    basis = basis or threshold_basis(signal, cap)
    if cap.n == 0 or math.isnan(cap.p50):
        return None, "no sample at the capacity level"
    frac = signal.is_fraction
    at_fail = (
        f", at the first failing level p50 {fmt_signal(fail.p50, frac)} (p95 {fmt_signal(fail.p95, frac)})"
        if fail is not None and fail.n
        else ""
    )
    if any_waiting_rule(signal, typical):
        if fail is not None and fail.n and fail.p50 >= NOTHING_WAITS:
            why = "requests rarely wait while the SLO holds (median 0) and wait once it breaks: scale out as soon as requests wait"
        else:
            why = "requests rarely wait while the SLO holds (median 0): scale out as soon as requests wait"
        # the rule reads no magnitude off the scrapes, so whatever the basis, they are said plainly
        at_cap = f"at capacity the server reports p50 {fmt_signal(cap.p50, frac)} (p95 {fmt_signal(cap.p95, frac)})"
        return 1.0, f"{at_cap}{at_fail}; {why} (this fires at the edge, without headroom of its own)."
    at_cap = f"{basis.words}{at_fail}{basis.note}"
    if basis.value is None:
        return None, (f"{at_cap}: no threshold is written ({PLACEHOLDER} in autoscaling.yaml, to fill in); "
                      "more scrapes per level (a shorter target.metrics.interval_s, or longer levels) measure one.")
    of = {"p50": "the value", "time_mean": "the average", "client_in_flight": "the client's average"}[basis.kind]
    if signal.role == "waiting":
        below = round(basis.value * (1 - headroom), 2)
        value = max(1.0, below)
        # a count under 1 is no trigger: floored there, the threshold is not "20% below" anything
        median = "median" if basis.kind == "p50" else "average"
        how = (f"{headroom:.0%} below" if below >= 1.0 else
               f"the least a count of requests can trigger on; {headroom:.0%} below the {median} would be {below:g}")
        return value, (
            f"{at_cap}; requests already wait while the SLO holds (arrivals queue for the next step), "
            f"so waiting is a weak trigger: scale out above {value:g} waiting per replica ({how})."
        )
    value = round(basis.value * (1 - headroom), 3 if frac else 2)
    if not value > 0:  # "> 0 per replica" fires on any traffic (a profile's one-user run over two replicas read 0)
        return None, f"{at_cap}; a threshold at 0 fires on any traffic: the capacity level ran too little load to set one."
    return value, f"{at_cap}; scale out above {fmt_signal(value, frac)} per replica, {headroom:.0%} below {of} at capacity."


def too_few_scrapes(cap: SignalStats, fail: SignalStats | None) -> bool:
    """Too few scrapes at either level to say a signal rises between them (:data:`MIN_SEPARATING_SCRAPES`);
    a level with none is not "few": a signal without samples there separates nothing anyway."""
    return any(s is not None and 0 < s.n < MIN_SEPARATING_SCRAPES for s in (cap, fail))
