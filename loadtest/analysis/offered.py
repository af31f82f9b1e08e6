"""What a rate level's window was actually offered, against its nominal rate: the noise of a short window.

A level at ``r`` req/s draws its arrivals at random (:mod:`loadtest.load.arrivals`), so its measured
window of ``T`` s holds ``N`` of them, Poisson with mean ``r T``: it is offered ``N / T`` req/s,
about ``r ± sqrt(r / T)`` (one standard deviation). In a trial of 3 s windows the "10 req/s"
probe was offered 6.7 req/s, less than the "8" level before it, and the passing "11" got 9.9 while
``--refine`` stepped by 0.5 req/s against a noise of ±1.9; the capacity read "11 req/s". The
schedules are right; short windows are noisy. Gamma gaps of shape ``k`` (CV ``1 / sqrt(k)``)
spread the count by that CV times as much; constant arrivals (CV 0) offer the nominal rate to
within one arrival. A trace replay's arrivals are the trace's own (its window's start may be
quieter or burstier: :func:`loadtest.analysis.trace_levels.partial_replay_caveat`), not noise.

Why the arrivals are not made to hit the nominal count instead (exactly ``r T`` arrivals spread
uniformly over the window, which is Poisson given its count): the window's end is not known when
the schedule is drawn (a level ends when a look decides it, or runs longer until one does), and
pinning the count of every stretch removes the slow swings of real Poisson traffic that a server
must absorb, so the answer would flatter it. What the run measured is kept, and said:

* the capacity names the rate its window was offered (``capacity.offered_rate_rps``), and the
  autoscaling target rests on no more than it received (``capacity.sent_rate_rps``);
* :func:`offered_caveat`: a deciding level offered more than one standard deviation off its
  nominal rate is a warning, with the level length that holds it within :data:`CLOSE_SHARE`;
* :func:`refine_noise_rps`: ``--refine`` does not probe a rate whose distance from the bracket's
  ends is within that noise (no window this long can tell them apart), and
  :func:`bracket_caveat` says so wherever the bracket is that narrow.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from loadtest.analysis.results import LevelResult, fmt_rate

#: The offered rate is worth naming beside the nominal one when they differ by this share or more.
SHOWN_SHARE = 0.02
#: The level length advised holds a window's offered rate within this share of the nominal (1 sd).
CLOSE_SHARE = 0.05


def gaps_cv(arrival: str, burstiness: float | None = None) -> float:
    """The coefficient of variation of an arrival process's gaps: Poisson 1, gamma ``1/sqrt(k)``, constant 0."""
    if arrival == "constant":
        return 0.0
    if arrival == "gamma":
        return 1.0 / math.sqrt(float(burstiness or 1.0))
    return 1.0


def arrival_cv(run: Mapping[str, Any]) -> float | None:
    """The run's :func:`gaps_cv`; None in a trace replay. A run.json without its scenario reads as
    Poisson, the default arrival."""
    load = ((run.get("scenario") or {}).get("load") or {})
    if load.get("speedups") or run.get("trace"):
        return None
    return gaps_cv(str(load.get("arrival") or "poisson"), load.get("burstiness"))


def noise_rps(rate: float, window_s: float, cv: float) -> float:
    """One standard deviation of the rate a window of ``window_s`` s is offered at ``rate`` req/s."""
    if not (rate > 0 and window_s > 0):
        return math.inf
    return cv * math.sqrt(rate / window_s)


def window_for(rate: float, noise: float, cv: float) -> float:
    """The window (s) whose offered rate at ``rate`` varies by ``noise`` req/s (1 sd)."""
    return cv * cv * rate / (noise * noise) if noise > 0 else math.inf


def offered_note(level: LevelResult | None) -> str:
    """`` (its 3.0 s window was offered 9.9 req/s)``, for the capacity sentence; "" where it matches."""
    loop = (level.open_loop or {}) if level is not None else {}
    offered = loop.get("offered_rps")
    if level is None or level.speedup is not None or not level.rate_rps or offered is None or not math.isfinite(offered):
        return ""
    if abs(offered / level.rate_rps - 1) < SHOWN_SHARE:
        return ""
    return f" (its {level.window_s:.1f} s window was offered {offered:.3g} req/s)"


def deciding_levels(levels: Sequence[LevelResult], capacity: Any) -> list[LevelResult]:
    """The capacity level and the first failing one, where they are rate levels (not a trace's speedups)."""
    out = []
    for rate, status in ((getattr(capacity, "rate_rps", None), "pass"),
                         (getattr(capacity, "first_failing_rate_rps", None), "fail")):
        level = next((lv for lv in reversed(levels) if rate is not None and lv.rate_rps == rate
                      and lv.status == status and lv.speedup is None and lv.open_loop), None)
        if level is not None:
            out.append(level)
    return out


def _longer_levels(rate: float, cv: float, warmup_s: float) -> str:
    window = window_for(rate, CLOSE_SHARE * rate, cv)
    return f"load.min_level_duration_s of at least {math.ceil(warmup_s + window)} s"


def offered_caveat(levels: Sequence[LevelResult], capacity: Any, cv: float | None, warmup_s: float) -> str | None:
    """A deciding level whose window was offered more than one standard deviation off its nominal rate."""
    if not cv:
        return None
    parts, worst = [], None
    for level in deciding_levels(levels, capacity):
        offered = level.open_loop.get("offered_rps")
        sd = noise_rps(level.rate_rps, level.window_s, cv)
        if offered is None or not math.isfinite(sd) or abs(offered - level.rate_rps) <= sd:
            continue
        parts.append(f"at {fmt_rate(level.rate_rps)} req/s ({level.status}) the {level.window_s:.1f} s window was "
                     f"offered {offered:.3g} req/s ({offered / level.rate_rps - 1:+.0%}; its arrivals vary "
                     f"by ±{sd:.2g} req/s)")
        worst = level.rate_rps if worst is None else max(worst, level.rate_rps)
    if not parts:
        return None
    return (f"{'; '.join(parts)}: the verdict there is evidence about the rate offered, not the nominal one, "
            "and the gap is more than a window this short varies by (one standard deviation of its random "
            f"arrivals); longer levels fix it: {_longer_levels(worst, cv, warmup_s)} hold the offered rate within "
            f"±{CLOSE_SHARE:.0%} of the nominal. The arrivals are drawn from load.arrival_seed, so every run with "
            "the same seed draws this window again: the gap does not average out over nights")


def refine_noise_rps(low: LevelResult | Any, high: LevelResult | Any, cv: float | None) -> float:
    """The smallest step ``--refine`` takes between two rates: the noise of the longer window of the two,
    at the midpoint (0 without a window length or with regular arrivals)."""
    windows = [w for w in (getattr(low, "window_s", None), getattr(high, "window_s", None)) if w and w > 0]
    if not cv or not windows:
        return 0.0
    return noise_rps((low.rate_rps + high.rate_rps) / 2, max(windows), cv)


def bracket_levels(levels: Sequence[Any], pair: tuple[float, float]) -> tuple[Any, Any]:
    """The levels run at a bracket's two rates (the last of each)."""
    low = next(lv for lv in reversed(list(levels)) if getattr(lv, "rate_rps", None) == pair[0])
    high = next(lv for lv in reversed(list(levels)) if getattr(lv, "rate_rps", None) == pair[1])
    return low, high


def bracket_caveat(levels: Sequence[LevelResult], capacity: Any, cv: float | None, warmup_s: float) -> str | None:
    """The capacity and the first failing rate closer than their windows can tell apart: refine stops there."""
    low_rate, high_rate = getattr(capacity, "rate_rps", None), getattr(capacity, "first_failing_rate_rps", None)
    if not cv or low_rate is None or high_rate is None or getattr(capacity, "speedup", None) is not None:
        return None
    low, high = bracket_levels(levels, (low_rate, high_rate))
    sd = refine_noise_rps(low, high, cv)
    step = (high_rate - low_rate) / 2
    if not (0 < step <= sd):
        return None
    window = max(low.window_s, high.window_s)
    need = window_for((low_rate + high_rate) / 2, step, cv)
    return (f"the capacity ({fmt_rate(low_rate)} req/s) and the first failing rate ({fmt_rate(high_rate)}) are closer "
            f"than their {window:.1f} s windows can tell apart: a rate between them lies {step:.2g} req/s from either, "
            f"within the ±{sd:.2g} req/s by which the rate a window this short is offered varies (one standard "
            "deviation of its random arrivals), so --refine stops at such a bracket and the capacity is known to "
            f"about that much; windows of at least {math.ceil(need)} s (load.min_level_duration_s "
            f"{math.ceil(warmup_s + need)} s) can split it")
