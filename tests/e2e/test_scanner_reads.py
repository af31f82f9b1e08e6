"""The reactor's read, compiled and in Python, gives the same record over a real socket.

Each case is an HTTP/1.1 response (head, then the body in chunked framing cut
into HTTP chunks at arbitrary points, sometimes with chunk extensions) written
into a socket pair one piece at a time; after each piece the reactor's read for
that stream runs once, by the compiled scanner (``Scanner.read`` and the
reactor's ``_settle``) and by the Python read (``Reactor._read_python``), with the
same ``now``. The records, the chunks each read stamped, and how the stream ended
(cleanly, bad framing, a close mid-stream) must be the same. Over TLS too: the
same bytes through a real TLS connection on a socket pair, read through its
OpenSSL object by both paths, with the peer closing cleanly, with close_notify,
or without it.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
from array import array
import time
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geventhttpclient.response import HTTPParseError, HTTPResponse

from loadtest.client import scanner
from loadtest.client._http import parser_feed
from loadtest.client.arrival import enable_arrival_stamps
from loadtest.client.decode import StreamDecoder
from loadtest.client.reactor import Reactor
from loadtest.client.reactor_stream import ReactorStream
from loadtest.client.reader_health import WAITED_S
from loadtest.client.record import RequestRecord
from loadtest.mock.tls import self_signed_cert
from support.same_record import assert_same_record
from support.wirezoo.fixtures import ZOO

pytestmark = [pytest.mark.untimed,
              pytest.mark.skipif(scanner.Scanner is None, reason="the C scanner is not built here (or LOADTEST_SCANNER=python)")]

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
STREAMS = [f for f in ZOO if f.status == 200 and f.api in ("chat", "completions", "responses")]
#: the ``mock`` fixture's server (tests/conftest.py), for the reactor-on-poll(2) test: quick steps, untimed
MOCK_ARGS = ["--decode-base-ms", "2", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0"]


class _Quiet:
    """What ``Reactor._end`` touches besides the stream: a poller and the hub's wake-up (both no-ops here)."""

    def send(self) -> None:
        pass

    def unregister(self, fd: int) -> None:
        pass

    def register(self, fd: int, mask: int) -> None:
        pass


def _reactor() -> Reactor:
    reactor = Reactor.__new__(Reactor)  # no thread, no epoll: only its per-stream steps are called
    reactor._streams, reactor._outbox, reactor._async, reactor._poll = {}, deque(), _Quiet(), _Quiet()
    return reactor


def _chunked(body: bytes, cuts: list[int], extension: bool) -> bytes:
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    out = b""
    for a, b in zip(points, points[1:]):
        if b > a:
            out += b"%x%s\r\n%s\r\n" % (b - a, b";x=1" if extension else b"", body[a:b])
    return out + b"0\r\n\r\n"


def _tls_pair(contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> tuple[ssl.SSLSocket, ssl.SSLSocket]:
    """A TLS connection over a socket pair: (ours, non-blocking, read as the reactor reads; theirs, blocking)."""
    server, client = contexts
    a, b = socket.socketpair()
    accepted: dict = {}
    handshake = threading.Thread(target=lambda: accepted.update(theirs=server.wrap_socket(b, server_side=True)))
    handshake.start()
    ours = client.wrap_socket(a)
    handshake.join(10)
    ours.setblocking(False)
    return ours, accepted["theirs"]


def _close(theirs: socket.socket, how: bool | str) -> None:
    if how in ("notify", "notify+"):  # TLS's close_notify, then the close (unwrap waits for our reply: it never comes)
        theirs.settimeout(0.05)
        try:
            theirs.unwrap()
        except OSError:
            pass
    theirs.close()  # an SSLSocket's close sends no close_notify: the ragged close most servers make


def _run(api: str, head: bytes, writes: list[bytes], compiled: bool | str, close_early: bool | str,
         tls: tuple | None = None) -> tuple:
    """One stream read as the reactor reads it: ``compiled`` False (Python), True (the scanner's
    read, the record complete after each), or ``"held"`` (the scanner's read leaving the usual
    chunks held, as the reactor's loop does, until a read goes to Python, an end, or the close)."""
    ours, theirs = _tls_pair(tls) if tls else socket.socketpair()
    ours.setblocking(False)
    reactor = _reactor()
    rec = RequestRecord(start_wall=0.0, start_perf=100.0)
    decoder = StreamDecoder(rec, api)
    if not compiled:
        decoder.scanner = None
    response = HTTPResponse()
    parser_feed(response, head)
    if compiled:  # as _http.PiecedResponse keeps them: the scanner de-frames whole-chunk reads from the head's end
        response.__dict__["_head_bytes"] = [head]
    stream = ReactorStream(ours, response, decoder, 100.0, ours._sslobj if tls else None)
    reactor._start(stream)
    ended_at_start = stream.ended
    reads = []
    try:
        for i, piece in enumerate(writes + [b""]):
            if stream.ended:
                break
            if piece:
                theirs.sendall(piece)
                if close_early and str(close_early).endswith("+") and i == len(writes) - 1:
                    _close(theirs, close_early)  # "+": the close comes with the last bytes, before their read
            elif close_early and not str(close_early).endswith("+"):
                _close(theirs, close_early)
            else:
                break
            now = 100.0 + (i + 1) * 0.01
            if stream.scanner is not None:
                outcome = stream.scanner.read(now, compiled == "held")
                added, _ = outcome if len(outcome) == 2 else reactor._settle(stream, outcome, now)
            else:
                added, _ = reactor._read_python(stream, now)
            reads.append(added)
        # the compiled read is the one under test (unless the head already held the whole stream)
        assert (stream.scanner is not None) == (bool(compiled) and not ended_at_start)
        if not stream.ended:  # the reads stopped before the stream's end: the reactor's drop hands over the rest
            reactor._drop(stream)
    finally:
        ours.close()
        if not close_early:
            theirs.close()
    _run.deframed = stream.scanner.deframed if stream.scanner is not None else 0
    return rec, reads, stream.ended


_same = assert_same_record


def _both(api: str, head: bytes, writes: list[bytes], close_early: bool | str = False,
          tls: tuple | None = None) -> RequestRecord:
    """The compiled read and the Python read give the same record; ``_both.deframed``: the compiled
    scanner's reads it de-framed itself (the HTTP parser not fed)."""
    c_rec, c_reads, c_ended = _run(api, head, writes, True, close_early, tls)
    _both.deframed = _run.deframed
    h_rec, h_reads, h_ended = _run(api, head, writes, "held", close_early, tls)
    _same(h_rec, c_rec)  # held chunks reach the record as the read's own do, in order
    assert (h_reads, h_ended) == (c_reads, c_ended)
    p_rec, p_reads, p_ended = _run(api, head, writes, False, close_early, tls)
    _same(c_rec, p_rec)
    assert (c_reads, c_ended) == (p_reads, p_ended)
    return c_rec


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(index=st.integers(0, len(STREAMS) - 1), chunk_cuts=st.lists(st.integers(0, 1 << 14), max_size=8),
       write_cuts=st.lists(st.integers(0, 1 << 14), max_size=6), extension=st.booleans(), in_head=st.integers(0, 40),
       truncate=st.one_of(st.none(), st.integers(1, 1 << 14)))
def test_split_reads_give_the_same_record(index, chunk_cuts, write_cuts, extension, in_head, truncate):
    fixture = STREAMS[index]
    wire = _chunked(b"".join(fixture.writes), chunk_cuts, extension)
    if truncate is not None:  # the connection drops mid-stream
        wire = wire[: truncate % len(wire)]
    head, wire = HEAD + wire[:in_head], wire[in_head:]  # some body bytes may come with the head
    points = sorted({c % (len(wire) + 1) for c in write_cuts} | {0, len(wire)})
    writes = [wire[a:b] for a, b in zip(points, points[1:]) if b > a]
    _both(fixture.api, head, writes, close_early=truncate is not None)


def test_the_usual_stream_is_read_whole_and_clean():
    fixture = next(f for f in STREAMS if f.name == "vllm-continuous-usage")
    writes = [b"%x\r\n%s\r\n" % (len(w), w) for w in fixture.writes] + [b"0\r\n\r\n"]
    rec = _both(fixture.api, HEAD, writes)
    assert rec.ok and len(rec.chunk_ms) == len(fixture.chunk_writes)
    # every whole-chunk read was de-framed by the scanner; the last chunk went to the parser, which ended it
    assert _both.deframed == len(writes) - 1


def test_the_framing_is_followed_across_a_chunk_cut_by_a_read():
    """Body bytes with the head and a chunk cut by the reads: those reads go to the parser, the next whole ones not."""
    fixture = next(f for f in STREAMS if f.name == "vllm-continuous-usage")
    chunks = [b"%x\r\n%s\r\n" % (len(w), w) for w in fixture.writes]
    head = HEAD + chunks[0] + chunks[1][:7]  # one whole chunk and a cut one came with the head
    writes = [chunks[1][7:20], chunks[1][20:]] + chunks[2:] + [b"0\r\n\r\n"]
    rec = _both(fixture.api, head, writes)
    assert rec.ok and len(rec.chunk_ms) == len(fixture.chunk_writes)
    assert _both.deframed == len(chunks) - 2  # not the two reads of the cut chunk, nor the last chunk


@pytest.mark.parametrize("odd", [b"%x;ext=1\r\n%s\r\n", b"%x \r\n%s\r\n", b"%x\n%s\r\n"])
def test_framing_it_does_not_read_strictly_goes_to_the_parser_for_the_rest(odd):
    """An extension, whitespace, a bare LF: the parser reads the stream from there on (and judges it), never this."""
    fixture = next(f for f in STREAMS if f.name == "vllm-continuous-usage")
    chunks = [b"%x\r\n%s\r\n" % (len(w), w) for w in fixture.writes]
    writes = chunks[:2] + [odd % (len(fixture.writes[2]), fixture.writes[2])] + chunks[3:] + [b"0\r\n\r\n"]
    _both(fixture.api, HEAD, writes)
    assert _both.deframed == 2


def test_frame_follows_only_what_the_parser_handed_over():
    """``Scanner.frame``: the framing from the head's end must give exactly the body the parser gave."""
    scanner_ = StreamDecoder(RequestRecord(start_wall=0.0, start_perf=100.0), "chat").scanner
    head = HEAD + b"5\r\nhello\r\n3\r\nab"
    assert scanner_.frame(head, b"helloab")
    assert not scanner_.frame(head, b"helloax")  # a different body: the parser alone
    assert not scanner_.frame(head + b"c\r\n0\r\n", b"helloabc")  # the last chunk: nothing to follow
    assert not scanner_.frame(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n", b"")  # no head end
    assert scanner_.frame(HEAD, b"")


@pytest.mark.parametrize("bad", [b"zz\r\n", b"3\r\nabcXY", b"-1\r\n"])
def test_bad_framing_fails_the_same_way(bad):
    ok = next(f for f in STREAMS if f.name == "vllm-continuous-usage")
    first = b"%x\r\n%s\r\n" % (len(ok.writes[0]), ok.writes[0])
    rec = _both("chat", HEAD, [first, bad])
    assert not rec.ok and rec.error_kind == "malformed" and "bad HTTP framing" in rec.error


def test_nothing_to_read_changes_nothing():
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    try:
        response = HTTPResponse()
        parser_feed(response, HEAD)
        rec = RequestRecord(start_wall=0.0, start_perf=100.0)
        decoder = StreamDecoder(rec, "chat")
        decoder.scanner.attach(ours.fileno(), False, parser_feed, response, [], HTTPParseError)
        assert decoder.scanner.read(100.5) == ("blocked", None, 0, None)
        assert rec.ok and not rec.chunk_ms
    finally:
        ours.close()
        theirs.close()


def test_the_arrival_stamp_is_the_kernels():
    """Over TCP the compiled read returns the kernel's wall-clock stamp of the bytes: after the send, before the read."""
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    try:
        assert enable_arrival_stamps(client)
        # The kernel turns stamping on a moment later (a deferred static key, and only once some
        # socket on the machine asks): a read before then has no stamp, and the client falls back to
        # its own clock. So send until a read is stamped (bounded), and check that stamp.
        for _ in range(40):
            time.sleep(0.05)
            sent = time.time()
            peer.sendall(b"data: x\n\n")
            time.sleep(0.01)
            data, arrived = scanner.recv_stamped(client.fileno(), 65536)
            assert data == b"data: x\n\n"
            if arrived is not None:
                break
        assert arrived is not None, "no read was stamped in 2 s"
        assert sent - 0.001 <= arrived <= time.time()
    finally:
        for s in (client, peer, server):
            s.close()


@pytest.mark.skipif(scanner.run_turns is None, reason="the compiled loop is built on Linux only")
def test_the_compiled_loop_reads_counts_and_hands_back_what_the_reactor_must_see():
    """``run_turns``: epoll waits, the scanners' reads of each batch and their delays, as the reactor's loop counts them."""
    reactor = _reactor()
    for name in ("batch_ms", "tick_lag_ms", "measured_ms", "woken_tail_ms", "waiting_bound_ms"):
        setattr(reactor, name, array("d"))
    poll = select.epoll()
    pairs, streams = [], []
    for _ in range(3):
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        response = HTTPResponse()
        parser_feed(response, HEAD)
        stream = ReactorStream(ours, response, StreamDecoder(RequestRecord(start_wall=0.0, start_perf=100.0), "chat"), 100.0)
        reactor._start(stream)
        poll.register(stream.fd, select.EPOLLIN)
        pairs.append((ours, theirs))
        streams.append(stream)
    stranger, stranger_peer = socket.socketpair()  # ready, but not a stream of this reactor: skipped
    wake_r, wake_w = os.pipe()
    poll.register(stranger.fileno(), select.EPOLLIN)
    poll.register(wake_r, select.EPOLLIN)
    python_read = streams[1]
    python_read.scanner.detach()
    python_read.scanner = None  # as if this one were read in Python: handed back
    usual = next(f for f in STREAMS if f.name == "vllm-continuous-usage").writes[1]
    framed = b"%x\r\n%s\r\n" % (len(usual), usual)

    def delays() -> dict:
        return {k: list(getattr(reactor, k)) for k in ("measured_ms", "woken_tail_ms", "waiting_bound_ms")}

    try:
        # 1. Nothing is ready when the loop starts: it waits (the tick is 2 s away), and the writes wake it.
        def send() -> None:
            time.sleep(0.05)
            for _, theirs in pairs:
                theirs.sendall(framed)
            stranger_peer.sendall(b"x")
            os.write(wake_w, b"\0")
        writer = threading.Thread(target=send)
        clock = array("d", [time.perf_counter() + 2.0, time.perf_counter()])
        t0 = time.perf_counter()
        writer.start()
        now, wall_now, waited, bound_ms, ready, rest = scanner.run_turns(
            poll.fileno(), reactor._streams, wake_r, reactor, clock, WAITED_S, 0.01, 0)
        writer.join()
        assert t0 + 0.04 <= now <= time.perf_counter() and abs(wall_now - time.time()) < 1.0
        assert clock[1] == now and clock[0] > now  # the last return kept; the tick not reached yet: still ahead
        assert ready >= 1 and rest  # it returns only with something to hand back (no max_turns)
        # the writes may land in one batch or several (the loop went on until it had something to hand back);
        # what it hands back stays ready until read, as the reactor then reads it
        seen = set(rest)
        for _ in range(20):
            if len(seen) == 2:
                break
            if (python_read.fd, None) in seen:
                python_read.raw.recv(65536)
            now, _, _, _, _, more = scanner.run_turns(poll.fileno(), reactor._streams, wake_r, reactor, clock,
                                                     WAITED_S, 0.01, 0)
            seen |= set(more)
        assert seen == {(python_read.fd, None), (wake_r, None)}
        # the chunks are held in C until the record is read: a flush (the decoder's close, a drop) hands them over
        assert [len(s.decoder.rec.chunk_ms) for s in streams] == [0, 0, 0]
        assert (streams[0].scanner.held, streams[2].scanner.held) == (1, 1)
        streams[0].scanner.flush()
        assert len(streams[0].decoder.rec.chunk_ms) == 1 and streams[0].scanner.held == 0
        assert streams[0].decoder.rec.ttft_ms == streams[0].decoder.rec.chunk_ms[0]
        d = delays()
        assert len(d["woken_tail_ms"]) + len(d["waiting_bound_ms"]) == 2 and not d["measured_ms"]  # (a socketpair: no kernel stamps)
        os.read(wake_r, 16)
        stranger.recv(16)
        try:
            python_read.raw.recv(65536)
        except BlockingIOError:  # (read above already)
            pass
        # 2. Data already waiting, the tick past: the turn returns at once, counts the tick's lateness and a bound.
        pairs[0][1].sendall(b"zz\r\n")  # bad framing: handed back to be settled
        pairs[2][1].sendall(framed)
        time.sleep(0.05)
        clock[0] = time.perf_counter() - 0.001
        lags = len(reactor.tick_lag_ms)
        now, _, waited, bound_ms, ready, rest = scanner.run_turns(poll.fileno(), reactor._streams, wake_r, reactor, clock,
                                                               WAITED_S, 0.01, 0)
        assert ready == 2 and len(rest) == 1 and bound_ms >= 50.0 and not waited
        fd, outcome = rest[0]
        assert fd == streams[0].fd and outcome[0] == "http"
        assert len(reactor.tick_lag_ms) == lags + 1 and abs(clock[0] - (now + 0.01)) < 1e-9
        assert streams[2].scanner.held == 2 and delays()["waiting_bound_ms"][-1] == pytest.approx(bound_ms)
        streams[2].decoder.close(100.9)  # the close hands over what is held, in order
        assert len(streams[2].decoder.rec.chunk_ms) == 2 and list(streams[2].decoder.rec.chunk_tokens) == [1, 1]
        # 3. max_turns: an empty batch comes back after that many turns, with nothing to see.
        batches = len(reactor.batch_ms)
        clock[0] = time.perf_counter() + 0.005
        _, _, _, _, ready, rest = scanner.run_turns(poll.fileno(), reactor._streams, wake_r, reactor, clock,
                                                    WAITED_S, 0.01, 1)
        assert (ready, rest) == (0, []) and len(reactor.batch_ms) == batches  # (an empty batch has no batch time)
        # 4. Turns that hand nothing back: their figures reach the reactor's arrays while the loop goes
        #    on (every 20 ms or so), not only when it returns; all of them by the time it returns.
        returned: list = []
        loop = threading.Thread(target=lambda: returned.append(scanner.run_turns(
            poll.fileno(), reactor._streams, wake_r, reactor, array("d", [time.perf_counter() + 2.0, 0.0]),
            WAITED_S, 0.01, 0)))
        bounds0, held0 = len(reactor.waiting_bound_ms) + len(reactor.woken_tail_ms), streams[2].scanner.held
        loop.start()
        seen_running, sent, deadline = False, 0, time.monotonic() + 20
        while time.monotonic() < deadline and not seen_running:
            pairs[2][1].sendall(framed)  # one usual chunk: held, nothing to hand back
            sent += 1
            time.sleep(0.01)
            seen_running = len(reactor.batch_ms) > batches and loop.is_alive()
        os.write(wake_w, b"\0")
        loop.join(20)
        assert seen_running and not loop.is_alive() and returned
        assert streams[2].scanner.held == held0 + sent  # every chunk sent was read and held, once
        # one delay per read, one batch time per turn that read (the last turn's, if it also had the
        # wake-up, is the caller's to add): nothing was lost in the hand-overs
        delays = len(reactor.waiting_bound_ms) + len(reactor.woken_tail_ms) - bounds0
        assert delays >= 1 and 0 <= delays - (len(reactor.batch_ms) - batches) <= 1
    finally:
        for ours, theirs in pairs + [(stranger, stranger_peer)]:
            ours.close()
            theirs.close()
        os.close(wake_r)
        os.close(wake_w)
        poll.close()


@pytest.fixture(scope="module")
def tls_contexts(tmp_path_factory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    cert, key = self_signed_cert(tmp_path_factory.mktemp("tls"))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
    return server, client


# (cut, end): how the wire is written and how the peer ends the connection
# ("+": the peer closes right after its last write, so one read gets the last bytes and the end)
TLS_CASES = [(0, "clean"), (1, "ragged"), (7, "clean"), (7, "notify"), (0, "notify+"), (1, "ragged+")]


@pytest.mark.parametrize(("cut", "end"), TLS_CASES)
@pytest.mark.parametrize("index", range(len(STREAMS)))
def test_tls_reads_give_the_same_record(tls_contexts, index, cut, end):
    """Over TLS each write is its own records, read through the OpenSSL object by both paths.

    cut 0: one write per event, as a paced server sends them; cut n > 0 puts n body bytes with the
    head and splits the rest into writes of n + 13 bytes, so records, HTTP chunks and events
    straddle each other. ``ragged``/``notify``: the peer closes after two thirds of the writes,
    without or with TLS's close_notify (both an end of stream, as the standard library's
    suppress_ragged_eofs makes them).
    """
    fixture = STREAMS[index]
    if cut == 0:
        wire = b"".join(b"%x\r\n%s\r\n" % (len(w), w) for w in fixture.writes) + b"0\r\n\r\n"
        writes = [b"%x\r\n%s\r\n" % (len(w), w) for w in fixture.writes] + [b"0\r\n\r\n"]
        head = HEAD
    else:
        wire = _chunked(b"".join(fixture.writes), [cut * 97, cut * 211], extension=cut == 7)
        head, wire = HEAD + wire[:cut], wire[cut:]
        writes = [wire[i:i + cut + 13] for i in range(0, len(wire), cut + 13)]
    if end != "clean":
        writes = writes[: max(1, 2 * len(writes) // 3)]
    _both(fixture.api, head, writes, close_early=False if end == "clean" else end, tls=tls_contexts)


def test_a_tls_read_takes_every_record_that_waits(tls_contexts):
    """Several records in the kernel at once (the usual read after a late wake-up): one read takes them all."""
    fixture = next(f for f in STREAMS if f.name == "vllm-continuous-usage")
    ours, theirs = _tls_pair(tls_contexts)
    try:
        response = HTTPResponse()
        parser_feed(response, HEAD)
        rec = RequestRecord(start_wall=0.0, start_perf=100.0)
        stream = ReactorStream(ours, response, StreamDecoder(rec, "chat"), 100.0, ours._sslobj)
        reactor = _reactor()
        reactor._start(stream)
        assert stream.scanner is not None
        assert stream.scanner.read(100.1) == ("blocked", None, 0, None)  # nothing yet (or only the session tickets)
        for w in fixture.writes[:5]:
            theirs.sendall(b"%x\r\n%s\r\n" % (len(w), w))  # one TLS record each
        time.sleep(0.05)
        added, arrived = stream.scanner.read(100.2)
        assert arrived is None  # no kernel stamp over TLS
        assert added == len(rec.chunk_ms) >= 4 and not stream.ended
        assert stream.scanner.read(100.3) == ("blocked", None, 0, None)
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("compiled", [True, False], ids=["scanner", "python"])
def test_the_reactor_on_poll_reads_as_on_epoll(mock, monkeypatch, compiled):
    """Where there is no epoll (not Linux) the reactor's loop polls with poll(2) and reads each ready
    stream itself, with the compiled scanner's read or in Python: the same records as on epoll.

    (In this untimed file: the reactor threads it starts stay, idle, for the rest of the process.)
    """
    from loadtest.client import poller
    from loadtest.client import reactor as reactor_module
    from loadtest.client.stream import StreamingClient
    from loadtest.client.wire import build_body

    if not compiled:
        monkeypatch.setattr("loadtest.client.decode.Scanner", None)
    monkeypatch.setattr(reactor_module, "make_poller", lambda: poller._PollAsEpoll(select.poll()))
    monkeypatch.setattr(reactor_module, "_instance", reactor_module.Reactor())  # a reactor thread on poll(2)
    client = StreamingClient(mock.base_url, "chat")
    recs = [client.send(build_body("chat", "mock-model", "one two three", 12, continuous_usage=True)) for _ in range(3)]
    client.close()
    on_poll = reactor_module._instance
    assert isinstance(on_poll._poll, poller._PollAsEpoll) and on_poll.batch_ms  # that reactor read them
    for rec in recs:
        assert rec.ok, rec.error
        assert len(rec.chunk_ms) == 12 and list(rec.chunk_tokens) == [1] * 12
        assert rec.token_source == "continuous_usage" and rec.completion_tokens == 12 and rec.prompt_tokens == 3
