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
