"""Which injected faults hit a request: one seeded draw per request.

Every request draws the same five numbers in the same order, whatever its
kind and whatever the rates, so that with ``--seed`` the n-th request always
gets the same faults: a reliability test is reproducible run after run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from loadtest.mock.config import MockConfig


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """The faults drawn for one request (any combination may be true)."""

    fail: bool = False
    """Answer HTTP 500 before admission."""
    drop: bool = False
    """Cut the connection mid-way: no final chunk, no ``[DONE]``."""
    malformed: bool = False
    """Corrupt one content chunk mid-way (not valid JSON)."""
    stall: bool = False
    """Pause mid-way for ``stall_s`` while holding the batch slot."""
    hang: bool = False
    """Never answer: no status, no byte, until the client gives up (a wedged server)."""


NO_FAULTS = FaultPlan()


class FaultInjector:
    """Draws a :class:`FaultPlan` per request from one RNG seeded with ``--seed``."""

    def __init__(self, config: MockConfig) -> None:
        self._rng = random.Random(config.seed)
        self._rates = (
            config.fail_rate,
            config.drop_rate,
            config.malformed_rate,
            config.stall_rate,
            config.hang_rate,
        )
        self.enabled = any(rate > 0 for rate in self._rates)

    def draw(self) -> FaultPlan:
        if not self.enabled:
            return NO_FAULTS
        rnd = self._rng.random
        fail, drop, malformed, stall, hang = self._rates
        # Five draws, always, in this order: see the module docstring.
        return FaultPlan(
            rnd() < fail, rnd() < drop, rnd() < malformed, rnd() < stall, rnd() < hang
        )


def middle_chunk(n_chunks: int) -> int:
    """The index of the chunk where a "mid-stream" fault happens (0-based).

    It is ``n_chunks // 2``: for a 16-chunk stream, after 8 chunks were sent.
    A one-chunk stream has no middle, so the fault hits chunk 0.
    """
    return n_chunks // 2
