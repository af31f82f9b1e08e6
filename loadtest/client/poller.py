"""The reactor's poller: the unpatched ``epoll``, or ``poll(2)`` in its shape where there is none.

The originals, not gevent's: Locust monkey-patches ``select`` for greenlets, and the
reactor is an OS thread that must block in the kernel (see :mod:`loadtest.client.reactor`).
"""

from __future__ import annotations

from typing import Any

from gevent import monkey


def make_poller() -> Any:
    """A new poller: ``epoll`` on Linux, else ``poll`` behind the same three methods."""
    try:
        return monkey.get_original("select", "epoll")()
    except (AttributeError, ImportError):  # not Linux: poll(2) has the same shape (timeout in ms)
        return _PollAsEpoll(monkey.get_original("select", "poll")())


class _PollAsEpoll:
    def __init__(self, poller: Any) -> None:
        self._p = poller

    def register(self, fd: int, mask: int) -> None:
        self._p.register(fd, mask)

    def unregister(self, fd: int) -> None:
        self._p.unregister(fd)

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        return self._p.poll(timeout * 1000.0)
