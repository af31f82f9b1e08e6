"""A hand-started worker stops within seconds of losing its master.

Locust's worker sends a heartbeat every second and the master answers each
one; but the worker only gives up after ``MASTER_HEARTBEAT_TIMEOUT`` (60 s) of
silence, and keeps its users loading the target all that while. A master
killed with SIGKILL (an OOM kill, a cancelled CI job) would leave every remote
worker hammering staging for a minute with nobody recording: an incident.

Local workers (``--workers N``) already follow their master's pid
(:func:`loadtest.load.distributed.exit_with_master`); a remote one cannot see
the master's process, so it watches the master's answers instead: after
``timeout_s`` without one (default 5 s, five missed answers) it stops its users
and exits with code 4. Its records of the last second have nowhere to go; the
master that would have written them is gone.

Before the first answer a bound holds too (:func:`give_up_without_master`):
Locust's worker blocks in its constructor, retrying every 5 s up to 60 times (5
minutes of ``retry N/60`` lines), so a worker pointed at the wrong host or port
would wait that long for a master that is not there. It gives up after
``--master-wait`` seconds (default ``--master-timeout``) instead, with one line and
exit code 4. Where workers start alongside the master, which binds only after its
preflight and warm-up (docker compose, the Kubernetes Jobs, the tests), they give
``--master-wait`` a few minutes, so the short silence bound stays short.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager
from typing import Iterator

import gevent
from locust.env import Environment
from locust.runners import WorkerRunner

from loadtest.errors import LoadtestError

log = logging.getLogger(__name__)

#: Silence from the master after which a worker stops (Locust's heartbeat is one a second).
DEFAULT_MASTER_TIMEOUT_S = 5.0
#: Exit code of a worker that stopped because its master went silent (README: exit codes).
EXIT_MASTER_LOST = 4


class MasterNeverAnswered(LoadtestError):
    """No master answered within ``--master-timeout``. Exit code 4, as for one that went silent."""

    exit_code = EXIT_MASTER_LOST


@contextmanager
def give_up_without_master(timeout_s: float, *, describe: str = "the master") -> Iterator[None]:
    """Bound the wait for a master's first answer (Locust's connect, in the block) by ``timeout_s``.

    A ``gevent.Timeout`` raises in the waiting greenlet itself, so the worker leaves Locust's retry
    loop as one error the CLI prints; Locust's own give-up (a ``ConnectionError`` after its 60
    retries) becomes the same error rather than a traceback.
    """
    error = MasterNeverAnswered(f"no answer from {describe} within {timeout_s:g} s (--master-wait, default "
                                "--master-timeout): is the master running ('loadtest run --master'), and are the "
                                "host and port its? If it starts later, give --master-wait more")
    try:
        with gevent.Timeout(timeout_s, error):
            yield
    except ConnectionError:
        raise error from None


def stop_without_master(env: Environment, runner: WorkerRunner, timeout_s: float = DEFAULT_MASTER_TIMEOUT_S,
                        *, describe: str = "the master") -> gevent.Greenlet:
    """Watch the master's heartbeats; stop the users and exit the process after ``timeout_s`` of silence.

    The watch starts with the first heartbeat, so a worker started before its
    master waits for it as Locust's does.
    """
    last: list[float | None] = [None]

    def on_heartbeat(**_: object) -> None:
        last[0] = time.monotonic()

    env.events.heartbeat_received.add_listener(on_heartbeat)
    period = min(0.5, timeout_s / 4)

    def watch() -> None:
        while True:
            gevent.sleep(period)
            seen = last[0]
            if seen is None or time.monotonic() - seen <= timeout_s:
                continue
            log.error("no heartbeat from %s for %.1f s (it answers one a second): it is gone; "
                      "this worker stops its users and exits", describe, time.monotonic() - seen)
            with gevent.Timeout(2.0, False):  # stopping must not wait on the dead master's socket
                runner.stop()
            logging.shutdown()
            os._exit(EXIT_MASTER_LOST)

    return gevent.spawn(watch)
