"""The stepped shape holds a level's users and takes its looks: in a child interpreter.

Moved out of tests/unit/test_hold.py: the shape imports Locust, which patches the
process with gevent, so each test runs its body in a fresh interpreter (a subprocess,
hence not a unit test).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from loadtest.analysis import SloSpec


def _shape_holds_a_levels_users_until_its_measured_requests_finish() -> None:
    from loadtest.load.levels import LevelClock
    from loadtest.load.shape import SteppedShape

    running = [0]
    shape = SteppedShape([1, 2], 0.05, LevelClock(0.0), pending=lambda span: running[0], hold_cap_s=30.0)
    assert shape.tick()[0] == 1
    time.sleep(0.06)
    running[0] = 2  # two of level 1's measured requests still run when its window ends
    assert shape.tick()[0] == 1 and len(shape.spans) == 1  # held: still one user, no new level
    first = shape.spans[0]
    assert first.end_wall is not None and first.hold == {}
    assert shape.tick()[0] == 1
    running[0] = 0
    assert shape.tick()[0] == 2 and len(shape.spans) == 2
    assert first.hold["ended"] == "drained" and first.hold["waited_for"] == 2
    assert shape.spans[1].start_wall >= first.hold["end_wall"]
    time.sleep(0.06)
    shape.tick()  # level 2 ends; nothing of it runs: its hold ends at once and the batch is done
    assert shape.done and shape.spans[1].hold["held_s"] < 0.05


def _look_waits_for_enough_requests_and_never_exceeds_the_schedule() -> None:
    from loadtest.analysis.decide import Decision, LookSchedule, requests_for_a_look
    from loadtest.load.levels import LevelClock
    from loadtest.load.shape import SteppedShape

    assert requests_for_a_look([SloSpec.from_dict({"ttft_ms": {"p95": 150}})]) == 20
    assert requests_for_a_look([SloSpec.from_dict({"itl_ms": {"p99": 150}})]) == 1  # gaps, not requests
    assert requests_for_a_look([SloSpec.from_dict({"e2e_ms": {"p99": 9000}})]) == 100

    calls = []
    done = [0]

    def decide(span):
        calls.append(span.looks)
        return Decision("uncertain", "interval straddles the limit")

    schedule = LookSchedule(5.0, 10.0, 40.0)
    assert schedule.looks == [5.0, 10.0, 20.0, 40.0]
    shape = SteppedShape([1], 10.0, LevelClock(0.0), schedule=schedule, decide=decide,
                         enough=lambda span: done[0] >= 20)
    shape.tick()  # enters the level
    done[0] = 5
    assert not shape._level_over(5.5) and not calls  # due, but 5 requests can only say "too few"
    assert not shape._level_over(10.5) and not calls  # the 10 s look is due first: the 5 s one is dropped
    done[0] = 25
    assert not shape._level_over(10.9) and not calls  # enough now, but the 10.5 s check said no: next at 11
    assert not shape._level_over(11.05) and len(calls) == 1
    assert shape.spans[0].looks[0]["at_s"] == 10.0 and shape.spans[0].looks[0]["taken_s"] == 11.05
    done[0] = 0  # whatever the count, the last look is taken when due
    assert not shape._level_over(25.0) and len(calls) == 1  # the 20 s look waits …
    assert shape._level_over(40.0)  # … and is dropped for the last one, which ends the level
    assert len(calls) == 2 <= len(schedule.looks)
    assert shape.spans[0].decision["ended"] == "undecided_at_max"


def _a_pass_puts_the_slopes_probe_before_the_next_level() -> None:
    from loadtest.analysis.decide import Decision, LookSchedule
    from loadtest.load.levels import LevelClock
    from loadtest.load.session import sweep_probe
    from loadtest.load.shape import SteppedShape

    def decide(span):  # issue 23's server: ITL = 20 + 18 x users, SLO 191 ms: 9 holds, 10 does not
        value = 20.0 + 18.0 * span.concurrency
        return Decision("pass" if value <= 191 else "fail", "", observed={"itl_ms.p95": (value, 191.0)})

    def sweep(levels, **options):
        shape = SteppedShape(levels, 0.01, LevelClock(0.0), schedule=LookSchedule(0.01, 0.01, 0.01), decide=decide,
                             stop_on_fail=True, **options)
        for _ in range(200):  # bounded: each level ends at its one look
            shape.tick()
            if shape.done:
                return [(span.concurrency, span.refine) for span in shape.spans]
            time.sleep(0.012)
        raise AssertionError("the sweep did not end")

    # after 8 (164 ms), the line through 4 and 8 reaches 191 ms at 9.5: 10 is probed, fails, and 16 never runs
    assert sweep([1, 2, 4, 8, 16], probe_before=sweep_probe) == [
        (1, False), (2, False), (4, False), (8, False), (10, True)]
    assert sweep([1, 2, 4, 8, 16]) == [(1, False), (2, False), (4, False), (8, False), (16, False)]  # without --refine


def _a_look_is_open_until_its_verdict_and_the_end_it_sets_are_in() -> None:
    from loadtest.analysis.decide import Decision, LookSchedule
    from loadtest.load.levels import LevelClock
    from loadtest.load.shape import SteppedShape

    seen = []  # (looking, end_wall) as the judge is asked: what a batch handed over then is told

    def decide(span):
        seen.append((span.looking, span.end_wall))
        return Decision("pass" if len(seen) == 2 else "uncertain", "")

    shape = SteppedShape([1], 10.0, LevelClock(0.0), schedule=LookSchedule(5.0, 10.0, 20.0), decide=decide)
    shape.tick()  # enters the level
    span = shape.spans[0]
    assert not shape._level_over(5.0) and not span.looking and span.end_wall is None  # uncertain: it goes on
    assert shape._level_over(10.0) and not span.looking  # the pass ends it …
    assert span.end_wall == span.looked_at  # … at the look's instant (load/look_rows.py holds what came after)
    assert seen == [(True, None), (True, None)]


def _in_a_child(body: str) -> None:
    """Run one of this file's test bodies in a fresh interpreter.

    Why: the shape imports Locust, which monkey-patches the process with gevent; in
    pytest's own process that would turn every later test's ``time.sleep`` cooperative
    and ``ssl`` half-patched (test_monitor's loop stall, the TLS fixtures).
    """
    here = Path(__file__).parent  # this file
    code = f"import sys; sys.path.insert(0, {str(here)!r}); import test_hold_shape; test_hold_shape.{body}()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_the_shape_holds_a_levels_users_until_its_measured_requests_finish():
    _in_a_child("_shape_holds_a_levels_users_until_its_measured_requests_finish")


def test_a_look_waits_for_enough_requests_and_never_exceeds_the_schedule():
    _in_a_child("_look_waits_for_enough_requests_and_never_exceeds_the_schedule")


def test_a_pass_puts_the_slopes_probe_before_the_next_level():
    _in_a_child("_a_pass_puts_the_slopes_probe_before_the_next_level")


def test_a_look_is_open_until_its_verdict_and_the_end_it_sets_are_in():
    _in_a_child("_a_look_is_open_until_its_verdict_and_the_end_it_sets_are_in")
