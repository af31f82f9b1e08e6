"""Refinement: where to probe next to narrow the capacity down to one user.

A geometric sweep (1, 2, 4, 8, 16) brackets the capacity cheaply but coarsely:
"8 passes, 16 fails" leaves a factor of two. Bisection between the highest
passing level below the first failure and that failure halves the bracket with
each extra level (8|16 → 12 → 10 or 14 → …) until the two are adjacent
integers. The load stage calls this after each level; it is a pure function of
the verdicts so far, so it is trivially testable and restartable.

**Probes placed by the measured slope.** Latency percentiles usually rise
smoothly with load between two levels (ITL grows by a decode step's per-sequence
cost for each user), so the line through the two nearest measured points says
roughly where a check reaches its limit. Two places use it:

* in the sweep (:func:`probe_before`): after a pass, when the line through the
  two highest passing levels reaches a limit before the sweep's next level, the
  first level predicted to fail is probed first. If it fails, the higher sweep
  level is never run (at 16 users a 16-token answer holds the load for 5 s more);
  if it passes, the sweep goes on as declared;
* in refinement (:func:`next_refine_level`): the probe between the bracket's
  ends is the interpolated crossing rather than the midpoint, kept at least a
  quarter of the bracket from either end, so a wrong slope still shrinks the
  bracket by a quarter a probe.

The answer is never taken from the line: every level is measured and judged as
any other, and capacity is still the highest pass below the first failure with
the bracket closed to adjacent integers. A line that is wrong (a step in TTFT
when the slots fill, noise in a p95) costs at most a level, never the answer.

**Below a lowest level that fails.** When the sweep's first level already fails
for certain there is no pass to bisect from, and refine used to stop there ("a
lower first level would bracket the capacity"), leaving the user to guess one and
run again. It now halves the load below it (:func:`probe_below`) until a level
does not fail, then bisects as usual: users down to 1; a rate (or a trace's
speedup) down to :data:`RATE_FLOOR_SHARE` of the lowest declared rate, since a
server that refuses everything would otherwise be probed to the probe limit at
rates whose windows hold ever fewer requests. An *undecided* lowest level is not
probed below: longer levels would decide it, and a lower one may pass for reasons
that say nothing of it. No load is probed twice: a probe that measured no request
(its verdict ignored) is not chosen again.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Protocol, Sequence, Union


class _HasVerdict(Protocol):
    concurrency: int

    @property
    def passed(self) -> bool | None: ...


Result = Union[_HasVerdict, tuple[int, "bool | None"]]


def bracket(results: Iterable[Result]) -> tuple[int, int] | None:
    """(highest pass below the first failure, first failure), or None without such a pair.

    Accepts :class:`~loadtest.analysis.results.LevelResult` objects or
    ``(concurrency, passed)`` pairs; ``passed=None`` (no data) is ignored, and
    an uncertain level counts as *not* passing, as it does for the capacity:
    the bracket is (the capacity, the first level that did not pass), so the
    probes go where the capacity can still move.
    """
    verdicts: dict[int, bool] = {}
    for item in results:
        if isinstance(item, tuple):
            concurrency, passed = item
        else:
            concurrency, passed = item.concurrency, item.passed
        if passed is not None:
            verdicts[int(concurrency)] = bool(passed)
    fails = [c for c, ok in verdicts.items() if not ok]
    if not fails:
        return None
    first_fail = min(fails)
    passes = [c for c, ok in verdicts.items() if ok and c < first_fail]
    if not passes:
        return None
    return max(passes), first_fail


def next_refine_level(results: Iterable[Result]) -> int | None:
    """The next concurrency to probe, or None when the bracket is closed.

    Bisection on ``(concurrency, passed)`` pairs; on LevelResults, the
    interpolated crossing of their checks (see the module doc).

    >>> next_refine_level([(8, True), (16, False)])
    12
    >>> next_refine_level([(8, True), (16, False), (12, True)])
    14
    >>> next_refine_level([(4, True), (5, False)]) is None
    True
    """
    results = list(results)
    pair = bracket(results)
    if pair is None:
        below = probe_below(list(_statuses(results, rate=False).items()), 1.0, users=True)
        return None if below is None or already_run(results, below, rate=False) else int(below)
    low, high = pair
    if high - low <= 1:
        return None
    middle = (low + high) // 2
    values = {int(item.concurrency): check_values(item) for item in results if not isinstance(item, tuple)}
    if not values.get(low) or not values.get(high):
        return middle
    at = crossing([(low, values[low]), (high, values[high])], extrapolate=False)
    if at is None:
        return middle
    margin = max(1, math.ceil((high - low) / 4))
    return min(max(math.floor(at) + 1, low + margin), high - margin)


#: One level's percentile checks: check key -> (measured value, limit).
Values = Mapping[str, tuple[float, float]]


def check_values(result: object) -> dict[str, tuple[float, float]]:
    """A LevelResult's finite percentile checks as ``{key: (value, limit)}`` (the error budget left out)."""
    out: dict[str, tuple[float, float]] = {}
    for check in getattr(result, "checks", None) or ():
        if check.percentile is None or not (math.isfinite(check.value) and math.isfinite(check.limit)):
            continue
        key = f"{check.class_name}.{check.name}" if check.class_name else check.name
        out[key] = (float(check.value), float(check.limit))
    return out


def crossing(points: Sequence[tuple[int, Values]], *, extrapolate: bool = True) -> float | None:
    """The lowest concurrency at which the line through the two highest ``points`` reaches a limit.

    Per check present at both points and rising between them. ``extrapolate``:
    beyond the higher point (the sweep); otherwise only between the two (refine).
    None when no check rises towards its limit.
    """
    if len(points) < 2:
        return None
    (c1, v1), (c2, v2) = sorted(points, key=lambda p: p[0])[-2:]
    if c2 <= c1:
        return None
    best: float | None = None
    for key, (y2, limit) in v2.items():
        if key not in v1:
            continue
        y1 = v1[key][0]
        slope = (y2 - y1) / (c2 - c1)
        if slope <= 0 or not math.isfinite(slope):
            continue
        at = c1 + (limit - y1) / slope
        if at <= c1 or (not extrapolate and at >= c2) or (extrapolate and at <= c2):
            continue
        best = at if best is None else min(best, at)
    return best


def probe_before(passes: Sequence[tuple[int, Values]], following: int) -> int | None:
    """In the sweep, after a pass: a level to probe before ``following``, or None.

    ``passes``: the passing levels so far with their values. The probe is the
    first integer beyond where the line through the two highest passes reaches
    a limit, when that lies strictly between the highest pass and ``following``.

    >>> probe_before([(4, {"itl_ms.p95": (92.0, 191.0)}), (8, {"itl_ms.p95": (164.0, 191.0)})], 16)
    10
    >>> probe_before([(4, {"ttft_ms.p95": (40.0, 150.0)}), (8, {"ttft_ms.p95": (39.0, 150.0)})], 16) is None
    True
    """
    if len(passes) < 2:
        return None
    top = max(c for c, _ in passes)
    at = crossing(passes)
    if at is None:
        return None
    probe = math.floor(at) + 1
    return probe if top < probe < following else None


#: Default refine resolution on a rate: this share of the first failing rate.
RATE_RESOLUTION_SHARE = 0.05
#: Below a failing lowest rate, refine probes down to this share of the lowest declared rate (module doc).
RATE_FLOOR_SHARE = 1 / 8


def probe_below(statuses: Sequence[tuple[float, str]], floor: float, *, users: bool = False) -> float | None:
    """Half the lowest load when it fails for certain and half of it is not below ``floor``; else None.

    ``statuses``: ``(load, status)`` of the levels with a verdict (``pass``, ``fail``,
    ``uncertain``). ``users``: halved to a whole number, down to 1 (``floor`` is then 1).

    >>> probe_below([(4.0, "fail"), (8.0, "fail")], 1.0, users=True)
    2.0
    >>> probe_below([(3.0, "fail")], 1.0, users=True)
    1.0
    >>> probe_below([(1.0, "fail")], 1.0, users=True) is None
    True
    >>> probe_below([(4.0, "uncertain"), (8.0, "fail")], 1.0, users=True) is None
    True
    >>> probe_below([(2.0, "fail")], 0.25)
    1.0
    >>> probe_below([(0.3, "fail")], 0.25) is None
    True
    """
    if not statuses:
        return None
    lowest, status = min(statuses, key=lambda ls: ls[0])
    if status != "fail":
        return None
    if users:
        return float(max(1, math.floor(lowest / 2))) if lowest > 1 else None
    return None if halving_passes_floor(lowest, floor) else round(lowest / 2, 6)


def halving_passes_floor(rate: float, floor: float) -> bool:
    """Would half of ``rate`` fall below ``floor``? Within the 6 decimals rates are kept to: a trace's
    speedups are rates rounded so (2× of a window at 3.522 req/s is 7.044, and an eighth of 8× is
    3.5225 where half of 2× is 3.522), and an exact comparison stopped refine an octave early."""
    return rate / 2 < floor - 1e-6 * max(1.0, abs(floor))


def lowest_declared_rate(results: Iterable[object]) -> float | None:
    """The lowest rate the sweep declared (a refine probe's is not), the floor's reference; None without one."""
    rates = [float(r) for item in results
             if (r := getattr(item, "rate_rps", None)) is not None and not getattr(item, "refine", False)]
    return min(rates) if rates else None


def _statuses(results: Sequence[object], *, rate: bool) -> dict[float, str]:
    """Each load's verdict as a status word, the worst where a load ran twice; levels without data left out.

    Pairs read ``True`` as a pass and ``False`` as a failure; a LevelResult gives its ``status``."""
    worst = {"pass": 0, "uncertain": 1, "fail": 2}
    out: dict[float, str] = {}
    for item in results:
        if isinstance(item, tuple):
            load, passed = float(item[0]), item[1]
            status = None if passed is None else ("pass" if passed else "fail")
        else:
            value = getattr(item, "rate_rps", None) if rate else getattr(item, "concurrency", None)
            if value is None:
                continue
            load, status = float(value), getattr(item, "status", None)
        if status not in worst:
            continue
        if load not in out or worst[status] > worst[out[load]]:
            out[load] = status
    return out


def already_run(results: Sequence[object], load: float, *, rate: bool) -> bool:
    """Whether a level at ``load`` ran already, with a verdict or not (a probe is never run twice)."""
    for item in results:
        value = item[0] if isinstance(item, tuple) else getattr(item, "rate_rps" if rate else "concurrency", None)
        if value is not None and math.isclose(float(value), load, rel_tol=1e-6):
            return True
    return False


def rate_bracket(results: Iterable[object]) -> tuple[float, float] | None:
    """(highest passing rate below the first failure, first failing rate), or None.

    The same rule as :func:`bracket` on open-loop levels (``rate_rps``);
    closed-loop levels (no rate) are ignored.
    """
    verdicts: dict[float, bool] = {}
    for item in results:
        rate = getattr(item, "rate_rps", None)
        passed = getattr(item, "passed", None)
        if rate is not None and passed is not None:
            verdicts[float(rate)] = bool(passed) and verdicts.get(float(rate), True)
    fails = [r for r, ok in verdicts.items() if not ok]
    if not fails:
        return None
    first_fail = min(fails)
    passes = [r for r, ok in verdicts.items() if ok and r < first_fail]
    return (max(passes), first_fail) if passes else None


def next_refine_rate(results: Iterable[object], resolution: float | None = None, cv: float | None = None) -> float | None:
    """The next rate to probe by bisection, or None once the bracket is within ``resolution``, or once
    the probe would lie within its window's noise of the bracket's ends.

    ``resolution`` (requests/s) defaults to :data:`RATE_RESOLUTION_SHARE` of the
    first failing rate. ``cv``, the arrival gaps' coefficient of variation
    (:func:`loadtest.analysis.offered.arrival_cv`; None: no floor), sets the floor: a
    window of ``T`` s at ``r`` req/s is offered ``r ± cv·sqrt(r/T)``, so a probe half
    a bracket from its ends, when that half is within this noise (at the longer of
    the ends' windows), could not be told from them whatever its verdict
    (:func:`loadtest.analysis.offered.bracket_caveat` says so). ``--rate-resolution``
    does not go below it.
    """
    from loadtest.analysis.offered import bracket_levels, refine_noise_rps  # numpy: only when a run refines

    results = list(results)
    pair = rate_bracket(results)
    if pair is None:
        declared = lowest_declared_rate(results)
        if declared is None:
            return None
        below = probe_below(list(_statuses(results, rate=True).items()), RATE_FLOOR_SHARE * declared)
        return None if below is None or already_run(results, below, rate=True) else below
    low, high = pair
    step = resolution if resolution is not None else RATE_RESOLUTION_SHARE * high
    if high - low <= step:
        return None
    if (high - low) / 2 <= refine_noise_rps(*bracket_levels(results, pair), cv):
        return None
    return round((low + high) / 2, 6)
