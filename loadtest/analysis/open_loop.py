"""Open-loop levels: was the schedule kept, and did the server keep up?

A rate level is only meaningful if the arrivals went out when they were due.
Three rates per level, each per second of measured window, tell the story:

* ``offered_rps``: arrivals scheduled in the window (sent, dropped or cut);
* ``sent_rps``: the ones actually sent (the achieved send rate). Below the
  offered rate only by ``dropped`` arrivals (``max_in_flight`` was reached);
* ``completed_rps``: successful requests that ended in the window shifted by
  a request's life (:mod:`served_span`; the window itself holds the
  completions of earlier sends, and a short window after a drained server too
  few of them). When it falls clearly behind the send rate (below
  :data:`KEEP_UP` of it) the server could not keep up: its queue grew through
  the level. When the shifted span cannot tell (``keep_up_told`` false: a hold
  cut short, too few sends) the level is not flagged.

The **send lag** (actual send − scheduled time) is the client's own delay:
users are never the bottleneck by construction (an arrival that finds none
free is dropped, not delayed), so a late send means the client's event loop
or CPU was too busy. Its p50/p99 and the count of sends later than
:data:`LATE_MS` are reported; when more than :data:`LATE_SHARE` of the sends
(and at least :data:`MIN_LATE`) were that late, the level is ``client_saturated`` (the latencies still include
the lag, since they are measured from the scheduled time, but they describe
the client as much as the server).

``mean_in_flight`` is the time-average number of requests in flight during
the window (each request's in-flight time clipped to the window, summed, over
the window's length). At the capacity rate it bridges to the closed-loop
answer (Little's law: in flight = rate × time in system) and to autoscaling.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from loadtest.analysis.results import fmt_rate
from loadtest.analysis.served_span import DROPPED, ServedSpan, served_span
from loadtest.analysis.windows import LevelWindow
from loadtest.metric_registry import BY_NAME, METRICS

#: A send later than this (ms) counts as late.
LATE_MS = 10.0
#: A level whose share of late sends exceeds this is client_saturated ...
LATE_SHARE = 0.01
#: ... if at least this many were late (one stall in a short, slow level is not a saturated client).
MIN_LATE = 3
#: Completions below this share of the send rate: the server could not keep up.
KEEP_UP = 0.9



def open_loop_stats(frame: pd.DataFrame, window: LevelWindow, p: int, span: ServedSpan | None = None) -> dict[str, Any]:
    """The open-loop figures of the level at window position ``p`` (see module doc)."""
    duration = window.duration_s
    pos = frame["pos"].to_numpy()
    measured = frame["measured"].to_numpy() & (pos == p)
    dropped = measured & (frame["error_kind"].to_numpy(dtype=object) == DROPPED)
    sent = measured & ~dropped
    ok = frame["ok"].to_numpy()
    if span is None:
        span = served_span(frame, window.window_start, window.end_wall, window.start_wall, window.decision,
                           sent & ~frame["cancelled"].to_numpy())
    end = frame["end_wall"].to_numpy(dtype=float)
    completed = ok & (end >= span.start) & (end < span.end)
    lag = frame["schedule_lag_ms"].to_numpy(dtype=float)[sent]
    lag = lag[~np.isnan(lag)]
    late = int((lag > LATE_MS).sum())

    def rate(n: int) -> float:
        return n / duration if duration > 0 else math.nan

    offered, achieved = rate(int(measured.sum())), rate(int(sent.sum()))
    done = int(completed.sum()) / span.seconds if span.seconds > 0 else math.nan
    # held against the sends the span's completions answer (after the requests in flight filled up)
    behind = bool(span.told and span.sent_rps > 0 and done < KEEP_UP * span.sent_rps)
    return {
        "rate_rps": window.rate_rps,
        "offered_rps": offered,
        "sent_rps": achieved,
        "completed_rps": done,
        "arrivals": int(measured.sum()),
        "sent": int(sent.sum()),
        "dropped": int(dropped.sum()),
        "server_kept_up": not behind,  # unless the server's own waiting count says no request waited (keep_up.py)
        "completions_behind": behind,
        "keep_up_told": span.told,
        "keep_up_sent_rps": span.sent_rps,
        "completed_span_s": span.seconds,
        "completed_shift_s": span.shift_s,
        "fill_s": span.fill_s,
        "schedule_lag_ms": {
            "n": int(len(lag)),
            "p50": float(np.percentile(lag, 50)) if len(lag) else math.nan,
            "p99": float(np.percentile(lag, 99)) if len(lag) else math.nan,
            "max": float(lag.max()) if len(lag) else math.nan,
            "late": late,
            "late_ms": LATE_MS,
        },
        "client_late": bool(late >= MIN_LATE and late / len(lag) > LATE_SHARE),
        "mean_in_flight": mean_in_flight(frame, window),
    }


def mean_in_flight(frame: pd.DataFrame, window: LevelWindow) -> float:
    """Time-average of the requests in flight (sent, not yet ended) over the measured window."""
    duration = window.duration_s
    if duration <= 0:
        return math.nan
    sent = frame["sent_wall"].to_numpy(dtype=float)
    end = frame["end_wall"].to_numpy(dtype=float)
    dropped = frame["error_kind"].to_numpy(dtype=object) == DROPPED
    lo = np.maximum(sent, window.window_start)
    hi = np.minimum(np.where(np.isnan(end), window.end_wall, end), window.end_wall)
    overlap = np.where(~dropped & ~np.isnan(sent), np.clip(hi - lo, 0.0, None), 0.0)
    return float(overlap.sum() / duration)


#: A short level hides an overload of at least this share above the sustainable rate: worth a warning.
HIDDEN_OVERLOAD = 0.05


#: The wait must grow at least this fast (s per s of level: 2% above the sustainable rate) to call the
#: queue growing, and at least :data:`GROWTH_LOW` at the lower end of its interval: a healthy level's
#: waits wander, and consecutive waits are correlated, which the slope's interval (made for
#: independent points) does not allow for.
GROWTH_FLOOR = 0.02
GROWTH_LOW = 0.01


def queue_growth(frame: pd.DataFrame, level: Any, sample_column: str) -> tuple[float, float, float] | None:
    """How fast the wait grew through the level: the Theil–Sen slope of ``sample_column`` (ms, measured
    from the scheduled time) against the arrival time, in seconds per second, with its 95% interval.

    At a rate ``R`` above what the server sustains, ``C``, its queue grows and each request waits
    about ``e = R / C − 1`` s more per second of the level (docs/method.md): the slope is ``e``, so
    ``C ≈ R / (1 + e)``. The margin under a limit (:func:`short_level_caveat`) only bounds ``e``;
    the slope measures it. A trial: 10.5 req/s to a server that serves 10 passed a 2.5 s level (TTFT
    p95 208 ms against 250) while the TTFT grew 65 ms a second. None with fewer than 10 samples.
    """
    from scipy.stats import theilslopes  # start-up time: SciPy only where a capacity rate is judged

    if level.window_start is None or sample_column not in frame:
        return None
    start = frame["start_wall"].to_numpy(dtype=float)
    wait = frame[sample_column].to_numpy(dtype=float) / 1000.0
    keep = (frame["measured"].to_numpy() & np.isfinite(wait) & (start >= level.window_start)
            & (start < level.end_wall))
    if int(keep.sum()) < 10 or np.ptp(start[keep]) <= 0:
        return None
    slope, _, low, high = theilslopes(wait[keep], start[keep], 0.95)
    return float(slope), float(low), float(high)


def short_level_caveat(levels: list, capacity: Any, slo: Any, frame: pd.DataFrame | None = None) -> str | None:
    """Open loop: how far above what the server sustains a level this short would still pass.

    At a rate ``R = (1 + e) C`` the queue grows and each request waits about ``e`` s more per
    second of the level (docs/method.md, "What a short level cannot see"), so a level of ``T``
    s fails on a wait limit only once ``e T`` exceeds the margin left under it. The margin
    at the capacity level (the limit of the first metric that counts the queue's wait, TTFT then e2e, less the p95 there) over its window
    gives the overload that would still have passed: when that is 5% or more, the capacity
    may be that much above the sustainable rate, and the warning says how to confirm it.
    """
    rate = getattr(capacity, "rate_rps", None)
    if rate is None:
        return None
    metric = next((m.name for m in METRICS if m.queue_wait and slo.tightest(m.name) is not None), None)
    level = next((lv for lv in reversed(levels) if lv.rate_rps == rate and lv.status == "pass"), None)
    if metric is None or level is None or not level.window_s or level.window_s <= 0:
        return None
    label = metric.removesuffix("_ms").upper()
    # A trace replay's arrivals follow the trace's own bursts, whose queue grows and drains by design.
    growth = queue_growth(frame, level, BY_NAME[metric].sample_column) \
        if frame is not None and getattr(capacity, "speedup", None) is None else None
    if growth is not None and growth[0] >= GROWTH_FLOOR and growth[1] >= GROWTH_LOW:
        e = growth[0]
        return (
            f"at {fmt_rate(rate)} req/s the {label} grew through the level by {e * 1000:.0f} ms a second "
            f"({growth[1] * 1000:.0f}-{growth[2] * 1000:.0f} ms): the server's queue was growing, so it does not "
            f"sustain this rate although the level was too short to break the limit; the sustainable rate is "
            f"about {rate / (1 + e):.3g} req/s; confirm the capacity with one longer level at it (docs/method.md, open loop)"
        )
    limit, p95 = slo.tightest(metric), level.metric(metric).percentile("p95")
    if not math.isfinite(p95) or p95 >= limit:
        return None
    hidden = (limit - p95) / 1000.0 / level.window_s
    if hidden < HIDDEN_OVERLOAD:
        return None
    return (
        f"at {fmt_rate(rate)} req/s the {label} p95 left {limit - p95:.0f} ms under its limit "
        f"over a {level.window_s:.0f} s window: a rate up to {hidden:.0%} above what the server sustains would "
        f"still pass a level this short (its queue grows too slowly to break the limit in time), so the "
        f"sustainable rate may be as low as {rate / (1 + hidden):.3g} req/s; confirm the capacity with one "
        "longer level at it (docs/method.md, open loop)"
    )
