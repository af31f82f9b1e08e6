"""How long a Locust user pauses after a refused connection or a 429 (no Locust import: testable alone)."""

from __future__ import annotations

#: The longest a user pauses after a refused connection or a 429.
MAX_BACKOFF_S = 2.0
#: The shortest, even when a 429 says ``Retry-After: 0``.
MIN_BACKOFF_S = 0.05


def backoff_s(retry_after_s: float | None, failures_in_a_row: int) -> float:
    """How long a user waits after its ``failures_in_a_row``-th refused connection or 429.

    Without a pause a user facing a closed port or a rate limiter spins, writing
    thousands of identical records a second and starving the other users of
    CPU. A 429's Retry-After is honoured, but never below ``MIN_BACKOFF_S``
    (``Retry-After: 0`` would otherwise be a busy loop) nor above
    ``MAX_BACKOFF_S``; without one the wait doubles from 100 ms. Every failed
    attempt is still recorded and counts against the SLO.
    """
    if retry_after_s is not None:
        return min(max(retry_after_s, MIN_BACKOFF_S), MAX_BACKOFF_S)
    return min(MIN_BACKOFF_S * 2 ** min(failures_in_a_row, 5), MAX_BACKOFF_S)
