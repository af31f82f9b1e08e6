"""The mock speaks OpenAI's wire format: checked with the official client and a plain line reader.

Every test talks to a real ``loadtest mock`` subprocess over 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Iterator

import httpx
import openai
import pytest

from loadtest.mock import MockConfig, MockServer
from support.probe import probe

# Bytes on the wire only (formats, counts, status codes): never how fast they came.
pytestmark = [pytest.mark.timeout(60), pytest.mark.untimed]

PROMPT = "one two three four five"  # 5 words = 5 prompt tokens
MESSAGES = [
    {"role": "system", "content": "be brief"},  # 2 words
    {"role": "user", "content": PROMPT},  # 5 words
]


#: the ``mock`` fixture's server (tests/conftest.py). Fast steps: these tests are about bytes, not timing.
MOCK_ARGS = ["--decode-base-ms", "1", "--decode-per-seq-ms", "0"]


@pytest.fixture
def http(mock: MockServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=mock.base_url, trust_env=False, timeout=10) as client:
        yield client


@pytest.fixture
def oai(mock: MockServer) -> Iterator[openai.OpenAI]:
    with httpx.Client(trust_env=False, timeout=10) as http_client:
        yield openai.OpenAI(
            base_url=mock.base_url, api_key="x", http_client=http_client, max_retries=0
        )


def sse_lines(client: httpx.Client, path: str, body: dict) -> list[str]:
    """The ``data:`` payloads of a streamed response, read with httpx's line iterator."""
    out = []
    with client.stream("POST", path, json=body) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "text/event-stream"
        assert "content-encoding" not in resp.headers
        for line in resp.iter_lines():
            if line:
                assert line.startswith("data: ")
                out.append(line[len("data: ") :])
    return out


# -- the official client ----------------------------------------------------------


def test_openai_client_chat_stream(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="anything",
        messages=MESSAGES,  # type: ignore[arg-type]
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    first = chunks[0]
    assert first.choices[0].delta.role == "assistant"
    assert first.choices[0].delta.content == ""
    assert first.object == "chat.completion.chunk"
    assert first.model == "anything"
    assert first.id.startswith("chatcmpl-")
    assert all(c.id == first.id and c.created == first.created for c in chunks)

    contents = [
        c.choices[0].delta.content for c in chunks[1:] if c.choices and c.choices[0].delta.content
    ]
    assert len(contents) == 12
    assert "".join(contents) == " tok" * 12

    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].choices[0].finish_reason == "length"
    assert finish[0].choices[0].delta.content is None

    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    assert usage_chunk.usage is not None
    assert usage_chunk.usage.prompt_tokens == 7
    assert usage_chunk.usage.completion_tokens == 12
    assert usage_chunk.usage.total_tokens == 19
    assert all(c.usage is None for c in chunks[:-1])  # "usage": null, as OpenAI


def test_openai_client_completion_stream(oai: openai.OpenAI) -> None:
    stream = oai.completions.create(
        model="m",
        prompt=PROMPT,
        max_tokens=9,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].object == "text_completion"
    texts = [c.choices[0].text for c in chunks if c.choices and c.choices[0].text]
    assert texts == [" tok"] * 9
    assert chunks[-2].choices[0].finish_reason == "length"
    usage = chunks[-1].usage
    assert usage is not None and chunks[-1].choices == []
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (5, 9, 14)


def test_openai_client_non_streaming(oai: openai.OpenAI) -> None:
    chat = oai.chat.completions.create(
        model="m", messages=MESSAGES, max_tokens=5  # type: ignore[arg-type]
    )
    assert chat.object == "chat.completion"
    assert chat.choices[0].message.role == "assistant"
    assert chat.choices[0].message.content == " tok" * 5
    assert chat.choices[0].finish_reason == "length"
    assert chat.usage is not None
    assert (chat.usage.prompt_tokens, chat.usage.completion_tokens) == (7, 5)

    comp = oai.completions.create(model="m", prompt=PROMPT, max_tokens=3)
    assert comp.object == "text_completion"
    assert comp.choices[0].text == " tok tok tok"
    assert comp.usage is not None and comp.usage.prompt_tokens == 5


def test_openai_client_lists_the_model(oai: openai.OpenAI) -> None:
    assert [m.id for m in oai.models.list()] == ["mock-model"]


def test_default_max_tokens_is_16(oai: openai.OpenAI) -> None:
    comp = oai.completions.create(model="m", prompt="x")
    assert comp.usage is not None and comp.usage.completion_tokens == 16


# -- a plain line reader ----------------------------------------------------------


def test_line_reader_chat_stream(http: httpx.Client) -> None:
    body = {"model": "m", "messages": MESSAGES, "max_tokens": 4, "stream": True}
    lines = sse_lines(http, "/chat/completions", body)
    assert lines[-1] == "[DONE]"
    objs = [json.loads(x) for x in lines[:-1]]
    assert objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [o["choices"][0]["delta"] for o in objs[1:5]] == [{"content": " tok"}] * 4
    assert objs[5]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "length",
    }
    assert len(objs) == 6  # no usage chunk unless asked for
    assert all("usage" not in o for o in objs)
    assert {o["object"] for o in objs} == {"chat.completion.chunk"}
    assert all(isinstance(o["created"], int) and o["model"] == "m" for o in objs)


def test_line_reader_completion_stream(http: httpx.Client) -> None:
    body = {
        "model": "m",
        "prompt": PROMPT,
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    lines = sse_lines(http, "/completions", body)
    objs = [json.loads(x) for x in lines[:-1]]
    assert [o["choices"][0]["text"] for o in objs[:3]] == [" tok"] * 3
    assert objs[3]["choices"][0]["finish_reason"] == "length"
    assert objs[4]["choices"] == []
    assert objs[4]["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    assert lines[-1] == "[DONE]"


def test_continuous_usage_stats_on_every_chunk(http: httpx.Client) -> None:
    body = {
        "model": "m",
        "messages": MESSAGES,
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    objs = [json.loads(x) for x in sse_lines(http, "/chat/completions", body)[:-1]]
    assert all("usage" in o and o["usage"]["prompt_tokens"] == 7 for o in objs)
    seen = 0
    for o in objs:
        if o["choices"] and o["choices"][0]["delta"].get("content"):
            seen += 1
        assert o["usage"]["completion_tokens"] == seen
        assert o["usage"]["total_tokens"] == 7 + seen
    assert seen == 5 and objs[-1]["choices"] == []


def test_prompt_as_token_ids(http: httpx.Client) -> None:
    r = http.post("/completions", json={"model": "m", "prompt": [1, 2, 3, 4], "max_tokens": 1})
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == 4


def test_content_parts_count_their_text(http: httpx.Client) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "a b c"}]}]
    r = http.post("/chat/completions", json={"model": "m", "messages": messages, "max_tokens": 1})
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == 3


def test_health_and_models(http: httpx.Client, mock: MockServer) -> None:
    assert httpx.get(mock.url + "/health", trust_env=False).text == "ok"
    models = http.get("/models").json()
    assert models["object"] == "list"
    assert models["data"][0]["id"] == "mock-model" and models["data"][0]["object"] == "model"


# -- bad requests -----------------------------------------------------------------

BAD_BODIES = [
    ("chat", b"{not json", None),
    ("chat", b"[1, 2]", None),
    ("chat", b'{"messages": [{"role": "user", "content": "x"}]}', "model"),
    ("chat", b'{"model": "m"}', "messages"),
    ("chat", b'{"model": "m", "messages": []}', "messages"),
    ("chat", b'{"model": "m", "messages": ["hi"]}', "messages[0]"),
    ("completions", b'{"model": "m"}', "prompt"),
    ("completions", b'{"model": "m", "prompt": {"a": 1}}', "prompt"),
    ("completions", b'{"model": "m", "prompt": "x", "max_tokens": 0}', "max_tokens"),
    ("completions", b'{"model": "m", "prompt": "x", "max_tokens": -3}', "max_tokens"),
    ("completions", b'{"model": "m", "prompt": "x", "max_tokens": "10"}', "max_tokens"),
    ("completions", b'{"model": "m", "prompt": "x", "max_tokens": 1.5}', "max_tokens"),
    ("completions", b'{"model": "m", "prompt": "x", "max_tokens": true}', "max_tokens"),
    ("completions", b'{"model": "m", "prompt": "x", "stream": "yes"}', "stream"),
    ("completions", b'{"model": "m", "prompt": "x", "n": 2}', "n"),
]


@pytest.mark.parametrize(("endpoint", "body", "param"), BAD_BODIES)
def test_bad_request_is_an_openai_400(
    http: httpx.Client, endpoint: str, body: bytes, param: str | None
) -> None:
    path = "/chat/completions" if endpoint == "chat" else "/completions"
    r = http.post(path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["message"]
    # ... and the server keeps serving.
    ok = http.post("/completions", json={"model": "m", "prompt": "x", "max_tokens": 1})
    assert ok.status_code == 200


def test_openai_client_sees_bad_request(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        oai.completions.create(model="m", prompt="x", max_tokens=0)
    assert err.value.param == "max_tokens"  # type: ignore[attr-defined]


# -- dedicated servers ------------------------------------------------------------

ONE_SLOT = MockConfig(max_batch=1, decode_base_ms=5, decode_per_seq_ms=0)


def test_tokens_per_chunk_and_stamps() -> None:
    with MockServer(
        ["--decode-base-ms", "2", "--decode-per-seq-ms", "0"]
        + ["--tokens-per-chunk", "3", "--stamp-chunks"]
    ) as mock, httpx.Client(base_url=mock.base_url, trust_env=False, timeout=10) as http:
        before = time.perf_counter()
        body = {
            "model": "m",
            "messages": MESSAGES,
            "max_tokens": 10,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        objs = [json.loads(x) for x in sse_lines(http, "/chat/completions", body)[:-1]]
        after = time.perf_counter()
        contents = [o["choices"][0]["delta"].get("content") for o in objs if o["choices"]]
        assert [c for c in contents if c] == [" tok tok tok"] * 3 + [" tok"]
        assert objs[-1]["usage"]["completion_tokens"] == 10
        # mock_sent is the mock's perf_counter(), the same clock as ours on this host.
        stamps = [o["mock_sent"] for o in objs]
        assert all(before <= s <= after for s in stamps)
        assert stamps == sorted(stamps)


def test_metrics_count_every_request() -> None:
    with MockServer(["--decode-base-ms", "1", "--decode-per-seq-ms", "0"]) as mock, httpx.Client(
        base_url=mock.base_url, trust_env=False, timeout=10
    ) as http:
        statuses = []
        for i in range(5):
            body = {"model": "m", "prompt": "a b c", "max_tokens": 4, "stream": i % 2 == 0}
            statuses.append(http.post("/completions", json=body).status_code)
        statuses.append(http.post("/chat/completions", content=b"nope").status_code)
        statuses.append(http.get("/models").status_code)  # not a completions request
        assert statuses[:6] == [200] * 5 + [400]
        assert mock.requests_by_status() == {200: 5, 400: 1}
        samples = mock.metrics()
        assert samples['vllm:prompt_tokens_total{model_name="mock-model"}'] == 15
        assert samples['vllm:generation_tokens_total{model_name="mock-model"}'] == 20
        key = 'vllm:request_success_total{finished_reason="length",model_name="mock-model"}'
        assert samples[key] == 5
        assert samples['vllm:num_requests_running{model_name="mock-model"}'] == 0
        assert samples['vllm:num_requests_waiting{model_name="mock-model"}'] == 0
        text = httpx.get(mock.url + "/metrics", trust_env=False).text
        assert "# TYPE vllm:num_requests_running gauge" in text
        assert "# TYPE loadtest_mock_requests_total counter" in text
    assert mock.returncode == 0  # SIGTERM is a clean stop


def test_client_disconnect_frees_the_slot() -> None:
    """With one slot, a client that leaves mid-stream must not block the next one.

    The first request would hold the slot for 100 000 steps of 5 ms (over 8 minutes), so the second
    one's 60 s timeout is what shows the slot was freed; a wall-clock bound on it (it was < 1 s)
    measures the idle class's starvation in make test's untimed pass, not the mock."""
    with MockServer(config=ONE_SLOT) as mock:
        with httpx.Client(base_url=mock.base_url, trust_env=False, timeout=60) as http:
            body = {"model": "m", "prompt": "x", "max_tokens": 100_000, "stream": True}
            with http.stream("POST", "/completions", json=body) as resp:
                lines = resp.iter_lines()
                for _ in range(3):
                    next(lines)
            # The connection is closed now. The next request gets the slot (not after the first's 8 minutes).
            r = http.post("/completions", json={"model": "m", "prompt": "x", "max_tokens": 2})
            assert r.status_code == 200
            assert mock.metrics()['vllm:num_requests_running{model_name="mock-model"}'] == 0


def test_non_streaming_client_disconnect_frees_the_slot() -> None:
    with MockServer(config=ONE_SLOT) as mock:

        async def go() -> None:
            body = {"model": "m", "prompt": "x", "max_tokens": 100_000}
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(probe(mock.host, mock.port, "/v1/completions", body), 0.3)
            r = await probe(  # 60 s, not 5: a starved idle-class mock still answers well inside it
                mock.host, mock.port, "/v1/completions", {**body, "max_tokens": 2}, timeout=60
            )
            assert r.status == 200 and r.complete

        asyncio.run(go())
        assert mock.requests_by_status() == {200: 1, 499: 1}
