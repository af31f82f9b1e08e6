"""The autoscaling recommendation in words: the paragraph the terminal, the report and summary.json give.

Why apart from :mod:`loadtest.analysis.autoscaling`: that module decides the numbers (the target per
replica, each signal's threshold and whether it separates the capacity level from the first failing
one); this one only says them, in closed loop (users) or open loop (req/s), with the caveats a reader
needs (a lower bound, a provisional verdict, too few scrapes, a placeholder to fill in).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from loadtest.analysis.results import Capacity, fmt_rate
from loadtest.analysis.server import ServerView
from loadtest.analysis.signals import ROLE_LABELS
from loadtest.analysis.thresholds import MIN_GAUGE_SCRAPES, MIN_SEPARATING_SCRAPES, PLACEHOLDER, fmt_signal, too_few_scrapes

if TYPE_CHECKING:
    from loadtest.analysis.autoscaling import Autoscaling, SignalRecommendation


def paragraph(result: Autoscaling, capacity: Capacity, server: ServerView | None) -> str:
    """The recommendation in words, for the report."""
    cap, fail = capacity.concurrency, capacity.first_failing
    if capacity.rate_rps is not None:
        parts = [_open_loop_sentence(result, capacity)]
    elif cap is None:
        return "No autoscaling threshold: no level held the SLOs, so there is no capacity to scale around."
    else:
        parts = _closed_loop_sentences(result, capacity)
    if server is None:
        parts.append("The server's metrics were not scraped, so only the client-side target is given.")
        return " ".join(parts)
    if result.fleet_sentence:
        parts.append(result.fleet_sentence)
    return " ".join(parts + _signal_sentences(result, fail if capacity.rate_rps is None else capacity.first_failing_rate_rps))


def _open_loop_sentence(result: Autoscaling, capacity: Capacity) -> str:
    """Open loop: the rate that holds, the one that breaks, and the rate to aim for per replica."""
    held, fail = capacity.rate_rps, capacity.first_failing_rate_rps
    text = f"At {fmt_rate(held)} req/s the SLOs hold"
    text += f"; at {fmt_rate(fail)} req/s the {capacity.binding or 'SLO'} breaks." if fail is not None else (
        " (every tested rate held, so these thresholds are a lower bound).")
    if capacity.verdict in ("uncertain", "client_saturated", "host_contended"):
        text += f" The capacity verdict is {capacity.verdict.replace('_', ' ')}: treat the numbers below as provisional."
    in_flight = f" (at capacity {capacity.mean_in_flight:.1f} requests were in flight on average)" if capacity.mean_in_flight else ""
    sustains, received = result.sustainable_rate_rps or math.inf, capacity.sent_rate_rps or math.inf
    text += f" Its queue grew there: the server sustains about {fmt_rate(sustains)} req/s." if (
        sustains < held and sustains <= received) else ""
    text += (f" Its measured window received {fmt_rate(round(received, 2))} req/s, not {fmt_rate(held)}: the target "
             "rests on what it received." if received < held and received < sustains else "")
    return text + (f" Headroom {result.headroom:.0%} ({result.headroom_source}): aim for "
                   f"{fmt_rate(result.target_rate_rps_per_replica)} req/s per replica{in_flight}.")


def _closed_loop_sentences(result: Autoscaling, capacity: Capacity) -> list[str]:
    cap, fail = capacity.concurrency, capacity.first_failing
    target = result.target_concurrency_per_replica
    parts = []
    between = [c for c in capacity.uncertain_levels if cap < c < (fail if fail is not None else float("inf"))]
    undecided = f" ({', '.join(map(str, between))} undecided)" if between else ""
    if fail is not None:
        parts.append(f"At {cap} users the SLOs hold{undecided}; at {fail} the {capacity.binding or 'SLO'} breaks.")
    else:
        parts.append(f"Every tested level held the SLOs (up to {cap} users), so these thresholds are a lower bound.")
    if capacity.verdict in ("uncertain", "client_saturated", "host_contended"):
        parts.append(f"The capacity verdict is {capacity.verdict.replace('_', ' ')}: treat the numbers below as provisional.")
    mean = result.mean_concurrency_per_replica()
    if mean is not None and mean != target:  # the forecast and the triggers work with the average
        parts.append(f"Headroom {result.headroom:.0%} ({result.headroom_source}): aim for {mean:g} concurrent users "
                     f"per replica on average ({target} where users are pinned to a replica).")
    else:
        parts.append(f"Headroom {result.headroom:.0%} ({result.headroom_source}): aim for {target} concurrent users per replica.")
    return parts


def _load_source(running: SignalRecommendation) -> str:
    """Where the running count at capacity came from, when not plainly the scrapes' median."""
    n, median = running.at_capacity.n, fmt_signal(running.at_capacity.p50, False)
    if running.basis == "time_mean":
        return f": the time average of {n} scrapes, whose median is {median}"
    if running.basis == "client_in_flight":
        return (f": the client's time average of requests in flight, which counts the same requests while none "
                f"waits; the {n} scrapes there, median {median}, are too few to average")
    if running.placeholder:
        return f": the median of only {n} scrapes, too few to measure a threshold on"
    return ""


def _signal_sentences(result: Autoscaling, fail: float | None) -> list[str]:
    """What the server reported at capacity, and the recommended server-side trigger."""
    parts: list[str] = []
    running = next((s for s in result.signals if s.role == "running"), None)
    waiting = next((s for s in result.signals if s.role == "waiting"), None)
    if running is not None and running.at_capacity.n:
        who = "each replica runs" if (result.replicas or 1) > 1 else "the server runs"
        averaged = running.basis in ("time_mean", "client_in_flight")
        runs = round(running.basis_value, 2) if averaged else running.at_capacity.p50
        seen = f"{who} {runs:g} request{'' if runs == 1 else 's'}" + (" on average" if averaged else "")
        if waiting is not None and waiting.at_capacity.n:
            queued = round(waiting.at_capacity.mean, 2) if averaged else waiting.at_capacity.p50
            seen += f" with {queued:g} waiting"
        where = f"the mean over replicas; {running.metric}" if who.startswith("each") else running.metric
        parts.append(f"At capacity {seen} ({where}{_load_source(running)}).")
    best = result.best_signal()
    if best is None:
        what = "read above 0" if any(s.at_capacity.n for s in result.signals) else "was measured"  # see _threshold
        parts.append(f"No known signal {what} at the capacity level, so no server-side trigger is recommended.")
        return parts
    label = ROLE_LABELS.get(best.role, best.role)
    rule = (
        "when any request waits" if best.role == "waiting" and best.threshold == 1.0
        else f"when {best.metric} > {PLACEHOLDER} per replica (to fill in: {best.at_capacity.n} scrapes at capacity "
        f"are too few to measure it, at least {MIN_GAUGE_SCRAPES})" if best.placeholder
        else f"when {best.metric} > {fmt_signal(best.threshold, best.role == 'kv_cache')} per replica"
    )
    extra = ""
    if running is not None and best.metric != running.metric and running.threshold is not None and not running.pinned:
        extra = f", or when running > {running.threshold:g} per replica"
    scrapes = (best.at_capacity.n, best.at_first_failing.n if best.at_first_failing is not None else 0)
    few = fail is not None and too_few_scrapes(best.at_capacity, best.at_first_failing)
    pinned = running is not None and running.pinned and best.metric != running.metric
    why = "it is the most direct signal that rises from the capacity level to the first failing one" if best.separates else (
        f"running requests are pinned at the server's batch limit ({running.at_capacity.p50:g} at capacity, with "
        f"requests waiting): they read the same from that many users up, while {best.metric} grows with the load "
        "above it" if pinned else
        f"the levels had too few scrapes to tell the capacity level from the first failing one ({scrapes[0]} and "
        f"{scrapes[1]}; at least {MIN_SEPARATING_SCRAPES} each: a shorter target.metrics.interval_s, or longer "
        "levels), so the most direct one is used" if few else
        "no signal rises between the capacity and the first failing level, so the most direct one is used" if fail is not None
        else "it is the most direct measure of load"
    )
    parts.append(f"Scale out {rule}{extra}: {label} is the recommended trigger because {why}.")
    return parts
