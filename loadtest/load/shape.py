"""The stepped load shape: hold each concurrency level for ``level_duration_s``.

Locust calls :meth:`SteppedShape.tick` about once a second; we answer with the
user count for the current step. Closed-loop concurrency is Locust's own model
(N users, each sending its next request when the last one ends), so a level is
simply "N users". Users are spawned at once (a high spawn rate) so that the
level is in force from its first second; ``warmup_s`` absorbs the ramp.
"""

from __future__ import annotations

import time
from typing import Callable

from locust import LoadTestShape

from loadtest.load.levels import LevelClock, LevelSpan

#: Users started per second when a level begins: effectively "all at once".
SPAWN_RATE = 10_000


class SteppedShape(LoadTestShape):
    """Runs ``levels`` in order, each for ``duration_s``; then stops the test."""

    abstract = False

    def __init__(
        self,
        levels: list[int],
        duration_s: float,
        clock: LevelClock,
        *,
        first_index: int = 0,
        refine: bool = False,
        on_level_change: Callable[[LevelSpan | None, LevelSpan | None], None] | None = None,
    ) -> None:
        super().__init__()
        self.levels = list(levels)
        self.duration_s = duration_s
        self.clock = clock
        self.first_index = first_index
        self.refine = refine
        self.on_level_change = on_level_change
        self.spans: list[LevelSpan] = []
        self._current: LevelSpan | None = None
        self._entered = 0.0

    def tick(self) -> tuple[int, float] | None:
        # Locust ticks about once a second, so a level starts at the first tick
        # after its predecessor has run its full duration: levels last
        # duration_s to duration_s + 1 s, never less.
        if self._current is None:
            step = 0 if not self.spans else len(self.levels)
        elif time.perf_counter() - self._entered >= self.duration_s:
            step = self._current.index - self.first_index + 1
        else:
            step = self._current.index - self.first_index
        if step >= len(self.levels):
            self.finish()
            return None
        if self._current is None or self._current.index != self.first_index + step:
            self._enter(step)
        return self.levels[step], SPAWN_RATE

    def finish(self) -> None:
        """End the current level now (the run is stopping)."""
        if self._current is not None:
            self._enter(None)

    def _enter(self, step: int | None) -> None:
        now = time.time()
        previous = self._current
        if previous is not None and previous.end_wall is None:
            previous.end_wall = now
        if step is None:
            self._current = None
        else:
            span = LevelSpan(
                index=self.first_index + step,
                concurrency=self.levels[step],
                start_wall=now,
                refine=self.refine,
            )
            self.spans.append(span)
            self._current = span
            self._entered = time.perf_counter()
            self.clock.set(span.index, span.concurrency, now)
        if self.on_level_change is not None and (previous is not None or step is not None):
            self.on_level_change(previous, self._current)
