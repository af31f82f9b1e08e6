"""Refinement: where to probe next to narrow the capacity down to one user.

A geometric sweep (1, 2, 4, 8, 16) brackets the capacity cheaply but coarsely:
"8 passes, 16 fails" leaves a factor of two. Bisection between the highest
passing level below the first failure and that failure halves the bracket with
each extra level (8|16 → 12 → 10 or 14 → …) until the two are adjacent
integers. The load stage calls this after each level; it is a pure function of
the verdicts so far, so it is trivially testable and restartable.
"""

from __future__ import annotations

from typing import Iterable, Protocol, Union


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
    """The next concurrency to probe by bisection, or None when the bracket is closed.

    >>> next_refine_level([(8, True), (16, False)])
    12
    >>> next_refine_level([(8, True), (16, False), (12, True)])
    14
    >>> next_refine_level([(4, True), (5, False)]) is None
    True
    """
    pair = bracket(results)
    if pair is None:
        return None
    low, high = pair
    if high - low <= 1:
        return None
    return (low + high) // 2


#: Default refine resolution on a rate: this share of the first failing rate.
RATE_RESOLUTION_SHARE = 0.05


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


def next_refine_rate(results: Iterable[object], resolution: float | None = None) -> float | None:
    """The next rate to probe by bisection, or None once the bracket is within ``resolution``.

    ``resolution`` (requests/s) defaults to :data:`RATE_RESOLUTION_SHARE` of the
    first failing rate. The probe is rounded to 3 significant digits past the
    resolution's own precision, so levels read cleanly in the report.
    """
    pair = rate_bracket(results)
    if pair is None:
        return None
    low, high = pair
    step = resolution if resolution is not None else RATE_RESOLUTION_SHARE * high
    if high - low <= step:
        return None
    return round((low + high) / 2, 6)
