"""The mock's parts without a socket: the byte stream of every option combination,
the engine's schedule, config round-trips, the metrics text, the precise timer."""

from __future__ import annotations

import asyncio
import json
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.errors import InputError
from loadtest.mock.config import MockConfig
from loadtest.mock.engine import Engine, Outcome, Sequence
from loadtest.mock.faults import FaultInjector, middle_chunk
from loadtest.mock.metrics import MockMetrics, parse_prometheus_text, render
from loadtest.mock.parse import BadRequest, parse_request
from loadtest.mock.stream import StreamSink
from loadtest.mock.timing import run as run_precise
from loadtest.mock.wire import StreamEncoder

pytestmark = pytest.mark.timeout(60)


class FakeTransport:
    """Records writes; the boundary the sink writes to."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.data += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def dechunk(data: bytes) -> tuple[bytes, bool]:
    """HTTP/1.1 chunked body -> (payload, saw the terminating chunk)."""
    out = bytearray()
    i = 0
    while i < len(data):
        eol = data.index(b"\r\n", i)
        size = int(data[i:eol], 16)
        if size == 0:
            return bytes(out), True
        out += data[eol + 2 : eol + 2 + size]
        assert data[eol + 2 + size : eol + 4 + size] == b"\r\n"
        i = eol + 4 + size
    return bytes(out), False


@settings(max_examples=300, deadline=None)
@given(
    chat=st.booleans(),
    max_tokens=st.integers(1, 40),
    k=st.integers(1, 7),
    include_usage=st.booleans(),
    continuous=st.booleans(),
    stamp=st.booleans(),
    chunked=st.booleans(),
    fault=st.sampled_from(["none", "drop", "malformed"]),
)
def test_stream_bytes_for_every_option_combination(
    chat: bool,
    max_tokens: int,
    k: int,
    include_usage: bool,
    continuous: bool,
    stamp: bool,
    chunked: bool,
    fault: str,
) -> None:
    enc = StreamEncoder(
        chat=chat,
        request_id="id-1",
        created=123,
        model='m"odel',
        prompt_tokens=7,
        max_tokens=max_tokens,
        tokens_per_chunk=k,
        include_usage=include_usage,
        continuous_usage=continuous,
        stamp=stamp,
        chunked=chunked,
    )
    n_chunks = -(-max_tokens // k)
    mid = middle_chunk(n_chunks)
    transport = FakeTransport()
    sink = StreamSink(
        transport,  # type: ignore[arg-type]
        enc,
        tokens_per_chunk=k,
        drop_chunk=mid if fault == "drop" else -1,
        malformed_chunk=mid if fault == "malformed" else -1,
    )
    assert sink(0)
    for g in range(1, max_tokens + 1):
        if not sink(g):
            break
    if chunked:
        payload, _ = dechunk(bytes(transport.data))
    else:
        payload = bytes(transport.data)
    if not payload:  # a completion dropped before its first chunk: nothing was sent
        assert fault == "drop" and not chat and mid == 0 and transport.closed
        return
    assert payload.endswith(b"\n\n")
    events = payload[:-2].split(b"\n\n")
    assert all(e.startswith(b"data: ") for e in events)
    datas = [e[len(b"data: ") :] for e in events]

    if fault == "drop":
        assert transport.closed and sink.dropped
        assert b"[DONE]" not in datas
    else:
        assert not transport.closed
        assert datas[-1] == b"[DONE]"
        datas = datas[:-1]

    objs, bad = [], []
    for d in datas:
        try:
            objs.append(json.loads(d))
        except json.JSONDecodeError:
            bad.append(d)
    assert len(bad) == (1 if fault == "malformed" else 0)

    texts = []
    for o in objs:
        assert o["id"] == "id-1" and o["created"] == 123 and o["model"] == 'm"odel'
        assert o["object"] == ("chat.completion.chunk" if chat else "text_completion")
        assert ("mock_sent" in o) == stamp
        if continuous:
            assert o["usage"]["prompt_tokens"] == 7
        elif include_usage and o["choices"]:
            assert o["usage"] is None
        elif not include_usage:
            assert "usage" not in o
        if o["choices"]:
            choice = o["choices"][0]
            text = choice["delta"].get("content") if chat else choice["text"]
            if text:
                texts.append(text)
    if chat:
        assert objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}

    sizes = [k] * (n_chunks - 1) + [max_tokens - (n_chunks - 1) * k]
    if fault == "drop":
        sizes = sizes[:mid]
    elif fault == "malformed":
        del sizes[mid]
    assert texts == [" tok" * n for n in sizes]
    if fault == "none":
        assert "".join(texts) == " tok" * max_tokens
        finals = [o for o in objs if o["choices"] and o["choices"][0]["finish_reason"]]
        assert len(finals) == 1 and finals[0]["choices"][0]["finish_reason"] == "length"
        if include_usage:
            assert objs[-1]["choices"] == []
            assert objs[-1]["usage"] == {
                "prompt_tokens": 7,
                "completion_tokens": max_tokens,
                "total_tokens": 7 + max_tokens,
            }
        if continuous:
            # Running counts: each content chunk's usage counts the tokens sent so far.
            sent = 0
            for o in objs:
                if o["choices"]:
                    c = o["choices"][0]
                    sent += ((c["delta"].get("content") if chat else c["text"]) or "").count("tok")
                assert o["usage"]["completion_tokens"] == sent


# -- the engine ---------------------------------------------------------------


def test_engine_stop_releases_everyone() -> None:
    async def go() -> list[Outcome]:
        engine = Engine(MockConfig(max_batch=1, decode_base_ms=1))
        engine.start()
        seqs = [Sequence(0, 10**6, lambda g: True) for _ in range(3)]
        for s in seqs:
            engine.submit(s)
        await asyncio.sleep(0.02)
        await engine.stop()
        return [s.done.result() for s in seqs]

    assert run_precise(go()) == [Outcome.SHUTDOWN] * 3


# -- config, parsing, faults, metrics -------------------------------------------


def test_config_round_trips_through_argv() -> None:
    from loadtest.cli import build_parser

    config = MockConfig(
        port=0,
        max_batch=7,
        decode_per_seq_ms=1.5,
        api_key="k",
        rate_limit_queue=3,
        stall_rate=0.25,
        seed=3,
        stamp_chunks=True,
    )
    args = build_parser().parse_args(["mock", *config.to_argv()])
    assert MockConfig.from_args(args) == config
    assert MockConfig.from_args(build_parser().parse_args(["mock"])) == MockConfig()


def test_config_rejects_bad_values_with_the_flag_name() -> None:
    with pytest.raises(InputError, match=r"^--fail-rate: must be between 0 and 1$"):
        MockConfig(fail_rate=1.01)


def test_parse_request_prefers_max_completion_tokens() -> None:
    body = (
        b'{"model": "m", "messages": [{"role": "user", "content": "a b"}],'
        b' "max_tokens": 5, "max_completion_tokens": 9}'
    )
    req = parse_request(body, chat=True)
    assert (req.max_tokens, req.prompt_tokens, req.stream) == (9, 2, False)
    with pytest.raises(BadRequest) as err:
        parse_request(b'{"model": "m", "prompt": ["a", "b"]}', chat=False)
    assert err.value.param == "prompt"


def test_fault_draws_are_seeded_and_fixed_per_request() -> None:
    a = FaultInjector(MockConfig(fail_rate=0.3, stall_rate=0.6, seed=11))
    b = FaultInjector(MockConfig(fail_rate=0.3, stall_rate=0.6, seed=11))
    assert [a.draw() for _ in range(50)] == [b.draw() for _ in range(50)]
    assert not FaultInjector(MockConfig()).enabled


def test_metrics_text_parses_back() -> None:
    async def go() -> bytes:
        config = MockConfig(model_name='we"ird')
        engine = Engine(config)
        metrics = MockMetrics()
        metrics.requests_by_status[200] += 3
        metrics.requests_by_status[429] += 1
        metrics.faults["rate_limit"] += 1
        return render(config, engine, metrics)

    samples = parse_prometheus_text(asyncio.run(go()).decode())
    assert samples['loadtest_mock_requests_total{status="200"}'] == 3
    assert samples['loadtest_mock_requests_total{status="429"}'] == 1
    assert samples['loadtest_mock_faults_total{kind="rate_limit"}'] == 1
    assert samples['vllm:num_requests_running{model_name="we\\"ird"}'] == 0
    assert samples['loadtest_mock_config{param="max_batch"}'] == 256


def test_drift_draws_one_slowdown_per_start_from_its_seed() -> None:
    """--drift SD: each start of the mock is one draw exp(N(0, SD)) of a factor on every step cost;
    the same --drift-seed is the same start, and the draws spread as SD says."""
    assert MockConfig().slowdown() == 1.0
    same = MockConfig(drift=0.05, drift_seed=3)
    assert same.slowdown() == same.slowdown() != 1.0
    draws = [MockConfig(drift=0.05, drift_seed=s).slowdown() for s in range(2000)]
    logs = [math.log(d) for d in draws]
    assert abs(statistics.fmean(logs)) < 0.005 and statistics.stdev(logs) == pytest.approx(0.05, rel=0.08)
    engine = Engine(same)
    assert engine.slowdown == same.slowdown()
    scraped = parse_prometheus_text(render(same, engine, MockMetrics()).decode())
    assert scraped['loadtest_mock_config{param="drift_slowdown"}'] == pytest.approx(engine.slowdown)
    with pytest.raises(InputError, match="--drift"):
        MockConfig(drift=-0.1)
