"""Greenlet reads (TLS) are stamped when the hub's poll returned, and each read's delay is bounded.

Real gevent sockets and a real OS thread as the sender; the hub is kept busy
by greenlets that spin, as decoding 100 other streams would.
"""

from __future__ import annotations

import sys
import time

import gevent
import gevent.socket
from gevent import monkey
import pytest

from loadtest.client.hub_clock import ReadTimer, hub_clock

pytestmark = pytest.mark.solo

_start_thread = monkey.get_original("_thread", "start_new_thread")
_real_sleep = monkey.get_original("time", "sleep")


def spin(seconds: float) -> None:
    """Hold the hub (and the GIL) without yielding, like a long decode."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def send_later(socks: list, delay_s: float, sent: list[float]) -> None:
    """From a real thread: sleep, note the time, write one byte to each socket."""

    def run() -> None:
        _real_sleep(delay_s)
        sent.append(time.perf_counter())
        for s in socks:
            s.send(b"x")

    _start_thread(run, ())


def timed_read(sock, stamps: list[float], then_spin_s: float = 0.0) -> None:
    timer = ReadTimer(hub_clock(), sock.fileno(), time.perf_counter())
    rounds = timer.before_recv()
    assert sock.recv(100) == b"x"
    stamps.append(timer.stamp(rounds))
    timer.settle(stamped_content=True)
    timer.close()
    spin(then_spin_s)


def test_a_read_woken_by_a_waiting_poll_is_stamped_at_the_wake_not_when_its_greenlet_ran():
    clock = hub_clock()
    clock.health()  # start afresh
    pairs = [gevent.socket.socketpair() for _ in range(4)]
    stamps: list[float] = []
    sent: list[float] = []
    readers = [gevent.spawn(timed_read, a, stamps, 0.02) for a, _ in pairs]
    gevent.sleep(0.01)  # every reader is parked in recv; the hub waits in epoll
    send_later([b for _, b in pairs], 0.05, sent)
    gevent.joinall(readers, timeout=5)
    assert len(stamps) == 4
    # Each reader spins 20 ms after its read: without the poll clock the last
    # one would be stamped 60 ms late. All four bytes came during one waiting poll.
    assert max(stamps) - sent[0] < 0.01
    assert min(stamps) >= sent[0]
    health = clock.health()
    assert len(health.woken_tail_ms) == 4 and max(health.woken_tail_ms) == 0.0
    for a, b in pairs:
        a.close()
        b.close()


def test_bytes_that_waited_behind_a_busy_hub_get_a_bound_covering_the_wait():
    clock = hub_clock()
    a, b = gevent.socket.socketpair()
    stamps: list[float] = []
    reader = gevent.spawn(timed_read, a, stamps)
    gevent.sleep(0.01)  # parked in recv
    clock.health()
    b.send(b"x")
    sent = time.perf_counter()
    spin(0.03)  # the hub cannot poll: the byte waits in the kernel
    reader.join(timeout=5)
    assert stamps and stamps[0] >= sent
    true_delay_ms = (stamps[0] - sent) * 1000.0
    health = clock.health()
    assert len(health.waiting_bound_ms) == 1 and not len(health.woken_tail_ms)
    assert health.waiting_bound_ms[0] >= true_delay_ms >= 25.0
    a.close()
    b.close()


def two_bytes_waiting():
    """A socket with two bytes already in it, its read timer, and the clock's figures cleared."""
    clock = hub_clock()
    a, b = gevent.socket.socketpair()
    b.send(b"xy")
    timer = ReadTimer(clock, a.fileno(), time.perf_counter())
    clock.health()
    return clock, timer, a, b


def test_a_read_that_did_not_wait_carries_the_previous_bound_plus_the_time_since():
    clock, timer, a, b = two_bytes_waiting()
    rounds = timer.before_recv()
    assert a.recv(1) == b"x"
    first = timer.stamp(rounds)
    timer.settle(stamped_content=True)
    spin(0.01)
    rounds = timer.before_recv()
    assert a.recv(1) == b"y"  # already in the socket: no wait
    second = timer.stamp(rounds)
    timer.settle(stamped_content=True)
    timer.close()
    health = clock.health()
    assert health.woken_tail_ms[1] >= (second - first) * 1000.0 >= 10.0
    assert health.woken_tail_ms[1] >= health.woken_tail_ms[0]
    a.close()
    b.close()


def busy_stream(sock, reads: int, spin_s: float) -> None:
    """Read ``reads`` bytes that are already waiting, decoding ``spin_s`` after each: one long round."""
    timer = ReadTimer(hub_clock(), sock.fileno(), time.perf_counter())
    for _ in range(reads):
        rounds = timer.before_recv()
        assert sock.recv(1) == b"x"
        timer.stamp(rounds)  # a read that did not wait: it sweeps, and yields to nobody
        timer.settle(stamped_content=True)
        spin(spin_s)
    timer.close()


def test_bytes_that_came_late_in_a_busy_round_are_bounded_by_the_sweeps_not_the_whole_round():
    """One greenlet reads six waiting chunks, decoding 10 ms after each; another stream's byte comes 35 ms in.

    The poll after that 60 ms round returns at once. Without the sweeps the byte
    could have come any time in the round (a 60 ms bound); each read's sweep
    shows it was not there until about 30 ms in.
    """
    clock = hub_clock()
    busy_a, busy_b = gevent.socket.socketpair()
    a, b = gevent.socket.socketpair()
    stamps: list[float] = []
    reader = gevent.spawn(timed_read, a, stamps)
    gevent.sleep(0.01)  # the reader is parked in recv
    clock.health()
    late: list[float] = []
    busy_b.send(b"x" * 6)
    started = time.perf_counter()
    send_later([b], 0.035, late)
    busy_stream(busy_a, 6, 0.01)  # the hub is held for 60 ms: no poll until it ends
    round_end = time.perf_counter()
    reader.join(timeout=5)
    assert stamps and late
    round_ms = (round_end - started) * 1000.0
    true_delay_ms = (stamps[0] - late[0]) * 1000.0
    health = clock.health()
    assert len(health.waiting_bound_ms) == 1  # the reader's: its poll returned at once
    bound_ms = health.waiting_bound_ms[0]
    assert round_ms >= 60.0 and true_delay_ms > 0
    assert bound_ms >= true_delay_ms
    assert bound_ms <= true_delay_ms + 25.0  # within about two sweeps of the truth
    assert bound_ms < round_ms - 15.0  # not the whole round
    for x, y in ((busy_a, busy_b), (a, b)):
        x.close()
        y.close()


def test_bytes_that_came_after_the_streams_own_sweep_are_bounded_from_that_sweep():
    """A read whose bytes waited 20 ms behind a busy hub, then a chunk that came during its own decode.

    The second chunk is read without a wait. Chained from the first read it
    could be 30 ms late; the sweep the stream made right after that read found
    nothing, so it came within the 10 ms since.
    """
    clock = hub_clock()
    a, b = gevent.socket.socketpair()
    armed: list[bool] = []
    sent: list[float] = []

    def send_when_armed() -> None:
        while not armed:
            _real_sleep(0.0005)
        _real_sleep(0.002)
        sent.append(time.perf_counter())
        b.send(b"y")

    def subject(out: list[float]) -> None:
        timer = ReadTimer(clock, a.fileno(), time.perf_counter())
        rounds = timer.before_recv()
        assert a.recv(1) == b"x"
        timer.stamp(rounds)  # stamped at the poll, then swept: nothing more yet
        timer.settle(stamped_content=True)
        armed.append(True)
        spin(0.01)  # decoding, while "y" comes
        rounds = timer.before_recv()
        assert a.recv(1) == b"y"  # already there: no wait
        out.append(timer.stamp(rounds))
        timer.settle(stamped_content=True)
        timer.close()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # as in a run (load/session.py), so the sender thread gets the GIL
    try:
        out: list[float] = []
        reader = gevent.spawn(subject, out)
        gevent.sleep(0.01)  # parked in recv
        clock.health()
        _start_thread(send_when_armed, ())
        b.send(b"x")
        spin(0.02)  # the hub is busy: "x" waits 20 ms
        reader.join(timeout=5)
    finally:
        sys.setswitchinterval(interval)
    assert out and sent
    health = clock.health()
    first_ms, second_ms = health.waiting_bound_ms[-2:]
    true_delay_ms = (out[0] - sent[0]) * 1000.0
    assert first_ms >= 20.0  # "x" may have waited the whole busy spell
    assert second_ms >= true_delay_ms
    assert second_ms < first_ms  # not chained from the first read's bound
    for x in (a, b):
        x.close()


def test_a_read_that_stamped_no_content_chunk_is_not_counted():
    """A role chunk, a usage chunk or [DONE] times nothing: its delay does not enter the self-check."""
    clock, timer, a, b = two_bytes_waiting()
    for stamped_content in (False, True):
        rounds = timer.before_recv()
        a.recv(1)
        timer.stamp(rounds)
        timer.settle(stamped_content)
    timer.close()
    health = clock.health()
    assert len(health.woken_tail_ms) + len(health.waiting_bound_ms) == 1
    for x in (a, b):
        x.close()
