"""When a lost worker's users must be dispatched again, because Locust's rebalancing skipped them.

Locust's master moves a missing worker's users to the others only if its last
spawn had completed when the worker was found missing. A worker that dies
between two levels misses the next level's spawn; the master is still waiting
for its report when it is found missing, and nothing moves them until Locust
removes the dead worker a minute later. That level then ran short of users
while booked at its full count (seen: 4 of 8 users at "concurrency 8", with
the caveat saying they had been moved).

Pure, with no Locust import (importing Locust patches the interpreter with
gevent), so that the rule is tested in tests/unit; ``load/distributed.py``
reads the runner into a :class:`SpawnState` and acts on the answer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpawnState:
    """What the master's runner says about its users now."""

    #: The runner is running or spawning (not stopping or stopped).
    running: bool
    #: Its last spawn has completed (the moment Locust itself would have moved them).
    spawning_completed: bool
    #: Users the workers report, and users the level asks for.
    user_count: int
    target: int
    #: Workers still connected.
    workers_left: int


def settle_losses(lost: int, settled: int, spawn: SpawnState) -> tuple[int, bool]:
    """(how many losses are now settled, whether to dispatch the level's users again).

    A loss is settled once a spawn has completed after it: then either Locust
    moved the users (the count is whole) or it did not (a shortfall: dispatch
    again, once). While a spawn is under way nothing is decided.
    """
    if settled >= lost or not spawn.running or not spawn.spawning_completed:
        return settled, False
    return lost, spawn.workers_left > 0 and spawn.user_count < spawn.target
