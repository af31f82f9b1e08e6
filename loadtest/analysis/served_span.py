"""At a rate, over what span a level's served flow is counted: its window, shifted by a request's life.

A rate level's window ``[ws, we)`` holds its sends; their completions come a request's life ``L``
later. Counting the successes that *ended* in the window counts the sends of ``[ws − L, we − L)``,
and when the level began less than ``L`` before its window (``warmup_s`` 1 s against 1.7 s
requests, after a hold that had drained the server) the first ``L − warmup`` of those sends never
happened: a server that kept up at 8 req/s read 6.2 completions a second against 8.6 sends, and
was flagged as not keeping up (a trial's 2.56 s window, decided early). Each request's share of its
life in the window (``requests_per_s``, goodput) lags the same way, and weighs the warmup's and
the previous level's requests (which ran at another load) against the level's own.

So at a rate the flow is the successes that *ended* in ``[a + d, we + d)``: ``d`` the median life
(scheduled time to end) of the level's own successes, ``a`` the later of the window's start and
``f`` after the level's start, ``f`` the median time those successes spent in the server's batch
(first token to end: ``fill_s``; until then the running requests are still filling up from the
previous level's, so each one's life is still growing: completions spread out though the server
keeps up; the wait before the first token is left out, as a queue that was there before the level
is not the level's filling up), and no later than the end of the level's hold (the load stage holds the rate until every
measured request has ended, :mod:`loadtest.load.hold`, so the whole span ran at this level's rate).
A server that keeps up completes there the sends of ``[a, we)``, at their own rate, whatever the
window's length against ``L``; one that does not completes ``C`` a second throughout. Ends, not
shares of a life: a share's weight centres half a life after its send, not a whole one. Goodput is
that flow times the share of the level's own successes that met every limit (:func:`rate_weights`).

Whether the server kept up is told only where ``[a, we)`` is at least ``f`` and half the window
long, holds :data:`MIN_SENDS` sends, and the hold reached half of the span (a hold cut at its cap,
or a look taken while the level runs, may not): otherwise ``told`` is false and the level is
never flagged on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

#: A rate level's arrival that found ``max_in_flight`` requests in flight (never sent).
DROPPED = "dropped"

#: Fewer sends than this in a window: whether the completions kept up cannot be told.
MIN_SENDS = 10


@dataclass(frozen=True)
class ServedSpan:
    """Where a rate level's completions are counted, and the sends they are held against (wall s)."""

    start: float
    end: float
    #: How far the span lies after the sends: the median life of the level's successes (s).
    shift_s: float
    #: False when the span is too short, or the sends too few, to tell whether the server kept up.
    told: bool
    #: The sends the completions are held against: those of ``[sends_from, window end)`` ...
    sends_from: float = math.nan
    #: ... per second.
    sent_rps: float = math.nan
    #: The median time the level's successes spent in the server's batch (from the first token, s).
    fill_s: float = 0.0

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


def served_span(frame: pd.DataFrame, window_start: float, end_wall: float, level_start: float,
                decision: Mapping[str, Any] | None, cohort: np.ndarray) -> ServedSpan:
    """The span of a rate level whose sends in its window are ``cohort`` (a mask over ``frame``)."""
    window = max(0.0, end_wall - window_start)
    ok = cohort & frame["ok"].to_numpy()
    lives = frame["e2e_ms"].to_numpy(dtype=float)[ok] / 1000.0
    lives = lives[np.isfinite(lives)]
    shift = float(np.median(lives)) if len(lives) else 0.0
    # the time in the server's batch (from the first token): what the running requests fill up over
    ttft = frame["ttft_ms"].to_numpy(dtype=float)[ok] / 1000.0
    running = frame["e2e_ms"].to_numpy(dtype=float)[ok] / 1000.0 - np.where(np.isfinite(ttft), ttft, 0.0)
    running = running[np.isfinite(running)]
    fill = float(np.median(running)) if len(running) else 0.0
    hold = (decision or {}).get("hold") or {}
    horizon = hold.get("end_wall")
    horizon = float(horizon) if horizon is not None and math.isfinite(float(horizon)) else end_wall
    steady = min(max(window_start, level_start + fill), end_wall)
    judged = end_wall - steady
    sends = cohort & (frame["start_wall"].to_numpy(dtype=float) >= steady)
    told = judged >= fill and judged >= window / 2 and int(sends.sum()) >= MIN_SENDS
    if not told:  # the best the window has: all its sends, and their completions
        steady, judged, sends = window_start, window, cohort
    start, end = steady + shift, min(end_wall + shift, max(horizon, end_wall))
    if end <= start:
        return ServedSpan(window_start, end_wall, 0.0, False, fill_s=fill)
    told = told and end - start >= judged / 2
    return ServedSpan(start, end, shift, told, steady, int(sends.sum()) / judged if judged > 0 else math.nan, fill)


def level_cohort(frame: pd.DataFrame, index: int) -> np.ndarray:
    """The requests a rate level sent in its window: measured there, neither dropped nor cut by the harness."""
    kinds = frame["error_kind"].to_numpy(dtype=object)
    return (frame["measured"].to_numpy() & (frame["level_index"].to_numpy() == index)
            & ~frame["cancelled"].to_numpy() & (kinds != DROPPED))


def rate_weights(frame: pd.DataFrame, cohort: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Each request's weight in a rate level's served rates: the successes that ended in ``[lo, hi)``
    (whichever level sent them), spread evenly over the level's own successes.

    The count is the served flow (above); which requests it is made of is the level's own, each
    counted whole, so that goodput is the flow times the share of the level's successes that met
    every limit: the warmup's and the previous level's requests, which ran at another load, weigh
    nothing, and a request whose life straddles the window counts once, whatever the window's length.
    """
    ok = frame["ok"].to_numpy()
    end = frame["end_wall"].to_numpy(dtype=float)
    ended = int((ok & (end >= lo) & (end < hi)).sum())
    own = cohort & ok
    return np.where(own, ended / own.sum(), 0.0) if own.any() else np.zeros(len(frame))


def untold_caveat(levels: Sequence[Any], capacity: Any) -> str | None:
    """A warning where the capacity rate's window was too short to tell whether the server kept up."""
    rate = getattr(capacity, "rate_rps", None)
    level = next((lv for lv in reversed(levels) if rate is not None and lv.rate_rps == rate), None)
    loop = level.open_loop if level is not None else None
    if not loop or loop.get("keep_up_told", True) or level.speedup is not None:
        return None
    fill = loop.get("fill_s") or 0.0
    return (
        f"at {level.load_text} req/s the {level.window_s:.1f} s window was too short to tell whether the server "
        f"kept up: its requests spent {fill:.1f} s in the server, and the window held less than that once the "
        f"requests in flight had filled up after the level began (or fewer than {MIN_SENDS} sends); its "
        "completions, goodput and the cost forecast built on them describe requests that ran while the load was "
        f"still settling. Make the levels longer (load.min_level_duration_s at least warmup_s + "
        f"{max(2 * fill, 1.0):.0f} s) or warmup_s at least {fill:.1f} s"
    )
