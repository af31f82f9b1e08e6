"""A rate the server does not sustain never passes, and nothing is planned above what it sustains.

At a rate ``R`` above what the server sustains, ``C``, its queue grows by ``R − C`` requests a
second for as long as the rate lasts, so the TTFT grows without bound: a finite window only
catches it before it breaks a limit (a trial: 8 req/s to a server that serves 6.67, a 4.5 s
window, TTFT p95 1,007 ms under ``--slo ttft_ms.p95=1200``: "capacity ≥ 8 req/s", and an
autoscaling target of 7.6 req/s per replica, above what a replica serves). Such a level fails the
check ``sustained_rate`` when both signs of a growing queue are there, so that a healthy level
is never failed by noise:

* its TTFT (else e2e, from the scheduled time) grew through the level, significantly
  (:func:`loadtest.analysis.open_loop.queue_growth`, the same test as the queue-growth warning:
  2% of a second per second or more, the lower end of its 95% interval 1% or more);
* and its completions fell short of the sends beyond what the window can explain
  (``open_loop.server_kept_up`` false where ``keep_up_told``: :mod:`served_span`).

The check's value is the rate the server sustains, ``R / (1 + slope)``, its limit the offered
rate. Not in a trace replay, whose queue grows and drains with the trace's own bursts.

Where the capacity level itself shows the growth (too little to fail it), the autoscaling target
rate is held to that sustainable rate, less the headroom: :func:`sustainable_at_capacity`.
"""

from __future__ import annotations

import math

from typing import Any, Sequence

import pandas as pd

from loadtest.analysis.open_loop import GROWTH_FLOOR, GROWTH_LOW, queue_growth
from loadtest.analysis.results import Check, LevelResult, fmt_rate
from loadtest.analysis.slo import SloSpec
from loadtest.analysis.verdict import SUSTAINED_CHECK, level_status
from loadtest.metric_registry import BY_NAME, METRICS

__all__ = ["SUSTAINED_CHECK", "judge_sustained", "sustained_check", "sustainable_at_capacity"]


def growth_metric(slo: SloSpec | None) -> str:
    """The wait whose growth is measured: the SLO's first queue-wait metric with a limit, else TTFT."""
    named = next((m.name for m in METRICS if m.queue_wait and slo is not None and slo.tightest(m.name) is not None),
                 None)
    return named or "ttft_ms"


def _growing(frame: pd.DataFrame, level: LevelResult, metric: str) -> tuple[float, float, float] | None:
    growth = queue_growth(frame, level, BY_NAME[metric].sample_column)
    if growth is None or growth[0] < GROWTH_FLOOR or growth[1] < GROWTH_LOW:
        return None
    return growth


def sustained_check(level: LevelResult, frame: pd.DataFrame, slo: SloSpec | None = None) -> Check | None:
    """The failing ``sustained_rate`` check of a rate level whose queue grew (see module doc), else None."""
    loop = level.open_loop
    if (loop is None or level.rate_rps is None or level.speedup is not None
            or not loop.get("keep_up_told", False) or loop["server_kept_up"]):
        return None
    metric = growth_metric(slo)
    growth = _growing(frame, level, metric)
    if growth is None:
        return None
    e, low, high = growth
    rate = level.rate_rps
    label = metric.removesuffix("_ms").upper()
    # The queue grows at (sent − served) a second, so its wait grows e = sent / served − 1 seconds a
    # second: served = sent / (1 + e), from what was sent, not the nominal rate. A trial's seeded
    # window sent 1.10 req/s at a nominal 2, and "sustains about 1.83 req/s" sat beside "0.73 req/s
    # completed against 1.10 sent".
    sent = loop.get("keep_up_sent_rps", loop.get("sent_rps"))
    arrivals = float(sent) if sent is not None and math.isfinite(float(sent)) and float(sent) > 0 else rate
    sustains = arrivals / (1 + e)
    reason = (
        f"queue grew through the level: its {label} rose {e * 1000:.0f} ms a second ({low * 1000:.0f}-"
        f"{high * 1000:.0f} ms) and {loop['completed_rps']:.2f} req/s completed against "
        f"{loop.get('keep_up_sent_rps', loop['sent_rps']):.2f} sent once the requests in flight had filled up; the server sustains about {sustains:.3g} req/s, so at {fmt_rate(rate)} req/s the {label} grows "
        "without bound, and a finite window's pass is not a pass"
    )
    return Check(
        name=SUSTAINED_CHECK, metric=SUSTAINED_CHECK, percentile=None, value=sustains,
        ci=(arrivals / (1 + high), arrivals / (1 + low)), limit=rate, verdict="fail", n=int(loop["sent"]),
        low_n=False, reason=reason,
    )


def judge_sustained(level: LevelResult, frame: pd.DataFrame, slo: SloSpec | None = None) -> LevelResult:
    """Add the failing ``sustained_rate`` check where it applies, and the level's status with it."""
    check = sustained_check(level, frame, slo)
    if check is not None:
        level.checks.append(check)
        level.status = level_status(level.requests, level.checks)
    return level


def sustainable_at_capacity(levels: Sequence[LevelResult], capacity: Any, frame: pd.DataFrame | None,
                            slo: SloSpec | None = None) -> float | None:
    """The rate the server sustains, measured at the capacity level by its queue's growth; None without one."""
    rate = getattr(capacity, "rate_rps", None)
    if rate is None or frame is None:
        return None
    level = next((lv for lv in reversed(levels) if lv.rate_rps == rate and lv.status == "pass"), None)
    if level is None or level.speedup is not None or level.window_start is None:
        return None
    growth = _growing(frame, level, growth_metric(slo))
    return rate / (1 + growth[0]) if growth is not None else None
