"""Run a list of concurrency levels on a Locust runner inside this process.

This is Locust used as a library, the way ``locust/env.py`` and ``runners.py``
intend: an :class:`~locust.env.Environment` with our generated user class and
our :class:`~loadtest.load.shape.SteppedShape`, a local runner, and
``start_shape()``. We wait for the shape to end the test, then collect the level
spans (with the self-monitor's per-level health) for ``run.json``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import gevent
from locust.env import Environment
from locust.runners import STATE_STOPPED

from loadtest.load.levels import LevelClock, LevelSpan
from loadtest.load.monitor import SelfMonitor
from loadtest.load.recorder import Recorder
from loadtest.load.shape import SteppedShape
from loadtest.load.user import make_user_class
from loadtest.scenario import Scenario


@dataclass
class LevelRunContext:
    """What every level run of one ``loadtest run`` shares."""

    scenario: Scenario
    clock: LevelClock
    recorder: Recorder
    monitor: SelfMonitor
    continuous_usage: bool
    on_level_change: Callable[[LevelSpan | None, LevelSpan | None], None] | None = None


def run_levels(ctx: LevelRunContext, levels: list[int], *, first_index: int, refine: bool = False) -> list[LevelSpan]:
    """Run ``levels`` in order, ``level_duration_s`` each, and return their spans."""
    scenario = ctx.scenario

    def on_change(previous: LevelSpan | None, current: LevelSpan | None) -> None:
        if previous is not None:
            previous.client = ctx.monitor.cut()
        else:
            ctx.monitor.cut()  # discard the idle time before the first level
        if ctx.on_level_change is not None:
            ctx.on_level_change(previous, current)

    shape = SteppedShape(
        levels,
        scenario.load.level_duration_s,
        ctx.clock,
        first_index=first_index,
        refine=refine,
        on_level_change=on_change,
    )
    user_class = make_user_class(scenario, ctx.clock, ctx.recorder, continuous_usage=ctx.continuous_usage)
    env = Environment(user_classes=[user_class], shape_class=shape, host=scenario.target.base_url)
    runner = env.create_local_runner()
    runner.start_shape()
    # Bounded: the shape ends the test after len(levels) * duration (+1 s per tick).
    deadline = time.monotonic() + len(levels) * (scenario.load.level_duration_s + 2) + 30
    try:
        gevent.sleep(0.1)
        while runner.state != STATE_STOPPED and time.monotonic() < deadline:
            gevent.sleep(0.1)
    finally:
        shape.finish()  # close the last span first: requests cut from here on are "cancelled"
        runner.quit()
    return shape.spans
