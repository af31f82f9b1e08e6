"""One OS thread that reads every event stream of this process, plain HTTP and TLS.

Why a thread, when Locust users are greenlets: a greenlet that waits for each
chunk costs a hub wake-up, two ``recv`` calls (one says "would block"), a
timeout timer and two context switches per chunk, about 20 µs of CPU before a
byte is parsed; and its timestamp waits for whatever other greenlet is
running. Here one thread blocks in ``epoll`` over all open streams, stamps
``perf_counter()`` the moment a read returns, and decodes it on the spot:
about half the CPU per chunk, and a stamp that never waits behind Locust's
own work for longer than the interpreter's switch interval (lowered to 0.5 ms
by :func:`loadtest.load.session.tune_interpreter`).

The user greenlet still sends the request and reads the response head with
geventhttpclient; for a 200 event stream it hands the socket over with
:meth:`Reactor.read` and sleeps until the reactor says the stream ended. It
gets the socket back to return it to the keep-alive pool itself, on the hub's
thread, since gevent's pool is not thread-safe.

Where the compiled scanner is built (:mod:`loadtest.client.scanner`), this loop runs in C
(``run_turns`` in ``_scanner.c``) with the same stamps, delays and records; it comes back here
for the wake-up, Python reads and ends. A TLS stream is read through its OpenSSL object
(:mod:`loadtest.client.tls_read`; in C too, where built).

The thread and its epoll are the unpatched originals (Locust monkey-patches
``threading`` and ``select`` for gevent). It is a daemon: it dies with the
process.

Every stream that one ``epoll`` call reports ready is stamped with the time
that call returned: their bytes were all in the kernel by then, so a stamp does
not depend on where in the batch its stream happened to be read.

**How late can a stamp be?** The thread measures it, batch by batch, for the
self-check. When ``epoll`` had to *wait* for data, the bytes arrived during the
wait and the stamp is late only by the wake-up: the kernel scheduling the
thread and the thread getting the GIL, which the 10 ms tick measures (how late
the thread runs past a timeout the kernel promised). When ``epoll`` returns *at
once*, the bytes were already waiting: they may have arrived at any moment
since the previous call returned (while the previous batch was processed), so
that whole span is the bound for this batch. With a continuous-batching server
every stream's token comes in the same step and the next step is tens of ms
away, so nearly every call waits and a long batch delays nothing; under real
saturation the calls stop waiting and the bound grows with the batches.

On Linux the delay is not only bounded but measured, read by read: the
kernel stamps when each packet reached the socket (``SO_TIMESTAMPING``,
software receive stamps, wall clock), ``recvmsg`` returns the stamp of the
newest bytes read, and the delay is the batch's stamp minus that. For a read
that ``epoll`` woke, this replaces the tick's distribution, which cannot see
what matters most: wake-ups for data come right when the server has just run,
and a server on the same cores (a test, a local model) competes for the CPU
exactly then, not at the tick's even times. For a read whose call returned at
once it is a floor under the bound: a stopped process (SIGSTOP, a debugger)
makes Python give up an interrupted ``epoll_wait`` past its deadline with
nothing, so "since the previous call returned" can miss bytes that waited
through the stop. Bytes that came in more than one packet were waiting longer
than the newest one; for a woken read that is the µs between packets the
server sent together.
"""

from __future__ import annotations

import math
import os
import time
from array import array
from collections import deque
from typing import Any

import gevent
import gevent.event
from gevent import monkey
from geventhttpclient.response import HTTPParseError

from loadtest.client._http import collect_body, head_bytes, parser_feed
from loadtest.client.arrival import ANCILLARY_SIZE, arrival_time, enable_arrival_stamps
from loadtest.client.decode import StreamDecoder
from loadtest.client.poller import make_poller
from loadtest.client.reactor_stream import ReactorStream
from loadtest.client.reader_health import WAITED_S, ReaderHealth
from loadtest.client.scanner import run_turns
from loadtest.client.tls_read import read_tls

_READ_SIZE = 65536
_TICK_S = 0.01
_EPOLLIN = 0x001
_start_thread = monkey.get_original("_thread", "start_new_thread")
__all__ = ["Reactor", "ReaderHealth", "WAITED_S", "arrival_time", "enable_arrival_stamps", "reactor", "running_reactor"]

class Reactor:
    """The process's stream reader. Use :func:`reactor` to get it."""

    def __init__(self) -> None:
        self._poll = make_poller()
        self._streams: dict[int, ReactorStream] = {}
        self._inbox: deque[ReactorStream] = deque()
        self._outbox: deque[ReactorStream] = deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._poll.register(self._wake_r, _EPOLLIN)
        self._async = gevent.get_hub().loop.async_()
        self._async.start(self._deliver)
        #: Milliseconds spent on each batch of ready streams (the worst stamp delay within it).
        self.batch_ms = array("d")
        #: Milliseconds this thread woke up late for its 10 ms tick (CPU and GIL waits).
        self.tick_lag_ms = array("d")
        #: Per read whose data was already waiting: the most its stamp can be late (ms).
        self.waiting_bound_ms = array("d")
        #: Per read whose ``epoll`` call waited: late only by a wake-up (see module doc), so 0 beyond it.
        self.woken_tail_ms = array("d")
        #: Per read whose arrival the kernel stamped: how late the stamp was, measured (ms;
        #: for a read whose ``epoll`` call returned at once, at least its bound).
        self.measured_ms = array("d")
        _start_thread(self._run, ())

    # -- called from greenlets (the hub's thread) ------------------------------
    def read(self, raw: Any, response: Any, decoder: StreamDecoder, first_at: float, tls: Any = None) -> bool:
        """Read the stream to its end; False if the reactor ended it early (cut, malformed).

        ``raw`` is the socket under gevent's wrapper; ``tls`` its OpenSSL object over TLS.
        """
        stream = ReactorStream(raw, response, decoder, first_at, tls)
        self._post(stream)
        try:
            stream.event.wait()
        except BaseException:
            self.cancel(stream)
            raise
        return stream.ended

    def cancel(self, stream: ReactorStream) -> None:
        """Take a stream back before its end (timeout, or the user was stopped)."""
        stream.cancelled = True
        self._post(stream)
        stream.event.wait(timeout=5.0)  # the reactor acknowledges within a poll round

    def _post(self, stream: ReactorStream) -> None:
        self._inbox.append(stream)
        os.write(self._wake_w, b"\0")

    def _deliver(self) -> None:
        while self._outbox:
            self._outbox.popleft().event.set()

    # -- the reactor thread ------------------------------------------------------
    def _run(self) -> None:
        perf = time.perf_counter
        if run_turns is not None and hasattr(self._poll, "fileno"):  # the loop in C (_scanner.run_turns)
            epfd, streams, wake = self._poll.fileno(), self._streams, self._wake_r
            clock = array("d", [perf() + _TICK_S, perf()])  # [next tick, last return]
            while True:
                # Turns of the loop below, in C, until a batch holds what this code must see.
                now, wall_now, waited, bound_ms, _, rest = run_turns(epfd, streams, wake, self, clock, WAITED_S, _TICK_S, 0)
                self._see(rest, now, wall_now, waited, bound_ms)
                self.batch_ms.append((perf() - now) * 1000.0)
        else:
            self._run_python()

    def _run_python(self) -> None:
        """The loop where there is no epoll or no compiled scanner: what ``run_turns`` does, in Python."""
        poll = self._poll
        perf = time.perf_counter
        wall = time.time
        next_tick = perf() + _TICK_S
        last_return = perf()
        while True:
            # epoll counts whole ms, rounding up: the wake-up it promises is the next ms after the tick.
            before = perf()
            wait_ms = math.ceil(max(0.0, next_tick - before) * 1000.0)
            ready = poll.poll(wait_ms / 1000.0)
            # One stamp for the whole batch, before any of it is read: every stream in it had its
            # bytes in the kernel by now, so a stamp does not depend on the order of the reads.
            now = perf()
            wall_now = wall()  # the kernel's arrival stamps are wall-clock
            promised = before + wait_ms / 1000.0
            if now >= promised:  # how late the thread ran past a promised wake-up (CPU and GIL waits)
                self.tick_lag_ms.append((now - promised) * 1000.0)
                next_tick = now + _TICK_S
            waited = now - before > WAITED_S
            waiting_bound_ms = (now - last_return) * 1000.0
            last_return = now
            self._see([(fd, None) for fd, _ in ready], now, wall_now, waited, waiting_bound_ms)
            if ready:
                self.batch_ms.append((perf() - now) * 1000.0)

    def _see(self, rest: list, now: float, wall_now: float, waited: bool, waiting_bound_ms: float) -> None:
        """A batch's items in order, (fd, outcome): the wake-up, reads (the compiled read's outcome
        to settle, or None: read here) and each read's stamp delay.

        One delay per stream read that stamped a content chunk, not per batch: a
        percentile of gaps weighs every chunk alike, and a late batch is usually a
        large one. Reads that stamp no content (a role chunk, usage, [DONE]) time nothing.
        """
        streams = self._streams
        wake = self._wake_r
        measured = self.measured_ms  # (health() swaps the arrays: fetched per batch)
        for fd, outcome in rest:
            if fd == wake:
                self._take_inbox()
                continue
            stream = streams.get(fd)
            if stream is None:
                continue
            if outcome is None and stream.scanner is not None:  # poll(2), not epoll: the compiled read alone
                outcome = stream.scanner.read(now)
                if len(outcome) == 2:
                    added, arrived = outcome
                    outcome = None
            if outcome is not None:  # the compiled read ended or failed the stream: settle it here
                added, arrived = self._settle(stream, outcome, now)
            elif stream.scanner is None:
                added, arrived = self._read_python(stream, now)
            if not added:
                continue  # no content chunk was stamped (a role chunk, usage, [DONE]): no delay to count
            if arrived is not None:
                # Against the kernel's arrival stamp: the newest packet's (a chunk that ended in an
                # earlier one waited longer, though never from before the previous return).
                measured_ms = (wall_now - arrived) * 1000.0
                if not waited and (added > 1 or stream.decoder.parser.has_partial) and measured_ms < waiting_bound_ms:
                    measured_ms = waiting_bound_ms
                measured.append(measured_ms if measured_ms > 0.0 else 0.0)
            elif waited:
                self.woken_tail_ms.append(0.0)
            else:
                self.waiting_bound_ms.append(waiting_bound_ms)

    def _read_python(self, stream: ReactorStream, now: float) -> tuple[int, float | None]:
        """One read in Python (what ``Scanner.read`` does in C): content chunks stamped, the kernel's stamp."""
        closed = False
        try:
            if stream.tls is not None:  # decrypted records: no kernel stamp for them (tls_read.py)
                (data, closed), arrived = read_tls(stream.tls, _READ_SIZE), None
            elif stream.rx_stamps:
                data, ancillary, _, _ = stream.raw.recvmsg(_READ_SIZE, ANCILLARY_SIZE)
                arrived = arrival_time(ancillary) if ancillary else None
            else:
                data, arrived = stream.raw.recv(_READ_SIZE), None
        except BlockingIOError:
            return 0, None
        except OSError as err:
            stream.decoder.rec.fail("disconnect", f"{type(err).__name__}: {err}")
            self._end(stream, now)
            return 0, None
        if not data:
            self._end(stream, now)
            return 0, None
        chunks = stream.chunks
        chunks_before = len(chunks)
        try:
            self._consume(stream, data, now)
        except Exception as err:  # a bug must cost one stream, never the reader thread
            stream.decoder.rec.fail("malformed", f"could not process the stream: {type(err).__name__}: {err}")
            self._end(stream, now)
        if closed and not stream.ended:
            self._end(stream, now)
        return len(chunks) - chunks_before, arrived

    def _settle(self, stream: ReactorStream, outcome: tuple, now: float) -> tuple[int, float | None]:
        """What the compiled scanner's read left to do (its end, a failure): as the Python read does it."""
        kind, err, added, arrived = outcome
        rec = stream.decoder.rec
        if kind == "oserror":
            rec.fail("disconnect", f"{type(err).__name__}: {err}")
        elif kind == "http":
            rec.fail("malformed", f"bad HTTP framing: {err}")
        elif kind == "error":  # a bug must cost one stream, never the reader thread
            rec.fail("malformed", f"could not process the stream: {type(err).__name__}: {err}")
        if kind != "blocked":
            self._end(stream, now)
        return added, arrived

    def _consume(self, stream: ReactorStream, data: bytes, now: float) -> None:
        response = stream.response
        try:
            parser_feed(response, data)
        except HTTPParseError as err:
            stream.decoder.rec.fail("malformed", f"bad HTTP framing: {err}")
            self._end(stream, now)
            return
        pieces = stream.pieces
        if pieces:
            chunk = b"".join(pieces)  # bytes, whatever the parser handed over
            pieces.clear()
            if not stream.feed(chunk, now):
                self._end(stream, now)
                return
        if response.message_complete:
            self._end(stream, now)

    def _take_inbox(self) -> None:
        try:
            os.read(self._wake_r, 4096)
        except BlockingIOError:
            pass
        while self._inbox:
            stream = self._inbox.popleft()
            if stream.cancelled:
                self._drop(stream)
            elif not stream.registered and not stream.ended:
                self._start(stream)

    def _start(self, stream: ReactorStream) -> None:
        stream.pieces = collect_body(stream.response)
        head = head_bytes(stream.response)
        early = b""
        if stream.pieces:  # bytes that came with the response head
            early = b"".join(stream.pieces)
            stream.pieces.clear()
            if not stream.decoder.feed(early, stream.first_at):
                self._end(stream, stream.first_at)
                return
        if stream.response.message_complete:
            self._end(stream, stream.first_at)
            return
        if stream.tls is not None:  # no kernel stamps: SSL_read reads the socket itself
            pending = stream.tls.pending()  # decrypted with the head's record: it arrived with the head
            if pending:
                head = None  # parsed past the head's bytes: the scanner does not follow the framing
                self._consume(stream, stream.tls.read(pending), stream.first_at)
                if stream.ended:
                    return
        else:
            stream.rx_stamps = enable_arrival_stamps(stream.raw)
        scanner = stream.decoder.scanner
        if scanner is not None:  # the compiled read: the raw socket's, or the OpenSSL object's over TLS
            scanner.attach(stream.fd, stream.rx_stamps, parser_feed, stream.response, stream.pieces, HTTPParseError,
                           stream.tls)
            if head is not None:  # whole-chunk reads are then de-framed by the scanner, not the parser
                scanner.frame(head, early)
            stream.scanner = scanner
        self._streams[stream.fd] = stream
        self._poll.register(stream.fd, _EPOLLIN)
        stream.registered = True

    def _unregister(self, stream: ReactorStream) -> None:
        if stream.registered:
            stream.registered = False
            if stream.scanner is not None:
                stream.scanner.detach()  # the compiled loop finds a stream's scanner by its socket
            self._streams.pop(stream.fd, None)
            try:
                self._poll.unregister(stream.fd)
            except (OSError, ValueError, KeyError):
                pass

    def _end(self, stream: ReactorStream, now: float) -> None:
        self._unregister(stream)
        stream.ended = True
        try:
            stream.decoder.close(now)
        except Exception as err:  # a bug must cost one stream, never the reader thread
            stream.decoder.rec.fail("malformed", f"could not settle the stream: {type(err).__name__}: {err}")
        self._outbox.append(stream)
        self._async.send()

    def _drop(self, stream: ReactorStream) -> None:
        self._unregister(stream)
        if stream.scanner is not None:  # the record keeps the chunks seen: hand over those the scanner holds
            try:
                stream.scanner.flush()
            except Exception as err:  # a bug must cost one stream, never the reader thread
                stream.decoder.rec.fail("malformed", f"could not settle the stream: {type(err).__name__}: {err}")
        self._outbox.append(stream)
        self._async.send()

    def health(self) -> ReaderHealth:
        """Take the figures gathered since the last call."""
        batch_ms = self.batch_ms
        health = ReaderHealth(
            batch_ms, self.tick_lag_ms, self.waiting_bound_ms, self.woken_tail_ms, sum(batch_ms) / 1000.0, self.measured_ms
        )
        self.batch_ms, self.tick_lag_ms = array("d"), array("d")
        self.waiting_bound_ms, self.woken_tail_ms, self.measured_ms = array("d"), array("d"), array("d")
        return health


_instance: Reactor | None = None


def reactor() -> Reactor:
    """The process's reactor, started on first use."""
    global _instance
    if _instance is None:
        _instance = Reactor()
    return _instance


def running_reactor() -> Reactor | None:
    """The reactor if this process started one (the self-monitor reads its health)."""
    return _instance
