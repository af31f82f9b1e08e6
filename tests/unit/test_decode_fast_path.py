"""The decoder's short way for the usual content chunk gives the very record the general path gives.

``StreamDecoder._plain`` takes chat and completions content chunks without the
general path's :class:`ChunkFacts`; every other event, and every chunk with
anything odd about it, must fall through to ``_event`` untouched. Each case is
decoded twice, once as shipped and once with the short way switched off, fed
per server write and as one read, and the two records must match field by field.
"""

from __future__ import annotations

import pytest

from loadtest.client.decode import StreamDecoder
from loadtest.client.record import RequestRecord
from support.same_record import assert_same_record
from support.wirezoo.fixtures import ZOO

_HEAD = b'"id":"x","object":"chat.completion.chunk","model":"m"'


def _chat(body: bytes) -> bytes:
    return b"data: {" + _HEAD + b"," + body + b"}\n\n"


_PLAIN = _chat(b'"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]')
_END = _chat(b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]') + b"data: [DONE]\n\n"

#: Chunks that look almost like the usual one: each must take the general path's answer.
ODD_CHAT = {
    "usage with details": _chat(b'"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],'
                                b'"usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":2},'
                                b'"completion_tokens_details":{"reasoning_tokens":1}}'),
    "negative prompt count": _chat(b'"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":-1,"completion_tokens":1}'),
    "prompt count a string": _chat(b'"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":"3","completion_tokens":1}'),
    "completion count a float": _chat(b'"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1.0}'),
    "completion count a bool": _chat(b'"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":true}'),
    "usage a list": _chat(b'"choices":[{"delta":{"content":"a"}}],"usage":[1]'),
    "content a number": _chat(b'"choices":[{"delta":{"content":7}}]'),
    "content empty": _chat(b'"choices":[{"delta":{"content":""}}]'),
    "content with a finish": _chat(b'"choices":[{"delta":{"content":"a"},"finish_reason":"length"}]'),
    "content with an abort": _chat(b'"choices":[{"delta":{"content":"a"},"finish_reason":"abort"}]'),
    "an error beside content": _chat(b'"choices":[{"delta":{"content":"a"}}],"error":{"message":"boom"}'),
    "a null error": _chat(b'"choices":[{"delta":{"content":"a"}}],"error":null'),
    "object error": b'data: {"object":"error","choices":[{"delta":{"content":"a"}}],"message":"bad"}\n\n',
    "llama.cpp timings": _chat(b'"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1},'
                               b'"timings":{"cache_n":4,"predicted_ms":1.5}'),
    "mock stamps": _chat(b'"choices":[{"delta":{"content":"a"}}],"mock_sent":12.5'),
    "choices a dict": _chat(b'"choices":{"0":{"delta":{"content":"a"}}}'),
    "choice a list": _chat(b'"choices":[["a"]]'),
    "delta a string": _chat(b'"choices":[{"delta":"a"}]'),
    "tool call only": _chat(b'"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]'),
    "reasoning only": _chat(b'"choices":[{"delta":{"reasoning_content":"hm"}}]'),
    "not JSON": b"data: {not json\n\n",
    "a JSON list": b"data: [1,2]\n\n",
    "named error event": b"event: error\ndata: {\"message\":\"overloaded\"}\n\n",
}


def _decode(writes: list[bytes], api: str, plain: bool, capture: bool = False) -> RequestRecord:
    rec = RequestRecord(start_wall=0.0, start_perf=100.0)
    decoder = StreamDecoder(rec, api, capture)
    decoder.plain = decoder.plain and plain
    for i, write in enumerate(writes):
        if not decoder.feed(write, 100.0 + i * 0.01):
            break
    decoder.close(100.0 + len(writes) * 0.01)
    return rec


_same = assert_same_record  # (tests/support/same_record.py)


def _cases() -> list[tuple[str, str, list[bytes]]]:
    cases = [(f.name, f.api, f.writes) for f in ZOO if f.api in ("chat", "completions") and f.status == 200]
    for name, odd in ODD_CHAT.items():
        cases.append((name, "chat", [_PLAIN, odd, _PLAIN, _END]))
        cases.append((name + ", first", "chat", [odd, _PLAIN, _END]))
    return cases


@pytest.mark.parametrize(("name", "api", "writes"), _cases(), ids=[c[0] for c in _cases()])
def test_the_short_way_gives_the_general_paths_record(name, api, writes):
    _same(_decode(writes, api, plain=True), _decode(writes, api, plain=False))
    whole = [b"".join(writes)]
    _same(_decode(whole, api, plain=True), _decode(whole, api, plain=False))


def test_the_short_way_is_taken_and_times_every_chunk():
    """The usual chunks do take it (or the test above compares the general path with itself)."""
    rec = RequestRecord(start_wall=0.0, start_perf=100.0)
    decoder = StreamDecoder(rec, "chat")
    events = decoder.parser.feed(_PLAIN * 3 + _END)
    assert decoder._plain(events, 0, 100.25) == 3  # three taken, the finish chunk left to _event
    assert list(rec.chunk_ms) == [250.0] * 3 and rec.ttft_ms == 250.0
    assert list(decoder.chunk_usage) == [-1] * 3


def test_captured_text_takes_the_general_path():
    rec = _decode([_PLAIN, _PLAIN, _END], "chat", plain=True, capture=True)
    assert rec.answer == "aa"
