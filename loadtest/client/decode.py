"""Turn a stream's body bytes into a record: the per-chunk hot path.

:class:`StreamDecoder` is fed whatever one socket read returned, with the time
that read returned, and updates the :class:`RequestRecord` in place. It is
shared by both readers (the reactor thread and the greenlet fallback), so the
definition of TTFT, of a content chunk, of a failed stream and of token counts
lives in one place.

Servers disagree on where ``usage`` goes (vLLM: on every chunk when asked for
``continuous_usage_stats``; OpenAI: one usage-only chunk at the end; older
llama.cpp: on the finish chunk; some: on every content chunk with the final
total). So the decoder only *notes* the usage each content chunk carried, and
:func:`settle_tokens` decides at the end of the stream: the counts are
continuous (exact tokens per chunk) only if every content chunk carried a
strictly rising count; otherwise the last total is spread over the chunks.

Per chunk it costs one SSE split, one orjson parse (about a microsecond for a
200-byte chunk, cheaper than any byte-level shortcut is worth), a few dict
lookups and three ``array.append`` calls.
"""

from __future__ import annotations

import operator
from array import array
from typing import Callable

import orjson

from loadtest.client.record import RequestRecord
from loadtest.client.responses import event_text, read_event
from loadtest.client.scanner import Scanner
from loadtest.client.sse import SSEEvent, SSEParser
from loadtest.client.wire import Api, add_tool_calls, chunk_text, error_message, read_chunk

_NO_USAGE = -1
_loads = orjson.loads


class StreamDecoder:
    """SSE body bytes in, chunk times and token counts out."""

    __slots__ = (
        "rec", "api", "parser", "chunk_usage", "usage_before", "last_usage", "reasoning_tokens",
        "reasoning_streamed", "done", "finished", "failed", "capture", "plain", "chat", "scanner",
    )

    def __init__(self, rec: RequestRecord, api: Api, capture_text: bool = False) -> None:
        self.rec = rec
        #: Keep the generated text (only when asked: it costs a list append per chunk).
        self.capture = capture_text
        if capture_text:
            rec.text = []
            rec.tool_calls = {}
        self.api = api
        #: Chat and completions chunks may take :meth:`_plain` (the captured text needs the general path).
        self.plain = api in ("chat", "completions") and not capture_text
        self.chat = api == "chat"
        self.parser = SSEParser()
        #: usage.completion_tokens carried by each content chunk (-1: none).
        self.chunk_usage = array("i")
        #: The count carried by the last chunk before the first content chunk (vLLM's role chunk).
        self.usage_before = 0
        #: The last usage.completion_tokens seen anywhere (the total, in the end).
        self.last_usage: int | None = None
        self.reasoning_tokens: int | None = None
        self.reasoning_streamed = False
        self.done = False        # [DONE] seen
        self.finished = False    # a finish_reason seen
        self.failed = False      # a malformed, error or aborted chunk: stop reading
        #: The compiled per-read scanner (loadtest/client/scanner.py), bound to this decoder; None: Python only.
        self.scanner = Scanner(self) if Scanner is not None else None

    def reader(self) -> "Callable[[bytes, float], bool]":
        """The callable a reader feeds each read to: :meth:`feed`, or the scanner's own (one frame fewer)."""
        return self.scanner.feed if self.scanner is not None and self.plain else self.feed

    def feed(self, data: bytes, now: float) -> bool:
        """Process body bytes that arrived at ``now`` (perf_counter). False: stop reading."""
        if self.scanner is not None and self.plain:
            return self.scanner.feed(data, now)
        return self.feed_events(self.parser.feed(data), now)

    def feed_python(self, data: bytes, now: float) -> bool:
        """:meth:`feed` in Python: the scanner's way back for a read it does not take whole."""
        return self.feed_events(self.parser.feed(data), now)

    def feed_events(self, events: list, now: float) -> bool:
        """Apply the events one read completed (all stamped ``now``). False: stop reading."""
        i, n = 0, len(events)
        while i < n:
            if self.plain:
                i = self._plain(events, i, now)
                if i == n:
                    break
            if not self._event(events[i], now):
                return False
            i += 1
        return True

    def _plain(self, events: list, i: int, now: float) -> int:
        """Take the usual content chunks from ``events[i]`` on; return the index of the first that is not one.

        The usual chunk (chat or completions): one choice with non-empty text and no
        ``finish_reason``, no error, and a ``usage`` that is absent or has only plain
        counts. For such a chunk :meth:`_event` would do exactly what this does; any
        other event (and anything odd about this one) is left to it, with nothing
        changed yet. Why: per chunk, the general path's checks, its :class:`ChunkFacts`
        and its calls cost more than the JSON parse itself, and this loop runs once
        per read, not once per event. (The scanner, when built, does this loop in C.)
        """
        if self.scanner is not None:
            return self.scanner.plain(events, i, now)
        rec = self.rec
        chunks = rec.chunk_ms
        t = (now - rec.start_perf) * 1000.0
        chat = self.chat
        n = len(events)
        while i < n:
            payload = events[i]
            if type(payload) is not bytes or payload[:1] != b"{":
                return i
            try:
                obj = _loads(payload)
            except orjson.JSONDecodeError:
                return i
            choices = obj.get("choices")
            if type(choices) is not list or not choices or "error" in obj or "timings" in obj or "mock_sent" in obj:
                return i
            choice = choices[0]
            if type(choice) is not dict or choice.get("finish_reason") is not None:
                return i
            if chat:
                delta = choice.get("delta")
                if type(delta) is not dict:
                    return i
                content = delta.get("content")
            else:
                content = choice.get("text")
            if type(content) is not str or not content or obj.get("object") == "error":
                return i
            usage = obj.get("usage")
            if usage:
                if type(usage) is not dict or "completion_tokens_details" in usage or "prompt_tokens_details" in usage:
                    return i
                count = usage.get("completion_tokens")
                prompt = usage.get("prompt_tokens")
                if type(count) is not int or (prompt is not None and (type(prompt) is not int or prompt < 0)):
                    return i
                self.last_usage = count
                if prompt is not None:
                    rec.prompt_tokens = prompt
            else:
                count = _NO_USAGE
            if not chunks:
                rec.ttft_ms = t
            chunks.append(t)
            rec.chunk_tokens.append(1)
            self.chunk_usage.append(count)
            i += 1
        return i

    def _event(self, payload: "bytes | SSEEvent", now: float) -> bool:
        """Apply one SSE event to the record. False: the stream failed, stop reading."""
        rec = self.rec
        if type(payload) is not bytes:  # a named event (SSEEvent)
            if payload.name == "error":  # TGI: "event: error" with the message as data
                return self._fail("stream_error", f"error event in stream: {error_message(payload.data)}")
            if self.api != "responses":
                return True
            payload = payload.data  # the Responses API names every event; its data says the same type
        if payload == b"[DONE]":
            self.done = True
            return True
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            if payload.strip() == b"[DONE]":
                self.done = True
                return True
            return self._fail("malformed", f"chunk is not JSON: {payload[:120]!r}")
        try:
            facts = read_event(obj) if self.api == "responses" else read_chunk(obj, self.api)
        except (AttributeError, TypeError, IndexError, KeyError) as err:  # JSON, but not a chunk's shape
            return self._fail("malformed", f"unexpected chunk ({type(err).__name__}: {err}): {payload[:120]!r}")
        if facts.error is not None:
            return self._fail("stream_error", f"error in stream: {facts.error}")
        usage = facts.usage_completion
        if usage is not None:
            if type(usage) is not int:
                return self._fail("malformed", f"usage.completion_tokens is not an integer: {payload[:120]!r}")
            self.last_usage = usage
            if facts.usage_prompt is not None:
                rec.prompt_tokens = facts.usage_prompt
            if facts.reasoning_tokens is not None:
                self.reasoning_tokens = facts.reasoning_tokens
            if facts.cached_tokens is not None:
                rec.cached_tokens = facts.cached_tokens
            timings = obj.get("timings")  # llama.cpp's own measurement, beside its usage
            if isinstance(timings, dict):
                rec.server_timings = timings
                if rec.cached_tokens is None and isinstance(timings.get("cache_n"), int):
                    rec.cached_tokens = timings["cache_n"]  # llama.cpp: prompt tokens reused from its cache
        if facts.content:
            t = (now - rec.start_perf) * 1000.0
            if not rec.chunk_ms:
                rec.ttft_ms = t
            rec.chunk_ms.append(t)
            rec.chunk_tokens.append(1)
            if self.capture:
                rec.text.append(event_text(obj) if self.api == "responses" else chunk_text(obj, self.api))
                if self.api == "chat":
                    add_tool_calls(obj, rec.tool_calls)
            self.chunk_usage.append(_NO_USAGE if usage is None else usage)
            if facts.reasoning:
                self.reasoning_streamed = True
            if "mock_sent" in obj:
                rec.chunk_sent_ms.append((obj["mock_sent"] - rec.start_perf) * 1000.0)
        elif usage is not None and not rec.chunk_ms:
            self.usage_before = usage
        if facts.aborted is not None:
            return self._fail("aborted", f"the server aborted the request (finish_reason {facts.aborted!r}) "
                              f"after {len(rec.chunk_ms)} content chunks")
        if facts.finished:
            self.finished = True
        return True

    def _fail(self, kind: str, message: str) -> bool:
        self.rec.fail(kind, message)
        self.failed = True
        return False

    def close(self, now: float) -> None:
        """The stream ended (cleanly or not): stamp e2e and settle the token counts."""
        if self.scanner is not None:
            self.scanner.flush()  # the chunks the reactor's reads hold in C (_scanner.c, "held chunks")
        rec = self.rec
        rec.e2e_ms = (now - rec.start_perf) * 1000.0
        if not self.failed and not (self.done or self.finished):
            # A last event may lack only its blank line ("data: [DONE]\n" and a close).
            for payload in self.parser.finish():
                if not self._event(payload, now):
                    break
        if not self.failed and not (self.done or self.finished):
            rec.fail("disconnect", f"stream ended before [DONE] after {len(rec.chunk_ms)} content chunks")
        elif not self.failed and not rec.chunk_ms:
            rec.fail("empty", "the stream ended without a single content chunk")
        settle_tokens(rec, self)
        self.scanner = None  # it holds this decoder: without it, no cycle is left for the collector


def settle_tokens(rec: RequestRecord, decoder: StreamDecoder) -> None:
    """Decide the completion token count and say where it came from.

    - Continuous usage (every content chunk carried a strictly rising count)
      gives exact per-chunk counts.
    - Otherwise a usage total (the last one seen, wherever it came) is exact;
      when it differs from the chunk count (several tokens per chunk), it is
      spread evenly over the chunks.
    - Without usage, one token per content chunk is the only estimate.

    Reasoning tokens the server counted but never streamed (OpenAI's o-series,
    gpt-5) are taken out: ``completion_tokens`` is what was streamed, the TPOT
    divisor and the tokens ITL spreads over, and ``reasoning_tokens`` keeps the
    hidden count. When reasoning *is* streamed (``reasoning_content``), its
    chunks are content and its tokens stay in.
    """
    n = len(rec.chunk_ms)
    total = decoder.last_usage
    hidden = 0
    if decoder.reasoning_tokens is not None:
        rec.reasoning_tokens = decoder.reasoning_tokens
        if not decoder.reasoning_streamed:
            hidden = max(decoder.reasoning_tokens, 0)
    if total is None:
        rec.token_source = "chunks"
        rec.completion_tokens = n
        return
    visible = max(total - hidden, 0)
    rec.completion_tokens = visible
    usage = decoder.chunk_usage
    if n and _is_continuous(usage, decoder.usage_before):
        rec.token_source = "continuous_usage"
        # Each chunk's tokens: its count minus the one before (>= 1, as the counts rise;
        # only the first can fall below 1, when hidden reasoning came before it).
        tokens = array("i", map(operator.sub, usage, _previous(usage, decoder.usage_before + hidden)))
        tokens[0] = max(tokens[0], 1)
        rec.chunk_tokens[:] = tokens
        return
    rec.token_source = "usage"
    if n and visible != n and visible >= n:
        base, extra = divmod(visible, n)
        rec.chunk_tokens[:] = array("i", [base + 1] * extra + [base] * (n - extra))


def _previous(usage: array, first: int) -> array:
    """The count before each chunk's: ``first``, then the counts shifted by one."""
    return array("i", (first,)) + usage[:-1]


def _is_continuous(usage: array, before: int) -> bool:
    """Every content chunk carried a count, each higher than the one before.

    (A missing count is -1, so a chunk without one breaks the rise too.) One
    ``map`` in C rather than a Python loop: this runs once per request.
    """
    return all(map(operator.lt, _previous(usage, before), usage))
