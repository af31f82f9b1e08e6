"""A lost worker's users go to the others even when Locust skipped it (loadtest.load.lost_workers).

Why: Locust moves a missing worker's users only if its last spawn had completed
when the worker was found missing. A worker killed between two levels missed the
next level's spawn, and that level ran 4 of its 8 users while booked at 8 (a
clean-clone run of tests/e2e/test_distributed.py::test_worker_killed_mid_run).
This is the rule; the e2e test checks the outcome with real workers.
"""

from __future__ import annotations

import dataclasses

import pytest

from loadtest.load.lost_workers import SpawnState, settle_losses

SHORT = SpawnState(running=True, spawning_completed=True, user_count=4, target=8, workers_left=1)


def test_a_shortfall_after_a_loss_is_dispatched_again_once():
    settled, dispatch = settle_losses(1, 0, SHORT)
    assert (settled, dispatch) == (1, True)
    assert settle_losses(1, settled, SHORT) == (1, False)  # settled: not again
    assert settle_losses(2, settled, SHORT) == (2, True)  # a second loss is its own


def test_it_waits_while_a_spawn_is_under_way():
    assert settle_losses(1, 0, dataclasses.replace(SHORT, spawning_completed=False)) == (0, False)
    assert settle_losses(1, 0, SHORT) == (1, True)


@pytest.mark.parametrize(
    ("lost", "settled", "change", "expected"),
    [
        (1, 0, {"user_count": 8}, (1, False)),  # Locust moved them itself: settled, nothing to do
        (0, 0, {}, (0, False)),  # nothing lost: a shortfall is a spawn still being reported
        (1, 0, {"workers_left": 0}, (1, False)),  # nobody left to take them
        (1, 0, {"running": False}, (0, False)),  # stopping or stopped
    ],
)
def test_nothing_is_dispatched_otherwise(lost, settled, change, expected):
    assert settle_losses(lost, settled, dataclasses.replace(SHORT, **change)) == expected
