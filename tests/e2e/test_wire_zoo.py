"""The wire zoo: every real server's dialect, replayed byte for byte, gives the exact record.

Each fixture (tests/support/wirezoo/fixtures.py) is served by a tiny replay server at a
realistic pace; the client reads it with both readers (the reactor thread and
the greenlet fallback), and the test checks the whole record: status, error
kind, token source, tokens per chunk, totals, and every content chunk's
arrival against the moment the server wrote it.
"""

from __future__ import annotations

import gevent
import pytest

from loadtest.client.stream import StreamingClient
from loadtest.client.wire import build_body
from support.wirezoo.fixtures import ZOO, Fixture
from support.wirezoo.server import ReplayServer

pytestmark = pytest.mark.solo

#: A chunk is stamped when its bytes are read: after the server's write, and
#: (on a shared 2-core machine) within a few ms of it.
LATE_MS = 25.0


@pytest.fixture(scope="module")
def zoo():
    with ReplayServer(ZOO) as server:
        yield server


@pytest.mark.parametrize("use_reactor", [True, False], ids=["reactor", "greenlet"])
@pytest.mark.parametrize("fixture", ZOO, ids=[f.name for f in ZOO])
def test_fixture_gives_the_exact_record(zoo, fixture: Fixture, use_reactor):
    client = StreamingClient(zoo.base_url(fixture.name), fixture.api, timeout_s=20, use_reactor=use_reactor)
    try:
        # the tool-call fixtures check the joined calls, which only a captured answer keeps
        rec = client.send(build_body(fixture.api, "m", fixture.prompt, 16), capture_text="tool_calls" in fixture.expect)
    finally:
        client.close()
    exchange = [e for e in zoo.exchanges if e.fixture == fixture.name][-1]
    expect = dict(fixture.expect)
    assert rec.status == expect.pop("status", 200)
    assert rec.ok is expect.pop("ok"), rec.error
    assert rec.error_kind == expect.pop("error_kind", None), rec.error
    assert list(rec.chunk_tokens) == expect.pop("chunk_tokens")
    assert rec.completion_tokens == expect.pop("completion_tokens")
    if "token_source" in expect:
        assert rec.token_source == expect.pop("token_source")
    if "error_contains" in expect:
        assert expect.pop("error_contains") in rec.error
    for key, value in expect.items():
        assert getattr(rec, key) == value, key
    # Timing: each content chunk arrives after its write, and soon after it.
    assert len(rec.chunk_ms) == len(fixture.chunk_writes)
    for arrived, write in zip(rec.chunk_ms, fixture.chunk_writes):
        sent = (exchange.sent_at[write] - rec.start_perf) * 1000.0
        assert sent <= arrived < sent + LATE_MS, (arrived, sent)
    if fixture.chunk_writes:
        assert rec.ttft_ms == rec.chunk_ms[0]
    else:
        assert rec.ttft_ms != rec.ttft_ms  # NaN: no content, no TTFT
    assert rec.e2e_ms >= (rec.chunk_ms[-1] if len(rec.chunk_ms) else 0.0)


@pytest.mark.untimed
def test_a_stale_keepalive_connection_is_resent_on_a_fresh_one():
    """llama-server closes a connection after 100 requests: the next request must not fail."""
    fixture = next(f for f in ZOO if f.name == "llamacpp-chat")
    with ReplayServer([fixture], close_after=2) as server:
        client = StreamingClient(server.base_url(fixture.name), "chat", timeout_s=10)
        try:
            recs = [client.send(build_body("chat", "m", "hi", 4)) for _ in range(5)]
        finally:
            client.close()
    assert all(r.ok for r in recs), [r.error for r in recs]
    # Connections answer two requests each; the third on each is closed unanswered and resent.
    assert [r.resends for r in recs] == [0, 0, 1, 0, 1]
    assert server.connections == 3
    assert sum(not e.answered for e in server.exchanges) == 2


@pytest.mark.untimed
def test_a_fresh_connection_closed_without_answer_is_a_failure():
    fixture = next(f for f in ZOO if f.name == "llamacpp-chat")
    with ReplayServer([fixture], close_after=0) as server:
        client = StreamingClient(server.base_url(fixture.name), "chat", timeout_s=10)
        try:
            rec = client.send(build_body("chat", "m", "hi", 4))
        finally:
            client.close()
    # the connection was made, then closed unanswered: a disconnect, not a refusal (a trial read
    # "connect: HTTPConnectionClosed: connection closed." after llama-server was killed)
    assert not rec.ok and rec.error_kind == "disconnect" and rec.status == 0 and rec.resends == 0, rec.error
    assert rec.error.startswith("the connection was closed before any response byte (HTTPConnectionClosed"), rec.error
    assert server.connections == 1


@pytest.mark.untimed
def test_an_exception_from_the_http_layer_costs_one_request_not_the_run(zoo):
    """A header value with a line break makes geventhttpclient raise ValueError: recorded, not raised."""
    client = StreamingClient(zoo.base_url("openai-chat"), "chat", headers={"X-Bad": "a\r\nb"}, timeout_s=5)
    try:
        rec = client.send(build_body("chat", "m", "hi", 4))
        good = StreamingClient(zoo.base_url("openai-chat"), "chat", timeout_s=5).send(build_body("chat", "m", "hi", 4))
    finally:
        client.close()
    assert rec.error_kind == "client_error" and "ValueError" in rec.error
    assert good.ok


@pytest.mark.untimed
def test_query_parameters_and_env_headers_reach_the_server(zoo, monkeypatch):
    from loadtest.client.stream import client_for
    from loadtest.scenario import parse_scenario

    monkeypatch.setenv("ZOO_TEST_KEY", "k-123")
    scenario = parse_scenario({
        "name": "q", "load": {"levels": [1]},
        "target": {"base_url": zoo.base_url("openai-chat") + "?deployment=d1", "query": {"api-version": "2024-10-21"},
                   "headers_env": {"api-key": "ZOO_TEST_KEY"}, "headers": {"X-Team": "perf"}},
    })
    client = client_for(scenario.target, None)
    try:
        rec = client.send(build_body("chat", "m", "hi", 4))
    finally:
        client.close()
    assert rec.ok, rec.error
    exchange = zoo.exchanges[-1]
    assert exchange.path.endswith("/v1/chat/completions?deployment=d1&api-version=2024-10-21")
    assert exchange.headers["api-key"] == "k-123" and exchange.headers["x-team"] == "perf"


@pytest.mark.untimed
def test_parser_cost_is_linear_in_a_long_event():
    """Feeding a 1 MB event in 1 kB pieces keeps the pieces, never re-joins them per read."""
    from loadtest.client.sse import SSEParser

    parser = SSEParser()
    payload = b"data: " + b"y" * 1_000_000
    pieces = [payload[i:i + 1024] for i in range(0, len(payload), 1024)]
    for piece in pieces:
        assert parser.feed(piece) == []
    assert len(parser._pieces) == len(pieces)  # appended, not concatenated each time
    assert parser.feed(b"\n\n") == [b"y" * 1_000_000]


@pytest.mark.untimed
def test_reactor_survives_every_fixture_at_once(zoo):
    """All dialects streaming concurrently through one reactor: each record as when alone."""
    clients = [StreamingClient(zoo.base_url(f.name), f.api, timeout_s=20) for f in ZOO]
    jobs = [gevent.spawn(c.send, build_body(f.api, "m", f.prompt, 16)) for c, f in zip(clients, ZOO)]
    gevent.joinall(jobs, timeout=60)
    for c in clients:
        c.close()
    for job, fixture in zip(jobs, ZOO):
        rec = job.value
        assert rec is not None, fixture.name
        assert rec.error_kind == fixture.expect.get("error_kind"), (fixture.name, rec.error)
        assert list(rec.chunk_tokens) == fixture.expect["chunk_tokens"], fixture.name
