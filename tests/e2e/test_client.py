"""The streaming client against the real mock: both readers, token sources, failures.

geventhttpclient uses gevent's sockets directly, so no monkey-patching is
needed (and none is done: it would leak into the other tests of this process).
"""

from __future__ import annotations

import gevent
import numpy as np
import pytest

from loadtest.client.stream import StreamingClient
from loadtest.client.wire import build_body
from loadtest.mock.process import MockServer

pytestmark = pytest.mark.solo


#: the ``mock`` fixture's server (tests/conftest.py): 10 ms steps, whatever the concurrency
MOCK_ARGS = ["--decode-base-ms", "10", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0"]


@pytest.fixture(scope="module")
def chunky_mock():
    """Four tokens per SSE chunk, as servers send under speculative decoding."""
    with MockServer(["--decode-base-ms", "5", "--decode-per-seq-ms", "0", "--tokens-per-chunk", "4"]) as server:
        yield server


@pytest.mark.parametrize("use_reactor", [True, False], ids=["reactor", "greenlet"])
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_stream_is_timed_per_chunk(mock, use_reactor, api):
    client = StreamingClient(mock.base_url, api, use_reactor=use_reactor)
    recs = [client.send(build_body(api, "mock-model", "one two three", 12, continuous_usage=True)) for _ in range(3)]
    client.close()
    for rec in recs:
        assert rec.ok, rec.error
        assert rec.status == 200
        assert len(rec.chunk_ms) == 12 and list(rec.chunk_tokens) == [1] * 12
        assert rec.token_source == "continuous_usage" and rec.completion_tokens == 12
        assert rec.prompt_tokens == 3
        # TTFT is the first content chunk, never before the first byte.
        assert rec.ttfb_ms <= rec.ttft_ms == rec.chunk_ms[0]
        assert rec.e2e_ms >= rec.chunk_ms[-1]
        gaps = np.diff(np.asarray(rec.chunk_ms))
        assert abs(np.median(gaps) - 10) < 1.5, gaps


@pytest.mark.untimed
def test_usage_total_is_spread_over_multi_token_chunks(chunky_mock):
    client = StreamingClient(chunky_mock.base_url, "chat")
    rec = client.send(build_body("chat", "mock-model", "hi", 16))  # include_usage only
    client.close()
    assert rec.ok, rec.error
    assert len(rec.chunk_ms) == 4
    assert rec.token_source == "usage" and rec.completion_tokens == 16
    assert list(rec.chunk_tokens) == [4, 4, 4, 4]


@pytest.mark.untimed
def test_continuous_usage_gives_exact_tokens_per_chunk(chunky_mock):
    client = StreamingClient(chunky_mock.base_url, "chat")
    rec = client.send(build_body("chat", "mock-model", "hi", 10, continuous_usage=True))
    client.close()
    assert rec.ok, rec.error
    assert rec.token_source == "continuous_usage"
    assert list(rec.chunk_tokens) == [4, 4, 2]


@pytest.mark.untimed
def test_without_usage_tokens_are_counted_as_chunks(chunky_mock):
    client = StreamingClient(chunky_mock.base_url, "chat")
    body = build_body("chat", "mock-model", "hi", 8, extra_body={"stream_options": {"include_usage": False}})
    rec = client.send(body)
    client.close()
    assert rec.ok, rec.error
    assert rec.token_source == "chunks" and rec.completion_tokens == len(rec.chunk_ms) == 2


@pytest.mark.untimed
def test_connection_refused_is_a_connect_error():
    rec = StreamingClient("http://127.0.0.1:9/v1", "chat", timeout_s=5).send(b"{}")
    assert rec.error_kind == "connect" and rec.status == 0 and not rec.ok


def test_timeout_mid_stream_keeps_the_chunks_seen(mock):
    client = StreamingClient(mock.base_url, "chat", timeout_s=0.25)
    rec = client.send(build_body("chat", "mock-model", "hi", 100))
    assert rec.error_kind == "timeout"
    assert 10 <= len(rec.chunk_ms) <= 30
    assert 240 <= rec.e2e_ms <= 400
    # The cut connection is not reused: the next request works.
    client.timeout_s = 10
    assert client.send(build_body("chat", "mock-model", "hi", 3)).ok
    client.close()


def test_killed_greenlet_leaves_a_cancelled_record(mock):
    client = StreamingClient(mock.base_url, "chat")
    g = gevent.spawn(client.send, build_body("chat", "mock-model", "hi", 100))
    gevent.sleep(0.2)
    g.kill(block=True, timeout=5)
    rec = client.in_flight
    assert rec is not None and rec.error_kind == "cancelled"
    assert len(rec.chunk_ms) > 5
    assert client.send(build_body("chat", "mock-model", "hi", 3)).ok
    client.close()


@pytest.mark.untimed
def test_http_errors_are_classified(mock):
    client = StreamingClient(mock.base_url, "chat")
    rec = client.send(b'{"model": "m", "messages": "not a list", "stream": true}')
    assert rec.status == 400 and rec.error_kind == "http_4xx"
    assert "HTTP 400" in rec.error
    client.close()


def test_many_concurrent_streams_share_the_reactor(mock):
    clients = [StreamingClient(mock.base_url, "chat") for _ in range(40)]
    jobs = [gevent.spawn(c.send, build_body("chat", "mock-model", "hi", 20)) for c in clients]
    gevent.joinall(jobs, timeout=30)
    recs = [j.value for j in jobs]
    assert all(r is not None and r.ok for r in recs)
    gaps = np.concatenate([np.diff(np.asarray(r.chunk_ms)) for r in recs])
    assert abs(np.median(gaps) - 10) < 1.5
    for c in clients:
        c.close()


@pytest.mark.untimed
def test_json_that_is_not_a_chunk_fails_one_request_not_the_reader():
    """A server that sends JSON of the wrong shape gets 'malformed'; the reader thread lives on."""
    from loadtest.client.decode import StreamDecoder
    from loadtest.client.record import RequestRecord

    for payload in (b'{"choices": [null]}', b'{"choices": [{"delta": "text"}]}', b'{"choices": 3}', b"[1, 2]"):
        rec = RequestRecord(start_wall=0.0, start_perf=0.0)
        decoder = StreamDecoder(rec, "chat")
        assert decoder.feed(b"data: " + payload + b"\n\n", 0.001) is False
        assert rec.error_kind == "malformed", payload
