"""Stopping users so that they really stop: every try bounded, survivors killed again.

Locust stops a run's users by killing each greenlet once and then joining it
with no timeout. gevent does not promise that one kill lands: "depending on
what this greenlet is executing … the exception may or may not be raised …
it may not be raised at all" (``Greenlet.kill``). In practice an open-loop
user idle in the arrival queue outlived its single kill at about one batch end
in four to eight, and the run then hung for ever after its last level (seen on 2 cores,
``tests/e2e/test_open_loop.py``). So before Locust's own stop (its ``test_stopping``
event, which fires just before it stops the users), every user still alive is
killed directly, not through its group (a ``Group`` never kills a greenlet
twice), and waited for a bounded time, up to :data:`STOP_TRIES` times. Locust
then finds nothing left to wait for. (Measured with 300 open-loop users: two
outlived the first kill at every batch end, and a second kill took them at once.)
"""

from __future__ import annotations

import logging
import signal
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import gevent

#: How long the first try waits for the users it killed (a killed user cancels its request
#: and leaves within milliseconds); each later try waits once more as long.
STOP_TRY_S = 0.5
STOP_TRIES = 3

log = logging.getLogger(__name__)


def kill_until_dead(greenlets: Iterable[gevent.Greenlet]) -> list[gevent.Greenlet]:
    """Kill the greenlets, again while any survives (bounded); return those that never died."""
    alive = [g for g in greenlets if not g.dead]
    for attempt in range(STOP_TRIES):
        if not alive:
            break
        if attempt:
            log.warning("%d user(s) outlived a kill; killing them again", len(alive))
        for greenlet in alive:
            greenlet.kill(block=False)
        gevent.joinall(alive, timeout=STOP_TRY_S * (attempt + 1))
        alive = [g for g in alive if not g.dead]
    if alive:
        log.error("%d user(s) would not stop after %d kills", len(alive), STOP_TRIES)
    return alive


def stop_users_reliably(environment: Any) -> None:
    """Hook :func:`kill_until_dead` on an environment's ``test_stopping`` event (any runner)."""

    def on_stopping(environment: Any, **_: Any) -> None:
        runner = environment.runner
        if runner is not None:
            kill_until_dead(list(runner.user_greenlets))

    environment.events.test_stopping.add_listener(on_stopping)


def quiet_interrupts() -> None:
    """Let a Ctrl-C outside the load (the preflight, the warm-up) reach the CLI without gevent's print.

    A SIGINT that arrives while the main greenlet waits on a socket is raised in gevent's hub,
    whose ``handle_error`` prints every exception that is not in ``NOT_ERROR``: here a bare
    ``KeyboardInterrupt`` line and a timestamp (``2026-12-05T17:55:07Z``), before the CLI's own
    ``loadtest run: interrupted``. Marking it not-an-error only stops the print: it is still a
    ``SYSTEM_ERROR``, so the hub still throws it into the main greenlet, and the run ends with
    exit 130 as before. (During the load, SIGINT only sets an event: orchestrate._stop_on_signals.)
    """
    hub = gevent.get_hub()
    if not issubclass(KeyboardInterrupt, hub.NOT_ERROR):
        hub.NOT_ERROR = (*hub.NOT_ERROR, KeyboardInterrupt)


class StoppedBeforeTheLoad(KeyboardInterrupt):
    """SIGTERM before the load began (the preflight, the warm-up): raised like Ctrl-C's KeyboardInterrupt,
    so that the run folder records the stop and the CLI ends with its one line and exit 130."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


@contextmanager
def signals_before_the_load(record: Any, save: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C or SIGTERM before the load (whose own handlers only ask the session to stop) ends the
    run here, and run.json says so (``stopped_by: "signal"``, ``stop_signal``), not an unexplained
    folder without records; SIGTERM would otherwise kill the process where it stands, the scraper
    child left running.

    A Python-level handler runs in whichever greenlet is current, often gevent's hub; the hub
    throws a ``KeyboardInterrupt`` (a system error to it) into the main greenlet, as it does
    Ctrl-C's (:func:`quiet_interrupts`).
    """

    def on_term(signum: int, _frame: Any) -> None:
        raise StoppedBeforeTheLoad(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    except KeyboardInterrupt as stop:
        if record.stopped_by is None:
            record.stopped_by = "signal"
            record.stop_signal = stop.signal_name if isinstance(stop, StoppedBeforeTheLoad) else "SIGINT"
            record.complete = False
            save()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
