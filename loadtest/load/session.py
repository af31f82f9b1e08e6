"""Run batches of concurrency levels on one Locust runner.

This is Locust used as a library, the way ``locust/env.py`` and ``runners.py``
intend: one :class:`~locust.env.Environment` with our generated user class, a
runner (local, or a master that drives workers), and for each batch of levels
a fresh :class:`~loadtest.load.shape.SteppedShape` started with
``start_shape()``. A ``loadtest run`` uses one session for the main sweep and
for every refine probe, so workers stay connected between them.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import gevent
import gevent.event
import pandas as pd
from locust.env import Environment
from locust.runners import STATE_STOPPED, Runner

from loadtest.load.hold import hold_cap_s, measured_running
from loadtest.load.levels import LevelClock, LevelSpan
from loadtest.load.monitor import SelfMonitor
from loadtest.load.recorder import Recorder
from loadtest.analysis.classes import class_slos
from loadtest.analysis.decide import LookSchedule, requests_for_a_look
from loadtest.analysis.refine import probe_before
from loadtest.analysis.slo import SloSpec
from loadtest.load.open_loop import ArrivalScheduler
from loadtest.load.modes import ClosedLoop, LoadMode, load_mode
from loadtest.load.shape import Decide, SteppedShape
from loadtest.load.stopping import stop_users_reliably
from loadtest.load.ticks import tick_often
from loadtest.load.user import UserSettings, make_user_class
from loadtest.scenario import Scenario

if TYPE_CHECKING:
    import pandas as pd

#: How long a background thread may hold the GIL before the event loop gets it.
SWITCH_INTERVAL_S = 0.0005


def tune_interpreter() -> None:
    """Keep the interpreter from delaying the event loop that stamps chunks.

    - Imports (pandas, pyarrow, locust) leave hundreds of thousands of objects;
      a full collection walking them pauses the loop for tens of ms, which shows
      up as a false inter-chunk gap. ``gc.freeze()`` hides them from the collector.
    - The record sink works in a background thread; with CPython's default
      5 ms switch interval it could keep the loop waiting for the GIL for 5 ms.
    """
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(SWITCH_INTERVAL_S)


LevelChange = Callable[[LevelSpan | None, LevelSpan | None], None]


def library_options(**extra: object) -> argparse.Namespace:
    """The few ``parsed_options`` Locust's runners read when used as a library.

    ``headless=False`` makes a finished shape *stop* the runner (so the next
    batch can start) instead of quitting it; ``enable_rebalancing`` moves users
    of a lost worker onto the remaining ones, so a run survives worker loss.
    """
    return argparse.Namespace(
        headless=False, enable_rebalancing=True, web_base_path="", tags=None, exclude_tags=None, **extra
    )


@dataclass
class LoadSession:
    """One runner for a whole run; :meth:`run_levels` runs one batch of levels."""

    scenario: Scenario
    clock: LevelClock
    recorder: Recorder
    monitor: SelfMonitor
    settings: UserSettings
    on_level_change: LevelChange | None = None
    #: Set (by a signal handler) to end the run early; records are kept.
    stop_requested: gevent.event.Event = field(default_factory=gevent.event.Event)
    #: Who asked for that stop first (:meth:`request_stop`): run.json's ``stopped_by`` and ``stop_signal``.
    stop_cause: tuple[str, str | None] | None = None
    #: Judges a running level on the records so far; None: every level lasts level_duration_s.
    decide: Decide | None = None
    #: The requests in flight now (see :data:`loadtest.analysis.decide.IN_FLIGHT_COLUMNS`).
    in_flight: Callable[[], "pd.DataFrame"] | None = None
    env: Environment = field(init=False)
    runner: Runner = field(init=False)
    #: Open loop: releases each level's arrivals to this process's users (None in closed loop).
    scheduler: ArrivalScheduler | None = field(init=False, default=None)
    #: Closed or open loop (:mod:`loadtest.load.modes`): the levels' kind, the users' pacing, the shape.
    mode: LoadMode = field(init=False)
    _look_requests: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.mode = load_mode(self.scenario)
        self.scheduler = self.make_scheduler()
        user_class = make_user_class(self.scenario, self.clock, self.recorder, self.settings, self.scheduler)
        self.env = Environment(user_classes=[user_class], host=self.scenario.target.base_url, parsed_options=library_options())
        stop_users_reliably(self.env)
        self.runner = self.create_runner()
        tick_often(self.runner)  # looks and holds end on time, not at Locust's next 1 s tick
        tune_interpreter()

    def request_stop(self, by: str, signal_name: str | None = None) -> None:
        """End the run early, as asked by ``by`` ("signal", with the signal's name, or "web_ui").

        Only the first cause is kept: a second Ctrl-C, or a SIGTERM after a Stop, does not
        rewrite why the run stopped.
        """
        if self.stop_cause is None:
            self.stop_cause = (by, signal_name)
        self.stop_requested.set()

    def create_runner(self) -> Runner:
        return self.env.create_local_runner()

    def make_scheduler(self) -> ArrivalScheduler | None:
        """What tells this process's users when to send (the mode's; a master has none: its workers do)."""
        return self.mode.scheduler(self.clock, self.recorder)

    def level_changed(self, previous: LevelSpan | None, current: LevelSpan | None) -> None:
        """Close the previous level's health record; tell whoever listens."""
        health = self.monitor.cut()
        if previous is not None:
            previous.client = health
        if self.on_level_change is not None:
            self.on_level_change(previous, current)

    @property
    def schedule(self) -> LookSchedule:
        load = self.scenario.load
        return LookSchedule(load.min_duration_s, load.level_duration_s, load.max_duration_s)

    def run_levels(
        self, levels: list[int] | list[float], *, first_index: int, refine: bool = False, stop_on_fail: bool = False,
        probes: bool = False,
    ) -> list[LevelSpan]:
        """Run ``levels`` in order, each until decided (see :mod:`shape`), and return their spans.

        The levels are the mode's (:mod:`loadtest.load.modes`): users, or rates in requests per second.

        ``stop_on_fail``: end the batch at the first level that fails with certainty.
        ``probes``: (``--refine``, closed loop) after a pass, probe first where the measured
        slope crosses a limit before the next level (:func:`loadtest.analysis.refine.probe_before`).
        """
        duration = self.scenario.load.level_duration_s
        schedule = self.schedule if self.decide is not None else None
        cap = hold_cap_s(self.scenario.target.timeout_s)
        common = dict(
            first_index=first_index, refine=refine,
            on_level_change=self.level_changed, schedule=schedule, decide=self.decide, stop_on_fail=stop_on_fail,
            pending=self.pending, hold_cap_s=cap, enough=self.enough_for_a_look,
        )
        if probes and isinstance(self.mode, ClosedLoop) and schedule is not None:
            common["probe_before"] = sweep_probe
        shape = self.mode.shape(levels, duration, self.clock, **common)
        self.env.shape_class = shape
        shape.runner = self.runner
        self.runner.start_shape()
        # Bounded: each level ends by its longest duration (+1 s per tick, and the time to judge it),
        # and its hold by the hold's cap.
        longest = schedule.max_s + 2 * len(schedule.looks) if schedule is not None else duration
        runs = 2 * len(levels) - 1 if probes else len(levels)  # at most one probe before each next level
        deadline = time.monotonic() + runs * (longest + cap + 2) + 30
        try:
            gevent.sleep(0.1)
            while (
                self.runner.state != STATE_STOPPED
                and not shape.done
                and time.monotonic() < deadline
                and not self.stop_requested.is_set()
            ):
                gevent.sleep(0.1)
                self.poll()
        finally:
            shape.finish()  # close the last span (and a hold cut short): requests cut from here on are "cancelled"
            self.runner.stop()
        return shape.spans

    def enough_for_a_look(self, span: LevelSpan) -> bool:
        """Has ``span`` measured as many finished requests as a look needs (this process's records)?"""
        return self.recorder.measured_done.get(span.index, 0) >= self.look_requests

    @property
    def look_requests(self) -> int:
        """Requests a look waits for: :func:`~loadtest.analysis.decide.requests_for_a_look` of the run's SLOs."""
        if self._look_requests is None:
            run = {"scenario": self.scenario.public_dict()}
            top, per_class = class_slos(run, SloSpec.from_dict(run["scenario"].get("slo")))
            self._look_requests = requests_for_a_look([top, *per_class.values()])
        return self._look_requests

    def running_now(self) -> "pd.DataFrame":
        """The requests in flight in this process now (see :data:`loadtest.analysis.decide.IN_FLIGHT_COLUMNS`)."""
        return pd.DataFrame(self.recorder.in_flight())

    def pending(self, span: LevelSpan) -> int:
        """How many of ``span``'s measured requests are still running (the hold waits for them)."""
        return measured_running(self.running_now(), span)

    def poll(self) -> None:
        """Called ten times a second while a batch runs (the master checks its workers here)."""

    def close(self) -> None:
        self.runner.quit()


def sweep_probe(spans: list[LevelSpan], following: int) -> int | None:
    """The shape's ``probe_before`` for ``--refine``: from the passing levels' deciding looks."""
    passes = [(s.concurrency, s.observed) for s in spans if s.decision.get("verdict") == "pass" and s.observed]
    return probe_before(passes, following)
