"""An asyncio event loop whose timers fire on time (within ~0.1 ms, not 0-2.3 ms).

Why: the engine's steps are timers, and their error lands in every ITL the
client measures. With the stock loop on Linux a timer fires 0-2.3 ms late
(median ~1.3 ms): asyncio rounds the epoll timeout *up* to a whole
millisecond, then CPython rounds the float seconds up again when it converts
them (``0.010`` s becomes 10,000,001 ns, hence 11 ms). So a 10 ms ITL comes
out as 8-12 ms.

The fix is a selector that asks epoll for the whole milliseconds *below* the
timeout, converted without the second rounding, and that polls without
blocking when less than a millisecond is left: asyncio calls ``select`` again
and again, so the last fraction is a spin that still serves I/O as it comes.
Timers then fire within ~0.1 ms. The price is the spin, ~0.5 ms of CPU per
timer on average (~5-9 % of a core at 10 ms steps, measured), only in time the
loop would otherwise sleep; sleeping to the nearest millisecond instead
halves the spin but lets timers fire up to ~0.8 ms late.

Elsewhere than Linux (no epoll) the stock loop is used.
"""

from __future__ import annotations

import asyncio
import select as _select
import selectors
from typing import Any, Callable

_SPIN_BELOW_S = 0.001


if hasattr(selectors, "EpollSelector"):

    class PreciseEpollSelector(selectors.EpollSelector):
        """``EpollSelector`` with timers that do not overshoot (see the module docstring)."""

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            if timeout is None:
                poll_timeout = -1.0
            elif timeout < _SPIN_BELOW_S:
                poll_timeout = 0.0
            else:
                # Whole ms, minus 100 ns so CPython's own ceiling keeps it whole.
                poll_timeout = int(timeout * 1e3) * 1e-3 - 1e-7
            epoll: Any = self._selector  # type: ignore[attr-defined]
            max_ev = max(len(self._fd_to_key), 1)  # type: ignore[attr-defined]
            ready: list[tuple[selectors.SelectorKey, int]] = []
            try:
                fd_event_list = epoll.poll(poll_timeout, max_ev)
            except InterruptedError:
                return ready
            for fd, event in fd_event_list:
                events = 0
                if event & ~_select.EPOLLIN:
                    events |= selectors.EVENT_WRITE
                if event & ~_select.EPOLLOUT:
                    events |= selectors.EVENT_READ
                key = self._key_from_fd(fd)  # type: ignore[attr-defined]
                if key:
                    ready.append((key, events & key.events))
            return ready

    def new_event_loop() -> asyncio.AbstractEventLoop:
        """A selector event loop with :class:`PreciseEpollSelector`."""
        return asyncio.SelectorEventLoop(PreciseEpollSelector())

else:  # pragma: no cover - not Linux

    def new_event_loop() -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()


def run(
    main: Any, *, loop_factory: Callable[[], asyncio.AbstractEventLoop] = new_event_loop
) -> Any:
    """``asyncio.run(main)`` on a precise loop."""
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main)
