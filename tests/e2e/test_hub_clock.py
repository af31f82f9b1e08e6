"""Greenlet reads (TLS) are stamped when the hub's poll returned, and each read's delay is bounded.

Real gevent sockets and a real OS thread as the sender; the hub is kept busy
by greenlets that spin, as decoding 100 other streams would.
"""

from __future__ import annotations

import subprocess
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


def timed_read(sock, stamps: list[float], then_spin_s: float = 0.0) -> None:
    timer = ReadTimer(hub_clock(), sock.fileno(), time.perf_counter())
    rounds = timer.before_recv()
    assert sock.recv(100) == b"x"
    stamps.append(timer.stamp(rounds))
    timer.settle(stamped_content=True)
    timer.close()
    spin(then_spin_s)


# Another process that writes one byte to each inherited fd, back to back, a
# delay after a "go" on stdin; it prints perf_counter() (CLOCK_MONOTONIC, shared
# across processes) just before and just after each write. Not a thread of this
# process: a thread needs the GIL between its writes, and a spinning reader
# holds it, so in CI the bytes after the first were written 20 ms late.
_SENDER = """
import os, sys, time
delay, fds = float(sys.argv[1]), [int(a) for a in sys.argv[2:]]
print("ready", flush=True)
os.read(0, 1)
time.sleep(delay)
times = []
for fd in fds:
    times.append(time.perf_counter())
    os.write(fd, b"x")
    times.append(time.perf_counter())
print(*times, flush=True)
"""


# A bound starts at most at the previous poll's stamp, which the check watcher
# takes a few microseconds after epoll gathered its events: a byte that came
# in between is older than the bound says by those microseconds.
SLACK_MS = 0.05


class Sender:
    """Starts the writer process and waits until it is up (Python's start-up takes tens of ms); :meth:`go` releases it."""

    def __init__(self, socks: list, delay_s: float = 0.0) -> None:
        fds = [s.fileno() for s in socks]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SENDER, str(delay_s), *map(str, fds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=fds,
        )
        # Wait for it to be up (blocking the hub: nothing is timed yet), so the delay counts from go.
        assert self.proc.stdout.readline() == b"ready\n"

    def go(self) -> None:
        self.proc.stdin.write(b"g")
        self.proc.stdin.flush()

    def written(self) -> list[tuple[float, float]]:
        """Per socket: the time just before its write and just after."""
        try:
            times = [float(t) for t in self.proc.stdout.readline().split()]
        finally:
            self.proc.kill()
            self.proc.wait(timeout=5)
        return list(zip(times[::2], times[1::2]))


def test_a_read_woken_by_a_waiting_poll_is_stamped_at_the_wake_not_when_its_greenlet_ran():
    """Four bytes come while the hub waits in its poll; each reader then decodes 20 ms.

    The bytes are written by another process, back to back. Most often one poll
    returns with all four; but the hub can wake between two writes (on a busy
    host CI saw two polls of two), and then the later bytes wait behind a
    decoding reader: the next test's case, with a bound instead. So each read
    is checked by what happened to it: a read that a waiting poll woke is
    stamped within the wake-up of its byte and carries no delay; any other
    carries a bound that covers its true delay; and every read that ran after
    another reader's decode was stamped at its poll, not 20 ms later.
    """
    clock = hub_clock()
    pairs = [gevent.socket.socketpair() for _ in range(4)]
    sender = Sender([b for _, b in pairs])
    reads: dict[int, tuple[float, bool, float, float]] = {}

    def read(i: int) -> None:
        sock = pairs[i][0]
        timer = ReadTimer(clock, sock.fileno(), time.perf_counter())
        rounds = timer.before_recv()
        assert sock.recv(100) == b"x"
        ran_at = time.perf_counter()
        stamp = timer.stamp(rounds)
        reads[i] = (stamp, timer.woken, timer.carried, ran_at)
        timer.settle(stamped_content=True)
        timer.close()
        spin(0.02)

    readers = [gevent.spawn(read, i) for i in range(4)]
    gevent.sleep(0.01)  # every reader is parked in recv; the hub waits in epoll
    clock.health()  # start afresh
    sender.go()
    gevent.joinall(readers, timeout=5)
    written = sender.written()
    assert len(reads) == 4 and len(written) == 4
    late_runners = 0
    for i, (stamp, woken, bound_ms, ran_at) in reads.items():
        before, after = written[i]
        assert stamp >= before  # never stamped before its byte was written
        true_delay_ms = (stamp - after) * 1000.0  # at least this late
        assert stamp <= ran_at
        if woken:
            assert bound_ms == 0.0 and true_delay_ms < 10.0  # late only by the wake-up
        else:
            assert bound_ms >= true_delay_ms - SLACK_MS
        if ran_at - stamp >= 0.015:  # it ran after another reader's 20 ms decode
            late_runners += 1
    # Four polls of one byte each would need three 20 ms gaps between back-to-back writes.
    assert late_runners >= 1
    health = clock.health()
    # Usually the first poll waited; if the first byte came within 0.2 ms of the
    # start of a poll (the probe wakes the hub every 5 ms) none was woken.
    assert len(health.woken_tail_ms) == sum(1 for r in reads.values() if r[1])
    assert all(ms == 0.0 for ms in health.woken_tail_ms)
    assert len(health.woken_tail_ms) + len(health.waiting_bound_ms) == 4
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
    sender = Sender([b], delay_s=0.035)
    busy_b.send(b"x" * 6)
    started = time.perf_counter()
    sender.go()
    busy_stream(busy_a, 6, 0.01)  # the hub is held for 60 ms: no poll until it ends
    round_end = time.perf_counter()
    reader.join(timeout=5)
    [(before, after)] = sender.written()
    assert stamps
    assert before < round_end  # the premise: the byte came during the round
    round_ms = (round_end - started) * 1000.0
    health = clock.health()
    assert len(health.waiting_bound_ms) == 1  # the reader's: its poll returned at once
    bound_ms = health.waiting_bound_ms[0]
    assert round_ms >= 60.0 and stamps[0] > after
    assert bound_ms >= (stamps[0] - after) * 1000.0 - SLACK_MS
    assert bound_ms <= (stamps[0] - before) * 1000.0 + 25.0  # within about two sweeps of the truth
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
