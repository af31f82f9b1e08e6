"""The compiled scanner and the pure-Python path give bit-identical records.

Every stream is decoded twice, once by a decoder with the scanner
(``loadtest/client/_scanner.c``) and once by one without it (what
``LOADTEST_SCANNER=python`` or a machine without a compiler gets), and the two
records must match field by field: chunk times, tokens, usage, errors, all of it.
The inputs are every wire-zoo fixture, fed per server write, as one read and cut
at arbitrary points, and fuzzed chunks (hypothesis): near-misses of the usual
content chunk, byte-level mutations, and JSON the check must refuse whenever
orjson does. The scanner may leave any chunk to Python; it may take one only
when the Python short way would take it with the same facts.
"""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadtest.client import scanner
from loadtest.client.decode import StreamDecoder
from loadtest.client.record import RequestRecord
from support.same_record import assert_same_record
from support.wirezoo.fixtures import ZOO

needs_scanner = pytest.mark.skipif(scanner.Scanner is None, reason="the C scanner is not built here (or LOADTEST_SCANNER=python)")

_HEAD = b'"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m"'
_ROLE = b'data: {' + _HEAD + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
_END = (b'data: {' + _HEAD + b',"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b'data: {' + _HEAD + b',"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":3,"total_tokens":11}}\n\n'
        b"data: [DONE]\n\n")


def _chunk(i: int, text: str = " tok", usage: bool = True, chat: bool = True) -> bytes:
    choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
    body = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{**choice, "finish_reason": None}]}
    if usage:
        body["usage"] = {"prompt_tokens": 8, "completion_tokens": i + 1, "total_tokens": i + 9}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _decode(reads: list[bytes], api: str, compiled: bool, capture: bool = False) -> tuple[RequestRecord, str | None]:
    """The record, and what the decoder raised if it did (the reactor fails the stream with it)."""
    rec = RequestRecord(start_wall=0.0, start_perf=100.0)
    decoder = StreamDecoder(rec, api, capture)
    if not compiled:
        decoder.scanner = None
    assert (decoder.scanner is not None) == compiled
    feed = decoder.reader()
    try:
        for i, data in enumerate(reads):
            if not feed(data, 100.0 + i * 0.013):
                break
        decoder.close(100.0 + len(reads) * 0.013)
    except Exception as err:  # e.g. a count too large for array("i"): the same error both ways
        return rec, f"{type(err).__name__}: {err}"
    return rec, None


_same = assert_same_record


def _both(reads: list[bytes], api: str = "chat", capture: bool = False) -> RequestRecord:
    (c, c_error), (p, p_error) = _decode(reads, api, True, capture), _decode(reads, api, False, capture)
    _same(c, p)
    assert c_error == p_error
    return c


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 1), len(data) - 1) for c in cuts if len(data) > 1})
    out, last = [], 0
    for p in points:
        out.append(data[last:p])
        last = p
    out.append(data[last:])
    return [r for r in out if r]


STREAMS = [f for f in ZOO if f.status == 200 and f.api in ("chat", "completions", "responses")]


def test_the_extension_is_built_where_a_compiler_is():
    """``pip install -e .`` builds it when a C compiler is there; then the tests below are not skipped."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}): the install falls back to the Python path")
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        pytest.skip("no Python headers (python3-dev): the install falls back to the Python path")
    if scanner.ENV in os.environ:
        pytest.skip(f"{scanner.ENV} is set")
    assert scanner.Scanner is not None, "a C compiler is here but loadtest/client/_scanner.c was not built"
    assert scanner.active() == "c"


@needs_scanner
@pytest.mark.parametrize("fixture", STREAMS, ids=[f.name for f in STREAMS])
def test_every_wire_zoo_fixture_gives_the_same_record(fixture):
    capture = "tool_calls" in fixture.expect
    _both(fixture.writes, fixture.api, capture)
    _both([b"".join(fixture.writes)], fixture.api, capture)
    _both([b"".join(fixture.writes)], fixture.api, not capture)


@needs_scanner
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(STREAMS) - 1), cuts=st.lists(st.integers(0, 1 << 16), max_size=12))
def test_wire_zoo_cut_anywhere_gives_the_same_record(index, cuts):
    fixture = STREAMS[index]
    _both(_cut(b"".join(fixture.writes), cuts), fixture.api)


@needs_scanner
def test_the_usual_chunks_are_taken_in_c():
    """Whole reads of usual chunks never reach the Python loop (or the tests above compare Python with itself)."""
    calls = []

    class Counting(StreamDecoder):
        def feed_events(self, events: list, now: float) -> bool:
            calls.append(events)
            return super().feed_events(events, now)

    rec = RequestRecord(start_wall=0.0, start_perf=100.0)
    decoder = Counting(rec, "chat")
    feed = decoder.reader()
    assert feed(_chunk(0) + _chunk(1), 100.25)
    assert feed(_chunk(2), 100.5)
    assert not calls
    assert list(rec.chunk_ms) == [250.0, 250.0, 500.0] and rec.ttft_ms == 250.0
    assert list(decoder.chunk_usage) == [1, 2, 3] and decoder.last_usage == 3 and rec.prompt_tokens == 8
    assert feed(_END, 100.75)
    assert len(calls) == 1 and len(calls[0]) == 3  # the finish chunk, usage and [DONE]: the Python path's


# -- fuzzed chunks ------------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
_number = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none())
_json = st.recursive(st.one_of(_number, _text), lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(_text, kids, max_size=3)), max_leaves=6)
_keys = ["id", "object", "created", "model", "choices", "usage", "error", "timings", "mock_sent", "system_fingerprint"]
_choice_keys = ["index", "delta", "text", "finish_reason", "logprobs"]
_delta_keys = ["role", "content", "tool_calls", "reasoning_content"]
_usage_keys = ["prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"]


def _maybe(keys: list[str], value: st.SearchStrategy) -> st.SearchStrategy:
    return st.dictionaries(st.sampled_from(keys) | _text, value, max_size=len(keys))


_usage = st.one_of(st.none(), _json, st.fixed_dictionaries({}, optional={
    "prompt_tokens": st.one_of(st.integers(-3, 2**40), _json), "completion_tokens": st.one_of(st.integers(-(2**33), 2**33), _json),
    "total_tokens": st.integers(0, 99), "prompt_tokens_details": _json, "completion_tokens_details": _json}))
_delta = st.one_of(_json, st.fixed_dictionaries({}, optional={
    "content": st.one_of(_text, _json), "role": st.just("assistant"), "tool_calls": _json, "reasoning_content": _text}))
_choice = st.one_of(_json, st.fixed_dictionaries({}, optional={
    "index": st.integers(0, 2), "delta": _delta, "text": st.one_of(_text, _json),
    "finish_reason": st.one_of(st.none(), st.sampled_from(["stop", "length", "abort"]), _json)}))
_chunk_obj = st.fixed_dictionaries({"choices": st.one_of(st.lists(_choice, max_size=2), _json)}, optional={
    "id": _text, "object": st.one_of(st.sampled_from(["chat.completion.chunk", "error", "text_completion"]), _json),
    "usage": _usage, "error": _json, "timings": _json, "mock_sent": st.floats(0, 1e3), "model": _text})


_content = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6)
#: The usual chunk itself, its text, counts and neighbours varied (what the scanner must take).
_usual_obj = st.builds(
    lambda chat, text, extra, usage, order: dict(
        sorted({**extra, "choices": [{"index": 0, **({"delta": {"content": text}} if chat else {"text": text}),
                                      "finish_reason": None}], **({"usage": usage} if usage is not None else {})}.items(),
               reverse=order)),
    st.booleans(), _content, st.dictionaries(st.sampled_from(["id", "model", "created", "object"]), st.one_of(_text, st.integers()),
                                             max_size=3),
    st.one_of(st.none(), st.fixed_dictionaries({"completion_tokens": st.integers(-5, 2**31)},
                                               optional={"prompt_tokens": st.one_of(st.none(), st.integers(0, 2**40)),
                                                         "total_tokens": st.integers(0, 9)})),
    st.booleans())


def _render(obj, style: int) -> bytes:
    # orjson writes neither spaces nor \u escapes: the standard library's writer gives both
    if style == 0:
        return orjson.dumps(obj)
    return json.dumps(obj, ensure_ascii=style == 1, separators=(", ", ": ") if style < 3 else (",", ":")).encode()


@st.composite
def _payloads(draw) -> bytes:
    """A chunk's JSON, the usual one or near it, then maybe cut, spliced or bit-flipped."""
    obj = draw(st.one_of(_usual_obj, _chunk_obj))
    try:
        payload = _render(obj, draw(st.integers(0, 3)))
    except (TypeError, orjson.JSONEncodeError):  # an integer orjson cannot write: json can
        payload = json.dumps(obj).encode()
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "dup"]))
        at = draw(st.integers(0, max(len(payload) - 1, 0)))
        if kind == "flip" and payload:
            payload = payload[:at] + bytes([draw(st.integers(0, 255))]) + payload[at + 1:]
        elif kind == "cut":
            payload = payload[:at]
        elif kind == "insert":
            payload = payload[:at] + draw(st.sampled_from([b",", b"}", b'"', b"\\", b"\\u00e9", b"\\ud800", b" ", b"\xc3", b"\xff",
                                                            b'"usage":{"completion_tokens":1}', b'"error":1,'])) + payload[at:]
        elif kind == "dup":
            payload = payload[:at] + payload[at // 2: at] + payload[at:]
    return payload.replace(b"\n", b" ").replace(b"\r", b" ")


@needs_scanner
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=_payloads(), chat=st.booleans())
def test_the_check_takes_a_chunk_only_when_the_python_short_way_does(payload, chat):
    taken = scanner.usual(payload, chat)
    if taken is None:
        return  # left to Python: always allowed
    rec = RequestRecord(start_wall=0.0, start_perf=100.0)
    decoder = StreamDecoder(rec, "chat" if chat else "completions")
    decoder.scanner = None
    assert decoder._plain([payload], 0, 100.5) == 1, payload
    obj = orjson.loads(payload)
    usage = obj.get("usage") or None
    assert taken == ((usage["completion_tokens"], usage.get("prompt_tokens")) if usage else (None, None))


@needs_scanner
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads=st.lists(_payloads(), max_size=5), usual=st.lists(st.integers(0, 5), max_size=4),
       chat=st.booleans(), cuts=st.lists(st.integers(0, 4000), max_size=4), whole=st.booleans())
def test_fuzzed_streams_give_the_same_record(payloads, usual, chat, cuts, whole):
    events = [b"data: " + p + b"\n\n" for p in payloads]
    for i in usual:  # usual chunks among the odd ones, so that both paths take turns
        events.insert(min(i, len(events)), _chunk(i, chat=chat))
    body = b"".join(events) + (_END if chat else b"data: [DONE]\n\n")
    reads = [body] if whole else _cut(body, cuts)
    _both(reads, "chat" if chat else "completions")


@needs_scanner
@pytest.mark.parametrize("payload", [
    b'{"choices":[{"delta":{"content":"a"}}]} ',           # trailing space: orjson takes it
    b'{"choices":[{"delta":{"content":"\\u00e9"}}]}',       # an escape in the text
    b'{"choices":[{"delta":{"content":"\xc3\xa9"}}]}',      # UTF-8 in the text
    b'{ "choices" : [ { "delta" : { "content" : "a" } } ] }',
])
def test_the_check_takes_what_it_should(payload):
    assert scanner.usual(payload, True) == (None, None)
    _both([_ROLE, b"data: " + payload + b"\n\n", _END])


@needs_scanner
@pytest.mark.parametrize("payload", [
    b'{"choices":[{"delta":{"content":"\xff"}}]}',          # not UTF-8: orjson refuses it
    b'{"choices":[{"delta":{"content":"\xed\xa0\x80"}}]}',  # an encoded surrogate
    b'{"choices":[{"delta":{"content":"\\ud800"}}]}',       # a lone surrogate escape
    b'{"choices":[{"delta":{"content":"a"}}],}',            # a trailing comma
    b'{"choices":[{"delta":{"content":"a"}}]}x',
    b'{"choices":[{"delta":{"content":"a"}}],"created":01}',
    b'{"choices":[{"delta":{"content":"a"}}],"created":1e999}',
    b'{"choices":[{"delta":{"content":"a"}}],"created":123456789012345678901}',
    b'{"choices":[{"delta":{"content":"a"}}],"\\u0065rror":1}',   # "error", spelled with an escape
    b'{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1},"usage":{"completion_tokens":2}}',
    b'{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":3000000000}}',  # not an array("i") value
    b'{"choices":[{"delta":{"content":"a","content":""}}]}',
    b'{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1,"prompt_tokens":-1}}',
    b'{"choices":[{"delta":{"content":"a"}}],"object":"error"}',
])
def test_the_check_refuses_what_it_must(payload):
    assert scanner.usual(payload, True) is None
    _both([_ROLE, b"data: " + payload + b"\n\n", _END])
