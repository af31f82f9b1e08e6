"""Tick the load shape ten times a second, not once.

Locust's runner asks a ``LoadTestShape`` for its user count once a second
(``Runner.shape_worker``: ``gevent.sleep(1)`` between ticks). Our shape does
more than count users at a tick: it takes the looks that are due and ends a
level's hold as soon as its last measured request finishes. At one tick a
second every look and every hold ends up to a second late, which over a sweep
of five levels and a few refine probes is most of the time to an answer spent
waiting for a clock. :func:`tick_often` gives the runner the same loop with a
shorter sleep; everything else about it (what a tick returns, how the runner
starts users on a change, how a ``None`` stops it) is Locust's.
"""

from __future__ import annotations

import logging

import gevent
from locust.runners import STATE_INIT, STATE_RUNNING, STATE_SPAWNING, Runner

#: Seconds between two ticks of the shape (Locust's own: 1 s).
TICK_S = 0.1

log = logging.getLogger(__name__)


def tick_often(runner: Runner, interval_s: float = TICK_S) -> None:
    """Replace ``runner``'s shape worker with one that ticks every ``interval_s``."""

    def shape_worker() -> None:
        while runner.state in (STATE_INIT, STATE_SPAWNING, STATE_RUNNING):
            shape = runner.environment.shape_class
            current = shape.tick() if shape is not None else None
            if current is None:
                log.info("Shape test stopping")
                runner.stop()
                runner.shape_greenlet = None
                runner.shape_last_tick = None
                return
            if runner.shape_last_tick != current:
                user_count, spawn_rate = current[0], current[1]
                runner.start(user_count=user_count, spawn_rate=spawn_rate)
                runner.shape_last_tick = current
            gevent.sleep(interval_s)

    runner.shape_worker = shape_worker  # type: ignore[method-assign]
