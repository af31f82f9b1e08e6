"""The mock's engine on its precise loop, in real time (moved from tests/unit/test_mock_units.py).

Step lengths and timer lateness are wall-clock facts, so these run with the
serial e2e tests, never beside another test on a 2-core machine.
"""

from __future__ import annotations

import asyncio
import statistics

import pytest

from loadtest.mock.config import MockConfig
from loadtest.mock.engine import Engine, Outcome, Sequence
from loadtest.mock.timing import run as run_precise

pytestmark = pytest.mark.solo


def test_engine_schedule_fifo_and_batch_limit() -> None:
    """In-process, on the precise loop: admission order, batch limit and step lengths.

    Each token leaves at its step's deadline plus however late the engine was for that
    step, and however long handing out that step's tokens took, both measured by the engine
    itself on the same loop clock (``late_s_max``, ``emit_s_max``). The bound is that
    lateness, not a nominal +-5 ms (a loaded machine made the last step 7.7 ms late once). It still tells the schedules apart: c in the batch (20 ms steps)
    would put a's tokens 5, 10, 15, 20 ms off and c's 10 to 40 ms off, so only a
    lateness above 20 ms could hide it, and that is asserted not to have happened.
    """
    config = MockConfig(
        max_batch=2, decode_base_ms=5, decode_per_seq_ms=5, prefill_per_token_ms=0
    )

    async def go() -> tuple[dict[str, list[float]], list[Outcome], float]:
        loop = asyncio.get_running_loop()
        engine = Engine(config)
        engine.start()
        times: dict[str, list[float]] = {}

        def sink_for(name: str) -> object:
            times[name] = []

            def sink(g: int) -> bool:
                if g:
                    times[name].append(loop.time())
                return True

            return sink

        seqs = [Sequence(0, 4, sink_for(n)) for n in "abc"]  # type: ignore[arg-type]
        t0 = loop.time()
        for s in seqs:
            engine.submit(s)
        outcomes = [await s.done for s in seqs]
        await engine.stop()
        late_ms = (engine.late_s_max + engine.emit_s_max) * 1000
        return {n: [(t - t0) * 1000 for t in ts] for n, ts in times.items()}, outcomes, late_ms

    times, outcomes, late_ms = run_precise(go())
    assert outcomes == [Outcome.FINISHED] * 3
    assert late_ms < 20, (late_ms, times)  # beyond this the two schedules below could not be told apart
    # The engine's own lateness and emit time, plus a millisecond for the sink. Deadlines are absolute
    # (lateness does not add up) unless a step is more than a whole step late (>= 10 ms here),
    # when the engine restarts its clock from now: then two latenesses can add.
    slack = (late_ms if late_ms < 10 else 2 * late_ms) + 1.0
    # a and b run together: 5 + 5 x 2 = 15 ms steps.
    for name in "ab":
        assert all(-1.0 <= t - 15 * k <= slack for k, t in enumerate(times[name], 1)), (times, late_ms)
    # c waits for a slot (FIFO), then runs alone: 10 ms steps from 60 ms.
    assert times["c"][0] >= times["a"][-1]
    assert all(-1.0 <= t - (60 + 10 * k) <= slack for k, t in enumerate(times["c"], 1)), (times, late_ms)


def test_precise_loop_timers_do_not_overshoot() -> None:
    async def go() -> list[float]:
        loop = asyncio.get_running_loop()
        lates = []
        deadline = loop.time()
        for _ in range(40):
            deadline += 0.0037
            fut = loop.create_future()
            loop.call_at(deadline, fut.set_result, None)
            await fut
            lates.append(loop.time() - deadline)
        return lates

    lates = run_precise(go())
    # The stock loop is 1-2 ms late here; allow for a busy shared machine.
    assert statistics.median(lates) < 0.0005, lates
