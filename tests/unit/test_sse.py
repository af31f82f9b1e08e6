"""The SSE parser: known cases, and any split of the byte stream gives the same events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.client.sse import SSEParser


def parse_all(pieces: list[bytes]) -> list[bytes]:
    parser = SSEParser()
    events: list[bytes] = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    return events


def test_openai_style_stream():
    stream = b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n'
    assert parse_all([stream]) == [b'{"a":1}', b'{"b":2}', b"[DONE]"]


def test_crlf_and_cr_line_endings():
    assert parse_all([b"data: x\r\n\r\ndata: y\r\n\r\n"]) == [b"x", b"y"]
    assert parse_all([b"data: x\r\rdata: y\r\r", b"\n"]) == [b"x", b"y"]


def test_comments_and_other_fields_are_ignored():
    stream = b": keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: x\n\n:ping\n\n"
    assert parse_all([stream]) == [b"x"]


def test_multiline_data_is_joined_with_newlines():
    assert parse_all([b"data: a\ndata: b\ndata:c\n\n"]) == [b"a\nb\nc"]


def test_data_without_space_and_field_without_colon():
    assert parse_all([b"data:x\n\ndata\n\n"]) == [b"x", b""]


def test_incomplete_event_waits_for_its_blank_line():
    parser = SSEParser()
    assert parser.feed(b"data: par") == []
    assert parser.feed(b"tial\n") == []
    assert parser.feed(b"\n") == [b"partial"]
    assert parser.pending == b""


def test_split_crlf_pair_is_one_line_ending():
    assert parse_all([b"data: x\r", b"\n\r", b"\n"]) == [b"x"]


_line_ending = st.sampled_from([b"\n", b"\r\n"])
_payload = st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))


@st.composite
def sse_streams(draw) -> tuple[bytes, list[bytes]]:
    """A stream with random events, comments and line endings, and its expected events."""
    nl = draw(_line_ending)
    out = b""
    expected: list[bytes] = []
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            out += b":" + draw(_payload) + nl
        lines = draw(st.lists(_payload, min_size=1, max_size=3))
        for line in lines:
            out += b"data: " + line + nl
        out += nl
        expected.append(b"\n".join(lines))
    return out, expected


@given(sse_streams(), st.lists(st.integers(0, 400), max_size=12))
@settings(max_examples=300, deadline=None)
def test_any_split_gives_the_same_events(stream_and_events, cuts):
    stream, expected = stream_and_events
    points = sorted({c % (len(stream) + 1) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)])]
    assert parse_all([stream]) == expected
    assert parse_all(pieces) == expected


@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=10))
@settings(max_examples=300, deadline=None)
def test_arbitrary_bytes_split_anywhere_match_one_feed(stream, cuts):
    points = sorted({c % (len(stream) + 1) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)])]
    whole = SSEParser()
    once = whole.feed(stream)
    assert parse_all(pieces) == once
