"""When the event loop last returned from ``epoll``: the stamp, and its bound, for greenlet reads (TLS).

With ``LOADTEST_TLS_READS=greenlets`` (:mod:`loadtest.client.tls_read`; the
default reads TLS on the reactor thread) each user greenlet reads its own TLS
stream. When no data is waiting, ``recv`` parks the greenlet until
the hub's ``epoll`` reports its socket. Stamping ``perf_counter()`` when the
greenlet runs again would be late by everything the hub ran first in that
round: other greenlets' reads and decodes, milliseconds at 100 streams. Yet
the bytes were in the kernel when ``epoll`` returned. So, like the reactor's
one stamp per batch, a read that waited is stamped with the time the hub's
poll returned, which a ``check`` watcher notes: libev runs it after the poll,
before any other callback of the round (it has the highest priority).

**How late can that stamp be?** A ``prepare`` watcher (lowest priority: the
last thing before the poll) notes when the hub is about to poll.

* The poll took longer than the reactor's threshold (``WAITED_S``): nothing
  was ready when it began, the bytes came during the wait, and the stamp is
  late only by the wake-up (the kernel scheduling the hub's thread, and the
  thread getting the GIL). A probe measures that distribution the same way: a
  small OS thread writes a byte to a pipe the hub watches every 5 ms, noting
  when; when a waiting poll returns with it, the time since is one wake-up.
* The poll returned at once: the bytes were already waiting. They arrived
  after the previous poll returned (that poll would have reported them; its
  stamp is taken a few microseconds after ``epoll`` gathered its events, so
  a bound can be short by those), and after the greenlet last read. A busy
  round of 100 greenlets can last several ms, though, and the bytes usually
  came at its end. So every read also *sweeps*: one ``epoll_wait(0)`` over
  the sockets the greenlets are
  waiting on (level-triggered, one-shot, re-armed by each read of its socket)
  notes which became readable since the previous sweep. A socket first seen
  readable at a sweep got its bytes after the sweep before it; one not seen
  readable by the latest sweep got them after that sweep. So the bound is the
  time since the latest sweep that had not seen the bytes: about one
  greenlet's read and decode, not a whole round.
* ``recv`` did not wait at all: the bytes were already in the socket. They are
  stamped when ``recv`` returns, and arrived no earlier than the previous
  read's bytes: late by at most that read's bound plus the time since. If
  the sweep this stream made right after its previous read found nothing,
  they came after that sweep, which is usually the tighter bound.

Each read's bound is kept (per read, not per round, since a percentile of
gaps weighs every chunk alike; only reads that stamped a content chunk, since
the others time nothing) for the self-check (:mod:`loadtest.load.monitor`).
The two watchers cost about 2 µs of CPU per loop round, the sweep and the
re-arm two system calls per read, the probe about 10 µs per 5 ms; all are
started only in a process that reads streams in greenlets.
"""

from __future__ import annotations

import os
import time
from array import array
from typing import Any

import gevent
from gevent import monkey

from loadtest.client.reader_health import WAITED_S, ReaderHealth

_perf = time.perf_counter
_PROBE_S = 0.005
_start_thread = monkey.get_original("_thread", "start_new_thread")
_real_sleep = monkey.get_original("time", "sleep")


class HubClock:
    """Watches the hub's polls and its wake-ups; each stream's :class:`ReadTimer` adds its reads' bounds."""

    def __init__(self, loop: Any) -> None:
        now = _perf()
        #: Polls completed so far (a read that saw this change waited for the hub).
        self.rounds = 0
        self.poll_return = now
        self.prev_poll_return = now
        #: Whether the latest poll waited (nothing was ready when it began).
        self.poll_waited = False
        self._poll_start = now
        #: Per read whose stamp is late by at most this (ms).
        self.waiting_bound_ms = array("d")
        #: Per read that a waiting poll woke: its delay beyond the wake-up (ms).
        self.woken_tail_ms = array("d")
        #: Per probe byte that a waiting poll returned with: how late the hub woke (ms).
        self.wake_ms = array("d")
        self._prepare = loop.prepare(ref=False, priority=loop.MINPRI)
        self._check = loop.check(ref=False, priority=loop.MAXPRI)
        self._prepare.start(self._before_poll)
        self._check.start(self._after_poll)
        self._probe_r, self._probe_w = os.pipe()
        os.set_blocking(self._probe_r, False)
        self._probe_sent = now
        self._probe_io = loop.io(self._probe_r, 1, ref=False)  # 1: EV_READ
        self._probe_io.start(self._probe_arrived)
        self._closed = False
        _start_thread(self._probe, ())
        self.sweep = Sweep()

    def _before_poll(self) -> None:
        self._poll_start = _perf()

    def _after_poll(self) -> None:
        now = _perf()
        self.prev_poll_return = self.poll_return
        self.poll_return = now
        self.poll_waited = now - self._poll_start > WAITED_S
        self.rounds += 1

    def _probe(self) -> None:
        """The probe thread (a real OS thread): a byte every 5 ms, its time noted first."""
        while not self._closed:
            _real_sleep(_PROBE_S)
            self._probe_sent = _perf()
            try:
                os.write(self._probe_w, b"\0")
            except OSError:  # closed under us
                return

    def _probe_arrived(self) -> None:
        try:
            os.read(self._probe_r, 4096)
        except BlockingIOError:
            return
        if self.poll_waited:  # the byte came during a waiting poll: the rest is the wake-up
            self.wake_ms.append(max(0.0, self.poll_return - self._probe_sent) * 1000.0)

    def health(self) -> ReaderHealth:
        """Take the per-read bounds and the wake-ups gathered since the last call."""
        health = ReaderHealth(
            tick_lag_ms=self.wake_ms, waiting_bound_ms=self.waiting_bound_ms, woken_tail_ms=self.woken_tail_ms
        )
        self.waiting_bound_ms, self.woken_tail_ms, self.wake_ms = array("d"), array("d"), array("d")
        return health

    def close(self) -> None:
        self._closed = True
        self._prepare.stop()
        self._check.stop()
        self._probe_io.stop()


_EPOLLIN = 0x001
_EPOLLONESHOT = 1 << 30


class Sweep:
    """Which of the sockets that greenlets wait on became readable, and since when at the earliest.

    Level-triggered and one-shot: a socket armed before a ``recv`` is reported
    by at most one sweep, the first to find it readable. Reports are kept per
    socket (the time of the sweep before the reporting one: its bytes came
    after that) until the socket's next read takes them.
    """

    def __init__(self) -> None:
        try:
            self._epoll: Any = monkey.get_original("select", "epoll")()
        except (AttributeError, ImportError):  # not Linux: no sweep, the bounds stay per round
            self._epoll = None
        #: When the latest sweep ran: bytes that no sweep has reported came after it.
        self.last = _perf()
        #: Socket → (the earliest its reported bytes can have arrived, the sweep that saw them).
        self.seen: dict[int, tuple[float, float]] = {}
        self._watched = 0

    def arm(self, fd: int) -> None:
        """Report ``fd`` at the next sweep that finds it readable (call just before ``recv``)."""
        if self._epoll is None:
            return
        try:
            self._epoll.modify(fd, _EPOLLIN | _EPOLLONESHOT)
        except FileNotFoundError:
            self._epoll.register(fd, _EPOLLIN | _EPOLLONESHOT)
            self._watched += 1

    def unwatch(self, fd: int) -> None:
        self.seen.pop(fd, None)
        if self._epoll is None:
            return
        try:
            self._epoll.unregister(fd)
            self._watched -= 1
        except (OSError, ValueError):  # never registered, or already closed
            pass

    def sweep(self) -> None:
        if self._epoll is None:
            return
        now = _perf()
        since = self.last
        for fd, _ in self._epoll.poll(0, self._watched + 1):
            self.seen[fd] = (since, now)
        self.last = now


class ReadTimer:
    """Stamps and bounds the reads of one stream (see module doc); one per response."""

    __slots__ = ("clock", "fd", "prev", "carried", "woken", "swept", "_pending")

    def __init__(self, clock: HubClock, fd: int, head_at: float) -> None:
        self.clock = clock
        self.fd = fd
        #: The previous read's stamp (the response head's, at first).
        self.prev = head_at
        #: The previous read's bound (ms), beyond the wake-up if ``woken``.
        self.carried = 0.0
        self.woken = True
        #: When this stream was last swept, armed and found empty (None: never).
        self.swept: float | None = None
        #: The latest read's delay, kept by :meth:`settle` if its bytes held a content chunk.
        self._pending: tuple[array, float] | None = None
        clock.sweep.arm(fd)

    def before_recv(self) -> int:
        """``clock.rounds`` before a ``recv``, for :meth:`stamp` (the socket is armed already)."""
        return self.clock.rounds

    def stamp(self, rounds_before: int) -> float:
        """The stamp for bytes ``recv`` just returned; ``rounds_before`` is what :meth:`before_recv` gave."""
        clock = self.clock
        sweep = clock.sweep
        seen = sweep.seen.pop(self.fd, None)
        if clock.rounds != rounds_before:  # it waited: the bytes were in the kernel when the poll returned
            now = max(clock.poll_return, self.prev)
            seen_before_poll = seen is not None and seen[1] < clock.poll_return
            if clock.poll_waited and not seen_before_poll:
                self.woken, self.carried = True, 0.0  # they came during the poll's wait
            else:
                # They came after the previous poll, after this greenlet last read, and
                # after the latest sweep that did not see them (see module doc).
                if seen is not None:
                    unseen_since = seen[0]  # the sweep before the one that saw them did not
                elif sweep.last < clock.poll_return:
                    unseen_since = sweep.last  # no sweep saw them: they came after the latest
                else:  # cannot happen while the socket is armed; fall back to the round
                    unseen_since = clock.prev_poll_return
                earliest = max(clock.prev_poll_return, self.prev, unseen_since)
                self.woken, self.carried = False, max(0.0, now - earliest) * 1000.0
        else:  # already in the socket (or the TLS buffer): no later than the previous read's bytes
            now = _perf()
            self.carried += (now - self.prev) * 1000.0
            if seen is None and self.swept is not None:
                # This stream's own last sweep found nothing: they came after it.
                since_swept = (now - self.swept) * 1000.0
                if since_swept <= self.carried:
                    self.woken, self.carried = False, since_swept
        self._pending = (clock.woken_tail_ms if self.woken else clock.waiting_bound_ms, self.carried)
        # Re-arm and sweep at once: bytes already waiting are seen now (and read next without
        # a wait); if none are, whatever comes next came after this sweep.
        sweep.arm(self.fd)
        sweep.sweep()
        self.swept = None if self.fd in sweep.seen else sweep.last
        self.prev = now
        return now

    def settle(self, stamped_content: bool) -> None:
        """Count the latest read's delay if its bytes stamped a content chunk (only those time anything)."""
        if self._pending is not None and stamped_content:
            series, value = self._pending
            series.append(value)
        self._pending = None

    def close(self) -> None:
        self.clock.sweep.unwatch(self.fd)


_clocks: dict[int, HubClock] = {}


def hub_clock() -> HubClock:
    """This thread's hub clock, started on first use."""
    loop = gevent.get_hub().loop
    clock = _clocks.get(id(loop))
    if clock is None:
        clock = _clocks[id(loop)] = HubClock(loop)
    return clock


def sweep_now() -> None:
    """Sweep outside a read, where a greenlet does a stretch of other work (a request's end and the next send).

    Bytes that come during that stretch are then bounded from here, not from the
    last read before it.
    """
    clock = running_hub_clock()
    if clock is not None:
        clock.sweep.sweep()


def running_hub_clock() -> HubClock | None:
    """The current hub's clock if greenlet reads started one (the self-monitor reads it)."""
    return _clocks.get(id(gevent.get_hub().loop))
