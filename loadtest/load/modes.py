"""Load modes: how a scenario's load is offered, chosen once per run.

A mode answers the questions the rest of the load stage would otherwise ask a
boolean about:

- the levels it produces (:meth:`LoadMode.levels`): concurrencies (users) or
  rates (requests/s), and how they read in one line (:meth:`LoadMode.describe`);
- how a user gets its next request (:meth:`LoadMode.scheduler`): a closed-loop
  user sends its next request when its last one ends (no scheduler); an
  open-loop user waits for the next arrival drawn in advance
  (:class:`~loadtest.load.open_loop.ArrivalScheduler`), and its latency is
  measured from that scheduled time;
- the Locust shape that steps through the levels (:meth:`LoadMode.shape`);
- the most users (connections) it holds at once (:meth:`LoadMode.max_users`:
  file descriptors, each worker's share);
- how ``--refine`` bisects (:meth:`LoadMode.next_refine`): users, or rate;
- its :attr:`LoadMode.name`, written to run.json (``load_mode``) so that the
  analysis, which is pure and knows nothing of Locust, reads the mode as data.
  The analysis itself tells a rate level by its ``rate_rps``.

:func:`load_mode` chooses the mode from the scenario, once; nothing else asks
``scenario.load.open_loop``. The third mode, :class:`TraceReplay` (each level
replays a trace window at a speedup, open loop at the trace's own arrival
times, :mod:`loadtest.load.trace_replay`), is an open loop whose levels are
the speedups, each run as the rate it offers (the window's mean rate × the
speedup), so the shape, the judge and the analysis see a rate level; its
``scheduler`` releases the trace's arrivals divided by the speedup and
``next_refine`` bisects on the speedup. Nothing outside this module branches
on the mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Sequence

from loadtest.load.hold import hold_cap_s
from loadtest.scenario import Load, Scenario

if TYPE_CHECKING:  # annotations only: the shapes import Locust, which patches the process for gevent
    from loadtest.load.levels import LevelClock
    from loadtest.load.open_loop import ArrivalScheduler
    from loadtest.load.recorder import Recorder
    from loadtest.load.shape import SteppedShape


class LoadMode:
    """The interface every load mode implements (see the module docstring)."""

    #: run.json's ``load_mode`` (:data:`loadtest.run_record.LoadModeName`).
    name: ClassVar[str]
    #: Whether the users are the load (closed loop: each holds one request) or a pool of mostly idle
    #: senders (``max_in_flight`` of them, open loop): the live ``loadtest_users`` gauge reads the
    #: users in the first case and the requests in flight in the second (:mod:`loadtest.export.live`).
    users_are_the_load: ClassVar[bool] = True

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    @property
    def load(self) -> Load:
        return self.scenario.load

    def levels(self) -> list[Any]:
        """The planned levels, in run order."""
        raise NotImplementedError

    def describe(self) -> str:
        """The planned levels in one phrase (``loadtest validate``)."""
        raise NotImplementedError

    def level_load(self, level: Any) -> tuple[int, float | None]:
        """A planned level as its span will record it: ``(concurrency, rate_rps)`` (see :mod:`levels`), what
        the live view's :func:`~loadtest.load.live.level_label` names (the web UI's next level, say)."""
        raise NotImplementedError

    def max_users(self) -> int:
        """The most users (each a connection) this mode runs at once, over all processes."""
        raise NotImplementedError

    def scheduler(self, clock: LevelClock, recorder: Recorder) -> ArrivalScheduler | None:
        """What tells this process's users when to send (None: each sends when its last request ends)."""
        raise NotImplementedError

    def shape(self, levels: Sequence[Any], duration_s: float, clock: LevelClock, **common: Any) -> SteppedShape:
        """The Locust shape that runs ``levels`` (``common``: the keywords every shape takes)."""
        raise NotImplementedError

    def next_refine(self, results: Iterable[object], rate_resolution: float | None) -> Any | None:
        """The next level ``--refine`` probes between the last passing and first failing level, or None."""
        raise NotImplementedError


class ClosedLoop(LoadMode):
    """Concurrency levels: N users, each sending its next request when its last one ends."""

    name = "closed_loop"

    def levels(self) -> list[int]:
        return self.load.concurrency_levels()

    def describe(self) -> str:
        return "levels " + ", ".join(str(level) for level in self.levels())  # users, in full: never 1e+20

    def level_load(self, level: Any) -> tuple[int, float | None]:
        return int(level), None

    def max_users(self) -> int:
        return max(self.levels())

    def scheduler(self, clock: LevelClock, recorder: Recorder) -> None:
        return None

    def shape(self, levels: Sequence[Any], duration_s: float, clock: LevelClock, **common: Any) -> SteppedShape:
        from loadtest.load.shape import SteppedShape  # Locust: imported by the load stage only

        return SteppedShape(list(levels), duration_s, clock, **common)

    def next_refine(self, results: Iterable[object], rate_resolution: float | None) -> int | None:
        from loadtest.analysis.refine import next_refine_level  # numpy: only when a run refines

        return next_refine_level(results)  # type: ignore[arg-type]


class OpenLoop(LoadMode):
    """Rate levels: arrivals drawn in advance at the level's rate, sent whatever the server does."""

    name = "open_loop"
    users_are_the_load = False

    def levels(self) -> list[float]:
        return self.load.rate_levels()

    def describe(self) -> str:
        rates = ", ".join(f"{level:g}" for level in self.levels())
        return f"rates {rates} req/s ({self.load.arrival} arrivals)"

    def level_load(self, level: Any) -> tuple[int, float | None]:
        return 0, float(level)  # a rate level holds no users of its own (the shape's span: concurrency 0)

    def max_users(self) -> int:
        return self.load.max_in_flight  # users are only senders: at most this many requests at once

    def scheduler(self, clock: LevelClock, recorder: Recorder) -> ArrivalScheduler:
        from loadtest.load.open_loop import ArrivalScheduler  # gevent: imported by the load stage only

        classes = [(c.name, c.weight) for c in self.scenario.workload.classes]
        return ArrivalScheduler(self.load, clock, recorder, duration_s=arrival_horizon_s(self.scenario), classes=classes)

    def shape(self, levels: Sequence[Any], duration_s: float, clock: LevelClock, **common: Any) -> SteppedShape:
        from loadtest.load.shape import RateShape  # Locust: imported by the load stage only

        return RateShape(list(levels), duration_s, clock, max_in_flight=self.load.max_in_flight, **common)

    def next_refine(self, results: Iterable[object], rate_resolution: float | None) -> float | None:
        from loadtest.analysis.refine import next_refine_rate  # numpy: only when a run refines

        return next_refine_rate(results, rate_resolution, self.arrival_cv())

    def arrival_cv(self) -> float | None:
        """How much a window's arrivals vary (:func:`loadtest.analysis.offered.gaps_cv`): --refine steps no finer."""
        from loadtest.analysis.offered import gaps_cv  # numpy: only when a run refines

        return gaps_cv(self.load.arrival, self.load.burstiness)


class TraceReplay(OpenLoop):
    """Speedup levels: a trace window's own arrivals (workload.trace), at its times divided by the speedup."""

    name = "trace_replay"

    @property
    def trace(self):
        from loadtest.workload.trace import load_trace  # read once per process, on first use

        return load_trace(self.scenario.workload.trace)

    def speedups(self) -> list[float]:
        return [float(s) for s in self.load.speedups or []]

    def levels(self) -> list[float]:
        """Each speedup as the rate it offers: the window's mean rate × the speedup."""
        mean = self.trace.mean_rate_rps
        return [round(s * mean, 6) for s in self.speedups()]

    def describe(self) -> str:
        t = self.trace
        speedups = ", ".join(f"{s:g}×" for s in self.speedups())
        article = "an" if t.format[:1] in "aeiou" else "a"  # an azure, a mooncake, a burstgpt
        return (f"speedups {speedups} of {article} {t.format} trace window ({len(t.rows)} requests over {t.period_s:.4g} s, "
                f"{t.mean_rate_rps:.4g} req/s at 1×)")

    def scheduler(self, clock: LevelClock, recorder: Recorder) -> ArrivalScheduler:
        from loadtest.load.trace_replay import TraceScheduler  # gevent: imported by the load stage only

        return TraceScheduler(self.load, clock, recorder, duration_s=arrival_horizon_s(self.scenario), trace=self.trace)

    def arrival_cv(self) -> None:
        """The trace's own arrivals: no random draw whose noise limits the probes."""
        return None

    def next_refine(self, results: Iterable[object], rate_resolution: float | None) -> float | None:
        """Bisect on the speedup (to 3 decimals); the probe runs as its rate."""
        results = list(results)
        rate = super().next_refine(results, rate_resolution)
        if rate is None:
            return None
        mean = self.trace.mean_rate_rps
        snapped = round(round(rate / mean, 3) * mean, 6)
        if snapped <= 0:  # a speedup under 0.0005 rounds to 0: no arrivals, never a probe
            return None
        # the rounding may land on a speedup already run (a narrow bracket at a small speedup): never run it twice
        from loadtest.analysis.refine import already_run  # numpy: only when a run refines

        return None if already_run(results, snapped, rate=True) else snapped


def arrival_horizon_s(scenario: Scenario) -> float:
    """How far ahead an open-loop level's arrivals are drawn: its longest possible run (+ ticks and its hold)."""
    load = scenario.load
    return max(load.max_duration_s, load.level_duration_s) + 5.0 + hold_cap_s(scenario.target.timeout_s)


def load_mode(scenario: Scenario) -> LoadMode:
    """The scenario's load mode: trace replay with speedups, open loop with rates, closed loop otherwise."""
    if scenario.load.trace_replay:
        return TraceReplay(scenario)
    return OpenLoop(scenario) if scenario.load.open_loop else ClosedLoop(scenario)
