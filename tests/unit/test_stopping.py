"""Users that outlive one kill are killed again, each try bounded (loadtest/load/stopping.py)."""

from __future__ import annotations

import time

import gevent
from gevent import GreenletExit

from loadtest.load.stopping import STOP_TRIES, kill_until_dead


def stubborn(swallow: int) -> None:
    """Lose the first ``swallow`` kills (as a kill lost inside gevent would), then die normally."""
    for _ in range(swallow):
        try:
            gevent.sleep(30)
        except GreenletExit:
            pass
    gevent.sleep(30)


def test_a_greenlet_that_outlives_a_kill_is_killed_again():
    ordinary = [gevent.spawn(gevent.sleep, 30) for _ in range(5)]
    survivor = gevent.spawn(stubborn, 1)
    gevent.sleep(0)  # let them start
    started = time.monotonic()
    assert kill_until_dead([*ordinary, survivor]) == []
    assert all(g.dead for g in ordinary) and survivor.dead
    assert time.monotonic() - started < 3  # a bounded wait, not the 30 s sleep


def test_killing_gives_up_after_its_tries_and_names_the_survivors():
    hopeless = gevent.spawn(stubborn, STOP_TRIES + 1)
    gevent.sleep(0)
    assert kill_until_dead([hopeless]) == [hopeless]
    hopeless.kill(block=False)
    hopeless.kill(block=True, timeout=1)
